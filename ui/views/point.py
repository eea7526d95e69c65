"""Point and say, at the pause before an edit: a region drawn on the image under review
(a brush, by mouse or by touch: Gradio's ImageEditor), and the references the run aims for
changed from this round on (reference descriptors not wanted here, descriptors of the
visitor's own, stereotype candidates likewise). Apply hands them to the run with the
instruction (:meth:`refine.service.jobs.Job.submit_instruction`), which refuses what
cannot be (:class:`refine.loop.pause.Review`), the review still waiting.

Every value here comes from a client: the editor's layers are read as an alpha mask of the
image's size or refused, and each descriptor typed is one printable line of at most 120
characters (:func:`refine.records.person_phrase`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metrics.descriptors import DIMENSIONS
from refine.records import Descriptor, ReferenceEdit

# a brush that shows on any photo, and marks nothing but where it passes
BRUSH_COLOUR = "#ff00ff"
MOST_LINES = 64  # descriptors added or removed at once (ReferenceEdit's bound)
# the editor's label; under review, after the round it marks ("round 2: draw ...")
REGION_WORDS = (
    "draw over what to change (the edit keeps the rest); leave it blank for the whole image"
)


@dataclass
class PointControls:
    region: Any  # gr.ImageEditor: the image under review, a brush layer over it
    remove: Any  # gr.Dropdown of many: reference descriptors not wanted here
    add: Any  # gr.Textbox: descriptors of one's own, "dimension: phrase" a line
    stereotypes_remove: Any
    stereotypes_add: Any
    keep: Any = None  # the button that keeps the run's changed references as the visitor's

    def inputs(self) -> list[Any]:
        return [self.region, self.remove, self.add, self.stereotypes_remove, self.stereotypes_add]


def add_point(gr: Any, gate: Any) -> PointControls:
    """The controls, folded under Apply (they matter only in pause mode)."""
    with gr.Accordion(
        "Point and say (in pause mode): draw where to change, change what the run aims for",
        open=False,
        elem_id="point-box",
    ):
        region = gr.ImageEditor(
            type="pil",
            sources=(),
            transforms=(),
            layers=False,
            brush=gr.Brush(colors=[BRUSH_COLOUR], default_size="auto", color_mode="fixed"),
            label=REGION_WORDS,
            height=320,
            elem_id="region",
        )
        # picks of many, whose choices are the run's (set as its review comes up); their
        # values are checked against the run's references by the job, not by the component
        # (an API client, which has no page to set the choices, may name them too)
        remove, add = _drop_and_add(
            gr, "reference descriptors not wanted here", "refs",
            f"descriptors of your own, one a line: dimension: phrase "
            f"({', '.join(DIMENSIONS)}; at most 120 characters)", (2, 8),
        )  # fmt: skip
        stereotypes_remove, stereotypes_add = _drop_and_add(
            gr, "stereotype candidates not to count", "stereotypes",
            "stereotype candidates of your own, one a line", (1, 4),
        )  # fmt: skip
        keep = gate.button(
            gr, "Keep the run's references as mine, for my next runs", elem_id="keep-refs"
        )
    return PointControls(region, remove, add, stereotypes_remove, stereotypes_add, keep)


def _drop_and_add(
    gr: Any, dropped: str, name: str, added: str, lines: tuple[int, int]
) -> tuple[Any, Any]:
    """A pick of many of the run's items to leave out (``#NAME-remove``) and a box of the
    visitor's own, one a line (``#NAME-add``, ``lines``: its lines shown and at most)."""
    remove = gr.Dropdown(
        [], multiselect=True, allow_custom_value=True, label=dropped, elem_id=f"{name}-remove"
    )
    add = gr.Textbox(label=added, lines=lines[0], max_lines=lines[1], elem_id=f"{name}-add")
    return remove, add


def blank(image: Any) -> dict[str, Any]:
    """The editor's value for a review: the image under it, and one clear layer of its size
    to draw on (a value with no layer leaves a brush nothing to draw on, once a stroke of an
    earlier review was wiped)."""
    from PIL import Image

    return {"background": image, "layers": [Image.new("RGBA", image.size)], "composite": None}


MOST_LAYERS = 4  # the editor makes one; a client's value with more is made up


def region_mask(value: Any, size: tuple[int, int] | None = None) -> Any:
    """The region drawn in the editor's value (its layers' painted pixels) as a one-channel
    mask of the image's size (``size``: the image under review's), white over it; None when
    nothing is drawn. A ValueError says what is wrong with a value a client made up, before
    any layer is converted."""
    import numpy as np
    from PIL import Image

    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("the region is the editor's value: a background and its layers")
    background, layers = value.get("background"), value.get("layers") or []
    if not isinstance(layers, list) or not all(isinstance(x, Image.Image) for x in layers):
        raise ValueError("the region's layers are images")
    if not isinstance(background, Image.Image) or not layers:
        return None
    if len(layers) > MOST_LAYERS:
        raise ValueError(f"the region has {len(layers)} layers; the editor makes one")
    want = size or background.size
    painted = None
    for layer in layers:
        if layer.size != want:
            raise ValueError(
                f"a region's layer is {layer.size[0]}x{layer.size[1]}, the image "
                f"{want[0]}x{want[1]}"
            )
        alpha = np.asarray(layer.convert("RGBA"))[..., 3] > 0
        painted = alpha if painted is None else painted | alpha
    if painted is None or not painted.any():
        return None
    return Image.fromarray(painted.astype("uint8") * 255, mode="L")


