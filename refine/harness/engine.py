"""How a job's cells are made: one :class:`Engine` interface, chosen in one place
(:func:`open_engine`).

A job hands an engine a :class:`MakerSpec`: how a process builds the one cell maker (one
set of models) its cells are made with, and which an engine sends to each of its workers.
The local engine builds one maker and runs ``workers`` jobs at a time on threads sharing
it (API models wait on the network together; local models take turns on the device). The
Ray engine (:mod:`refine.harness.ray`) builds a maker in each of its actors. Either way the
engine tells the job's :class:`Driver`, in the driver process alone, when a job starts,
ends or loses its worker, so one process writes the job's record.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ENGINES = ("local", "ray")


@dataclass(frozen=True)
class EngineOptions:
    """Where and how wide a task's cells are made, carried as one value from the command
    line to the engine: ``kind`` ``local`` (this process, ``workers`` jobs at a time on
    threads sharing one set of models) or ``ray`` (``workers`` actors, on this machine or
    the cluster at ``address``, ``gpus_per_worker`` GPUs each). ``batch``: Gemini requests
    go out as batch jobs (:mod:`refine.backends.gemini_batch`; half the price, answered
    within a day), every cell at once, on the local engine. ``limit``: only the task's
    first N jobs (``--limit`` of a task whose Plan takes no limit itself)."""

    kind: str = "local"
    workers: int = 1
    address: str | None = None
    gpus_per_worker: float = 0.0
    batch: bool = False
    limit: int | None = None

    def check(self) -> None:
        """A ValueError naming the option that cannot be, and what to do instead."""
        if self.kind not in ENGINES:
            raise ValueError(f"--engine: {self.kind!r} is not {' or '.join(ENGINES)}")
        if self.workers < 1:
            raise ValueError(f"--workers: at least 1, got {self.workers}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit: at least 1, got {self.limit}")
        if self.gpus_per_worker < 0:
            raise ValueError(f"--gpus-per-worker: at least 0, got {self.gpus_per_worker:g}")
        if self.kind == "local" and (self.address or self.gpus_per_worker):
            raise ValueError("--address/--gpus-per-worker: only with --engine ray")
        if self.batch and self.kind != "local":
            raise ValueError(
                "--batch: batch jobs wait in the API's queue, not on workers; leave out "
                "--engine ray"
            )
        if self.batch:
            from refine.backends.gemini import vertex_ai

            if vertex_ai():
                raise ValueError(
                    f"--batch: jobs of inline requests are the Gemini developer API's; "
                    f"Vertex AI ({vertex_ai()} is set) takes batch jobs from Cloud Storage, "
                    f"which this toolkit does not send: leave out --batch, or unset "
                    f"{vertex_ai()}"
                )

    def flags(self, default_workers: int = 1) -> list[str]:
        """The command-line options that ask for these again (what differs from the
        defaults)."""
        out = ["--workers", str(self.workers)] if self.workers != default_workers else []
        if self.kind != "local":
            out += ["--engine", self.kind] + (["--address", self.address] if self.address else [])
            out += (
                ["--gpus-per-worker", f"{self.gpus_per_worker:g}"] if self.gpus_per_worker else []
            )
        return out + (["--batch"] if self.batch else [])


LOCAL = EngineOptions()


@dataclass(frozen=True)
class MakerSpec:
    """``cls(**kwargs)`` builds a cell maker: an object with ``describe()`` (what its
    cells are made with, the same on every worker) and ``make(job, tell=None)`` (the job's
    result; ``tell(news)``, when given, hears how it goes). Plain data and a module-level
    class, so Ray can send it to a worker."""

    cls: type
    kwargs: dict[str, Any] = field(default_factory=dict)

    def build(self, **local: Any) -> Any:
        return self.cls(**self.kwargs, **local)


class Driver(Protocol):
    """What an engine tells the job that runs on it, in the driver (the process that
    called it)."""

    def label(self, job: Any) -> str:
        """The job in a message ("generator: activity (country)")."""

    def started(self, job: Any) -> None:
        """The job was handed to a worker."""

    def heard(self, job: Any, news: Any) -> None:
        """News from a job under way (the local engine's workers tell; Ray's do not)."""

    def done(self, job: Any, result: Any, worker: str) -> None:
        """The job ended with ``result`` on ``worker`` ("" on the local engine)."""

    def lost(self, job: Any, worker: str, retries: int) -> bool:
        """The job's worker died mid-job (``retries`` times now): True to make it again,
        False when the driver has given it up (and recorded why)."""

    def failed(self, job: Any, err: Exception, worker: str) -> bool:
        """The job itself failed with ``err``: True when the driver recorded it and the
        other jobs go on, False to stop them (the engine raises ``err``)."""


class Engine(Protocol):
    def describe(self) -> Any:
        """What the cells are made with (checked to be the same on every worker)."""

    def run(self, jobs: Sequence[Any], driver: Driver) -> None:
        """Make every job, telling ``driver``. The first failure of a job that the driver
        does not take as the job's own (:meth:`Driver.failed`) stops the rest (jobs under
        way end first); what is done is kept."""

    def workers(self) -> list[str]:
        """The workers' names (none on the local engine)."""

    def models(self) -> dict[str, str]:
        """Each model the makers used and the weights it resolved to (a maker without a
        ``models()`` names none)."""

    def close(self) -> None: ...


