"""The Ray engine of ``refine bench``: the same bench folder, its cells made by Ray actors.

Each worker is a Ray actor holding one :class:`refine.harness.tasks.bench.CellMaker`
(the scorer's models and the generators, ``--gpus-per-worker`` GPUs each, or none for
API profiles). A cell (one generator and prompt) is the unit of work and of retry: the
worker generates and saves the cell's images in the bench folder, which every node must
see, and returns the scored cell; the driver alone appends it to ``cells.jsonl``, so the
file has one writer. A worker that dies mid-cell is restarted by Ray and the cell is
made again (its images are overwritten: the seeds are fixed), up to three times. Ctrl-C
stops the workers; cells done are kept and the next ``refine bench`` with the same
folder goes on from there, with either engine."""

from __future__ import annotations

import os
import socket
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from refine.harness.batch_ray import (
    MAX_RETRIES,
    RayEngineError,
    _alive,
    check_shared,
    connect,
    import_ray,
    restarted,
    sees,
    wait_for,
    worker_env,
)


class CellWorker:
    """One worker: a cell maker (one set of models) in its own process. The bench hands
    over its maker and store classes (Ray sends them by reference), so this engine needs
    no import of the bench."""

    def __init__(
        self, maker_cls: type, store_cls: type, plan: Any, backend_options: dict, env: dict
    ) -> None:
        os.environ.update(env)
        self.maker = maker_cls(plan, backend_options)
        self.store_cls = store_cls
        self.identity = f"{os.getpid()}@{socket.gethostname()}"

    def whoami(self) -> str:
        return self.identity

    def sees(self, probe: str, token: str) -> bool:
        return sees(probe, token)

    def describe(self) -> tuple[float, str, dict[str, str]]:
        return self.maker.describe()

    def make(self, job: tuple[str, str, str], bench_dir: str) -> dict[str, Any]:
        return self.maker.make(tuple(job), self.store_cls(bench_dir))


class RayPool:
    """``workers`` actors of ``worker_cls`` (each built with ``args``) on a local Ray
    instance or the cluster at ``address``, all seeing ``folder``; jobs are handed to idle
    workers and a job whose worker died is handed out again (up to MAX_RETRIES times)."""

    def __init__(
        self,
        worker_cls: type,
        args: tuple,
        workers: int,
        gpus_per_worker: float,
        address: str | None,
        folder: Path,
        what: str,
        emit: Callable[[str], None],
        kind: str,
    ) -> None:
        self.ray = ray = import_ray()
        self.emit = emit
        self.actors: list[Any] = []
        self.identity: dict[Any, str] = {}
        self.started_here = connect(ray, address)
        try:
            remote = ray.remote(worker_cls)
            tag = uuid.uuid4().hex[:6]
            self.actors = [
                # API workers wait on the network: they hold no CPU, so N may exceed the
                # cores; the name is what Ray's dashboard shows
                remote.options(
                    name=f"refine-{kind}-{tag}-{k}",
                    num_cpus=1 if gpus_per_worker else 0,
                    num_gpus=gpus_per_worker,
                    max_restarts=-1,
                    max_task_retries=0,
                ).remote(*args, worker_env())
                for k in range(max(1, workers))
            ]
            check_shared(ray, self.actors, Path(folder), what)
            names = self.get([a.whoami.remote() for a in self.actors])
            self.identity = dict(zip(self.actors, names, strict=True))
            emit(f"ray: {len(self.actors)} worker(s): {', '.join(names)}")
        except BaseException:
            self.close()
            raise

    def get(self, refs: Any) -> Any:
        """``ray.get``; a worker that could not start (its models unavailable, say) is one
        clear error."""
        from ray.exceptions import ActorDiedError

        try:
            return self.ray.get(refs)
        except ActorDiedError as err:
            cause = str(err).strip().splitlines()
            raise RayEngineError(
                "a Ray worker could not start: " + (cause[-1] if cause else "no reason given")
            ) from None

    def run(
        self,
        jobs: Sequence[Any],
        submit: Callable[[Any, Any], Any],
        done: Callable[[Any, Any, str], None],
        label: Callable[[Any], str],
    ) -> None:
        """``submit(actor, job)`` for every job; ``done(job, result, worker)`` as each
        ends. The first failure of a job itself stops the rest (what is done is kept)."""
        from ray.exceptions import RayActorError

        ray = self.ray
        queue = deque(range(len(jobs)))
        idle = list(self.actors)
        pending: dict[Any, tuple[int, Any]] = {}
        retries: dict[int, int] = {}
        while queue or pending:
            while queue and idle:
                k, actor = queue.popleft(), idle.pop()
                pending[submit(actor, jobs[k])] = (k, actor)
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for fut in ready:
                k, actor = pending.pop(fut)
                try:
                    result = ray.get(fut)
                except RayActorError:
                    # the worker died mid-job: Ray restarts it; the job is done again
                    retries[k] = retries.get(k, 0) + 1
                    self.identity[actor] = restarted(ray, actor)
                    idle.append(actor)
                    if retries[k] > MAX_RETRIES:
                        raise RayEngineError(
                            f"{label(jobs[k])}: its worker died {retries[k]} times"
                        ) from None
                    self.emit(
                        f"retrying {label(jobs[k])} (its worker died; "
                        f"retry {retries[k]} of {MAX_RETRIES})"
                    )
                    queue.appendleft(k)
                    continue
                except Exception as err:  # the first failure stops the rest, as locally
                    raise (getattr(err, "cause", None) or err) from None
                idle.append(actor)
                done(jobs[k], result, self.identity.get(actor, "?"))

    def close(self) -> None:
        """Kill the workers (waiting up to 15 s for those on this host) and leave Ray if
        this pool joined it."""
        ray = self.ray
        for actor in self.actors:
            ray.kill(actor)
        here = socket.gethostname()
        pids = [int(w.split("@")[0]) for w in self.identity.values() if w.endswith(f"@{here}")]
        wait_for(lambda: not any(_alive(pid) for pid in pids), 15.0)
        self.actors = []
        if self.started_here:
            ray.shutdown()
            self.started_here = False


class RayCells:
    """The Ray engine of ``refine bench`` (see :func:`refine.harness.tasks.bench.run_bench`)."""

    def __init__(
        self,
        maker_cls: type,
        plan: Any,
        store: Any,
        backend_options: dict[str, dict[str, Any]] | None,
        workers: int,
        gpus_per_worker: float,
        address: str | None,
        emit: Callable[[str], None],
    ) -> None:
        self.pool = RayPool(
            CellWorker,
            (maker_cls, type(store), plan, backend_options or {}),
            workers,
            gpus_per_worker,
            address,
            Path(store.dir),
            "the bench folder (--out)",
            emit,
            "bench",
        )

    def describe(self) -> tuple[float, str, dict[str, str]]:
        seen = self.pool.get([a.describe.remote() for a in self.pool.actors])
        first = seen[0]
        for other in seen[1:]:
            if tuple(other) != tuple(first):
                raise RayEngineError(
                    f"the Ray workers score differently ({first[2]} against {other[2]}): "
                    "give every node the same models and versions"
                )
        return first[0], first[1], first[2]

    def run(
        self,
        todo: Sequence[tuple[str, str, str]],
        store: Any,
        done: Callable[[dict[str, Any], str], None],
    ) -> None:
        bench_dir = str(store.dir)
        self.pool.run(
            list(todo),
            lambda actor, job: actor.make.remote(list(job), bench_dir),
            lambda job, cell, worker: done(cell, worker),
            lambda job: f"{job[0]}: {job[1]} ({job[2]})",
        )

    def close(self) -> None:
        self.pool.close()
