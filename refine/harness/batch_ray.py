"""The Ray engine of ``refine batch``: the same batch directory, its runs made by Ray actors.

Each worker is a Ray actor that loads one set of models (``--gpus-per-worker`` GPUs each,
or none for API profiles) and takes runs from the driver, one at a time; a run is the unit
of work and of retry. All state stays in the batch directory, which every node must see
(a shared filesystem path): ``batch.json`` (written by the driver only), ``runs/<run>/``
(written by the worker that holds the run's lock) and ``runs/.claims/<entry>.json`` (the
run directory a worker started for an entry, written as soon as the run starts, so a
retry resumes that run instead of starting another).

When a worker dies mid-run, Ray restarts it; the driver releases the dead worker's lock
on the run and gives the entry to a free worker, which resumes the run from its last
complete round (the run records decide what is done: no round is lost or made twice).
``retries`` in ``batch.json`` counts this per entry. Ctrl-C on the driver saves the record
and stops the workers; ``refine batch --resume`` (either engine) finishes the rest.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from refine.events import BatchStarted, EntryChanged, Event, RunStarted
from refine.harness.ray import (
    MAX_RETRIES,
    _alive,
    check_shared,
    connect,
    import_ray,
    restarted,
    sees,
    wait_for,
    worker_env,
)
from refine.harness.tasks.batch import Batch, BatchEntry, BatchStore, entry_ended, record_run
from refine.io.files import atomic_write_text
from refine.io.store import LOCK_FILE, RunStore
from refine.loop.refiner import Refiner


class RunWorker:
    """One worker: a Refiner with one set of models, in its own process."""

    def __init__(self, profile, backends, options, env: dict[str, str]) -> None:
        os.environ.update(env)

        self.refiner = Refiner(profile, backends, options)
        self.identity = f"{os.getpid()}@{socket.gethostname()}"

    def whoami(self) -> str:
        return self.identity

    def sees(self, probe: str, token: str) -> bool:
        """Whether this node sees the driver's batch directory (the shared-storage check)."""
        return sees(probe, token)

    def run(self, i: int, entry_json: str, batch_dir: str) -> str:
        """Make or resume the run of entry ``i``; returns its directory (relative)."""

        entry = BatchEntry.model_validate_json(entry_json)
        root = Path(batch_dir)
        claim = root / "runs" / ".claims" / f"{i}.json"
        started: dict[str, str] = {}

        def on_event(event: Event) -> None:
            if isinstance(event, RunStarted) and "dir" not in started:
                started["dir"] = str(Path(event.dir).relative_to(root))
                claim.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(claim, json.dumps({"run_dir": started["dir"]}))

        self.refiner.on_event = on_event
        run_dir = entry.run_dir or claimed(root, i)
        if run_dir and (root / run_dir / "run.json").is_file():
            run = self.refiner.resume(root / run_dir)
            started.setdefault("dir", run_dir)
        else:
            run = self.refiner.start(entry.spec, entry.references, out=root / "runs")
            started.setdefault("dir", str(Path(run.id)))
        return started["dir"]


def claimed(root: Path, i: int) -> str | None:
    """The run directory a worker started for entry ``i``, if any."""
    try:
        return json.loads((root / "runs" / ".claims" / f"{i}.json").read_text())["run_dir"]
    except (OSError, ValueError, KeyError):
        return None


def run_batch_ray(
    batch: Batch,
    store: BatchStore,
    profile: str,
    backends: dict[str, str] | None = None,
    backend_options: dict[str, dict[str, Any]] | None = None,
    workers: int = 2,
    gpus_per_worker: float = 0.0,
    address: str | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_workers: Callable[[list[str]], None] | None = None,
    timings: list[tuple[int, float, float, bool]] | None = None,
) -> Batch:
    """Run every unfinished entry of ``batch`` on ``workers`` Ray actors (a local Ray
    instance, or the cluster at ``address``) and return the batch record; the same
    record and run directories as :func:`refine.harness.tasks.batch.run_batch`."""
    ray = import_ray()
    emit = on_event or (lambda event: None)
    env = worker_env()
    started_here = connect(ray, address)
    try:
        return _drive(
            ray,
            batch,
            store,
            profile,
            backends,
            backend_options,
            workers,
            gpus_per_worker,
            env,
            emit,
            on_workers,
            timings,
        )
    finally:
        if started_here:
            ray.shutdown()


