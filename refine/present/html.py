"""The one HTML shell of every report: a self-contained page (styles inline, images as data
URIs, no scripts, no network), and the escaping and number formats its pages share. Every
text from a user, a file or a model goes through ``escape`` before it is part of a page."""

from __future__ import annotations

import base64
import io
from html import escape
from pathlib import Path

from refine.numbers import interval_text, shown

__all__ = ["CSS", "MAX_SIDE", "document", "escape", "image_tag", "interval_text", "num", "raw"]

MAX_SIDE = 768  # images larger than this are shown downscaled (the PNGs stay untouched)

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#1f2328;
padding:0 12px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px}h3{font-size:15px;margin:0 0 6px}
table{border-collapse:collapse;margin:8px 0;display:block;overflow-x:auto;max-width:100%}
td,th{border:1px solid #d0d7de;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f6f8fa}
.round{border:1px solid #d0d7de;border-radius:8px;padding:12px;margin:14px 0}
.round.accepted{border-left:6px solid #2da44e}.round.rejected{border-left:6px solid #cf222e}
.round.initial{border-left:6px solid #1f6feb}
.badge{display:inline-block;border-radius:10px;padding:0 8px;color:#fff;font-size:12px}
.badge.accepted{background:#2da44e}.badge.rejected{background:#cf222e}
.badge.initial{background:#1f6feb}.badge.failed{background:#cf222e}
.badge.finished{background:#2da44e}.badge.running,.badge.pending{background:#bf8700}
.imgs{display:flex;gap:10px;flex-wrap:wrap}figure{margin:0}
figure img{max-width:min(360px,100%);border:1px solid #d0d7de}
figure.chosen img{border:3px solid #1f6feb}figcaption{font-size:12px;color:#57606a}
pre{white-space:pre-wrap;background:#f6f8fa;padding:8px;border-radius:6px}
.aligned{color:#1a7f37}.missing{color:#9a6700}.hallucinated{color:#cf222e}.near{color:#0969da}
.exaggerated{color:#8250df}ul.check{margin:2px 0 6px 0;padding-left:18px}
.cols{display:flex;gap:24px;flex-wrap:wrap}.muted{color:#57606a}
"""


def num(x: float | None, digits: int = 3) -> str:
    return shown(x, f".{digits}f")


def raw(x: float | None) -> str:
    return "" if x is None else f"{x:.6f}"


def image_tag(path: Path, alt: str) -> str:
    from PIL import Image

    if not path.is_file():
        return f'<p class="missing">image {escape(path.name)} is missing</p>'
    with Image.open(path) as im:
        im = im.convert("RGB")
        size = im.size
        if max(size) > MAX_SIDE:
            im.thumbnail((MAX_SIDE, MAX_SIDE))
        buf = io.BytesIO()
        im.save(buf, format="PNG")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (
        f'<img src="data:image/png;base64,{data}" alt="{escape(alt)}" '
        f'data-file="{escape(path.name)}" data-size="{size[0]}x{size[1]}">'
    )


def document(title: str, body: str, heading: str | None = None) -> str:
    """A whole page: ``title`` in the browser's tab, ``heading`` (the title unless given)
    on the page, then ``body`` (already escaped where it holds outside text)."""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>"
        f"<body><h1>{escape(heading or title)}</h1>{body}</body></html>\n"
    )


def write_page(path: str | Path, page: str) -> Path:
    """Write a whole page (atomically) and return where it went."""
    from refine.io.files import atomic_write_text

    path = Path(path)
    atomic_write_text(path, page)
    return path
