"""Device and dtype choice shared by the backends."""

from __future__ import annotations


def pick_device(device: str | None = None) -> str:
    """``device`` if given, else ``cuda`` when a GPU is visible, else ``cpu``."""
    if device:
        if device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise ValueError(f"device {device!r} was asked for but no CUDA GPU is visible")
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
