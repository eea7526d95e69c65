"""The Ray engine: the cells of a job made by Ray actors, on this machine or a cluster.

Each worker is an actor that builds one cell maker (one set of models: ``--gpus-per-worker``
GPUs each, or none for API profiles) from the job's maker spec
(:class:`refine.harness.engine.MakerSpec`, which chooses this engine)
and makes the jobs the driver hands it, one at a time. A job is the unit of work and of
retry: a worker that dies mid-job is restarted by Ray and the job is made again (a cell's
images are overwritten: its seeds are fixed), up to :data:`MAX_RETRIES` times. Workers
write images into the job's folder, which every node must see (checked before the first
job); the driver alone writes the cells file, so it has one writer, and a job stopped
half-way goes on with either engine. Ctrl-C stops the workers; cells done are kept.

This module alone imports Ray; :func:`refine.harness.engine.open_engine` chooses it.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from refine.backends.imports import steady_collector
from refine.backends.registry import environment
from refine.io.files import atomic_write_text

# environment a worker needs to reach the same models and caches as the driver
# (and every variable a registered backend reads: its key, its server's address)
PASSED_ENV = (
    "REFINE_CACHE_DIR",
    "REFINE_DATA_DIR",  # the fetched packs and photo sets the references come from
    "HF_ENDPOINT",
    "REFINE_JUDGE_MEMORY",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HUB_CACHE",
)
MAX_RETRIES = 3


class RayEngineError(RuntimeError):
    """The Ray engine cannot run here; the message says what to do."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayEngineError(
            "--engine ray needs Ray: pip install ray (or the cultural-refine[ray] extra: "
            "pip install '.[ray]' in a clone)"
        ) from None
    return ray


def check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """A ``host:port`` or ``ray://host:port`` address answers a TCP connection (Ray itself
    would wait minutes on one that does not); ``auto`` and local are left to Ray."""
    if not address or address == "auto":
        return
    hostport = address.removeprefix("ray://").split("/")[0]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise RayEngineError(f"--address {address}: give auto, host:port or ray://host:port")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            pass
    except OSError as err:
        raise RayEngineError(
            f"--address {address}: nothing answers there ({err.strerror or err}); start the "
            "cluster (ray start --head) or check the address"
        ) from None


def connect(ray: Any, address: str | None) -> bool:
    """Join the cluster at ``address`` (or start a local Ray instance) unless this process
    has joined one already; True when this call did (the caller shuts it down)."""
    if ray.is_initialized():
        return False
    check_reachable(address)
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            # a cluster of this job's own: its workers run at the job's priority (Ray's
            # default, nice 15, leaves them almost no CPU beside any other busy process)
            os.environ.setdefault("RAY_worker_niceness", "0")
            ray.init(include_dashboard=False, log_to_driver=False)
    except Exception as err:  # an unreachable or wrong address
        raise RayEngineError(f"--address {address or 'local'}: cannot join Ray ({err})") from None
    return True


def check_shared(ray: Any, actors: list[Any], folder: Path, what: str) -> None:
    """Every worker sees ``folder``: a token written here is read there (each actor has a
    ``sees(probe, token)`` method)."""
    token = uuid.uuid4().hex
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".shared-{token[:8]}"
    atomic_write_text(probe, token)  # whole or absent, as a worker reads it
    try:
        seen = ray.get([a.sees.remote(str(probe), token) for a in actors])
    finally:
        probe.unlink(missing_ok=True)
    if not all(seen):
        raise RayEngineError(
            f"{folder} is not visible from every Ray worker: put {what} on storage every "
            "node sees, such as a shared filesystem"
        )


def sees(probe: str, token: str) -> bool:
    """Whether this node reads ``token`` in ``probe`` (see :func:`check_shared`)."""
    try:
        return Path(probe).read_text(encoding="utf-8") == token
    except OSError:
        return False


def worker_env() -> dict[str, str]:
    """The driver's environment that workers need: what the registered backends read
    (API keys, servers' addresses: refine.backends.registry.environment), caches and
    offline switches."""
    names = (*environment(), *PASSED_ENV)
    return {k: os.environ[k] for k in names if k in os.environ}


class MakerWorker:
    """One worker: the cell maker of a :class:`MakerSpec` in its own process."""

    def __init__(self, spec: Any, env: dict[str, str]) -> None:
        steady_collector()  # before the maker loads its libraries and models
        os.environ.update(env)
        self.maker = spec.build()
        self.identity = f"{os.getpid()}@{socket.gethostname()}"

    def whoami(self) -> str:
        return self.identity

    def sees(self, probe: str, token: str) -> bool:
        return sees(probe, token)

    def describe(self) -> Any:
        return self.maker.describe()

    def models(self) -> dict[str, str]:
        from refine.harness.made_with import maker_models

        return maker_models(self.maker)

    def make(self, job: Any) -> Any:
        return self.maker.make(job)


