"""The run service: one :class:`refine.loop.refiner.Refiner` (models load once) and one
job at a time (a run, a references build, a tune), with the references a run uses."""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path
from typing import Any

from refine.assets import prompt_template
from refine.backends.loading import describe_error
from refine.evaluate.expectations import build_expectations
from refine.evaluate.reference_source import ReferenceSource
from refine.evaluate.refs_build import (
    LLMCache,
    build_references,
    built_path,
    models_for,
    save_built,
)
from refine.io.files import atomic_write_text
from refine.records import DEFAULT_PROFILE, ReferencePack
from refine.service.folders import RunFolders, phrase
from refine.service.jobs import Job
from refine.service.slot import Slot
from refine.service.tuning import Tuning


class RunService(RunFolders):
    """Owns one :class:`refine.loop.refiner.Refiner` (models load once) and one run at a time."""

    def __init__(
        self,
        profile: str = DEFAULT_PROFILE,
        out: str | Path = "runs",
        backends: dict[str, str] | None = None,
        backend_options: dict[str, dict[str, Any]] | None = None,
        instances: dict[str, Any] | None = None,
        admins: tuple[str, ...] | list[str] = (),
    ) -> None:
        super().__init__(out, admins)
        self.profile = profile
        self._args = (profile, backends, backend_options, instances)
        self._refiner: Any = None
        self.slot = Slot()
        # a run paused for review with no page following it this long is stopped (the app
        # sets it: its visitors' pages are the runs' readers); None: only the review timeout
        self.orphan_s: float | None = None
        self.job: Job | None = None
        self.tuning = Tuning(self, self.refiner, self.slot)

    def refiner(self) -> Any:
        if self._refiner is None:
            from refine.loop.refiner import Refiner

            profile, backends, options, instances = self._args
            self._refiner = Refiner(profile, backends, options, instances=instances)
        return self._refiner

    def start(
        self,
        spec: Any,
        references: Any,
        pause: bool = False,
        owner: str | None = None,
        review_timeout_s: float | None = None,
    ) -> Job:
        """Start a run of a validated ``spec`` with its ``references``
        (:func:`refine.settings.load` makes both from raw settings) on a worker thread.
        Raises :class:`ServiceBusy` while one runs."""
        return self._launch(
            lambda refiner: refiner.start(spec, references, out=self.out),
            pause,
            owner,
            review_timeout_s,
        )

    def branch(
        self,
        run_dir: Path,
        round_index: int,
        pause: bool = False,
        owner: str | None = None,
        review_timeout_s: float | None = None,
        **changes: Any,
    ) -> Job:
        """Continue an earlier run from its round ``round_index`` as a new run, with
        ``changes`` to its settings (see :meth:`refine.loop.refiner.Refiner.branch`)."""
        return self._launch(
            lambda refiner: refiner.branch(run_dir, round_index, out=self.out, **changes),
            pause,
            owner,
            review_timeout_s,
        )

    def _launch(
        self,
        drive: Any,
        pause: bool,
        owner: str | None,
        review_timeout_s: float | None,
    ) -> Job:
        self.slot.take()
        job = Job(self.claim, self._stop_run, pause, owner, review_timeout_s, self.orphan_s)
        try:
            refiner = self.refiner()
        except Exception:
            self.slot.free()
            raise
        refiner.on_event = job._on_event
        refiner.review = job._review
        job.localizes = lambda: _localizes(refiner)
        self.job = job

        def work() -> None:
            try:
                job.run = drive(refiner)
            except Exception as err:  # shown to the user; the service keeps working
                job.error = describe_error(err)
            finally:
                refiner.on_event, refiner.review = (lambda e: None), None
                self.slot.free()
                job._finish()

        # the run's thread carries the caller's context (a Gradio request's): on a ZeroGPU
        # Space the GPU leases read the visitor from it, whose quota then pays
        context = contextvars.copy_context()
        job._thread = threading.Thread(
            target=context.run, args=(work,), name="refine-run", daemon=True
        )
        job._thread.start()
        return job

    # -- references ---------------------------------------------------------------------

    def reference_source(self, visitor: str | None = None) -> ReferenceSource:
        """Where this service's runs find their references
        (:mod:`refine.evaluate.reference_source`): ``visitor``'s own, the ones shared here,
        the data directory's packs, the bundled pack, ones built with refine refs build."""
        return ReferenceSource.default(
            shared=self.references_dir, visitor=self.visitor_references_dir(visitor)
        )

    def find_references(self, activity: str, country: str, visitor: str | None = None) -> Any:
        """The references a run of ``activity`` in ``country`` uses
        (:meth:`reference_source`); a ValueError (saying how to get some) when there are
        none."""
        return self.reference_source(visitor).find(activity, country).pack

    def build_references(
        self, activity: str, country: str, on_event: Any = None, visitor: str | None = None
    ) -> Any:
        """Build references with the profile's language models (answers cached inside
        ``out``) and keep them for ``visitor``'s later runs (see
        :meth:`visitor_references_dir`); returns the
        :class:`refine.evaluate.refs_build.BuildResult`.
        One job at a time, like runs."""

        activity, country = phrase(activity, "activity"), phrase(country, "country")
        with self.slot.held():
            proposers, refiner = models_for(self.profile, backends=self.refiner().backends)
            cache = LLMCache(self.references_dir / "llm")
            from refine.evaluate.reference_source import prompt_set

            result = build_references(
                activity, country, proposers, refiner, cache, on_event=on_event,
                prompts=prompt_set(activity),
            )  # fmt: skip
            save_built(result, self.visitor_references_dir(visitor))
            return result

    def expectations_for(self, activity: str, country: str) -> Any:
        """The cultural expectations of the run prompt of ``activity`` in ``country``,
        listed by the profile's language model (answers cached inside ``out``)."""

        activity, country = phrase(activity, "activity"), phrase(country, "country")
        prompt = prompt_template("generate").strip().format(activity=activity, country=country)
        backends = self.refiner().backends
        with backends.using("llm") as model:
            return build_expectations(prompt, country, model, LLMCache(self.references_dir / "llm"))

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

    def keep_references(self, run_dir: str | Path, visitor: str | None = None) -> Any:
        """The references a run aims at, once a person changed them at a pause, kept as
        ``visitor``'s own for its activity and country: their next runs start from them
        (:meth:`save_references`). Refused for another visitor's run, or one that aims at
        the pack's; a ValueError says why."""
        import json

        run, path = self.opened(run_dir)
        self.check_owner(path, visitor)
        if not run.aims_changed():
            raise ValueError("the run aims at the pack's references: change them at a pause first")
        refs = run.references
        text = json.dumps(
            {"descriptors": refs.descriptors, "stereotypes": refs.stereotypes,
             "source": f"changed in run {run.id}"}
        )  # fmt: skip
        return self.save_references(run.spec.activity, refs.country, text, visitor)

    @property
    def busy(self) -> bool:
        return self.slot.busy

    def _stop_run(self, why: str) -> None:
        self.refiner().request_stop(why)


def _localizes(refiner: Any) -> str | None:
    """How a refiner's editor restricts an edit to a region (``mask``, ``instruction``), or
    None where it cannot (or the run has no editor)."""
    try:
        return getattr(refiner.backends.get("editor"), "localizes", None)
    except Exception:  # no editor role (a run that only regenerates), or none that loads
        return None
