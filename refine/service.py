"""A run service for front ends: one run at a time on one set of models, watched live.

``RunService.start(...)`` runs the loop on a worker thread and returns a :class:`Job`;
``job.updates()`` yields an :class:`Update` after every stage and round (the run record
as saved so far, the stage in progress, an instruction waiting for review). In pause
mode the loop waits before every edit until ``job.submit_instruction(text)``; ``job.stop()``
ends the run within seconds (the round in progress is recorded as stopped). Saved runs open
without any model.

Visitors: a front end names who asks (a visitor id, see :func:`visitor_hash`). A run started
for a visitor keeps its owner for as long as it exists: the hash of the id is written to the
run folder's ``.owner`` (never returned, never zipped); :meth:`RunService.check_owner` is
what every change to a saved run goes through. A run without one (made by the CLI) is
read-only to visitors. References built or reviewed by a visitor are kept in a folder of
that visitor's; the shared ones under ``out/references`` change only for an admin.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refine.assets import prompt_template
from refine.backends.loading import describe_error
from refine.evaluate.expectations import build_expectations
from refine.evaluate.refs_build import (
    LLMCache,
    build_references,
    built_path,
    find_any,
    load_built,
    models_for,
    save_built,
)
from refine.events import Event, ReviewWaiting, RunStarted, StepDone
from refine.io.files import atomic_write_text, confined
from refine.io.store import RunStore
from refine.progress import RunProgress
from refine.records import ReferencePack, Run
from refine.train.export import export, find_runs
from refine.train.tune import TuneConfig, Tuner

_END = "end"  # put on a job's queue when its worker thread is done
OWNER_FILE = ".owner"  # the hash of the visitor who started the run
NOT_YOURS = "this run belongs to another visitor: you can watch it, not stop or steer it"
READ_ONLY = (
    "this run was made outside the app (or before runs had owners): it can be opened and "
    "watched here, not changed"
)


def visitor_hash(visitor: str) -> str:
    """What a run folder keeps of a visitor id: its SHA-256 (the id itself is never
    written, so a folder that is read or downloaded gives no one another visitor's id)."""
    import hashlib

    return hashlib.sha256(f"refine-visitor\x00{visitor}".encode()).hexdigest()


class ServiceBusy(RuntimeError):
    """A run is in progress; one device runs one run at a time."""


@dataclass
class Update:
    stage: str  # the event, in words (``round 1: edit x2``)
    run: Run | None  # the record as saved so far (None before round 0 is saved)
    run_dir: Path | None
    review: tuple[int, str] | None = None  # (round, instruction) waiting for the user
    done: bool = False
    error: str | None = None
    # (round, instruction) the user applied, for the round in progress
    applied: tuple[int, str] | None = None
    fraction: float = 0.0  # of the rounds this run may make (see refine.progress)
    progress: str = ""  # round k of N, stage, time spent, time left
    light: bool = False  # only the progress moved (a denoising step): the run is as before
    # with a review: who wrote the instruction and the changes it was built from
    review_source: str = ""
    review_changes: tuple[str, ...] = ()


class Job:
    """One run on a worker thread; its updates are read with :meth:`updates`."""

    def __init__(
        self,
        service: RunService,
        pause: bool,
        owner: str | None = None,
        review_timeout_s: float | None = None,
    ) -> None:
        self.service = service
        self.pause = pause
        self.owner = owner  # the visitor who may stop or steer it; None: anyone
        self.review_timeout_s = review_timeout_s
        self.run_dir: Path | None = None
        self.run: Run | None = None
        self.error: str | None = None
        self._events: queue.Queue[Event | str] = queue.Queue()
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.waiting: tuple[int, str] | None = None
        self.stopped = False
        self.tracker = RunProgress()
        self.applied: tuple[int, str] | None = None
        self.review_info: tuple[str, tuple[str, ...]] = ("", ())  # (source, changes)

    # called on the worker thread ------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if isinstance(event, ReviewWaiting):
            # reported by _review, and only when this job pauses for one
            self.review_info = (event.source, event.changes)
            return
        self.tracker.see(event)
        if isinstance(event, RunStarted):
            self.run_dir = Path(event.dir)
            if self.owner is not None:
                self.service.claim(self.run_dir, self.owner)
            if self.stopped:  # a stop asked for before the loop began still counts
                self.service.refiner().request_stop()
        self._events.put(event)

    def _review(self, k: int, instruction: str, run: Run) -> str | None:
        if not self.pause:
            return instruction
        self.waiting = (k, instruction)
        event = ReviewWaiting(round=k, instruction=instruction)
        self.tracker.see(event)
        self._events.put(event)
        try:
            answer = self._answers.get(timeout=self.review_timeout_s)
        except queue.Empty:  # nobody answered: the owner is gone, the slot is freed
            self.stopped = True
            answer = None
        self.waiting = None
        return answer

    # called by the front end ----------------------------------------------------------

    def submit_instruction(self, text: str) -> None:
        """Apply ``text`` (the proposed instruction or a rewritten one) and go on."""
        if not text or not text.strip():
            raise ValueError("the instruction is empty; write one, or stop the run")
        if self.waiting is not None:
            self.applied = (self.waiting[0], text.strip())
        self._answers.put(text)

    def stop(self) -> None:
        """End the run within moments (see :meth:`refine.loop.refiner.Refiner.request_stop`):
        completed rounds are kept, the round in progress is kept as stopped."""
        self.stopped = True
        self.service.refiner().request_stop()
        if self.waiting is not None:
            self._answers.put(None)

    def updates(self, poll_s: float = 0.25) -> Iterator[Update]:
        """An update per event until the run ends (the last one has ``done``)."""
        shown: Run | None = None
        while True:
            try:
                event = self._events.get(timeout=poll_s)
            except queue.Empty:
                if self._thread is not None and not self._thread.is_alive():
                    event = _END
                else:
                    continue
            if event == _END:
                yield Update(
                    "failed" if self.error else "finished",
                    self._load(),
                    self.run_dir,
                    done=True,
                    error=self.error,
                    fraction=1.0 if not self.error else self.tracker.fraction(),
                    progress=self.tracker.describe(),
                )
                return
            light = isinstance(event, StepDone)
            if light:  # steps come fast: only the latest one queued is shown
                while isinstance(self._peek(), StepDone):
                    event = self._events.get_nowait()
            else:
                shown = self._load()
            yield Update(
                event.describe(),
                shown,
                self.run_dir,
                review=self.waiting,
                applied=self.applied,
                review_source=self.review_info[0],
                review_changes=self.review_info[1],
                fraction=self.tracker.fraction(),
                progress=self.tracker.describe(),
                light=light,
            )

    def _peek(self) -> Event | str | None:
        with self._events.mutex:
            return self._events.queue[0] if self._events.queue else None

    def owned_by(self, who: str | None) -> bool:
        """Whether ``who`` may stop or steer this run (its owner; anyone when unowned)."""
        return self.owner is None or who == self.owner

    def join(self, timeout: float | None = None) -> None:
        """Wait until the worker thread has ended (the run fully stopped and saved)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def wait(self) -> Update:
        """The last update (the run's end). In pause mode another thread must answer the
        reviews (``submit_instruction`` or ``stop``), or this waits for ever."""
        updates = list(self.updates())
        return updates[-1]

    def _load(self) -> Run | None:
        if self.run_dir is None or not (self.run_dir / "run.json").is_file():
            return None
        return RunStore(self.run_dir).load()


class RunService:
    """Owns one :class:`refine.loop.refiner.Refiner` (models load once) and one run at a time."""

    def __init__(
        self,
        profile: str = "gemini",
        out: str | Path = "runs",
        backends: dict[str, str] | None = None,
        backend_options: dict[str, dict[str, Any]] | None = None,
        instances: dict[str, Any] | None = None,
        admins: tuple[str, ...] | list[str] = (),
    ) -> None:
        self.profile = profile
        self.out = Path(out)
        # visitor ids that change the shared references and tune from every run
        self.admins = frozenset(admins)
        self._args = (profile, backends, backend_options, instances)
        self._refiner: Any = None
        self._busy = threading.Lock()
        self.job: Job | None = None

    def refiner(self) -> Any:
        if self._refiner is None:
            from refine.loop.refiner import Refiner

            profile, backends, options, instances = self._args
            self._refiner = Refiner(profile, backends, options, instances=instances)
        return self._refiner

    def start(
        self,
        activity: str | None = None,
        country: str | None = None,
        pause: bool = False,
        references: Any = None,
        branch: tuple[Path, int] | None = None,
        spec: Any = None,
        owner: str | None = None,
        review_timeout_s: float | None = None,
        **settings: Any,
    ) -> Job:
        """Start a run on a worker thread: of a validated ``spec`` (with its
        ``references``), or of raw ``settings`` for ``activity`` and ``country``; with
        ``branch=(run_dir, round)``, continue an earlier run from that round. Raises
        :class:`ServiceBusy` while one runs."""
        if not self._busy.acquire(blocking=False):
            raise ServiceBusy("a run is in progress; wait for it or stop it")
        job = Job(self, pause, owner, review_timeout_s)
        try:
            refiner = self.refiner()
        except Exception:
            self._busy.release()
            raise
        refiner.on_event = job._on_event
        refiner.review = job._review
        self.job = job

        def work() -> None:
            try:
                if branch is not None:
                    job.run = refiner.branch(branch[0], branch[1], out=self.out, **settings)
                elif spec is not None:
                    job.run = refiner.start(spec, references, out=self.out)
                else:
                    job.run = refiner.run(
                        activity, country, out=self.out, references=references, **settings
                    )
            except Exception as err:  # shown to the user; the service keeps working
                job.error = describe_error(err)
            finally:
                refiner.on_event, refiner.review = (lambda e: None), None
                self._busy.release()
                job._events.put(_END)

        job._thread = threading.Thread(target=work, name="refine-run", daemon=True)
        job._thread.start()
        return job

    # -- references ---------------------------------------------------------------------

    @property
    def references_dir(self) -> Path:
        """Where references built through this service are kept (inside ``out``)."""
        return self.out / "references"

    def find_references(self, activity: str, country: str, visitor: str | None = None) -> Any:
        """The references a run of ``activity`` in ``country`` uses: the bundled pack's, else
        ones ``visitor`` built or reviewed here, else shared ones built here, else ones
        built with ``refine refs build``; a ValueError (saying how to get some) when there
        are none."""

        own = self.visitor_references_dir(visitor)
        if own != self.references_dir:
            try:
                from refine.evaluate.references import find_references

                return find_references(activity, country)
            except ValueError:
                built = load_built(activity, country, own)
                if built is not None:
                    return built
        return find_any(activity, country, self.references_dir)

    def build_references(
        self, activity: str, country: str, on_event: Any = None, visitor: str | None = None
    ) -> Any:
        """Build references with the profile's language models (answers cached inside
        ``out``) and keep them for ``visitor``'s later runs (see
        :meth:`visitor_references_dir`); returns the
        :class:`refine.evaluate.refs_build.BuildResult`.
        One job at a time, like runs."""

        activity, country = phrase(activity, "activity"), phrase(country, "country")
        if not self._busy.acquire(blocking=False):
            raise ServiceBusy("a run is in progress; wait for it or stop it")
        try:
            proposers, refiner = models_for(self.profile, backends=self.refiner().backends)
            cache = LLMCache(self.references_dir / "llm")
            result = build_references(
                activity, country, proposers, refiner, cache, on_event=on_event
            )
            save_built(result, self.visitor_references_dir(visitor))
            return result
        finally:
            self._busy.release()

    def expectations_for(self, activity: str, country: str) -> Any:
        """The cultural expectations of the run prompt of ``activity`` in ``country``,
        listed by the profile's language model (answers cached inside ``out``)."""

        activity, country = phrase(activity, "activity"), phrase(country, "country")
        prompt = prompt_template("generate").strip().format(activity=activity, country=country)
        backends = self.refiner().backends
        with backends.using("llm") as model:
            return build_expectations(prompt, country, model, LLMCache(self.references_dir / "llm"))

    # -- tuning the generator ---------------------------------------------------------

    @property
    def tunes_dir(self) -> Path:
        return self.out / "tunes"

    def training_data(self, max_drift: float = 0.5, visitor: str | None = None) -> dict[str, Any]:
        """What the saved runs ``visitor`` may learn from hold for tuning: runs, preference
        pairs (at most ``max_drift`` apart), accepted images (counted, nothing written)."""

        runs = self.runs_of(visitor)
        if not runs:
            return {"runs": 0, "pairs": 0, "images": 0}
        counts = {"runs": len(runs)}
        for fmt, key in (("pairs", "pairs"), ("imagefolder", "images")):
            try:
                counts[key] = export(
                    runs, self.out / ".dry", fmt, max_drift=max_drift, dry_run=True
                ).taken
            except ValueError:
                counts[key] = 0
        return counts

    def tunable_base(self) -> str:
        """The profile's generator when it can be tuned here (a diffusers: pipeline)."""
        name = self.refiner().backends.names.get("generator", "")
        if not name.startswith("diffusers:"):
            raise ValueError(
                f"the generator {name or '(none)'} cannot be tuned here: tuning needs a "
                "diffusers: Stable Diffusion, SDXL or FLUX.2 [klein] generator (the small-gpu or "
                "local-gpu profile, say)"
            )
        return name

    def tune(
        self,
        method: str,
        steps: int,
        lr: float,
        resolution: int,
        on_progress: Any = None,
        max_drift: float = 0.5,
        visitor: str | None = None,
    ) -> dict[str, Any]:
        """Export the saved runs ``visitor`` may learn from (see :meth:`runs_of`; pairs for
        dpo, accepted images for sft) into a new folder under ``out/tunes`` and train a
        LoRA for the profile's generator there; one job at a time, like runs. Returns the
        tune summary with the adapter folder."""

        if method not in ("dpo", "sft"):
            raise ValueError("the method is dpo or sft")
        if not 1 <= int(steps) <= 5000 or int(steps) != steps:
            raise ValueError("steps must be a whole number from 1 to 5000")
        if not 0 < float(lr) <= 0.1:
            raise ValueError("the learning rate must be above 0 and at most 0.1")
        if not 32 <= int(resolution) <= 1024 or int(resolution) % 8:
            raise ValueError("the resolution must be a multiple of 8 from 32 to 1024")
        if not 0 <= float(max_drift) <= 2:
            raise ValueError("the drift between a pair's images is from 0 to 2")
        base = self.tunable_base()
        if not self._busy.acquire(blocking=False):
            raise ServiceBusy("a run is in progress; wait for it or stop it")
        try:
            folder = self.tunes_dir / time.strftime("%Y%m%d-%H%M%S")
            n = 1
            while folder.exists():
                n += 1
                folder = self.tunes_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{n}"
            runs = self.runs_of(visitor)
            if not runs:
                raise ValueError(
                    "no saved runs to learn from yet: refine some images first (a visitor "
                    "tunes from their own runs)"
                )
            fmt = "pairs" if method == "dpo" else "imagefolder"
            exported = export(runs, folder / "data", fmt, max_drift=float(max_drift))
            options = self.refiner().backends.options.get("generator", {})
            config = TuneConfig(
                data=str(folder / "data"),
                base=base,
                out=str(folder / "adapter"),
                method=method,
                steps=int(steps),
                lr=float(lr),
                resolution=int(resolution),
                checkpoint_every=0,
                device=options.get("device"),
            )
            tuner = Tuner(config, on_progress)
            summary = tuner.run()
            summary["adapter"] = str(folder / "adapter")
            summary["exported"] = exported.to_dict()
            return summary
        finally:
            self._busy.release()

    def tunes(self) -> list[str]:
        """The adapters tuned here, newest first (names under ``out/tunes``)."""
        if not self.tunes_dir.is_dir():
            return []
        done = [
            p.name
            for p in self.tunes_dir.iterdir()
            if (p / "adapter" / "pytorch_lora_weights.safetensors").is_file()
        ]
        return sorted(done, reverse=True)

    def compare(self, tune: str, prompt: str, seed: int) -> tuple[Any, Any]:
        """(the base generator's image, the tuned one's) for ``prompt`` and ``seed``; the
        tune is one of :meth:`tunes` (a client's value: anything else is refused)."""
        if not tune:
            raise ValueError("pick a tuned adapter first (tune one above if there is none)")
        if tune not in self.tunes():
            raise ValueError(f"{tune!r} is not a tune of this app")
        prompt = phrase(prompt, "prompt", 300)
        self.tunable_base()
        if not self._busy.acquire(blocking=False):
            raise ServiceBusy("a run is in progress; wait for it or stop it")
        try:
            generator = self.refiner().backends.get("generator")
            base = generator.generate(prompt, [int(seed)])[0]
            generator.add_lora(str(self.tunes_dir / tune / "adapter"), 1.0, name="compare")
            try:
                tuned = generator.generate(prompt, [int(seed)])[0]
            finally:
                generator.unload_loras()
                for i, (path, scale) in enumerate(generator.loras):
                    generator.add_lora(path, scale, name=f"lora{i}")
            return base, tuned
        finally:
            self._busy.release()

    def save_references(
        self, activity: str, country: str, text: str, visitor: str | None = None
    ) -> Any:
        """Keep references a user reviewed (JSON: ``descriptors`` per dimension and
        ``stereotypes``) for ``activity`` in ``country``, for ``visitor``'s runs; a
        ValueError names what is wrong."""
        import json

        from pydantic import ValidationError

        activity, country = phrase(activity, "activity"), phrase(country, "country")
        if len(text) > 200_000:
            raise ValueError("the references are too long (at most 200,000 characters)")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"the references are not JSON: {err.msg} (line {err.lineno})") from err
        if not isinstance(doc, dict) or not isinstance(doc.get("descriptors"), dict):
            raise ValueError('the references need a "descriptors" object (dimension: phrases)')
        try:
            pack = ReferencePack(
                activity=activity,
                country=country,
                descriptors=doc["descriptors"],
                stereotypes=doc.get("stereotypes", []),
                source=f"reviewed in the app ({doc.get('source') or 'written by hand'})",
            )
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ValueError(f"the references: {where}: {first['msg']}") from err
        if not any(pack.descriptors.values()):
            raise ValueError("the references hold no descriptors")
        path = built_path(activity, country, self.visitor_references_dir(visitor))
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(pack.model_dump(mode="json"), indent=1))
        return pack

    @property
    def busy(self) -> bool:
        return self._busy.locked()

    # -- visitors and what they may change ----------------------------------------------

    def is_admin(self, visitor: str | None) -> bool:
        return visitor is not None and visitor in self.admins

    def claim(self, run_dir: str | Path, visitor: str) -> None:
        """Make ``visitor`` the owner of the run in ``run_dir`` (a run this service started)."""

        atomic_write_text(Path(run_dir) / OWNER_FILE, visitor_hash(visitor) + "\n")

    def owner_of(self, run_dir: str | Path) -> str | None:
        """The hash of the visitor who owns a run, or None (a run made outside the app)."""
        path = Path(run_dir) / OWNER_FILE
        if path.is_symlink() or not path.is_file():
            return None
        text = path.read_text(encoding="utf-8", errors="replace").strip()
        return text if len(text) == 64 else None

    def owns(self, run_dir: str | Path, visitor: str | None) -> bool:
        owner = self.owner_of(run_dir)
        return owner is not None and visitor is not None and owner == visitor_hash(visitor)

    def check_owner(self, run_dir: str | Path, visitor: str | None) -> None:
        """Nothing when ``visitor`` owns the run; else a ValueError saying why not (another
        visitor's run, or a run without an owner: read-only)."""
        owner = self.owner_of(run_dir)
        if owner is None:
            raise ValueError(READ_ONLY)
        if visitor is None or owner != visitor_hash(visitor):
            raise ValueError(NOT_YOURS)

    def visitor_references_dir(self, visitor: str | None) -> Path:
        """Where ``visitor``'s references are written: the shared folder for an admin (or
        without a visitor: a script's own service), else one of the visitor's own."""
        if visitor is None or self.is_admin(visitor):
            return self.references_dir
        return self.references_dir / "visitors" / visitor_hash(visitor)[:32]

    def runs_of(self, visitor: str | None) -> list[Path]:
        """The saved runs (tunes' folders left out) whose data ``visitor`` may learn from:
        every run for an admin or a script (no visitor), else the visitor's own."""

        try:
            runs = [p for p in find_runs([self.out]) if self.tunes_dir not in p.parents]
        except ValueError:
            return []
        if visitor is None or self.is_admin(visitor):
            return runs
        return [p for p in runs if self.owns(p, visitor)]

    def inside(self, value: str | Path | None, what: str = "folder") -> Path:
        """A folder named by a client (relative to ``out``, or a path inside it), confined
        to ``out``: no ``..`` out of it, no link on the way (refine.io.files.confined).
        Else a ValueError."""

        path = confined(self.out, value, what)
        if not path.is_dir():
            raise ValueError(
                f"{str(value).strip()!r} is not a {what} inside this app's folder ({self.out})"
            )
        return path

    def resolve(self, value: str | Path | None) -> Path:
        """The folder of a saved run named by a client (a run id, a path relative to ``out``
        or a path inside it), confined to ``out`` (see :meth:`inside`) and holding a real
        ``run.json``. Anything else is refused with a ValueError."""
        text = str(value or "").strip()
        if not text:
            raise ValueError("no run given: start one or open a saved run")
        try:
            path = self.inside(text, "run")
        except ValueError:
            raise ValueError(f"{text!r} is not a run of this app") from None
        record = path / "run.json"
        if not record.is_file() or record.is_symlink():
            raise ValueError(f"{text!r} is not a run of this app")
        return path

    def opened(self, run_dir: str | Path) -> tuple[Run, Path]:
        """A saved run inside ``out`` and its folder (no models needed); refused when it
        names images that are links or lie outside its folder."""
        path = self.resolve(run_dir)
        run = RunStore(path).load()
        for name in run.image_names():
            if (path / name).is_symlink():
                raise ValueError(f"{path.name}: {name} is a link, not an image of the run")
        return run, path

    def open(self, run_dir: str | Path) -> Run:
        """A saved run inside ``out`` (see :meth:`opened`)."""
        return self.opened(run_dir)[0]

    def runs(self) -> list[Path]:
        """Saved run directories under ``out`` (no links followed), newest first."""
        if not self.out.is_dir():
            return []
        found = []
        for record in self.out.rglob("run.json"):
            try:
                found.append(self.resolve(record.parent))
            except ValueError:
                continue
        return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)

    def saved(self, limit: int = 50) -> list[tuple[str, str]]:
        """(label, run id relative to ``out``) of the ``limit`` newest saved runs: activity,
        country, best FAITH, status and id (each record is read, so the list is short)."""
        return [(card.label, card.id) for card in self.cards(limit)]

    def cards(self, limit: int = 50) -> list[SavedRun]:
        """The ``limit`` newest saved runs, each with its best image for a thumbnail."""
        out = []
        root = self.out.resolve()
        for path in self.runs()[:limit]:
            try:
                run, path = self.opened(path)
            except (ValueError, OSError):
                continue
            best = run.best()
            faith = best.best.scores.faith if best is not None else None
            shown = "n/a" if faith is None else f"{faith:.3f}"
            label = (
                f"{run.spec.activity} - {run.references.country} - best FAITH {shown} - "
                f"{run.status} - {run.id}"
            )
            image = None
            if best is not None and (path / best.best.image).is_file():
                image = path / best.best.image
            when = (run.created or run.updated)[:16].replace("T", " ")
            caption = (
                f"{run.references.country}: {run.spec.activity} \u00b7 best FAITH {shown}"
                f" \u00b7 {when}"
            )
            out.append(SavedRun(str(path.resolve().relative_to(root)), label, caption, image))
        return out


def phrase(value: Any, what: str, limit: int = 120) -> str:
    """An activity or country from a client: one line of printable text, not too long."""
    text = " ".join(str(value or "").split())
    if not text:
        raise ValueError(f"give the {what}")
    if len(text) > limit or not text.isprintable():
        raise ValueError(f"the {what} must be printable text of at most {limit} characters")
    return text


@dataclass
class SavedRun:
    id: str  # the run's folder relative to the service's ``out``
    label: str  # activity - country - best FAITH - status - id
    caption: str  # a short one, under a thumbnail
    image: Path | None  # the best image (None before round 0 is saved)
