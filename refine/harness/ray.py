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

A worker holds no spec of its own: every call carries the pool's (one object in Ray's
store), and a worker builds its maker from it on the first call that needs one, so a
worker Ray restarts builds the spec it serves now. A driver that joined Ray itself
(``ray.init`` before the job) keeps the workers of a job that ended cleanly for its next
job, with their models released, for :data:`IDLE_S` seconds: a worker's start is mostly
importing torch and the model code (5-7 CPU-s of the 6-7 here), which the next job then
skips. They keep their Ray resources (GPUs) meanwhile; :func:`release_kept` ends them at
once, and a job of another kind (worker class, GPUs a worker, caches) ends them as it
starts. A job that Ctrl-C or an error stops ends its workers. A driver whose job started
Ray, or joined it by ``--address``, ends it with the job.

This module alone imports Ray; :func:`refine.harness.engine.open_engine` chooses it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
# how long the workers of a job that ended cleanly wait for the driver's next job
IDLE_S = 120.0


@dataclass(eq=False)  # each keeping of a worker is its own (a timer ends only its own)
class _Kept:
    key: tuple  # worker class, GPUs a worker, the caches' settings, the Ray session last
    actor: Any
    name: str  # pid@host


_KEPT: list[_Kept] = []
_KEPT_LOCK = threading.Lock()


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
    """One worker: the cell maker of the pool's :class:`MakerSpec`, in its own process.
    ``held`` is ``[ref]``, the reference to the pool's ``((spec,), env)`` in Ray's store
    (in a list, so Ray hands the reference, not the value): the maker is built from it on
    the first call that needs one, and again when a later pool hands another."""

    def __init__(self) -> None:
        steady_collector()  # before the maker loads its libraries and models
        self.identity = f"{os.getpid()}@{socket.gethostname()}"
        self.maker: Any = None
        self.loaded = ""  # the held spec the maker was built from
        self.base = dict(os.environ)
        self.env: dict[str, str] = {}

    def _maker(self, held: list[Any]) -> Any:
        (ref,) = held
        if ref.hex() != self.loaded:
            import ray

            (spec,), env = ray.get(ref)
            self.release()
            for name in set(self.env) - set(env):  # the last job's, which this one lacks
                if name in self.base:
                    os.environ[name] = self.base[name]
                else:
                    os.environ.pop(name, None)
            os.environ.update(env)
            self.env = dict(env)
            self.maker = spec.build()
            self.loaded = ref.hex()
        return self.maker

    def whoami(self) -> str:
        return self.identity

    def sees(self, probe: str, token: str) -> bool:
        return sees(probe, token)

    def prepare(self, held: list[Any]) -> str:
        self._maker(held)
        return self.identity

    def describe(self, held: list[Any]) -> Any:
        return self._maker(held).describe()

    def models(self, held: list[Any]) -> dict[str, str]:
        from refine.harness.made_with import maker_models

        return maker_models(self._maker(held))

    def make(self, held: list[Any], job: Any) -> Any:
        return self._maker(held).make(job)

    def release(self) -> None:
        """Drop the maker and its models (GPU memory included) while the worker waits."""
        if self.maker is None:
            return
        self.maker, self.loaded = None, ""
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()


