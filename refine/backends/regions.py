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

# an API editor's edit pasted back into the original outside its boxes blends over a band
# this wide outside them (a share of the image's shorter side, at least 2 pixels): beyond
# the band every pixel is the original's, exactly; within it the edit fades out linearly
FEATHER = 0.02


def feather_pixels(size: tuple[int, int], feather: float = FEATHER) -> int:
    """The feathered band's width in pixels for an image of ``size``."""
    return max(2, round(feather * min(size)))


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


def mask_array(mask: Image.Image, size: tuple[int, int]) -> np.ndarray:
    """A region drawn as a mask (a one-channel image of the edited image's ``size``, the
    region over half white) as a boolean array; a ValueError says what is wrong with it."""
    import numpy as np

    if mask.mode not in ("L", "1"):
        raise ValueError(f"a region's mask has one channel (L or 1), not {mask.mode}")
    if mask.size != size:
        raise ValueError(f"a region's mask is {mask.size[0]}x{mask.size[1]}, the image "
                         f"{size[0]}x{size[1]}")  # fmt: skip
    drawn = np.asarray(mask.convert("L")) > 127
    if not drawn.any():
        raise ValueError("a region's mask is empty: nothing is drawn on it")
    return drawn


def mask_box(region: np.ndarray) -> list[float]:
    """The box around a drawn region (its bounding box, as fractions)."""
    import numpy as np

    rows, cols = np.nonzero(region)
    if not rows.size:
        raise ValueError("a region's mask is empty")
    h, w = region.shape
    return [cols.min() / w, rows.min() / h, (cols.max() + 1) / w, (rows.max() + 1) / h]


def drawn_box(mask: Image.Image, size: tuple[int, int], least: float = 0.01) -> list[float]:
    """A region a person drew: its mask checked (one channel, the image's ``size``, at
    least ``least`` of the image: the by-hand bound, :data:`refine.records.MIN_REGION_AREA`)
    and its bounding box; a ValueError says what is wrong."""
    region = mask_array(mask, size)
    share = float(region.mean())
    if share < least:
        raise ValueError(f"the region drawn covers {share:.1%} of the image, under {least:.0%}")
    return mask_box(region)


def region_array(
    boxes: Sequence[Box], size: tuple[int, int], mask: Image.Image | None
) -> np.ndarray:
    """True inside any of ``boxes`` or the drawn ``mask``."""
    out = inside(boxes, size)
    return out if mask is None else out | mask_array(mask, size)


def feathered_mask(
    boxes: Sequence[Box], size: tuple[int, int], mask: Image.Image | None = None
) -> Image.Image:
    """The boxes (and a drawn ``mask``) as a blending mask: 255 inside, falling linearly to
    0 over the feathered band outside them (:data:`FEATHER`), 0 beyond it."""
    import numpy as np
    from PIL import Image
    from scipy.ndimage import distance_transform_edt

    band = feather_pixels(size)
    distance = distance_transform_edt(~region_array(boxes, size, mask))  # pixels outside
    alpha = np.clip(1.0 - distance / band, 0.0, 1.0)
    return Image.fromarray(np.round(alpha * 255).astype("uint8"), mode="L")


def reach(
    boxes: Sequence[Box], size: tuple[int, int], mask: Image.Image | None = None
) -> np.ndarray:
    """True inside the boxes (and a drawn ``mask``) and their feathered band: where an edit
    pasted back may have changed a pixel (drift outside is measured beyond it)."""
    import numpy as np

    return np.asarray(feathered_mask(boxes, size, mask)) > 0


def paste_back(
    original: Image.Image,
    edited: Image.Image,
    boxes: Sequence[Box],
    mask: Image.Image | None = None,
) -> Image.Image:
    """An API editor's edit restricted to ``boxes`` (and a drawn ``mask``) after the fact:
    the edit inside them, faded out over the feathered band, the original's pixels beyond."""
    return paste_outside(original, edited, feathered_mask(boxes, original.size, mask))


def region_words(boxes: Sequence[Box]) -> str:
    """The boxes as an API editor's instruction says them."""
    parts = [f"x {b[0]:.2f}-{b[2]:.2f}, y {b[1]:.2f}-{b[3]:.2f}" for b in boxes]
    return (
        "Change only the region(s) given as fractions of the image's width (x, from the "
        f"left) and height (y, from the top): {'; '.join(parts)}. Leave everything outside "
        "them exactly as it is."
    )
