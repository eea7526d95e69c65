"""LoRA adapters named with a model: ``MODEL+lora=PATH[@SCALE]``, repeatable, as in
``--generator "diffusers:stabilityai/sd-turbo+lora=adapters/culture@0.8"`` (bench) or
``--backend generator=diffusers:...+lora=...`` (run, batch). The one parser of that form:
the diffusers backend and the bench read it here, with the same checks."""

from __future__ import annotations

import math
from collections.abc import Sequence

MARK = "+lora="
SCALE_RANGE = (0.0, 4.0)


def split_adapters(text: str) -> tuple[str, list[tuple[str, float]]]:
    """``(model, [(path, scale), ...])`` of ``MODEL+lora=PATH[@SCALE]...`` (scale 1 when
    not given). A ValueError names what is wrong: no model before the first adapter, an
    adapter without a path, a scale that is not a number from 0 to 4."""
    model, *adapters = str(text).split(MARK)
    model = model.strip()
    if not model:
        raise ValueError(f"{text!r}: no model name before {MARK!r}")
    loras = []
    for adapter in adapters:
        path, sep, scale_text = adapter.rpartition("@")
        if not sep:
            path, scale_text = adapter, "1"
        path = path.strip()
        if not path:
            raise ValueError(f"{text!r}: {MARK!r} needs a path or hub id")
        try:
            scale = float(scale_text)
        except ValueError:
            raise ValueError(f"{text!r}: the LoRA scale {scale_text!r} is not a number") from None
        lo, hi = SCALE_RANGE
        if not math.isfinite(scale) or not lo <= scale <= hi:
            raise ValueError(f"{text!r}: the LoRA scale must be between {lo:g} and {hi:g}")
        loras.append((path, scale))
    return model, loras


def join_adapters(model: str, loras: Sequence[tuple[str, float]]) -> str:
    """The inverse of :func:`split_adapters`: ``MODEL+lora=PATH@SCALE...``."""
    return model + "".join(f"{MARK}{path}@{scale:g}" for path, scale in loras)


def lora_source(path: str) -> tuple[str, str | None]:
    """(where, weight file) of an adapter named by a folder, a file, a hub repository, or
    a file in a hub repository (``OWNER/REPO/FILE.safetensors``, as Qwen-Image-Lightning
    keeps several adapters in one: ``lightx2v/Qwen-Image-Lightning/...-8steps-V1.1...``)."""
    from pathlib import Path

    local = Path(path).expanduser()
    if local.exists():
        return str(local), None
    parts = path.split("/")
    if len(parts) >= 3 and path.endswith(".safetensors"):
        return "/".join(parts[:2]), "/".join(parts[2:])
    return path, None
