"""The references view: where an activity's references come from, or a way to build them
with the profile's language models, review and save them; the examples and the country
and activity pickers keep it current."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from metrics.descriptors import DIMENSIONS
from refine.evaluate.reference_source import WORDS, catalog
from refine.service import RunService, ServiceBusy, phrase
from ui.line import IN_LINE
from ui.safe import error, md_text
from ui.views.common import Session, VisitorGate

# examples that the bundled pack holds references for, one per country
EXAMPLES = [
    ["people eating food at home", "Iran"],
    ["wedding celebration", "India"],
    ["people participating in New Yam Festival", "Nigeria"],
]

REMOVE = "Remove the clicked row"
BUILD_REFS = "Build references with the language models"  # the button a refusal names


def ready_activities(country: str | None) -> list[str]:
    """The activities of ``country`` that the bundled pack or a pack of the data directory
    holds references for; for a country with none, all its activities (their references
    are built first, with `refine refs build`); empty for a country the catalog lacks."""
    if not isinstance(country, str) or len(country) > 200:  # what no picker sends
        return []
    pack, _ = catalog()
    key = pack.country_key(country)
    if key is None:
        return []
    acts = pack.countries[key]["activities"]
    ready = sorted(a for a, entry in acts.items() if entry.get("descriptors"))
    return ready or sorted(acts)


def references_note(
    service: RunService, activity: Any, country: Any, visitor: str | None = None
) -> tuple[str, bool]:
    """(a line on where the references of ``activity`` in ``country`` come from for
    ``visitor``, whether they are missing and can be built here)."""
    if not str(activity or "").strip() or not str(country or "").strip():
        return "pick an activity and a country", False
    try:  # what a client sends: one line of printable text, not too long
        activity, country = phrase(activity, "activity"), phrase(country, "country")
    except ValueError as err:
        return md_text(err), False
    act, ctry = md_text(activity), md_text(country)
    try:
        found = service.reference_source(visitor).find(activity, country)
    except ValueError:
        return (
            f"**no references yet** for *{act}* in {ctry}: build them with the profile's "
            "language models (a few calls, cached), review them, then Start.",
            True,
        )
    pack = found.pack
    n = sum(len(v) for v in pack.descriptors.values())
    # where they came from, in words (never a server's path)
    if pack.source.startswith("reviewed in the app"):
        where = "reviewed in this app"
    elif found.origin in ("visitor", "shared", "built", "new"):
        where = "built with language models"
    else:
        where = {"bundled": "the bundled CULTIVate pack"}.get(found.origin, WORDS[found.origin])
    return (
        f"references: {n} descriptors and {len(pack.stereotypes)} stereotype candidates "
        f"for *{act}* in {ctry} ({where})",
        False,
    )


# what a row of the review table may name: a descriptor's dimension, or a stereotype
KINDS = (*DIMENSIONS, "stereotype")
MAX_ROWS = 500
MAX_PHRASE = 200  # characters in one descriptor or stereotype
TABLE_HEADERS = ["dimension", "phrase"]


def references_rows(pack: Any) -> list[list[str]]:
    """A reference pack as the review table's rows: (dimension, phrase) for each
    descriptor, dimension by dimension, then (stereotype, phrase) for each candidate."""
    rows = [[d, text] for d in DIMENSIONS for text in pack.descriptors.get(d, [])]
    return rows + [["stereotype", text] for text in pack.stereotypes]


def references_doc(rows: Any, source: str | None = None) -> str:
    """The review table's rows as the JSON ``save_references`` reads; a row whose phrase
    was emptied is left out; ValueError naming the first row that is not a known
    dimension and a phrase."""
    if not isinstance(rows, list) or len(rows) > MAX_ROWS:
        raise ValueError(f"the references are a table of at most {MAX_ROWS} rows")
    descriptors: dict[str, list[str]] = {d: [] for d in DIMENSIONS}
    stereotypes: list[str] = []
    for k, row in enumerate(rows, start=1):
        if not isinstance(row, (list, tuple)) or len(row) != 2:
            raise ValueError(f"row {k}: a row is a dimension and a phrase")
        kind, text = ("" if x is None else str(x).strip() for x in row)
        if not text:
            continue  # an emptied phrase: the row is removed
        if kind not in KINDS:
            raise ValueError(f"row {k}: {kind[:40]!r} is not one of {', '.join(KINDS)}")
        try:  # one line of printable text, as every phrase from a client
            text = phrase(text, "phrase", MAX_PHRASE)
        except ValueError as err:
            raise ValueError(f"row {k}: {err}") from None
        (stereotypes if kind == "stereotype" else descriptors[kind]).append(text)
    doc = {"descriptors": descriptors, "stereotypes": stereotypes, "source": source}
    return json.dumps(doc, ensure_ascii=False)


@dataclass
class References:
    note: Any
    build: Any
    editor: Any  # the review block, shown once references are built
    review: Any  # the table: dimension, phrase
    kind: Any
    phrase: Any
    add: Any
    remove: Any
    save: Any
    picked: Any  # the row last clicked (a State)
    source: Any  # where the references under review came from (a State)

    def outputs(self) -> list[Any]:
        return [self.note, self.build, self.editor]


def add_references(gr: Any, service: RunService, activity: str, gate: VisitorGate) -> References:
    """The references block (in the run form's column): the note, the offer to build
    references, and their review as a table with add, remove and save (``gate``: the
    buttons that wait for the visitor)."""
    note = gr.Markdown(references_note(service, activity, "Iran")[0], elem_id="refs-note")
    build = gate.button(gr, BUILD_REFS, visible=False, elem_id="build-refs")
    with gr.Group(visible=False, elem_id="refs-editor") as editor:
        review = gr.Dataframe(
            value=[],
            headers=TABLE_HEADERS,
            datatype=["str", "str"],
            type="array",
            column_count=2,
            interactive=True,
            wrap=True,
            label="references to review: edit a phrase (empty it to remove the row), click a "
            "row and remove it, or add one below; then save",
            elem_id="refs-review",
        )
        with gr.Row():
            kind = gr.Dropdown(
                list(KINDS), value="objects", label="dimension", elem_id="refs-kind", scale=1
            )
            phrase_box = gr.Textbox(label="phrase", elem_id="refs-phrase", scale=2)
        with gr.Row():
            add = gate.plain(gr, "Add the row", elem_id="refs-add")
            remove = gate.plain(gr, REMOVE, elem_id="refs-remove")
        save = gate.button(gr, "Save the reviewed references", elem_id="save-refs")
    return References(
        note=note,
        build=build,
        editor=editor,
        review=review,
        kind=kind,
        phrase=phrase_box,
        add=add,
        remove=remove,
        save=save,
        picked=gr.State(None),
        source=gr.State(None),
    )


def wire_references(
    gr: Any,
    session: Session,
    refs: References,
    activity: Any,
    country: Any,
    examples: Any,
    example_act: Any,
    example_ctry: Any,
) -> None:
    """The pickers, the examples, building and saving references."""
    service, token = session.service, session.token
    visitor = session.visitor

    def on_country(tok, ctry, act, request=None):
        """The activities the pack has references for in this country."""
        choices = ready_activities(ctry)
        keep = act if act in choices else (choices[0] if choices else act)
        return [gr.update(choices=choices, value=keep), *on_activity(tok, keep, ctry, request)]

    def on_activity(tok, act, ctry, request=None):
        """Where this activity's references come from, or the offer to build them."""
        note, missing = references_note(service, act, ctry, visitor(tok, request))
        return [note, gr.update(visible=missing), gr.update(visible=False)]

    def on_build(tok, act, ctry, request=None, progress=gr.Progress()):  # noqa: B008
        asked = {"of": 1}

        def seen(event: dict) -> None:
            """propose 1..n, refine, stereotypes: n + 2 model answers in all."""
            stage = event.get("stage")
            if stage == "propose":
                asked["of"] = int(event.get("of", 1))
                done = int(event.get("n", 1)) - 1
            else:
                done = asked["of"] + (0 if stage == "refine" else 1)
            progress((done, asked["of"] + 2), desc=f"{stage}: {event.get('model', '')}")

        session.checked(who := visitor(tok, request), request)  # quota, before any call
        try:  # the device taken: wait in the app's line, told how many runs are ahead
            session.wait_quietly(who, lambda words: progress(0, desc=words))
            with session.counting(who):  # every request sent, against the daily calls
                result = service.build_references(act, ctry, on_event=seen, visitor=who)
        except (ServiceBusy, ValueError) as err:
            raise error(err) from err
        except Exception as err:  # a model or API failure: said, the app goes on
            from refine.backends.loading import describe_error

            raise error(f"could not build references: {describe_error(err)}") from err
        pack = result.pack
        note = (
            f"**references built** for *{md_text(pack.activity)}* in {md_text(pack.country)} "
            f"({result.asked} model calls, {result.cached} answers from the cache): "
            "review them below, save any change, then Start."
        )
        shown = gr.update(visible=True)
        return [note, gr.update(visible=False), shown, references_rows(pack), pack.source]

    def on_add(rows, kind, text):
        try:
            if kind not in KINDS:
                raise ValueError(f"the dimension is one of {', '.join(KINDS)}")
            text = phrase(text, "phrase", MAX_PHRASE)
            rows = [list(r) for r in (rows or [])]
            if len(rows) >= MAX_ROWS:
                raise ValueError(f"the references hold at most {MAX_ROWS} rows")
        except ValueError as err:
            raise error(err) from err
        return [*rows, [kind, text]], ""

    def on_pick(rows, evt):
        """The clicked row, named on the Remove button: what a click removes is in sight,
        and the button says the click has arrived."""
        k = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        rows = [list(r) for r in (rows or [])]
        if not isinstance(k, int) or not 0 <= k < len(rows):
            return None, gr.update(value=REMOVE)
        text = str(rows[k][1] if len(rows[k]) > 1 else "")
        text = text if len(text) <= 40 else text[:39] + "…"
        return k, gr.update(value=f"Remove “{text}”")

    on_pick.__annotations__["evt"] = gr.SelectData

    def on_remove(rows, picked):
        rows = [list(r) for r in (rows or [])]
        if picked is None or not 0 <= int(picked) < len(rows):
            raise error("click a row of the table first")
        return rows[: int(picked)] + rows[int(picked) + 1 :], None, gr.update(value=REMOVE)

    def on_save_refs(tok, act, ctry, rows, source=None, request=None):
        try:
            text = references_doc(rows, source)
            pack = service.save_references(act, ctry, text, visitor(tok, request))
        except ValueError as err:
            raise error(err) from err
        count = sum(len(v) for v in pack.descriptors.values())
        return (
            f"**references saved** for *{md_text(pack.activity)}* in {md_text(pack.country)} "
            f"({count} descriptors): Start when ready."
        )

    def on_example(tok, act, ctry, request=None):
        choices = ready_activities(ctry)
        return [
            gr.update(choices=choices, value=act),
            gr.update(value=ctry),
            *on_activity(tok, act, ctry, request),
        ]

    for handler in (on_country, on_activity, on_build, on_save_refs, on_example):
        handler.__annotations__["request"] = gr.Request
    examples.load_input_event.then(
        on_example,
        [token, example_act, example_ctry],
        [activity, country, *refs.outputs()],
        api_name=False,
        queue=False,
    )
    # a visitor's own pick only (.input): an example sets the country too, and its
    # activity must stay (a .change would reset it to the country's first activity)
    country.input(
        on_country, [token, country, activity], [activity, *refs.outputs()], api_name=False
    )
    activity.change(on_activity, [token, activity, country], refs.outputs(), api_name=False)
    built = refs.build.click(
        on_build,
        [token, activity, country],
        [*refs.outputs(), refs.review, refs.source],
        api_name="build_references",
        **IN_LINE,
    )
    added = refs.add.click(
        on_add, [refs.review, refs.kind, refs.phrase], [refs.review, refs.phrase], api_name=False
    )
    refs.review.select(
        on_pick, refs.review, [refs.picked, refs.remove], api_name=False, queue=False
    )
    removed = refs.remove.click(
        on_remove,
        [refs.review, refs.picked],
        [refs.review, refs.picked, refs.remove],
        api_name=False,
    )
    kept = refs.save.click(
        on_save_refs,
        [token, activity, country, refs.review, refs.source],
        refs.note,
        api_name="save_references",
    )
    session.gate.message.tells_refusals(built, added, removed, kept)
