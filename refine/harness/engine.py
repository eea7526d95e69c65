"""How a job's cells are made: one :class:`Engine` interface, chosen in one place
(:func:`open_engine`).

A job hands an engine a :class:`MakerSpec`: how a process builds the one cell maker (one
set of models) its cells are made with, and which an engine sends to each of its workers.
The local engine builds one maker and runs ``workers`` jobs at a time on threads sharing
it (API models wait on the network together; local models take turns on the device). The
Ray engine (:mod:`refine.harness.ray`) builds a maker in each of its actors. Either way the
driver alone hears each finished cell (``done``) and writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ENGINES = ("local", "ray")


@dataclass(frozen=True)
class MakerSpec:
    """``cls(**kwargs)`` builds a cell maker: an object with ``describe()`` (what its
    cells are scored with, the same on every worker) and ``make(job)`` (the job's cell).
    Plain data and a module-level class, so Ray can send it to a worker."""

    cls: type
    kwargs: dict[str, Any] = field(default_factory=dict)

    def build(self, **local: Any) -> Any:
        return self.cls(**self.kwargs, **local)


Done = Callable[[Any, Any, str], None]  # (job, its result, the worker that made it)


class Engine(Protocol):
    def describe(self) -> Any:
        """What the cells are scored with (checked to be the same on every worker)."""

    def run(self, jobs: Sequence[Any], done: Done, label: Callable[[Any], str]) -> None:
        """Make every job; ``done(job, result, worker)`` in the driver as each ends. The
        first failure of a job stops the rest; what is done is kept."""

    def close(self) -> None: ...


def run_jobs(make: Callable[[Any], None], todo: Sequence[Any], workers: int, name: str) -> None:
    """``make(job)`` for every job: ``workers`` at a time on threads (API models), else
    one after the other. The first failure stops the rest; what is done is kept."""
    if workers > 1 and len(todo) > 1:
        with ThreadPoolExecutor(min(workers, len(todo)), thread_name_prefix=name) as pool:
            for _ in pool.map(make, todo):
                pass
    else:
        for job in todo:
            make(job)


class LocalEngine:
    """One cell maker in this process, ``workers`` jobs at a time on threads."""

    def __init__(
        self, spec: MakerSpec, workers: int = 1, name: str = "cells", instances: Any = None
    ) -> None:
        self.maker = spec.build(instances=instances)
        self.workers, self.name = workers, name

    def describe(self) -> Any:
        return self.maker.describe()

    def run(self, jobs: Sequence[Any], done: Done, label: Callable[[Any], str]) -> None:
        run_jobs(lambda job: done(job, self.maker.make(job), ""), jobs, self.workers, self.name)

    def close(self) -> None:
        pass


def open_engine(
    kind: str,
    spec: MakerSpec,
    *,
    workers: int = 1,
    name: str = "cells",
    folder: str | Path,
    what: str,
    emit: Callable[[str], None],
    instances: Any = None,
    address: str | None = None,
    gpus_per_worker: float = 0.0,
) -> Engine:
    """The engine a job runs on: ``local`` (``instances``, models already built here, are
    used as they are) or ``ray`` (actors on this machine or the cluster at ``address``,
    each building its own maker, ``gpus_per_worker`` GPUs each; every worker must see
    ``folder``, which ``what`` names for the user)."""
    if kind == "local":
        return LocalEngine(spec, workers, name, instances)
    if kind == "ray":
        from refine.harness.ray import RayEngine

        return RayEngine(spec, workers, gpus_per_worker, address, Path(folder), what, emit, name)
    raise ValueError(f"engine {kind!r}: {' or '.join(ENGINES)}")