def _drive(
    ray, batch, store, profile, backends, options, workers, gpus, env, emit, on_workers, timings
):
    from ray.exceptions import RayActorError

    remote = ray.remote(RunWorker)
    todo = deque(i for i, e in enumerate(batch.entries) if e.status != "finished")
    total = len(batch.entries)
    emit(BatchStarted(id=batch.id, dir=str(store.dir), total=total, todo=len(todo)))
    if not todo:
        return batch
    n = max(1, min(workers, len(todo)))
    tag = uuid.uuid4().hex[:6]
    actors = [
        # API workers wait on the network: they hold no CPU, so N may exceed the cores;
        # the name is what Ray's dashboard shows
        remote.options(
            name=f"refine-batch-{tag}-{k}",
            num_cpus=1 if gpus else 0,
            num_gpus=gpus,
            max_restarts=-1,
            max_task_retries=0,
        ).remote(profile, backends or {}, options or {}, env)
        for k in range(n)
    ]
    check_shared(ray, actors, store.dir, "the batch directory (--out)")
    identity = dict(zip(actors, ray.get([a.whoami.remote() for a in actors]), strict=True))
    if on_workers:
        on_workers(list(identity.values()))
    idle = list(actors)
    pending: dict[Any, tuple[int, Any]] = {}
    submitted: dict[Any, float] = {}
    warmed: set[Any] = set()
    done_count = total - len(todo)
    began = time.perf_counter()
    made: dict[Any, list[int]] = {a: [0, 0] for a in actors}  # runs, rounds per worker
    try:
        while todo or pending:
            while todo and idle:
                i = todo.popleft()
                actor = idle.pop()
                entry = batch.entries[i]
                entry.status, entry.error = "running", None
                store.save(batch)
                emit(EntryChanged(entry=i, name=entry.name, status="running"))
                fut = actor.run.remote(i, entry.model_dump_json(), str(store.dir))
                pending[fut] = (i, actor)
                submitted[fut] = time.perf_counter()
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for fut in ready:
                i, actor = pending.pop(fut)
                entry = batch.entries[i]
                entry.run_dir = entry.run_dir or claimed(store.dir, i)
                try:
                    entry.run_dir = ray.get(fut)
                    run = RunStore(store.dir / entry.run_dir).load()
                    record_run(entry, run)
                    made[actor][0] += 1
                    made[actor][1] += len(run.rounds)
                    if timings is not None:
                        # (entry, the driver's wall time, the run's own, the worker's first:
                        # its models loaded on the way)
                        first = actor not in warmed
                        warmed.add(actor)
                        timings.append(
                            (i, time.perf_counter() - submitted[fut], run.elapsed_s, first)
                        )
                except RayActorError:
                    # the worker died mid-run: free its lock, resume the run elsewhere
                    entry.retries += 1
                    _release(store.dir, entry.run_dir, identity.get(actor))
                    identity[actor] = restarted(ray, actor)
                    idle.append(actor)
                    if entry.retries <= MAX_RETRIES:
                        entry.status = "pending"
                        store.save(batch)
                        todo.appendleft(i)
                        emit(EntryChanged(entry=i, name=entry.name, status="retrying"))
                        continue
                    entry.status, entry.error = "failed", "its worker died too often"
                except Exception as err:  # the run itself failed: recorded, the batch goes on
                    cause = getattr(err, "cause", None) or err
                    if entry.run_dir and (store.dir / entry.run_dir / "run.json").is_file():
                        record_run(entry, RunStore(store.dir / entry.run_dir).load())
                    entry.status = "failed"
                    entry.error = f"{type(cause).__name__}: {cause}"
                idle.append(actor)
                store.save(batch)
                done_count += 1
                minutes = max(time.perf_counter() - began, 1e-6) / 60
                emit(
                    replace(
                        entry_ended(i, entry, done_count, total),
                        worker=identity.get(actor),
                        worker_runs=made[actor][0],
                        worker_rounds_per_min=made[actor][1] / minutes,
                        rounds_per_min=sum(m[1] for m in made.values()) / minutes,
                    )
                )
    except KeyboardInterrupt:
        _stop(ray, actors, identity)
        for i, _ in pending.values():  # runs begun: --resume goes on with them
            entry = batch.entries[i]
            entry.run_dir = entry.run_dir or claimed(store.dir, i)
        store.save(batch)
        raise
    _stop(ray, actors, identity)
    store.save(batch)
    return batch


def _stop(ray: Any, actors: list[Any], identity: dict[Any, str]) -> None:
    """Kill the workers and wait (up to 15 s) until those on this host are gone, so the
    locks they held are stale when the runs are resumed."""
    for actor in actors:
        ray.kill(actor)
    here = socket.gethostname()
    pids = [int(w.split("@")[0]) for w in identity.values() if w.endswith(f"@{here}")]
    wait_for(lambda: not any(_alive(pid) for pid in pids), 15.0)


def _release(root: Path, run_dir: str | None, dead: str | None) -> None:
    """Remove a run's lock when the dead worker held it (its host may be another)."""
    if not run_dir or not dead:
        return
    lock = root / run_dir / LOCK_FILE
    try:
        if lock.read_text(encoding="utf-8").strip() == dead:
            lock.unlink(missing_ok=True)
    except OSError:
        pass