class LocalEngine:
    """One cell maker in this process, ``workers`` jobs at a time on threads."""

    def __init__(
        self, spec: MakerSpec, workers: int = 1, name: str = "cells", instances: Any = None
    ) -> None:
        self.maker = spec.build(instances=instances)
        self.threads, self.name = max(1, workers), name

    def describe(self) -> Any:
        return self.maker.describe()

    def models(self) -> dict[str, str]:
        from refine.harness.made_with import maker_models

        return maker_models(self.maker)

    def run(self, jobs: Sequence[Any], driver: Driver) -> None:
        queue = deque(jobs)
        lock = threading.Lock()
        stop = threading.Event()
        failures: list[BaseException] = []

        def work() -> None:
            while not stop.is_set():
                with lock:
                    if not queue:
                        return
                    job = queue.popleft()
                try:
                    driver.started(job)
                    result = self.maker.make(job, lambda news, job=job: driver.heard(job, news))
                    driver.done(job, result, "")
                except BaseException as err:  # the first failure stops the rest
                    try:
                        own = isinstance(err, Exception) and driver.failed(job, err, "")
                    except BaseException as failing:  # the driver could not record it
                        own, err = False, failing
                    if own:
                        continue  # the job's own failure, recorded: the others go on
                    failures.append(err)
                    stop.set()
                    return

        n = min(self.threads, len(queue))
        if n <= 1:
            work()
        else:
            threads = [
                threading.Thread(target=work, name=f"{self.name}-{k}", daemon=True)
                for k in range(n)
            ]
            for t in threads:
                t.start()
            try:
                for t in threads:
                    while t.is_alive():
                        t.join(0.2)  # Ctrl-C reaches this thread between waits
            except KeyboardInterrupt:
                stop.set()  # no job starts after this; those under way are left to end
                raise
        if failures:
            raise failures[0]

    def workers(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


class BatchEngine(LocalEngine):
    """The local engine with Gemini requests sent as batch jobs: every job at once (each
    waits on the API's queue, not on a model here), the batching open from before the
    models are built (so that they describe themselves as they will run) until
    :meth:`close`; its journal is in ``folder``."""

    def __init__(
        self,
        spec: MakerSpec,
        folder: str | Path,
        emit: Callable[[str], None],
        name: str = "cells",
        instances: Any = None,
    ) -> None:
        from refine.backends.gemini_batch import batching

        self._batching = batching(folder, emit)
        self.batcher = self._batching.__enter__()
        try:
            super().__init__(spec, 1, name, instances)
        except BaseException:
            self.close()
            raise

    def run(self, jobs: Sequence[Any], driver: Driver) -> None:
        from refine.backends.gemini_batch import MAX_AT_ONCE

        self.threads = max(1, min(len(jobs), MAX_AT_ONCE))
        super().run(jobs, driver)

    def close(self) -> None:
        if self._batching is not None:
            batching, self._batching = self._batching, None
            batching.__exit__(None, None, None)


def open_engine(
    options: EngineOptions,
    spec: MakerSpec,
    *,
    name: str = "cells",
    folder: str | Path,
    what: str,
    emit: Callable[[str], None],
    instances: Any = None,
) -> Engine:
    """The engine a job runs on (:class:`EngineOptions`): ``local`` (``instances``, models
    already built here, are used as they are) or ``ray`` (actors each building its own
    maker; every worker must see ``folder``, which ``what`` names for the user)."""
    if options.kind == "local" and options.batch:
        return BatchEngine(spec, folder, emit, name, instances)
    if options.kind == "local":
        return LocalEngine(spec, options.workers, name, instances)
    if options.kind == "ray":
        from refine.harness.ray import RayEngine

        return RayEngine(spec, options, Path(folder), what, emit, name)
    raise ValueError(f"engine {options.kind!r}: {' or '.join(ENGINES)}")
