"""Device choice shared by the backends."""

from __future__ import annotations

from typing import Any


def pick_device(device: str | None = None) -> str:
    """``device`` if given, else ``cuda`` when a GPU is visible, else ``cpu``."""
    import torch

    if device:
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {device!r} was asked for but no CUDA GPU is visible")
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def gpu_name() -> str | None:
    """The name of the first CUDA GPU, or None when there is none (or no torch)."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


class LazyDevice:
    """An attribute that stores the requested device and resolves it on first read.

    Creating a backend therefore imports nothing heavy; torch is imported when the device
    is first needed (in ``load()``).
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.requested, self.resolved = f"_{name}_requested", f"_{name}_resolved"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__.get(self.resolved)
        if value is None:
            value = obj.__dict__[self.resolved] = pick_device(obj.__dict__.get(self.requested))
        return value

    def __set__(self, obj: Any, value: str | None) -> None:
        obj.__dict__[self.requested] = value
        obj.__dict__.pop(self.resolved, None)
