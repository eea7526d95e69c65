"""Regions of an image an edit is restricted to (``--localize``): boxes as
[x0, y0, x1, y1] fractions of the width and height, the mask they make, and the words an
API editor is given for them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

Box = Sequence[float]  # x0, y0, x1, y1 in [0, 1]


def pixels(box: Box, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """A box in pixels of an image of ``size`` (width, height): left, top, right, bottom
    (right and bottom exclusive), at least one pixel."""
    import math

    w, h = size
    x0, y0, x1, y1 = box
    # every pixel the box touches (1e-9: the rounding of a fraction times the size, so
    # that 0.29 of 100 is pixel 29, not 28)
    left, top = math.floor(x0 * w + 1e-9), math.floor(y0 * h + 1e-9)
    right, bottom = math.ceil(x1 * w - 1e-9), math.ceil(y1 * h - 1e-9)
    right, bottom = max(left + 1, right), max(top + 1, bottom)
    return left, top, min(w, right), min(h, bottom)


def inside(boxes: Sequence[Box], size: tuple[int, int]) -> np.ndarray:
    """A boolean array of ``size`` (height by width), True inside any of ``boxes``."""
    import numpy as np

    w, h = size
    out = np.zeros((h, w), dtype=bool)
    for b in boxes:
        left, top, right, bottom = pixels(b, size)
        out[top:bottom, left:right] = True
    return out


def mask_image(boxes: Sequence[Box], size: tuple[int, int]) -> Image.Image:
    """The boxes as an inpainting mask: white (255) inside, black outside."""
    from PIL import Image

    return Image.fromarray(inside(boxes, size).astype("uint8") * 255, mode="L")


def paste_outside(original: Image.Image, edited: Image.Image, mask: Image.Image) -> Image.Image:
    """``edited`` inside the mask and ``original``'s own pixels outside it, exactly."""
    from PIL import Image as PILImage

    if edited.size != original.size:
        edited = edited.resize(original.size, PILImage.Resampling.LANCZOS)
    return PILImage.composite(edited.convert("RGB"), original.convert("RGB"), mask)


def region_words(boxes: Sequence[Box]) -> str:
    """The boxes as an API editor's instruction says them."""
    parts = [f"x {b[0]:.2f}-{b[2]:.2f}, y {b[1]:.2f}-{b[3]:.2f}" for b in boxes]
    return (
        "Change only the region(s) given as fractions of the image's width (x, from the "
        f"left) and height (y, from the top): {'; '.join(parts)}. Leave everything outside "
        "them exactly as it is."
    )
