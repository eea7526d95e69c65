"""The Rate view: people rate images one at a time under a study's protocol (the papers'
human studies, or the quick questions), after a profile and their consent; answers go to
``ratings.jsonl`` beside the images as each is saved, so a reload loses nothing (see
:mod:`refine.human.study`).

The view draws any protocol: :data:`SLOTS` question slots, each with a one-choice scale, a
checkbox group, a text answer and a reason box, shown and labelled from the protocol's
questions (conditions, required reasons and optional comments follow the answers as they
are given). Nothing about a question is in this file.

Keys (outside text boxes): 1-9 pick the first shown scale's choices in order, q w e r t y
the second's, Enter saves and shows the next image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from refine.human.protocols import AGE_BANDS, BUNDLED, Question, prompt_words
from refine.human.study import Slot, Study
from refine.service import RunService, phrase, visitor_hash
from ui.safe import error, md_text, take_refusal
from ui.views.common import VisitorGate, by_name
from ui.visitors import visitor_id

SLOTS = 8  # the most questions a protocol may ask in the Rate view
# a question slot's answer boxes (Slot.inputs), and what Save takes before them, by name
SLOT_PARTS = ("choice", "checks", "answer", "reason")
SAVE_OWN = ("tok", "folder_value", "who", "item", "slot_kind")
OWN = "as the set is rated (quick for a new set)"
HELP = (
    "Keys: **1-9** the first scale's choices · **q w e r t y** the second's · "
    "**Enter** save and next (outside the text boxes)."
)

# clicks the choices the keys stand for; Enter clicks "Save and next"
KEYS_JS = """
() => {
  if (window.__rateKeys) return;
  window.__rateKeys = true;
  const second = 'qwerty';
  const scales = () => [...document.querySelectorAll('[id^=rate-q][id$=-single]')]
    .filter(el => el.offsetParent !== null);
  const pick = (box, k) => {
    const inputs = box ? box.querySelectorAll('input[type=radio]') : [];
    if (k < 0 || k >= inputs.length) return false;
    inputs[k].click();
    return true;
  };
  document.addEventListener('keydown', (ev) => {
    const panel = document.getElementById('rate-image');
    if (!panel || panel.offsetParent === null) return;
    const tag = (ev.target && ev.target.tagName || '').toLowerCase();
    if (tag === 'textarea' || (tag === 'input' && ev.target.type === 'text')) return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    let done = false;
    const shown = scales();
    if (/^[1-9]$/.test(ev.key)) done = pick(shown[0], Number(ev.key) - 1);
    else if (second.includes(ev.key)) done = pick(shown[1], second.indexOf(ev.key));
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
# a bench (its cells), a batch, an SoS bank, a packed rater's folder
SET_MARKERS = (
    ("batch.json", "batch"),
    ("cells.jsonl", "bench"),
    ("bank.json", "SoS bank"),
    ("items.json", "rater folder"),
)


def rating_sets(service: RunService, visitor: str | None) -> list[tuple[str, str]]:
    """(what it is, its folder relative to the app's folder) of every set ``visitor`` may
    rate, newest first: their runs (every run for an admin; none for a request that names
    no visitor), the batch, bench, bank and packed folders (up to three folders down), and
    the folders of images right under the app's folder."""
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


def _open(
    service: RunService, folder_value: str, who: str, visitor: str | None, protocol: Any = None
) -> Study:
    """The study a visitor may add ``who``'s answers to: a folder inside ``out``; a run
    folder only when the visitor owns the run; the rater name claimed by this visitor (one
    visitor's answers are never written under another's name); ``protocol`` a bundled
    one's name (a client's value: nothing else is taken)."""
    folder = service.inside(folder_value, "rating set")
    service.check_set(folder, visitor)
    if visitor is None:
        raise ValueError("this request names no visitor: open the app in a browser")
    if protocol in (None, "", OWN):
        protocol = None
    elif protocol not in BUNDLED:
        raise ValueError(f"no protocol {str(protocol)[:40]!r}: pick one of {', '.join(BUNDLED)}")
    study = Study.open(folder, protocol)
    if len(study.protocol.questions) > SLOTS:
        raise ValueError(
            f"the {study.protocol.name} protocol asks {len(study.protocol.questions)} "
            f"questions; the Rate view draws up to {SLOTS}"
        )
    if any(q.options_from == "cultures" for q in study.protocol.questions):
        from refine.human.study import culture_options

        # a folder that is no SoS bank: said at Begin, before the rater gives a profile
        culture_options(study.set.items[0], study.seed)
    study.set.claim(who, visitor_hash(visitor))
    return study


class _Slot:
    """One question's widgets."""

    def __init__(self, k: int) -> None:
        with gr.Group(visible=False, elem_id=f"rate-q{k}") as self.group:
            self.text = gr.Markdown("", elem_id=f"rate-q{k}-text")
            hide = {"show_label": False, "visible": False}
            self.single = gr.Radio([], elem_id=f"rate-q{k}-single", **hide)
            self.multiple = gr.CheckboxGroup([], elem_id=f"rate-q{k}-multiple", **hide)
            self.answer = gr.Textbox(lines=2, elem_id=f"rate-q{k}-answer", **hide)
            self.reason = gr.Textbox(label="", lines=2, elem_id=f"rate-q{k}-reason", visible=False)

    def inputs(self) -> list[Any]:
        return [self.single, self.multiple, self.answer, self.reason]

    def outputs(self) -> list[Any]:
        return [self.group, self.text, self.single, self.multiple, self.answer, self.reason]


def _value(q: Question, single: Any, multiple: Any, answer: Any) -> Any:
    if q.kind == "single":
        return single
    if q.kind in ("multiple", "marks"):
        return list(multiple or [])
    return answer


def _reason(q: Question, value: Any) -> dict[str, Any]:
    """The reason box as the answer given asks: hidden, optional or required."""
    values = {
        str(v) for v in (value if isinstance(value, list) else [value]) if v not in (None, "")
    }
    needed = q.reason == "required" or bool(values & set(q.reason_if))
    allowed = needed or q.reason == "optional" or bool(values & set(q.comment_if))
    return {"visible": allowed, "label": q.reason_label + (" (required)" if needed else "")}


def _fill(text: str, slot: Slot, study: Study, who: str) -> str:
    it = slot.item
    fields = {
        "activity": it.activity or "the activity",
        "country": it.country or "the country",
        "prompt": it.prompt or "the prompt",
        "rater_country": study.rater_country(who) or "your country",
    }
    for key, value in fields.items():
        text = text.replace("{" + key + "}", value)
    return text


def _study_words(study: Study) -> str:
    p = study.protocol
    who = p.qualify.text
    return (
        f"**{md_text(p.title, 120)}**" + (f" ({md_text(p.source, 200)})" if p.source else "")
        + (f"\n\n{md_text(p.instructions, 1200)}" if p.instructions else "")
        + (f"\n\n**Who may rate:** {md_text(who, 300)}" if who else "")
        + "\n\nBefore the first image, tell us who you are and give your consent."
    )  # fmt: skip


def _answers_of(study: Study, values: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The answers and reasons in the slots' values (four a slot, in order)."""
    return _answers_of_protocol(study.protocol, values)


def _answers_of_protocol(protocol: Any, values: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    answers, reasons = {}, {}
    for k, q in enumerate(protocol.questions):
        single, multiple, answer, reason = values[4 * k : 4 * k + 4]
        answers[q.id] = _value(q, single, multiple, answer)
        if reason:
            reasons[q.id] = reason
    return answers, reasons


def _blank_slot() -> list[Any]:
    return [gr.update(visible=False), "", gr.update(), gr.update(), gr.update(), gr.update()]


def _hidden(note: str, profile: bool = False, words: str = "") -> list[Any]:
    """The view's outputs with no image: a note, and the profile form when asked."""
    blank = [w for _ in range(SLOTS) for w in _blank_slot()]
    return [note, gr.update(visible=profile), words, "", gr.update(visible=False), None, "",
            *blank, "", "", ""]  # fmt: skip


def _slot_values(q: Question, slot: Slot, study: Study, who: str, shown: set[str]) -> list[Any]:
    """A question's widgets for the slot shown."""
    head = f"**{md_text(_fill(q.text, slot, study, who), 400)}**"
    if q.rubric:
        head += f"\n\n{md_text(q.rubric, 1500)}"
    choices: list[Any] = [(o.shown(), o.value) for o in q.options]
    if q.options_from:
        choices = list(slot.options.get(q.id, []))
    if q.kind == "marks":
        choices = prompt_words(slot.item.prompt)
    # short choices (a scale) on one line; sentences one under another
    short = all(len(c[0] if isinstance(c, tuple) else str(c)) <= 4 for c in choices)
    look = ["rate-scale"] if short and len(choices) <= 7 else ["rate-choices"]
    empty = bool(q.options_from) and not choices  # nothing to choose for this image
    return [
        gr.update(visible=q.id in shown and not empty),
        head,
        gr.update(visible=q.kind == "single", choices=choices, value=None, elem_classes=look),
        gr.update(visible=q.kind in ("multiple", "marks"), choices=choices, value=[]),
        gr.update(visible=q.kind == "text", value=""),
        gr.update(value="", **_reason(q, None)),
    ]


def show_next(study: Study, who: str, note: str = "") -> list[Any]:
    """The view's outputs for what the rater is shown next: the profile form, a note on
    why they may not rate, the next image and its questions, or the end."""
    lead = f"{note} " if note else ""
    name = md_text(who, 60)
    if study.profile(who) is None:
        words = _study_words(study)
        return _hidden(f"{lead}{name}: give your profile and consent to begin.", True, words)
    ok, why = study.qualification(who)
    if not ok:
        return _hidden(f"{lead}{md_text(why[:1].upper() + why[1:], 300)}")
    slot, done, total = study.next_for(who)
    if slot is None:
        return _hidden(
            f"{lead}**All {total} images rated** by {name} under the {study.protocol.name} "
            f"protocol; thank you. Answers: `{study.set.ratings_path.name}` in the set's folder."
        )
    what = {
        "rate": f"this is image {done + 1}",
        "attention": "this is an attention check: answer as the image says",
        "repeat": "this image comes again: rate it as you see it now",
    }[slot.kind]
    text = slot.item.prompt or "(no prompt recorded for this image)"
    shown = {q.id for q in study.protocol.shown({})}
    questions = study.protocol.questions
    filled = []
    for k in range(SLOTS):
        filled += (
            _slot_values(questions[k], slot, study, who, shown)
            if k < len(questions)
            else _blank_slot()
        )
    return [
        f"{lead}{done} of {total} rated by {name} ({study.protocol.name}); {what}.",
        gr.update(visible=False),
        "",
        "",
        gr.update(visible=True),
        str(study.folder / slot.item.image),
        f"**Prompt:** {md_text(text, 400)}",
        *filled,
        "",
        slot.item.image,
        slot.kind,
    ]


def refused(request: gr.Request):
    """The refusal of the rater's last click, to show beside what they clicked."""
    said = take_refusal(getattr(request, "session_hash", None))
    return f"**Not saved:** {md_text(said, 400)}" if said else gr.skip()


class _Handlers:
    """The view's event handlers, on the app's service; each takes the request first
    (gradio passes it where a positional parameter is annotated ``gr.Request``)."""

    def __init__(self, service: RunService) -> None:
        self.service = service

    def begin(self, request, tok, folder_value, chosen, who) -> list[Any]:
        try:
            who = _rater(who)
            study = _open(self.service, folder_value, who, visitor_id(request, tok), chosen)
            return show_next(study, who)
        except ValueError as err:
            raise error(err) from err

    def give(self, request, tok, folder_value, who, b, r, res, nat, langs, band, agree):
        try:
            who = _rater(who)
            study = _open(self.service, folder_value, who, visitor_id(request, tok))
            profile = {
                "born": b, "raised": r, "residence": res, "nationality": nat,
                "languages": str(langs or ""), "age_band": band, "consent": bool(agree),
            }  # fmt: skip
            study.give_profile(who, {k: v for k, v in profile.items() if v not in (None, "")})
            return show_next(study, who, "Thank you.")
        except ValueError as err:
            raise error(err) from err

    def save(self, request, tok, folder_value, who, item, slot_kind, *values):
        try:
            who = _rater(who)
            study = _open(self.service, folder_value, who, visitor_id(request, tok))
            if not item:
                raise ValueError("press Begin first")
            answers, reasons = _answers_of(study, list(values))
            study.record(who, str(item), str(slot_kind or "rate"), answers, reasons)
            return show_next(study, who, "Saved.")
        except ValueError as err:
            raise error(err) from err

    def answer(self, request, tok, folder_value, *values):
        """The questions and reason boxes the answers so far call for."""
        try:  # read only: a set's protocol is recorded by Begin, never here
            folder = self.service.inside(folder_value, "rating set")
            # a set holding another visitor's run says nothing
            self.service.check_set(folder, visitor_id(request, tok))
            protocol = Study.recorded(folder)
        except ValueError:
            protocol = None
        if protocol is None:
            return [gr.update()] * (2 * SLOTS)
        answers, _ = _answers_of_protocol(protocol, list(values))
        shown = {q.id for q in protocol.shown(answers)}
        out = []
        for k in range(SLOTS):
            if k >= len(protocol.questions):
                out += [gr.update(), gr.update()]
                continue
            q = protocol.questions[k]
            out += [gr.update(visible=q.id in shown), gr.update(**_reason(q, answers.get(q.id)))]
        return out

    def sets(self, request, tok):
        return gr.update(choices=rating_sets(self.service, visitor_id(request, tok)))


def add_rate_view(service: RunService, token: Any, gate: VisitorGate) -> Any:
    """The Rate accordion and its events, inside the app's Blocks (``token``: the session's
    visitor state; ``gate``: the buttons that wait for the visitor); returns the load
    event's JavaScript to install (the keyboard shortcuts)."""
    with gr.Accordion("Rate images (human ratings)", open=False, elem_id="rate") as box:
        gr.Markdown(
            "Rate a set of images inside this app's folder: a run of yours, a batch, bench, "
            "SoS bank or rater folder, or any folder of images, under a study's protocol "
            "(the papers' human studies, or the quick questions). Answers are saved as you "
            "go in the set's `ratings.jsonl` (for `refine agree`); come back with the same "
            "name to go on (a name is yours once you rate under it). " + HELP
        )
        with gr.Row():
            # the sets are listed once the view opens, for the visitor who opens it (a run
            # is listed to its owner only); another folder inside the app's may be typed
            set_box = gr.Dropdown(
                [],
                value=None,
                allow_custom_value=True,
                label="set: a run, batch, bench, bank or folder of images inside the app's folder",
                elem_id="rate-set",
                scale=3,
            )
            protocol = gr.Dropdown(
                [OWN, *BUNDLED], value=OWN, label="protocol", elem_id="rate-protocol", scale=2
            )
            rater = gr.Textbox(label="your name", elem_id="rate-rater", scale=2)
            begin = gate.button(gr, "Begin / continue", elem_id="rate-begin", scale=1)
        status = gr.Markdown("", elem_id="rate-status")
        with gr.Group(visible=False, elem_id="rate-profile") as profile_box:
            study_text = gr.Markdown("", elem_id="rate-study")
            with gr.Row():
                born = gr.Textbox(label="country of birth", elem_id="rate-born")
                raised = gr.Textbox(
                    label="country you lived in for your first 18 years", elem_id="rate-raised"
                )
                residence = gr.Textbox(label="country you live in", elem_id="rate-residence")
                nationality = gr.Textbox(label="nationality", elem_id="rate-nationality")
            with gr.Row():
                languages = gr.Textbox(
                    label="languages you speak (comma-separated)", elem_id="rate-languages"
                )
                age = gr.Dropdown(list(AGE_BANDS), label="age", elem_id="rate-age")
            consent = gr.Checkbox(
                label="I agree to take part: my answers and this profile are kept with the "
                "images for research, under the name I gave.",
                elem_id="rate-consent",
            )
            give = gate.button(gr, "Save profile and begin", elem_id="rate-give")
            profile_refused = gr.Markdown("", elem_id="rate-profile-refused")
        with gr.Row(visible=False, elem_id="rate-panel") as panel:
            image = gr.Image(
                label="image", interactive=False, elem_id="rate-image", height=380, scale=3
            )
            with gr.Column(scale=2):
                prompt = gr.Markdown("", elem_id="rate-prompt")
                slots = [_Slot(k) for k in range(SLOTS)]
                save = gate.button(gr, "Save and next", variant="primary", elem_id="rate-save")
                save_refused = gr.Markdown("", elem_id="rate-refused")
        current = gr.Textbox(visible=False, elem_id="rate-item")
        kind = gr.Textbox(visible=False, elem_id="rate-kind")

    slot_outputs = [w for s in slots for w in s.outputs()]
    outputs = [status, profile_box, study_text, profile_refused, panel, image, prompt,
               *slot_outputs, save_refused, current, kind]  # fmt: skip
    answer_inputs = [w for s in slots for w in s.inputs()]
    on = _Handlers(service)
    for handler in (on.begin, on.save, on.sets, on.give, on.answer):
        handler.__func__.__annotations__["request"] = gr.Request
    box.expand(on.sets, token, set_box, api_name="rate_sets", queue=False)
    began = begin.click(
        on.begin, [token, set_box, protocol, rater], outputs, api_name="rate_begin", queue=False
    )
    profile_inputs = [born, raised, residence, nationality, languages, age, consent]
    given = give.click(
        on.give,
        [token, set_box, rater, *profile_inputs],
        outputs,
        api_name="rate_profile",
        queue=False,
    )
    # each answer box by name (question 1's choice, checks, answer and reason, ...), never
    # param_5 ... param_36
    answer_names = [f"q{k}_{part}" for k in range(1, SLOTS + 1) for part in SLOT_PARTS]

    def rate_save(v: dict[str, Any], request: Any) -> Any:
        return on.save(request, *(v[x] for x in SAVE_OWN), *(v[x] for x in answer_names))

    saved = save.click(
        by_name(rate_save, [*SAVE_OWN, *answer_names], gr.Request),
        [token, set_box, rater, current, kind, *answer_inputs],
        outputs,
        api_name="rate_save",
        queue=False,
    )
    # a refusal is said where the rater looks: under Begin, the profile's button, Save
    for event, where in ((began, status), (given, profile_refused), (saved, save_refused)):
        event.failure(refused, None, where, queue=False, api_name=False, show_progress="hidden")
    shown_outputs = [w for s in slots for w in (s.group, s.reason)]
    for s in slots:
        for widget in (s.single, s.multiple):
            widget.input(
                on.answer,
                [token, set_box, *answer_inputs],
                shown_outputs,
                queue=False,
                show_progress="hidden",
                api_name=False,  # the page's own: no API endpoint
            )
    return KEYS_JS
