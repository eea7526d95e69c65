"""The run view: the form (activity, country, examples, Start and Stop, the progress, the
references, the options, the instruction to review) beside the run display (rounds,
before / after, the other prompt languages, the metrics, the checklist, the timeline of
what each round fixed and lost, and the table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from refine import settings
from refine.evaluate.references import ReferenceNotFound, suggest
from refine.records import RunSpec
from refine.service import NOT_YOURS, ServiceBusy
from refine.settings import Setting, shown_on
from ui import adapters
from ui.line import IN_LINE
from ui.safe import error, html_text, no_server_paths, number_box
from ui.views import point
from ui.views.common import (
    APPLIED,
    NO_VISITOR,
    REVIEW_TIMEOUT_S,
    REVIEW_WORDS,
    RunDisplay,
    Session,
    by_name,
    numbers,
    settings_message,
)
from ui.views.point import add_point
from ui.views.references import (
    BUILD_REFS,
    EXAMPLES,
    References,
    add_references,
    ready_activities,
    wire_references,
)

MAX_UPLOAD_MB = 20
UPLOAD_LIMITS = f"PNG, JPEG or WebP, at most {MAX_UPLOAD_MB} MB"
UPLOAD_TYPES = settings.IMAGE_TYPES


@dataclass
class RunForm:
    """The settings of a run as the form holds them: a box per run setting the app shows
    (``settings``, made from the settings table, in its order), then the form's own."""

    activity: Any
    country: Any
    settings: dict[str, Any]
    numeric: list[str]  # the numbers among them: what a roll-back may change
    pause: Any
    expectations: Any
    upload: Any
    upload_preview: Any

    def start_inputs(self) -> list[Any]:
        """What ``/start`` takes after the visitor's token, in its order: activity and
        country, the run settings in the table's order, then pause, the upload and the
        form's own options (:data:`START_OWN`)."""
        return [
            self.activity,
            self.country,
            *self.settings.values(),
            self.pause,
            self.upload,
            self.expectations,
        ]

    def numbers(self) -> list[Any]:
        """The numbers a roll-back may change, then pause (``/branch``'s order)."""
        return [*(self.settings[n] for n in self.numeric), self.pause]


# the form's own inputs /start takes after the run settings, in order
START_OWN = ("paused", "image", "expectations")


def rolled_back(spec: type[RunSpec] = RunSpec) -> list[str]:
    """The run settings the app shows that are numbers (a roll-back may change them), in
    the table's order."""
    return [x.name for x in shown_on("app", spec) if x.kind in (int, float) and not x.choices]


@dataclass
class RunView:
    form: RunForm
    display: RunDisplay
    refs: References
    start: Any
    stop: Any
    apply: Any
    notice: Any
    started: Any = None  # the Start event (set as it is wired)
    spec: type[RunSpec] = RunSpec  # the run settings' table the form is made from
    point: Any = None  # the region and references controls of the pause (ui/views/point.py)


