"""How an editor bench's cell is made: one editor's chain of edits of one prompt's source
image (see :mod:`refine.harness.tasks.editor_loops.task`)."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from refine.harness.cells import Cell
from refine.harness.tasks.editor_loops.plan import EditorLoopPlan
from refine.harness.tasks.loop_benches import forgetting_of, loop_models
from refine.io.files import slug
from refine.io.store import run_left
from refine.usage import QuotaSpent

# the roles an editor's refiner shares with the bench's (every one but the editor)
SHARED = ("generator", "observer", "judge", "llm", "text_embedder", "image_embedder")


class EditorLoopMaker:
    """The bench's scoring models and generator, and a refiner per editor sharing them."""

    def __init__(
        self,
        plan: EditorLoopPlan,
        folder: str,
        backend_options: dict[str, dict[str, Any]] | None = None,
        instances: Any = None,
    ) -> None:
        self.plan, self.folder = plan, Path(folder)
        self.base, self.tau, self.tau_source, self.scoring = loop_models(
            plan, backend_options, instances, SHARED
        )
        self.refiners: dict[str, Any] = {}
        self.lock = threading.Lock()  # one source image a prompt, made once
        # every model loads (or is checked with its API) before the first cell: an editor
        # that cannot was named only once the editors before it had made their cells
        base = self.base.backends
        base.preflight([r for r in SHARED if r != "llm" and base.names.get(r)])
        for editor in plan.editors:
            self.refiner(editor).backends.preflight(["editor"])

    def describe(self) -> tuple[float, str, dict[str, str]]:
        return self.tau, self.tau_source, self.scoring

    def refiner(self, editor: str) -> Any:
        """A refiner whose editor is ``editor``, its other models the bench's own."""
        from refine.loop.refiner import Refiner

        with self.lock:
            if editor not in self.refiners:
                base = self.base.backends
                shared = {r: base.get(r) for r in SHARED if r in base.names}
                names = {**base.names, "editor": editor}
                # the profile's editor options belong to its own editor: another editor
                # keeps only the device (as Backends.named makes another model of a role)
                options = dict(base.options)
                if base.names.get("editor") != editor:
                    own = options.pop("editor", {})
                    options["editor"] = {"device": own["device"]} if "device" in own else {}
                made = Refiner(base.profile.name, names, options, instances=shared, parallel=False)
                made.baselines = self.base.baselines  # the photos' EXAG baseline, judged once
                self.refiners[editor] = made
            return self.refiners[editor]

    def source(self, activity: str, country: str) -> Path:
        """The prompt's source image (loop 0), drawn once by the generator for every
        editor: the same picture is edited by each."""
        from refine.assets import prompt_template

        p = self.plan
        drawn_by = self.scoring.get("generator", "")  # another generator, another picture
        tag = hashlib.sha1(drawn_by.encode()).hexdigest()[:8]
        name = f"{slug(country, 30)}--{slug(activity, 60)}--s{p.seed}-{tag}.png"
        path = self.folder / "sources" / name
        with self.lock:
            if not path.is_file():
                prompt = (
                    prompt_template("generate").strip().format(activity=activity, country=country)
                )
                with self.base.backends.using("generator") as generator:
                    image = generator.generate(prompt, [p.seed])[0]
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp.png")
                image.save(tmp)
                tmp.replace(path)
        return path

    def _rows(self, run: Any, run_dir: Path, source: Path, spec: Any, refiner: Any) -> list:
        """A row a loop: its FAITH, quality and drifts (from the image before, outside the
        boxes, from the source), its decision and image."""
        from PIL import Image

        with Image.open(source) as im:
            original = im.convert("RGB")
        assessor = refiner.assessor(spec)
        rows = []
        for r in run.rounds:
            c = r.best
            d = c.drift
            image = run_dir / c.image
            with Image.open(image) as im:
                moved = assessor.drift(original, im.convert("RGB")) if r.index else None
            rows.append(
                {
                    "loop": r.index,
                    "faith": c.scores.faith,
                    "quality": c.scores.quality,
                    "drift": None if d is None else d.value,
                    "drift_outside": None if d is None else d.outside,
                    "drift_from_source": None if moved is None else moved.value,
                    "decision": r.decision,
                    "image": str(image.relative_to(self.folder)),
                }
            )
        return rows

    def make(self, job: tuple[str, str, str], tell: Any = None) -> Cell:

        from refine import settings
        from refine.evaluate.reference_source import ReferenceSource

        editor, activity, country = job
        p = self.plan
        source = self.source(activity, country)
        raw = {
            "activity": activity,
            "country": country,
            "input_image": str(source),
            "rounds": p.loops,
            "candidates": 1,
            "seed": p.seed,
            "tau": self.tau,
            "target": 1.0,  # every loop is made, whatever it scores
            "patience": p.loops + 1,
            "edit_from": "last",  # each edit from the one before: a chain, every edit kept
            "max_drift": 2.0,
            "max_quality_drop": p.max_quality_drop,
            "localize": p.localize,
        }
        spec, refs = settings.load(raw, find=lambda a, c: ReferenceSource.default().find(a, c).pack)
        refiner = self.refiner(editor)
        where = self.folder / "runs" / slug(editor, 60)
        failed = None
        before = {d.name for d in where.iterdir()} if where.is_dir() else set()
        try:
            run = refiner.start(spec, refs, out=where)
        except QuotaSpent:  # every later cell would meet it too: the bench stops here
            raise
        except Exception as err:  # the loops done are kept; the bench goes on
            failed = f"{type(err).__name__}: {err}"
            run = run_left(where, before)
        if run is None:  # not even the source was scored
            rows: list[dict[str, Any]] = []
            run_dir, stop = None, failed
        else:
            run_dir, stop = where / run.id, run.stop_reason or run.error
            rows = self._rows(run, run_dir, source, spec, refiner)
        guard, guard_loop = _guard(rows, p.max_quality_drop)
        last = rows[-1] if rows else {}
        made = max(0, len(rows) - 1)
        errors = [] if len(rows) == p.loops + 1 else [f"{made} of {p.loops} edits made"]
        errors += [failed] if failed else []
        return Cell(
            key=(editor, activity, country, p.loops, p.seed, p.localize),
            inputs={
                "editor": editor,
                "activity": activity,
                "country": country,
                "loops": p.loops,
                "seed": p.seed,
                "localize": p.localize,
                "tau": self.tau,
                "scorer": self.scoring,
                "source": str(source.relative_to(self.folder)),
            },
            outputs={"faith": last.get("faith"), "quality": last.get("quality")},
            images=rows,
            data={
                "run_dir": None if run_dir is None else str(run_dir.relative_to(self.folder)),
                "stop_reason": stop,
                "guard": guard,
                "guard_loop": guard_loop,
                "failed": failed,  # a chain an error ended: made again on the next run
                # what the chain's edits fixed and lost, each from the one before
                "forgetting": None if run is None else forgetting_of(run, "parent"),
            },
            timings={"wall": 0.0 if run is None else run.elapsed_s},
            errors=errors,
        )


def _guard(rows: list[dict[str, Any]], drop: float) -> tuple[float | None, int | None]:
    """The quality the loop's guard holds an edit to (the source's less ``drop``), and the
    first loop whose quality falls below it (None: none does, or no quality reading)."""
    if not rows or rows[0]["quality"] is None:
        return None, None
    guard = rows[0]["quality"] - drop
    # 1e-9: the rounding of quality - drop, as the loop's own guard allows
    fell = [r["loop"] for r in rows[1:] if r["quality"] is not None and r["quality"] < guard - 1e-9]
    return guard, (fell[0] if fell else None)