class RayPool:
    """``workers`` actors of ``worker_cls`` serving ``args`` on a local Ray instance or
    the cluster at ``address``, all seeing ``folder``; jobs are handed to idle workers and
    a job whose worker died is handed out again (up to MAX_RETRIES times). Workers this
    driver kept from its last job (see the module's docstring) are taken first."""

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
        self.broken = False  # a call was cut short: the workers are not kept
        self.started_here = connect(ray, options.address)
        gpus = options.gpus_per_worker
        try:
            env = worker_env()
            # what a worker's libraries read once, as they are imported, is part of the key
            caches = tuple((k, env[k]) for k in PASSED_ENV if k in env)
            kind_of = (worker_cls.__module__, worker_cls.__qualname__)
            self.key = (*kind_of, gpus, caches, _session(ray))
            self.held = [ray.put((args, env))]
            kept = _take(ray, self.key, max(1, options.workers))
            self.identity = {k.actor: k.name for k in kept}  # until they answer
            remote = ray.remote(worker_cls)
            tag = uuid.uuid4().hex[:6]
            self.actors = [k.actor for k in kept] + [
                # API workers wait on the network: they hold no CPU, so N may exceed the
                # cores; the name is what Ray's dashboard shows
                remote.options(
                    name=f"refine-{kind}-{tag}-{k}",
                    num_cpus=1 if gpus else 0,
                    num_gpus=gpus,
                    max_restarts=-1,
                    max_task_retries=0,
                ).remote()
                for k in range(len(kept), max(1, options.workers))
            ]
            check_shared(ray, self.actors, Path(folder), what)
            names = self._prepare()
            self.identity = dict(zip(self.actors, names, strict=True))
            emit(f"ray: {len(self.actors)} worker(s): {', '.join(names)}")
            if kept:
                emit(f"kept from this program's last job: {', '.join(names[: len(kept)])}")
        except BaseException:
            self.broken = True
            self.close()
            raise

    def get(self, refs: Any) -> Any:
        """``ray.get``; a worker that died is one clear error."""
        from ray.exceptions import ActorDiedError

        try:
            return self.ray.get(refs)
        except ActorDiedError as err:
            self.broken = True
            raise RayEngineError("a Ray worker died: " + _last_line(err)) from None
        except BaseException:
            self.broken = True  # the calls may still be running
            raise

    def _prepare(self) -> list[str]:
        """Every worker builds its maker; the workers' names. One that cannot (its models
        unavailable, say) is one clear error."""
        from ray.exceptions import ActorDiedError, RayTaskError

        try:
            return self.ray.get([a.prepare.remote(self.held) for a in self.actors])
        except (ActorDiedError, RayTaskError) as err:
            self.broken = True
            cause = getattr(err, "cause", None) or err
            raise RayEngineError("a Ray worker could not start: " + _last_line(cause)) from None
        except BaseException:
            self.broken = True
            raise

    def run(self, jobs: Sequence[Any], driver: Any) -> None:
        """Every job on an idle worker (``make(job)``), telling ``driver`` (see
        :class:`refine.harness.engine.Driver`). A job whose worker died is made again
        while the driver wants it, up to MAX_RETRIES times; the first failure of a job
        itself stops the rest (what is done is kept)."""
        try:
            self._run(jobs, driver)
        except BaseException:
            self.broken = True  # calls may still be running: the workers go with the job
            raise

    def _run(self, jobs: Sequence[Any], driver: Any) -> None:
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
                pending[actor.make.remote(self.held, jobs[k])] = (k, actor)
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
        """Keep the workers for this driver's next job (see the module's docstring), or
        kill them (waiting up to 15 s for those on this host) and leave Ray if this pool
        joined it. Closed while an exception is handled (Ctrl-C among them), or after a
        call was cut short, the pool keeps nothing."""
        ray = self.ray
        actors, self.actors = self.actors, []
        clean = not self.broken and sys.exc_info()[0] is None
        if actors and clean and not self.started_here and self._park(actors):
            self.identity = {}
            return
        for actor in actors:
            ray.kill(actor)
        here = socket.gethostname()
        pids = [int(w.split("@")[0]) for w in self.identity.values() if w.endswith(f"@{here}")]
        self.identity = {}
        wait_for(lambda: not any(_alive(pid) for pid in pids), 15.0)
        if self.started_here:
            ray.shutdown()
            self.started_here = False

    def _park(self, actors: list[Any]) -> bool:
        """Release the workers' models and keep them for :data:`IDLE_S`; False when one
        does not answer."""
        try:
            self.ray.get([a.release.remote() for a in actors], timeout=60)
        except Exception:
            return False
        kept = [_Kept(self.key, a, self.identity.get(a, "?")) for a in actors]
        with _KEPT_LOCK:
            _KEPT.extend(kept)
        timer = threading.Timer(IDLE_S, _end_kept, args=(self.ray, kept))
        timer.daemon = True
        timer.start()
        return True


def _last_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[-1] if lines else "no reason given"


def _session(ray: Any) -> str:
    """This driver's Ray job on its node: new at each ``ray.init`` (a job id alone starts
    again at 1 in a new cluster)."""
    context = ray.get_runtime_context()
    return f"{context.get_job_id()}@{context.get_node_id()}"


def _take(ray: Any, key: tuple, n: int) -> list[_Kept]:
    """Up to ``n`` workers kept for ``key``, no longer kept. Those kept in another Ray
    session are forgotten (ended with it); those of this session kept for another kind
    of job are ended, so that they hold none of the resources this job may need."""
    with _KEPT_LOCK:
        here = [k for k in _KEPT if k.key[-1] == key[-1]]
        other = [k for k in here if k.key != key]
        taken = [k for k in here if k.key == key][:n]
        _KEPT[:] = [k for k in here if k not in other and k not in taken]
    _kill(ray, other)
    return taken


def _end_kept(ray: Any, kept: list[_Kept]) -> int:
    """End those of ``kept`` still waiting for a job (a timer's, :data:`IDLE_S` after
    they were kept); how many were ended."""
    with _KEPT_LOCK:
        gone = [k for k in kept if k in _KEPT]
        _KEPT[:] = [k for k in _KEPT if k not in gone]
    if not gone or not ray.is_initialized():
        return 0  # taken, or their Ray was left (which ended them)
    session = _session(ray)
    here = [k for k in gone if k.key[-1] == session]
    _kill(ray, here)
    return len(here)


def release_kept() -> int:
    """End at once the workers this driver keeps for its next job (a program that wants
    their GPUs back before :data:`IDLE_S`); how many were ended."""
    ray = sys.modules.get("ray")
    if ray is None:  # Ray never imported: nothing was kept
        return 0
    with _KEPT_LOCK:
        kept = list(_KEPT)
    return _end_kept(ray, kept)


def _kill(ray: Any, kept: list[_Kept]) -> None:
    for k in kept:
        with contextlib.suppress(Exception):  # already dead
            ray.kill(k.actor)


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

        pool = self.pool
        return merge_models(pool.get([a.models.remote(pool.held) for a in pool.actors]))

    def describe(self) -> Any:
        pool = self.pool
        seen = pool.get([a.describe.remote(pool.held) for a in pool.actors])
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