def add_run_view(
    gr: Any, session: Session, countries: list[str], spec: type[RunSpec] = RunSpec
) -> RunView:
    """The form and the display in two rows. First, the form's top (activity, country,
    Start and Stop, the progress) beside the current image, the instruction under review
    and Apply: on a desktop that is one screen, and on a phone, where the columns stack,
    the image comes right after the progress and the instruction right under it. Then the
    optional settings (folded) and the examples beside the rounds, the chart and the table."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300):
            activity = gr.Dropdown(
                ready_activities("Iran"),
                value="people eating food at home",
                allow_custom_value=True,
                label="activity",
                elem_id="activity",
            )
            country = gr.Dropdown(
                countries, value="Iran", allow_custom_value=True, label="country", elem_id="country"
            )
            with gr.Row():
                start = session.gate.button(gr, "Start", variant="primary", elem_id="start")
                stop = session.gate.button(gr, "Stop", answers=True, elem_id="stop")
            bar = gr.HTML(adapters.progress_bar(0, "not started"), elem_id="progress-bar")
            stage = gr.Textbox(label="stage", interactive=False, elem_id="stage")
            progress = gr.Textbox(
                label="so far", interactive=False, elem_id="progress", max_lines=5
            )
        with gr.Column(scale=2, min_width=300):
            slider = gr.ImageSlider(
                label="this round: before / after", height=360, elem_id="slider"
            )
            instruction = gr.Textbox(
                label="instruction (edit it in pause mode, then apply)",
                lines=4,
                max_lines=8,
                elem_id="instruction",
            )
            apply = session.gate.button(gr, "Apply instruction", answers=True, elem_id="apply")
            notice = session.gate.message.box.render()
            pointing = add_point(gr, session.gate)  # a region drawn, the references changed
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300):
            # examples the bundled pack holds references for; they fill plain text boxes (a
            # dropdown shows only the values among its current choices), which set the
            # country, its activities and the activity
            example_act = gr.Textbox(label="activity", visible=False)
            example_ctry = gr.Textbox(label="country", visible=False)
            examples = gr.Examples(
                EXAMPLES, [example_act, example_ctry], label="examples", elem_id="examples"
            )
            # references: where they come from, or a way to build them here
            refs = add_references(gr, session.service, activity.value, session.gate)
            form = _options(gr, session, activity, country, spec)
            run_dir = gr.Textbox(label="run directory", interactive=False, elem_id="run-dir")
        with gr.Column(scale=2, min_width=300):
            # a click picks a round, shown in the slider above (brought into sight); no
            # preview: it duplicated the slider, and with a round picked in it, each new
            # round focused its thumbnail, which moved the page down to it mid-run
            gallery = gr.Gallery(
                label="rounds", columns=4, height=260, allow_preview=False, elem_id="gallery"
            )
            languages = gr.Gallery(
                label="this round in the other prompt languages (SoS with a bank)",
                columns=4,
                height=180,
                elem_id="languages",
            )
            # an inline SVG chart: it redraws whole on every update, whatever metrics (SoS
            # per language, CAIRE) a run adds
            plot = gr.HTML(label="metrics per round", elem_id="plot")
            # what to fix in sight, what the image gets right folded under it: on a good
            # image the first is a few lines, not the whole list of references
            checklist = gr.HighlightedText(
                label="descriptor checklist: what to fix",
                color_map=adapters.CHECK_COLOURS,
                combine_adjacent=False,
                elem_id="checklist",
            )
            with gr.Accordion(
                "What the image already shows (aligned, near matches, met expectations)",
                open=False,
                elem_id="checked-box",
            ):
                checked = gr.HighlightedText(
                    show_label=False,
                    color_map=adapters.CHECK_COLOURS,
                    combine_adjacent=False,
                    elem_id="checked",
                )
            # each descriptor across the rounds: what a round fixed, and what it lost
            timeline = gr.HTML(
                label="what each round fixed and lost",
                show_label=True,
                container=True,
                elem_id="timeline",
            )
            # the reason wraps in a column of its own width, so that on a desktop every
            # column up to it is in sight (CAIRE, SoS and tokens scroll in when used)
            table = gr.Dataframe(
                headers=adapters.table_headers(),
                label="rounds",
                interactive=False,
                wrap=True,
                column_widths=adapters.table_widths(),
                elem_id="table",
            )
            # what every metric label above means, from the metric catalog (the chart's
            # legend says it too, on hover)
            with gr.Accordion(adapters.GLOSSARY_TITLE, open=False, elem_id="glossary"):
                glossary = gr.Markdown(adapters.glossary_markdown(), elem_id="glossary-text")
    display = RunDisplay(
        stage=stage,
        gallery=gallery,
        plot=plot,
        table=table,
        checklist=checklist,
        slider=slider,
        instruction=instruction,
        run_dir=run_dir,
        languages=languages,
        progress=progress,
        bar=bar,
        checked=checked,
        glossary=glossary,
        timeline=timeline,
    )
    view = RunView(form, display, refs, start, stop, apply, notice, spec=spec, point=pointing)
    # Apply's answer is about the review it ended: the next review empties it (in the page:
    # what a page shows, never what an API client got)
    stage.change(
        None,
        [stage, notice],
        notice,
        js=f"(stage, said) => (stage || '').includes('{REVIEW_WORDS}') && (said || '')"
        f".startsWith('{APPLIED}') ? '' : said",
        queue=False,
        api_name=False,
        show_progress="hidden",
    )
    _wire_upload(gr, form)
    wire_references(gr, session, refs, activity, country, examples, example_act, example_ctry)
    _wire_run(gr, session, view, spec)
    return view


def _options(
    gr: Any, session: Session, activity: Any, country: Any, spec: type[RunSpec] = RunSpec
) -> RunForm:
    """The optional settings, folded: a box per run setting the app shows (the settings
    table's: the numbers three to a row, then pause, the texts two to a row, each checkbox
    on its own), then the form's own."""
    limits = session.limits
    boxes: dict[str, Any] = {}
    shown = shown_on("app", spec)
    numeric = [x for x in shown if x.name in rolled_back(spec)]
    texts = [x for x in shown if x not in numeric and x.kind is not bool]
    with gr.Accordion("Options", open=False, elem_id="options"):
        for row in range(0, len(numeric), 3):
            with gr.Row():
                for setting in numeric[row : row + 3]:
                    boxes[setting.name] = _box(gr, setting, limits)
        pause = gr.Checkbox(
            False, label="pause before each edit to review the instruction", elem_id="pause"
        )
        for row in range(0, len(texts), 2):
            with gr.Row():
                for setting in texts[row : row + 2]:
                    boxes[setting.name] = _box(gr, setting, limits)
        for setting in shown:
            if setting.kind is bool:
                boxes[setting.name] = _box(gr, setting, limits)
        expectations = gr.Checkbox(
            False,
            label="check cultural expectations (explicit and implicit, listed by the language "
            "model) every round, and ask for the missed ones",
            elem_id="expectations",
        )
        # a file box, not an image box: a file that is not an image gets a message naming
        # it and the limits (an image box fails without one)
        upload = gr.File(
            type="filepath",
            file_types=list(UPLOAD_TYPES),
            label=f"refine this image instead (optional; {UPLOAD_LIMITS})",
            height=120,
            elem_id="upload",
        )
        upload_preview = gr.Image(
            label="the image to refine",
            interactive=False,
            visible=False,
            height=160,
            elem_id="upload-preview",
        )
    return RunForm(
        activity=activity,
        country=country,
        settings={x.name: boxes[x.name] for x in shown},  # the table's order
        numeric=[x.name for x in numeric],
        pause=pause,
        expectations=expectations,
        upload=upload,
        upload_preview=upload_preview,
    )


