"""A stroke of the app's region brush in a real browser, by mouse or by touch: for the
browser tests and the docs' screenshots (tools/app_screenshots.py)."""

from __future__ import annotations

import re

UNDO = "() => document.querySelector('#region button[aria-label=\"Undo\"]')?.disabled === false"

# The editor (Gradio's ImageEditor, which sets window.editor) holds the image under review
# (of [width, height]) with one layer, active: the state a new review's value leaves once it
# is loaded. A new value is loaded in steps (the image, put on the undo history; then the
# history emptied and the layers deleted; then a clear layer fetched and made active): Undo
# is off from the second step, and a stroke in the third lands on no layer, or on one the
# load then replaces. The view is the one the editor last set (its zoom and place, which its
# canvas takes up at its next frame): a stroke is placed by the zoom the toolbar shows.
# READY: that, and nothing to undo (no stroke on it yet).
SETTLED = """([w, h]) => {
    const e = window.editor;
    const layers = e?.layer_manager?.get_layers?.();
    const bg = e?.background_image;
    const view = e?.image_container;
    return !!layers && layers.length === 1
        && e.layer_manager.get_active_layer() === layers[0].container
        && bg?.texture?.width === w && bg?.texture?.height === h
        && view?.scale?.x === e.scale_value && view.position.x === e.position_value?.x
        && view.position.y === e.position_value.y;
}"""
READY = f"(size) => ({SETTLED})(size) && window.editor.command_manager.history.previous === null"
# one click of Undo, where it would undo a stroke (never the load of an image, which is on
# the history too), in one step: a click that waited for the button to be enabled would
# wait its whole timeout for a button that has just gone off
UNDO_ONCE = """() => {
    const undo = document.querySelector('#region button[aria-label="Undo"]');
    const last = window.editor?.command_manager?.history?.command;
    if (!undo || undo.disabled || last?.name !== 'Draw') return false;
    undo.click();
    return true;
}"""

# What Apply will send of the region: the editor's own export (get_blobs, which Gradio's
# ImageEditor calls to make its value), each layer read back as [width, height, whether
# each of the points (fractions of the image) is painted (alpha above 0)]
PAINTED = """async (points) => {
    const blobs = await window.editor.get_blobs();
    const out = [];
    for (const blob of blobs.layers) {
        if (!blob) { out.push(null); continue; }  // a layer the editor could not export
        const image = await createImageBitmap(blob);
        const canvas = new OffscreenCanvas(image.width, image.height);
        const g = canvas.getContext('2d');
        g.drawImage(image, 0, 0);
        const px = g.getImageData(0, 0, image.width, image.height).data;
        const at = ([x, y]) => px[(Math.floor(y * image.height) * image.width
            + Math.floor(x * image.width)) * 4 + 3] > 0;
        out.push([image.width, image.height, points.map(at)]);
    }
    return out;
}"""


def draw(
    pg,
    size: tuple[int, int],
    corner: tuple[float, float],
    touch: bool = False,
    away: tuple[float, float] | None = None,
) -> None:
    """:func:`stroke` on the loaded image under review, until the editor's export has the
    stroke's middle painted (and ``away``, a point far from it, not). The stroke waits
    for :data:`READY`: a round's new image clears the strokes on the last one, and a
    stroke made while the editor loads it was lost, or (once, under load, seen by the
    round's mask) kept beside another. Up to three strokes: one the editor took
    elsewhere is undone, and one it took elsewhere or not at all is made again."""
    middle = (corner[0] + 5 / 60, corner[1] + 5 / 60)
    points = [middle] + ([away] if away is not None else [])
    want = [list(size[:2]) + [[True] + [False] * (len(points) - 1)]]
    seen = []
    for attempt in range(3):
        if attempt:  # the last stroke undone, even one the editor took late
            held(pg, SETTLED, size, seen)
            for _ in range(10):
                if not pg.evaluate(UNDO_ONCE):
                    break
        held(pg, READY, size, seen)
        stroke(pg, size, corner, touch)
        try:
            pg.wait_for_function(UNDO, timeout=5000, polling=100)
        except Exception:  # playwright's TimeoutError: the stroke left no paint (yet)
            seen.append("no paint")
            continue
        painted = pg.evaluate(PAINTED, [list(p) for p in points])
        if painted == want:
            return
        seen.append(painted)
    raise AssertionError(f"the region editor's export, stroke by stroke: {seen} (want {want})")


def held(pg, state: str, size: tuple[int, int], seen: list) -> None:
    """Wait (30 s at most) until the editor is in ``state`` (:data:`SETTLED` or
    :data:`READY`) for an image of ``size``; an AssertionError names the state and what
    the strokes so far left."""
    try:
        pg.wait_for_function(state, arg=list(size[:2]), timeout=30000, polling=100)
    except Exception as err:  # playwright's TimeoutError
        name = "READY" if state == READY else "SETTLED"
        raise AssertionError(f"the region editor was not {name} in 30 s (strokes: {seen})") from err


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
