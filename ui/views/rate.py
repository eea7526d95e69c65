"""The Rate view: people of a culture rate images one at a time (the CulturalFrames
questions), with keyboard shortcuts; answers go to ``ratings.jsonl`` beside the images as
each is saved, so a reload loses nothing (see :mod:`refine.human.rating`).

Keys (outside text boxes): 1-5 image-prompt alignment, q w e r t cultural faithfulness
1-5, Enter save and show the next image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from refine.human.rating import RatingSet
from refine.service import RunService, phrase, visitor_hash
from ui.safe import error, md_text
from ui.views.common import VisitorGate
from ui.visitors import visitor_id

HELP = (
    "Keys: **1-5** image-prompt alignment · **q w e r t** cultural faithfulness 1-5 · "
    "**Enter** save and next (outside the comment box)."
)

# clicks the radio buttons the keys stand for; Enter clicks "Save and next"
KEYS_JS = """
() => {
  if (window.__rateKeys) return;
  window.__rateKeys = true;
  const faith = {q: 1, w: 2, e: 3, r: 4, t: 5};
  const pick = (id, value) => {
    const box = document.getElementById(id);
    if (!box) return false;
    const input = box.querySelector(`input[type=radio][value="${value}"]`);
    if (!input) return false;
    input.click();
    return true;
  };
  document.addEventListener('keydown', (ev) => {
    const panel = document.getElementById('rate-image');
    if (!panel || panel.offsetParent === null) return;
    const tag = (ev.target && ev.target.tagName || '').toLowerCase();
    if (tag === 'textarea' || (tag === 'input' && ev.target.type === 'text')) return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    let done = false;
    if (/^[1-5]$/.test(ev.key)) done = pick('rate-alignment', ev.key);
    else if (ev.key in faith) done = pick('rate-faithfulness', String(faith[ev.key]));
    else if (ev.key === 'Enter') {
      const save = document.getElementById('rate-save');
      if (save) { save.click(); done = true; }
    }
    if (done) ev.preventDefault();
  });
}
"""


def _rater(value: Any) -> str:
    return phrase(value, "rater name", 60)


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
SET_MARKERS = (("batch.json", "batch"), ("cells.jsonl", "bench"))  # a bench: its cells


def rating_sets(service: RunService, visitor: str | None) -> list[tuple[str, str]]:
    """(what it is, its folder relative to the app's folder) of every set ``visitor`` may
    rate, newest first: their runs (every run for an admin; none for a request that names
    no visitor), the batch and bench folders (up to three folders down), and the folders of
    images right under the app's folder."""
    root = service.out.resolve()
    found: dict[Path, str] = {}
    for path in service.runs_of(visitor) if visitor is not None else ():
        found[path.resolve()] = "run"
    for marker, kind in SET_MARKERS:
        for depth in range(1, 4):
            for file in root.glob("/".join(["*"] * depth) + "/" + marker):
                found.setdefault(file.parent.resolve(), kind)
    for folder in root.iterdir() if root.is_dir() else ():
        # a run is listed to its owner only, above, never as a folder of images
        run = (folder / "run.json").exists()
        if folder.is_dir() and not folder.is_symlink() and not run and folder not in found:
            if any(f.suffix.lower() in IMAGE_SUFFIXES for f in folder.iterdir()):
                found[folder.resolve()] = "images"
    hidden = [service.tunes_dir.resolve()]
    items = []
    for folder, kind in found.items():
        rel = folder.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or any(
            h == folder or h in folder.parents for h in hidden
        ):
            continue
        items.append((folder.stat().st_mtime, f"{kind}: {rel.as_posix()}", rel.as_posix()))
    return [(label, value) for _, label, value in sorted(items, reverse=True)]


def _open(service: RunService, folder_value: str, who: str, visitor: str | None) -> RatingSet:
    """The rating set a visitor may add ``who``'s answers to: a folder inside ``out``; a run
    folder only when the visitor owns the run; the rater name claimed by this visitor (one
    visitor's answers are never written under another's name)."""
    folder = service.inside(folder_value, "rating set")
    if (folder / "run.json").is_file():
        service.check_owner(folder, visitor)
    if visitor is None:
        raise ValueError("this request names no visitor: open the app in a browser")
    rating_set = RatingSet.cached(folder)
    rating_set.claim(who, visitor_hash(visitor))
    return rating_set


def add_rate_view(service: RunService, token: Any, gate: VisitorGate) -> Any:
    """The Rate accordion and its events, inside the app's Blocks (``token``: the session's
    visitor state; ``gate``: the buttons that wait for the visitor); returns the load
    event's JavaScript to install (the keyboard shortcuts)."""
    with gr.Accordion("Rate images (human ratings)", open=False, elem_id="rate") as box:
        gr.Markdown(
            "Rate a set of images inside this app's folder: a run of yours, a batch or bench "
            "folder, or any folder of images. Answers are saved as you go in the set's "
            "`ratings.jsonl` (for `refine agree`); come back with the same name to go on (a "
            "name is yours once you rate under it). " + HELP
        )
        with gr.Row():
            # the sets are listed once the view opens, for the visitor who opens it (a run
            # is listed to its owner only); another folder inside the app's may be typed
            set_box = gr.Dropdown(
                [],
                value=None,
                allow_custom_value=True,
                label="set: a run, batch, bench or folder of images inside the app's folder",
                elem_id="rate-set",
                scale=3,
            )
            rater = gr.Textbox(label="your name", elem_id="rate-rater", scale=2)
            begin = gate.button(gr, "Begin / continue", elem_id="rate-begin", scale=1)
        status = gr.Markdown("", elem_id="rate-status")
        with gr.Row():
            image = gr.Image(
                label="image", interactive=False, elem_id="rate-image", height=380, scale=3
            )
            with gr.Column(scale=2):
                prompt = gr.Markdown("", elem_id="rate-prompt")
                alignment = gr.Radio(
                    ["1", "2", "3", "4", "5"],
                    label="How well does the image match the prompt? (1 not at all - 5 fully)",
                    elem_id="rate-alignment",
                )
                unmet = gr.CheckboxGroup(
                    [], label="Which expectations does the image NOT meet?", elem_id="rate-unmet"
                )
                faithfulness = gr.Radio(
                    ["1", "2", "3", "4", "5"],
                    label="How culturally faithful is the image overall? (1 not at all - 5 fully)",
                    elem_id="rate-faithfulness",
                )
                comment = gr.Textbox(label="comment (optional)", lines=2, elem_id="rate-comment")
                save = gate.button(gr, "Save and next", variant="primary", elem_id="rate-save")
        current = gr.Textbox(visible=False, elem_id="rate-item")

    def show_next(rating_set: RatingSet, who: str, note: str = "") -> list[Any]:
        folder = rating_set.folder
        item, done, total = rating_set.next_for(who)
        lead = f"{note} " if note else ""
        name = md_text(who, 60)
        if item is None:
            return [
                f"{lead}**All {total} images rated** by {name}; thank you. Answers: "
                f"`{rating_set.ratings_path.name}` in the set's folder.",
                None,
                "",
                gr.update(choices=[], value=[]),
                None,
                None,
                "",
                "",
            ]
        text = item.prompt or "(no prompt recorded for this image)"
        return [
            f"{lead}{done} of {total} rated by {name}; this is image {done + 1}.",
            str(folder / item.image),
            f"**Prompt:** {md_text(text, 400)}",
            gr.update(choices=list(item.expectations), value=[], visible=bool(item.expectations)),
            None,
            None,
            "",
            item.image,
        ]

    outputs = [status, image, prompt, unmet, alignment, faithfulness, comment, current]

    def on_begin(tok, folder_value: str, who: str, request=None) -> list[Any]:
        try:
            who = _rater(who)
            return show_next(_open(service, folder_value, who, visitor_id(request, tok)), who)
        except ValueError as err:
            raise error(err) from err

    def on_save(tok, folder_value, who, item, align, missed, faith, note, request=None):
        try:
            who = _rater(who)
            rating_set = _open(service, folder_value, who, visitor_id(request, tok))
            if not item:
                raise ValueError("press Begin first")
            rating_set.record(who, item, align, faith, list(missed or []), note)
            return show_next(rating_set, who, "Saved.")
        except ValueError as err:
            raise error(err) from err

    def on_sets(tok, request=None):
        return gr.update(choices=rating_sets(service, visitor_id(request, tok)))

    for handler in (on_begin, on_save, on_sets):
        handler.__annotations__["request"] = gr.Request
    box.expand(on_sets, token, set_box, api_name="rate_sets", queue=False)
    begin.click(on_begin, [token, set_box, rater], outputs, api_name="rate_begin", queue=False)
    save.click(
        on_save,
        [token, set_box, rater, current, alignment, unmet, faithfulness, comment],
        outputs,
        api_name="rate_save",
        queue=False,
    )
    return KEYS_JS