def _box(gr: Any, setting: Setting, limits: Any) -> Any:
    """The form's box of a run setting, from the settings table: its label (with the
    operator's limit for rounds and candidates, whose default it then shows), its line of
    help, its default; a number, a choice, a checkbox or a text by its kind. A number box
    carries no minimum or maximum: Gradio's own check of them refuses with "Value 50 is
    greater than maximum value 10", naming no field; the bounds are said in the label or
    the info and checked by the handler, which names the field (ui.views.common.numbers,
    ui.limits)."""
    label, value = setting.box or setting.label, setting.default
    if setting.name in limits.OPTIONS:  # rounds, candidates: the operator's limits
        label, value = (
            f"{label} (at most {getattr(limits, setting.name)})",
            limits.default_of(setting.name),
        )
    extra = {"info": setting.info} if setting.info else {}
    elem_id = setting.flag.removeprefix("--")
    if setting.kind is bool:
        return gr.Checkbox(bool(value), label=label, elem_id=elem_id, **extra)
    if setting.choices:
        # the handler checks the value against the choices and names the field when it
        # refuses one (ui.views.common.numbers); Gradio's own check names none, and refuses
        # an empty value, which means the default
        return gr.Dropdown(
            list(setting.choices),
            value=value,
            label=label,
            elem_id=elem_id,
            allow_custom_value=True,
            **extra,
        )
    if setting.kind in (int, float) and value is None:
        # Gradio's number box is never empty (it shows and sends 0): a number whose default
        # is none (--keep-fixes: off) is a text box, empty for the default, read as a
        # number by the handler, which names the box when it is not one
        return gr.Textbox("", label=label, elem_id=elem_id, **extra)
    if setting.kind in (int, float):
        precision = 0 if setting.kind is int else None
        return number_box(value, precision=precision, label=label, elem_id=elem_id, **extra)
    if setting.placeholder:
        extra["placeholder"] = setting.placeholder
    return gr.Textbox(value or "", label=label, elem_id=elem_id, **extra)


def _wire_upload(gr: Any, form: RunForm) -> None:
    def on_upload(path):
        """A file the visitor uploaded: previewed when it is an image that can be refined,
        else a message naming it and the limits. A refused file stays in the box, so Start
        refuses it too, naming it, until another is uploaded or the box is cleared: the
        visitor asked for that image to be refined, not for a new one."""
        if not path:
            return gr.update(value=None, visible=False)
        try:
            settings.check_image(path)
        except settings.SettingsError as err:
            gr.Warning(html_text(no_server_paths(f"{err.message} (use {UPLOAD_LIMITS})")))
            return gr.update(value=None, visible=False)
        return gr.update(value=path, visible=True)

    form.upload.upload(on_upload, form.upload, form.upload_preview, api_name=False)
    form.upload.clear(
        lambda: gr.update(value=None, visible=False), None, form.upload_preview, api_name=False
    )


