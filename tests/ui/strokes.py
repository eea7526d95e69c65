"""A stroke of the app's region brush in a real browser, by mouse or by touch: for the
browser tests and the docs' screenshots (tools/app_screenshots.py)."""

from __future__ import annotations

import re

UNDO = "() => document.querySelector('#region button[aria-label=\"Undo\"]')?.disabled === false"
CLEAN = "() => document.querySelector('#region button[aria-label=\"Undo\"]')?.disabled !== false"


def draw(pg, size: tuple[int, int], corner: tuple[float, float], touch: bool = False) -> None:
    """:func:`stroke` on a clean image, until the editor took it. A new round's image
    clears the last one's strokes and turns Undo off a moment after the editor shows the
    round's label (Undo read every 0.1 s: on, then off): a stroke made in that moment was
    cleared with them, seen as a round without its region. So Undo is first waited for to
    be off; it comes on with the first stroke. A stroke sent while the editor still draws
    the image it was just handed (seen under load) leaves no paint, and is sent again, up
    to three times."""
    pg.wait_for_function(CLEAN, timeout=15000, polling=100)
    for _ in range(3):
        stroke(pg, size, corner, touch)
        try:
            pg.wait_for_function(UNDO, timeout=3000, polling=100)
            return
        except Exception:  # playwright's TimeoutError: the stroke left no paint
            continue
    raise AssertionError("the region editor took no stroke in three tries")


def stroke(pg, size: tuple[int, int], corner: tuple[float, float], touch: bool = False) -> None:
    """A stroke over the image (of ``size``) in the region editor, from ``corner``
    (fractions of the image) a sixth of the image to the right and down: by mouse, or by
    touch (the touch events a phone sends, through the browser's own input). The editor
    draws the image centred in its canvas, at the zoom its toolbar shows."""
    pg.locator("#region canvas").first.wait_for(state="visible")
    box = pg.locator("#region canvas").first.bounding_box()
    w, h = size
    # the editor's own zoom (its toolbar's "372%"): the image's scale on the screen
    zoom = pg.locator("#region").get_by_text(re.compile(r"^\d+%$")).first.inner_text()
    scale = int(zoom.rstrip("%")) / 100
    left = box["x"] + (box["width"] - w * scale) / 2
    top = box["y"] + (box["height"] - h * scale) / 2
    points = [
        (left + (corner[0] + i / 60) * w * scale, top + (corner[1] + i / 60) * h * scale)
        for i in range(11)
    ]
    if not touch:
        pg.mouse.move(*points[0])
        pg.mouse.down()
        for x, y in points[1:]:
            pg.mouse.move(x, y)
        pg.mouse.up()
        return
    cdp = pg.context.new_cdp_session(pg)
    try:
        cdp.send("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 1})
        for kind, (x, y) in [("touchStart", points[0])] + [("touchMove", p) for p in points[1:]]:
            cdp.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": [{"x": x, "y": y}]})
        cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
        cdp.send("Emulation.setTouchEmulationEnabled", {"enabled": False})
    finally:
        cdp.detach()