def _lines(text: Any, what: str) -> list[str]:
    if text is None:
        return []
    if not isinstance(text, str):
        raise ValueError(f"{what}: text, one a line")
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    if len(lines) > MOST_LINES:
        raise ValueError(f"{what}: at most {MOST_LINES} lines")
    return lines


def _picked(values: Any, what: str) -> list[str]:
    if values is None:
        return []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{what}: a list of the offered choices")
    return values


def descriptor(text: str, what: str) -> Descriptor:
    """``objects: a brass samovar`` as a descriptor; a ValueError names the line."""
    dimension, sep, phrase = text.partition(":")
    dimension = dimension.strip().lower()
    if not sep or dimension not in DIMENSIONS:
        raise ValueError(
            f"{what}: {text[:60]!r} is dimension: phrase, the dimension one of "
            f"{', '.join(DIMENSIONS)}"
        )
    try:
        return Descriptor(dimension=dimension, phrase=phrase)
    except ValueError as err:  # pydantic's: the phrase's own words
        said = err.errors()[0]["msg"] if hasattr(err, "errors") else str(err)
        raise ValueError(f"{what}: {said.removeprefix('Value error, ')}") from None


# a change's lists as the controls name them
LISTS = {
    "removed": "reference descriptors not wanted here",
    "added": "descriptors of your own",
    "stereotypes_removed": "stereotype candidates not to count",
    "stereotypes_added": "stereotype candidates of your own",
}


def reference_edit(
    remove: Any, add: Any, stereotypes_remove: Any, stereotypes_add: Any
) -> ReferenceEdit | None:
    """The change of references the controls say, or None where they say none."""
    edit_words = "descriptors of your own"
    removed = [descriptor(x, "reference descriptors not wanted here") for x in
               _picked(remove, "reference descriptors not wanted here")]  # fmt: skip
    added = [descriptor(x, edit_words) for x in _lines(add, edit_words)]
    try:
        edit = ReferenceEdit(
            removed=removed,
            added=added,
            stereotypes_removed=_picked(stereotypes_remove, "stereotype candidates not to count"),
            stereotypes_added=_lines(stereotypes_add, "stereotype candidates of your own"),
        )
    except ValueError as err:  # pydantic's: the list it is about, and its words
        first = err.errors()[0] if hasattr(err, "errors") else {"loc": (), "msg": str(err)}
        what = LISTS.get(str((first.get("loc") or ("",))[0]), "the references")
        raise ValueError(f"{what}: {first['msg'].removeprefix('Value error, ')}") from None
    return None if edit.empty() else edit


def choices(run: Any) -> tuple[list[str], list[str]]:
    """The run's references as the controls offer them: ``dimension: phrase`` each, and the
    stereotype candidates."""
    refs = run.references
    return [f"{d}: {p}" for d in DIMENSIONS for p in refs.descriptors.get(d, [])], list(
        refs.stereotypes
    )


def wire_point(gr: Any, session: Any, display: Any, notice: Any, controls: PointControls) -> None:
    """Each review of the visitor's run fills the controls once: the image under review in
    the editor (its label naming the round), the run's references offered to change. Keep
    saves the run's changed references as the visitor's own (``/keep_references``)."""
    from ui.views.common import REVIEW_WORDS

    service, visitor = session.service, session.visitor

    def on_review(tok, said, filled, request=None):
        """A review waiting for this visitor: the image under review in the editor, and the
        run's references offered to change (nothing changes for anyone else's run), once a
        review: what the visitor drew is never wiped by a later update of the same one."""
        job = service.job
        keep = [gr.skip()] * 6
        if REVIEW_WORDS not in (said or "") or job is None or job.waiting is None:
            return keep
        if not job.owned_by(visitor(tok, request)):
            return keep
        k = job.waiting[0]
        this = f"{job.run_dir}#{k}"
        if filled == this:
            return keep
        try:
            image, run = job.review_image(), job.reviewing
        except (ValueError, OSError):
            return keep
        descriptors, stereotypes = choices(run)
        return [
            gr.update(
                value=blank(image),
                label=f"round {k}: {REGION_WORDS}",
            ),
            gr.update(choices=descriptors, value=[]),
            "",
            gr.update(choices=stereotypes, value=[]),
            "",
            this,
        ]

    def on_keep(tok, path, request=None):
        """The run's references, as a person changed them, kept as the visitor's own."""
        try:
            pack = service.keep_references(path, visitor(tok, request))
        except (ValueError, OSError) as err:
            return f"error: {err}"
        n = sum(len(p) for p in pack.descriptors.values())
        return (
            f"references kept for your next runs of {pack.activity} in {pack.country}: "
            f"{n} descriptors, {len(pack.stereotypes)} stereotype candidates"
        )

    for handler in (on_review, on_keep):
        handler.__annotations__["request"] = gr.Request  # found by its type
    keep = [session.token, display.run_dir]
    controls.keep.click(on_keep, keep, notice, api_name="keep_references", queue=False)
    filled = gr.State("")  # the review whose image the editor holds (run folder#round)
    stage = display.stage
    stage.change(
        on_review,
        [session.token, stage, filled],
        [*controls.inputs(), filled],
        api_name=False,
        queue=False,
    )