class RayPool:
    """``workers`` actors of ``worker_cls`` (each built with ``args``) on a local Ray
    instance or the cluster at ``address``, all seeing ``folder``; jobs are handed to idle
    workers and a job whose worker died is handed out again (up to MAX_RETRIES times)."""

    def __init__(
        self,
        worker_cls: type,
        args: tuple,
        options: Any,
        folder: Path,
        what: str,
        emit: Callable[[str], None],
        kind: str,
    ) -> None:
        """``options``: :class:`refine.harness.engine.EngineOptions` (workers, address,
        GPUs per worker)."""
        self.ray = ray = import_ray()
        self.emit = emit
        self.actors: list[Any] = []
        self.identity: dict[Any, str] = {}
        self.started_here = connect(ray, options.address)
        gpus = options.gpus_per_worker
        try:
            remote = ray.remote(worker_cls)
            tag = uuid.uuid4().hex[:6]
            self.actors = [
                # API workers wait on the network: they hold no CPU, so N may exceed the
                # cores; the name is what Ray's dashboard shows
                remote.options(
                    name=f"refine-{kind}-{tag}-{k}",
                    num_cpus=1 if gpus else 0,
                    num_gpus=gpus,
                    max_restarts=-1,
                    max_task_retries=0,
                ).remote(*args, worker_env())
                for k in range(max(1, options.workers))
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

    def run(self, jobs: Sequence[Any], driver: Any) -> None:
        """Every job on an idle worker (``make(job)``), telling ``driver`` (see
        :class:`refine.harness.engine.Driver`). A job whose worker died is made again
        while the driver wants it, up to MAX_RETRIES times; the first failure of a job
        itself stops the rest (what is done is kept)."""
        from ray.exceptions import RayActorError

        ray = self.ray
        queue = deque(range(len(jobs)))
        idle = list(self.actors)
        pending: dict[Any, tuple[int, Any]] = {}
        retries: dict[int, int] = {}
        while queue or pending:
            while queue and idle:
                k, actor = queue.popleft(), idle.pop()
                driver.started(jobs[k])
                pending[actor.make.remote(jobs[k])] = (k, actor)
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for fut in ready:
                k, actor = pending.pop(fut)
                try:
                    result = ray.get(fut)
                except RayActorError:
                    # the worker died mid-job: Ray restarts it; the job is made again
                    retries[k] = retries.get(k, 0) + 1
                    dead = self.identity.get(actor, "?")
                    self.identity[actor] = restarted(ray, actor)
                    idle.append(actor)
                    if not driver.lost(jobs[k], dead, retries[k]):
                        continue  # given up by the driver, which said why
                    if retries[k] > MAX_RETRIES:
                        raise RayEngineError(
                            f"{driver.label(jobs[k])}: its worker died {retries[k]} times"
                        ) from None
                    self.emit(
                        f"retrying {driver.label(jobs[k])} (its worker died; "
                        f"retry {retries[k]} of {MAX_RETRIES})"
                    )
                    queue.appendleft(k)
                    continue
                except Exception as err:  # the first failure stops the rest, as locally
                    cause = getattr(err, "cause", None) or err
                    if driver.failed(jobs[k], cause, self.identity.get(actor, "?")):
                        idle.append(actor)  # the job's own failure, recorded: go on
                        continue
                    raise cause from None
                idle.append(actor)
                driver.done(jobs[k], result, self.identity.get(actor, "?"))

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


class RayEngine:
    """The :class:`refine.harness.engine.Engine` on Ray: ``workers`` :class:`MakerWorker`
    actors."""

    def __init__(
        self,
        spec: Any,
        options: Any,
        folder: Path,
        what: str,
        emit: Callable[[str], None],
        name: str,
    ) -> None:
        self.pool = RayPool(MakerWorker, (spec,), options, folder, what, emit, name)

    def models(self) -> dict[str, str]:
        from refine.harness.made_with import merge_models

        return merge_models(self.pool.get([a.models.remote() for a in self.pool.actors]))

    def describe(self) -> Any:
        seen = self.pool.get([a.describe.remote() for a in self.pool.actors])
        for other in seen[1:]:
            if other != seen[0]:
                raise RayEngineError(
                    f"the Ray workers score differently ({seen[0]} against {other}): "
                    "give every node the same models and versions"
                )
        return seen[0]

    def run(self, jobs: Sequence[Any], driver: Any) -> None:
        self.pool.run(list(jobs), driver)

    def workers(self) -> list[str]:
        """The workers, as ``pid@host``."""
        return list(self.pool.identity.values())

    def close(self) -> None:
        self.pool.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def restarted(ray: Any, actor: Any, seconds: float = 120.0) -> str:
    """The identity of ``actor`` once Ray has restarted it (asked again while it is still
    restarting)."""
    from ray.exceptions import ActorUnavailableError

    end = time.monotonic() + seconds
    while True:
        try:
            return ray.get(actor.whoami.remote())
        except ActorUnavailableError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    """Poll ``condition`` until it holds or ``seconds`` pass (tests and benchmarks)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return False
