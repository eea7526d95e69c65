"""Loading models with errors a user can act on, and the dtype/OOM rules the backends share."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


class ModelUnavailable(RuntimeError):
    """A model that cannot be loaded here; the message says what to do."""


class OutOfMemory(RuntimeError):
    """The GPU ran out of memory; the message names the ways out."""


class JobFailure(Exception):
    """A failure of one request of its own, not of the model or the account: a refusal, a
    batch job that failed. A many-cell job (a bench) records it as that cell's failure and
    goes on with the others; the next run makes that cell again
    (:meth:`refine.harness.task.Task.failed`)."""


class Refused(JobFailure, RuntimeError):
    """A model that refused a request (a safety block, a content filter), as its service
    said; the message says why. Another request, or another instruction, may be answered:
    a round whose every candidate is refused is recorded and the run goes on
    (:class:`refine.records.RefusedRound`)."""


def pick_dtype(device: str, dtype: str | None = None):
    """``dtype`` if given; bfloat16 (or float16) on CUDA; float32 on CPU."""
    import torch

    if dtype:
        value = getattr(torch, dtype, None)
        if not isinstance(value, torch.dtype):
            raise ValueError(f"unknown dtype {dtype!r}; use float32, float16 or bfloat16")
        return value
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


# One model loads at a time in this process. transformers and diffusers build models
# under process-wide switches (the default device and dtype, weight initialisation turned
# off while a checkpoint is read); two loads on two threads can interleave them, and one
# model then comes out with weights that are not its checkpoint's (seen with SigLIP: 1 in
# 25 pairs of concurrent loads). Candidates, batch workers and app sessions share models.
LOAD_LOCK = threading.RLock()


def serialised_load(loaded: Callable[[Any], bool]) -> Callable[[Callable], Callable]:
    """Decorate a backend's ``load()``: nothing to do once ``loaded(self)``; otherwise the
    load runs under :data:`LOAD_LOCK` (a second thread waits, then finds it loaded)."""

    def wrap(load: Callable) -> Callable:
        @functools.wraps(load)
        def guarded(self, *args: Any, **kwargs: Any) -> Any:
            if loaded(self):
                return self
            with LOAD_LOCK:
                if loaded(self):
                    return self
                return load(self, *args, **kwargs)

        return guarded

    return wrap


def load_or_explain(model: str, load: Callable[[], R]) -> R:
    """``load()``, turning hub and file errors into :class:`ModelUnavailable` that say what
    to do (log in for a gated model, download it where there is internet, fix the path)."""
    try:
        from huggingface_hub import errors as hub_errors
    except ImportError:  # pragma: no cover
        hub_errors = None
    try:
        return load()
    except Exception as err:
        gated = hub_errors is not None and isinstance(err, hub_errors.GatedRepoError)
        if gated or "gated repo" in str(err).lower():
            raise ModelUnavailable(
                f"{model} is a gated model: accept its licence on its Hugging Face page, then "
                "log in with `hf auth login` (or set HF_TOKEN)"
            ) from err
        missing = isinstance(err, OSError) or (
            hub_errors is not None
            and isinstance(
                err, hub_errors.RepositoryNotFoundError | hub_errors.LocalEntryNotFoundError
            )
        )
        if missing:
            raise ModelUnavailable(
                f"cannot load {model!r}: it is not a local model folder and not in the Hugging "
                "Face cache, and it could not be downloaded. Check the name, download it with "
                f"`hf download {model}` where there is internet, or give a local path. ({err})"
            ) from err
        raise


def oom_guard(model: str, fn: Callable[[], R]) -> R:
    """``fn()``; CUDA out-of-memory becomes :class:`OutOfMemory` naming the ways out."""
    import torch

    try:
        return fn()
    except torch.cuda.OutOfMemoryError as err:
        torch.cuda.empty_cache()
        raise out_of_memory(model) from err


def out_of_memory(model: str) -> OutOfMemory:
    """The advice for a model that ran out of GPU memory."""
    return OutOfMemory(
        f"{model} ran out of GPU memory: use the 'small-gpu' profile, enable CPU offload "
        "(cpu_offload=true), or lower the image size"
    )


def torch_dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def describe_error(err: BaseException) -> str:
    """A failure in words a user can act on. The backends already explain missing models
    (``ModelUnavailable``) and a full GPU (``OutOfMemory``); a raw CUDA out-of-memory
    from elsewhere gets the same advice."""
    name, text = type(err).__name__, str(err).strip()
    if isinstance(err, ImportError) and "cultural-refine[" in text:
        return text  # a missing optional extra: the message says what to install
    if name == "QuotaSpent":
        return text  # which model, that its quota is spent, when it comes back
    if name == "ModelsUnavailable":
        return "models not available: " + "; ".join(getattr(err, "problems", [text]))
    if name == "ModelUnavailable":
        return f"model not available: {text}"
    if name == "OutOfMemory":
        return f"out of GPU memory: {text}"
    if name == "OutOfMemoryError":
        first = text.splitlines()[0] if text else ""
        return (
            "out of GPU memory: use the 'small-gpu' profile, fewer candidates, or free the "
            f"GPU of other work, then start again ({first})"
        )
    return f"{name}: {text}"
