"""The app on a ZeroGPU Space: the GPU is leased for each model call, not for a whole run.

ZeroGPU, the free GPU tier of Hugging Face Spaces, gives a process a GPU only while a
function decorated with ``spaces.GPU(duration=...)`` runs, and counts a visitor's daily
quota in the seconds those functions hold it. A refinement run spends most of its wall time
between model calls (scoring, writing records, waiting for a visitor's review), so leasing
the GPU per model call spends the quota on model time only, where one lease around the run
would hold it for up to ``REFINE_MAX_RUN_MINUTES``.

:func:`lease_per_call` wraps the methods that run a local model (each is one call to the
GPU: a diffusion pipeline's batch, a generate call, a forward pass for answer
probabilities, an embedding batch) with ``spaces.GPU``; a wrapped method called from inside
another runs within its lease. :func:`main` is the ZeroGPU Space's entry: it loads the
profile's local models at start-up (ZeroGPU moves weights placed on ``cuda`` onto the GPU
for each lease, so they must be loaded outside one) and serves the app as
:func:`ui.deploy.main` does.

Inside a lease ZeroGPU runs the call in a worker process forked from this one, and sends it
the call's arguments pickled: the leased function gets the backend's id and the method's
name (the worker's copy of the process holds the backend and its weights), never the
backend itself, and no callable. So what a call leaves on its backend besides its answer
(the denoising steps it reports to the progress bar, a batch made smaller for lack of
memory) does not reach the app: on ZeroGPU the progress bar moves by stage, and a stop takes
effect between model calls. A tensor comes back on the CPU. MiniLM runs on the processor,
outside leases; tuning is off (a tune would hold the GPU for minutes).

``REFINE_GPU_SECONDS`` (60) is the longest one call may hold the GPU; ZeroGPU stops a call
that runs longer.
"""

from __future__ import annotations

import functools
import importlib
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

# class -> its methods that each run the model once (none of them calls another of the
# same class's listed methods, so the leases never nest in one backend): the backend
# registry's, and models that are no backend of a role but run here all the same (a
# baseline's own model)
OWN_MODEL_CALLS: dict[str, tuple[str, ...]] = {
    "refine.backends.image_reward:ImageReward": ("score",),
}


def model_calls() -> dict[str, tuple[str, ...]]:
    """Each class and its methods that run a model: what the backend registry declares
    (refine.backends.registry.BackendInfo.model_calls), and the baselines' own models."""
    from refine.backends.registry import model_calls as declared

    return {**declared(), **OWN_MODEL_CALLS}


DEFAULT_SECONDS = 60
TUNING_OFF = (
    "tuning is off on ZeroGPU: a tune holds the GPU for minutes, longer than a lease "
    "lasts; tune with refine tune on a GPU machine"
)
_state = threading.local()
_LEASED = "__refine_leased__"
# the backends whose calls are leased, by id: the leased function receives the id and the
# method's name, never the backend, since ZeroGPU pickles a call's arguments to its worker
# process (a forked copy of this one, which holds the same backends and their weights)
_BACKENDS: dict[int, Any] = {}
_lease: Callable[..., Any] | None = None


def _target(path: str) -> type:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _on_cpu(value: Any) -> Any:
    """A tensor moved to the CPU (an embedding): a leased call that returns one on the GPU
    never returns on ZeroGPU, whose worker process gives the GPU back as the call ends."""
    to = getattr(value, "cpu", None)
    return to() if callable(to) and type(value).__module__.startswith("torch") else value


def _in_lease(key: int, name: str, args: tuple, kwargs: dict) -> Any:
    """The leased function: backend ``key``'s original method ``name``, its answer on the
    CPU. Leased methods it calls run within this lease."""
    backend = _BACKENDS.get(key)
    if backend is None:
        raise RuntimeError(
            f"the GPU worker does not hold the backend of this {name} call: on ZeroGPU every "
            "model is loaded as the Space starts (ui.zerogpu.preload)"
        )
    original = getattr(getattr(type(backend), name), _LEASED)
    inside, _state.inside = getattr(_state, "inside", False), True
    try:
        return _on_cpu(original(backend, *args, **kwargs))
    finally:
        _state.inside = inside


def _leased(method: Callable, name: str) -> Callable:
    """``method`` run under the lease, unless it is called from inside one already (an
    img2img edit through its generator's pipeline, a SigLIP match probability through its
    embeddings). Callables among its keyword arguments (a progress reporter) stay behind:
    they cannot be sent to the worker process."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _lease is None or getattr(_state, "inside", False):
            return method(self, *args, **kwargs)
        kept = {k: v for k, v in kwargs.items() if not callable(v)}
        _BACKENDS[id(self)] = self
        _state.inside = True
        try:
            return _lease(id(self), name, args, kept)
        finally:
            _state.inside = False

    setattr(call, _LEASED, method)
    return call


def lease_per_call(spaces: Any, seconds: int = DEFAULT_SECONDS) -> list[str]:
    """Lease the GPU with ``spaces.GPU(duration=seconds)`` for every model call of the local
    backends; returns the wrapped methods' names. Calling it again takes the new duration."""
    global _lease
    if seconds < 1:
        raise ValueError(f"REFINE_GPU_SECONDS={seconds}: 1 or more")
    _lease = spaces.GPU(duration=seconds)(_in_lease)
    wrapped = []
    for path, methods in model_calls().items():
        cls = _target(path)
        for name in methods:
            method = cls.__dict__[name]
            method = getattr(method, _LEASED, method)  # the original, when wrapped before
            setattr(cls, name, _leased(method, name))
            wrapped.append(f"{cls.__name__}.{name}")
    return wrapped


def unlease() -> None:
    """Put the original methods back and forget the backends (tests)."""
    global _lease
    _lease = None
    _BACKENDS.clear()
    for path, methods in model_calls().items():
        cls = _target(path)
        for name in methods:
            original = getattr(cls.__dict__[name], _LEASED, None)
            if original is not None:
                setattr(cls, name, original)


def preload(service: Any) -> list[str]:
    """Load the service profile's local models now, outside any lease; returns them as
    ``role=name``. API backends (the registry's remote ones: gemini:, openai:) load
    nothing."""
    from refine.backends.registry import is_remote

    backends = service.refiner().backends
    loaded = []
    for role, name in backends.names.items():
        if is_remote(role, name):
            continue
        backend = backends.get(role)
        if hasattr(backend, "load"):
            backend.load()
            _BACKENDS[id(backend)] = backend  # before any worker is forked
            loaded.append(f"{role}={name}")
    service.tuning.disabled = TUNING_OFF
    return loaded


def seconds_from(env: Mapping[str, str]) -> int:
    from ui.deploy import DeployError, _number

    seconds = _number(env, "REFINE_GPU_SECONDS", int, DEFAULT_SECONDS)
    if seconds < 1:
        raise DeployError(f"REFINE_GPU_SECONDS={seconds}: 1 or more")
    return seconds


def main(spaces: Any, env: Mapping[str, str] | None = None) -> None:
    """The ZeroGPU Space's entry: lease per model call, load the models, serve."""
    import sys

    from ui.deploy import DeployError, build, from_env, serve

    env = os.environ if env is None else env
    try:
        seconds = seconds_from(env)
        deployment = from_env(env)
    except DeployError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    lease_per_call(spaces, seconds)
    # MiniLM is small and runs between leases: on the processor, where it needs none
    cpu = {"text_embedder": {"device": "cpu"}}
    demo = build(deployment, on_service=preload, backend_options=cpu)
    serve(demo, deployment)
