"""The references view: where an activity's references come from, or a way to build them
with the profile's language models, review and save them; the examples and the country
and activity pickers keep it current."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from refine.evaluate.references import load_pack
from refine.service import RunService, ServiceBusy, phrase
from ui.safe import error, md_text
from ui.views.common import ONE_RUN, Session

# examples that the bundled pack holds references for, one per country
EXAMPLES = [
    ["people eating food at home", "Iran"],
    ["wedding celebration", "India"],
    ["people participating in New Yam Festival", "Nigeria"],
]


def ready_activities(country: str | None) -> list[str]:
    """The activities of ``country`` that the bundled pack holds references for; for a
    country with none, all its activities (their references are built first, with
    `refine refs build`); empty for a country the pack lacks."""
    pack = load_pack()
    key = pack.country_key(country or "")
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
        pack = service.find_references(activity, country, visitor)
    except ValueError:
        return (
            f"**no references yet** for *{act}* in {ctry}: build them with the profile's "
            "language models (a few calls, cached), review them, then Start.",
            True,
        )
    n = sum(len(v) for v in pack.descriptors.values())
    if "pack (" in pack.source:
        where = "the bundled CULTIVate pack"
    elif pack.source.startswith("reviewed in the app"):
        where = "reviewed in this app"
    else:
        where = "built with language models"
    return (
        f"references: {n} descriptors and {len(pack.stereotypes)} stereotype candidates "
        f"for *{act}* in {ctry} ({where})",
        False,
    )


def references_json(pack: Any) -> str:
    """A reference pack as the JSON the review box shows and ``save_references`` reads."""
    doc = {
        "descriptors": dict(pack.descriptors),
        "stereotypes": list(pack.stereotypes),
        "source": pack.source,
    }
    return json.dumps(doc, indent=1, ensure_ascii=False)


@dataclass
class References:
    note: Any
    build: Any
    review: Any
    save: Any

    def outputs(self) -> list[Any]:
        return [self.note, self.build, self.review, self.save]


def add_references(gr: Any, service: RunService, activity: str) -> References:
    """The references block (in the run form's column)."""
    return References(
        note=gr.Markdown(references_note(service, activity, "Iran")[0], elem_id="refs-note"),
        build=gr.Button(
            "Build references with the language models", visible=False, elem_id="build-refs"
        ),
        review=gr.Code(
            language="json",
            label="references to review: edit, then save (descriptors per dimension, "
            "stereotype candidates)",
            interactive=True,
            visible=False,
            elem_id="refs-review",
        ),
        save=gr.Button("Save the reviewed references", visible=False, elem_id="save-refs"),
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
        hide = gr.update(visible=False)
        return [note, gr.update(visible=missing), hide, hide]

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

        try:
            result = service.build_references(
                act, ctry, on_event=seen, visitor=visitor(tok, request)
            )
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
        shown = gr.update(value=references_json(pack), visible=True)
        return [note, gr.update(visible=False), shown, gr.update(visible=True)]

    def on_save_refs(tok, act, ctry, text, request=None):
        try:
            pack = service.save_references(act, ctry, text or "", visitor(tok, request))
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
    refs.build.click(
        on_build,
        [token, activity, country],
        refs.outputs(),
        api_name="build_references",
        **ONE_RUN,
    )
    refs.save.click(
        on_save_refs,
        [token, activity, country, refs.review],
        refs.note,
        api_name="save_references",
    )
