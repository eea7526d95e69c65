"""Images from outside (uploads, downloaded photos, search candidates), checked by their
declared size before anything is decoded.

A PNG of 115 bytes can declare 12000 x 12000 pixels; decoding it takes a minute and
gigabytes. PIL warns above ``Image.MAX_IMAGE_PIXELS`` and refuses only above twice that,
so the limit is applied here as stated: :data:`MAX_PIXELS`, PIL's own default, read from
the header alone (``Image.open`` decodes nothing)."""

from __future__ import annotations

import io
from pathlib import Path

MAX_PIXELS = 89_478_485  # PIL's default Image.MAX_IMAGE_PIXELS (about 9459 x 9459)
THUMB = 1024  # the longest side a search candidate is decoded to (Commons' thumbnails' width)


class ImageError(ValueError):
    """An image that is not read: not an image, or (``size`` and ``limit`` set) one that
    declares too many pixels."""

    def __init__(
        self, message: str, size: tuple[int, int] | None = None, limit: int | None = None
    ) -> None:
        super().__init__(message)
        self.size, self.limit = size, limit


def declared_size(source: str | Path | bytes, max_pixels: int | None = None) -> tuple[int, int]:
    """(width, height) as the file's header declares them; an ImageError when it is not an
    image PIL knows or declares more than ``max_pixels`` pixels (default: PIL's
    ``Image.MAX_IMAGE_PIXELS`` as it is set now, else :data:`MAX_PIXELS`). Nothing is
    decoded."""
    import warnings

    from PIL import Image, UnidentifiedImageError

    max_pixels = max_pixels or Image.MAX_IMAGE_PIXELS or MAX_PIXELS

    fh = io.BytesIO(source) if isinstance(source, bytes) else Path(source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(fh) as im:
                width, height = im.size
    except Image.DecompressionBombError as err:
        raise ImageError(
            f"too many pixels (limit {max_pixels:,}): {err}", None, max_pixels
        ) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as err:
        raise ImageError(f"not an image ({type(err).__name__})") from None
    if width * height > max_pixels:
        raise ImageError(
            f"too many pixels: {width} x {height} = {width * height:,}, over the limit of "
            f"{max_pixels:,}",
            (width, height),
            max_pixels,
        )
    return width, height


def checked_image_bytes(data: bytes, max_pixels: int | None = None) -> tuple[int, int]:
    """:func:`declared_size` of ``data``, then a full check of its structure (PIL's
    ``verify``, which decodes no pixels); an ImageError saying why not."""
    from PIL import Image

    size = declared_size(data, max_pixels)
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.verify()
    except Exception as err:  # anything PIL cannot read is not kept
        raise ImageError(f"not an image ({type(err).__name__})") from None
    return size


def small_rgb(path: str | Path, longest: int = THUMB):
    """The image at ``path`` decoded as RGB with its longest side at most ``longest`` (a
    JPEG is decoded at a reduced scale straight away); its declared size checked first."""
    from PIL import Image

    declared_size(path)
    with Image.open(path) as im:
        im.draft("RGB", (longest, longest))
        im = im.convert("RGB")
    im.thumbnail((longest, longest))
    return im