def _wire_run(gr: Any, session: Session, view: RunView, spec_type: type[RunSpec] = RunSpec) -> None:
    """Start, Stop and Apply."""
    service, limits, visitor = session.service, session.limits, session.visitor

    names = [x.name for x in shown_on("app", spec_type)]

    def on_start(values, request=None):
        tok, act, ctry = values["tok"], values["act"], values["ctry"]
        paused, image = values["paused"], values["image"]
        check_expectations = values["expectations"]
        who = visitor(tok, request)
        try:  # a missing key or a model that cannot load: said at once, in one line
            session.check_ready()
        except ValueError as err:
            raise error(err) from err
        try:  # the operator's limits, and each run's budget of time and calls
            given = limits.apply(numbers({n: values[n] for n in names}, spec_type, limits))
        except ValueError as err:
            raise error(err) from err
        raw = {"activity": act, "country": ctry, **given, "image": image or None}
        if who is None:  # a run nobody owns could be stopped by anyone
            raise error(NO_VISITOR)
        if given.get("memory"):  # the visitor's own fixes only: another's words stay theirs
            raw["memory_store"] = str(service.memory_store(who))
        # the start reserved against the quotas, before any model call (its most calls held
        # to what the day's allowance has left), released if the run never starts
        held = session.admitted(who, request, raw.get("budget_calls"))
        with session.holding(held):
            raw["budget_calls"] = session.capped(held, raw.get("budget_calls"))
            if check_expectations:
                try:  # built from the run's own prompt (cached inside --out); never a path
                    with session.counting(who):
                        made = service.expectations_for(act, ctry).expectations
                    raw["expectations"] = [e.model_dump() for e in made]
                except ValueError as err:
                    raise error(f"cultural expectations: {err}") from err

            def find(a: str, c: str) -> Any:
                try:
                    return service.find_references(a, c, who)
                except ReferenceNotFound as err:  # the app's own way, not the CLI's
                    near = suggest(a, ready_activities(c))
                    raise ReferenceNotFound(
                        f'no references yet for {a!r} in {c}{near}; or press "{BUILD_REFS}" '
                        "under the form (a few model calls, cached), review them, then Start"
                    ) from err

            try:
                # knowledge bases and SoS banks are read from inside --out only
                spec, refs = settings.load(raw, find=find, root=service.out, spec=spec_type)
            except settings.SettingsError as err:
                raise error(settings_message(err)) from err
            try:  # the device taken: wait in the app's line, told how many runs are ahead
                ticket = session.line.join()
                try:
                    most_s = limits.run_minutes * 60 + 60
                    yield from session.wait_turn(ticket, who, gr.skip(), most_s)
                    job = service.start(
                        spec=spec,
                        references=refs,
                        pause=bool(paused),
                        owner=who,
                        review_timeout_s=REVIEW_TIMEOUT_S,
                    )
                finally:  # started, refused, or the page left while waiting
                    session.line.leave(ticket)
            except (ServiceBusy, ValueError) as err:
                raise error(err) from err
        yield from session.counted(job, who, held, gr.skip())

    def on_stop(tok, request=None):
        job = service.job
        if job is not None and service.busy:
            if not job.owned_by(visitor(tok, request)):
                return NOT_YOURS
            job.stop()
            return "stopping now: the round in progress is cut short, the rounds done are kept"
        return "no run in progress"

    def on_apply(
        tok, text, region=None, remove=None, add=None, stereotypes_remove=None,
        stereotypes_add=None, request=None,
    ):  # fmt: skip
        job = service.job
        if job is None or job.waiting is None:
            return "no instruction is waiting for review"
        if not job.owned_by(visitor(tok, request)):
            return NOT_YOURS
        try:  # what the visitor drew and changed (ui/views/point.py), checked by the job
            mask = point.region_mask(region, job.review_image().size)
            edit = point.reference_edit(remove, add, stereotypes_remove, stereotypes_add)
            job.submit_instruction(text, mask=mask, references=edit)
        except ValueError as err:
            return f"error: {err}"
        return f"{APPLIED}; editing ..."

    for handler in (on_stop, on_apply):
        handler.__annotations__["request"] = gr.Request
    token = session.token
    started = view.start.click(
        # every setting may be left out (the form's default; an empty box: the run's)
        by_name(on_start, ["tok", "act", "ctry", *names, *START_OWN], gr.Request, names),
        [token, *view.form.start_inputs()],
        view.display.outputs(),
        api_name="start",
        **IN_LINE,
    )
    view.started = started
    session.gate.message.tells_refusals(started)
    # their messages go to their own box, so they never hide the run's own stage
    view.stop.click(on_stop, token, view.notice, api_name="stop", queue=False)
    view.apply.click(
        on_apply,
        [token, view.display.instruction, *view.point.inputs()],
        view.notice,
        api_name="apply",
        queue=False,
    )
    point.wire_point(gr, session, view.display, view.notice, view.point)
