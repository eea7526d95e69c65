"""What the app's views share: the run display (the widgets every run view fills, by name),
the visitor's session (who asks, their quota, following a started run) and the form's
checks on what a client sends."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from refine import settings
from refine.io.store import branches_of
from refine.present.views import branches_text, progress_line
from refine.records import Run, RunSpec
from refine.service import RunService, Update, visitor_hash
from refine.settings import SETTINGS
from ui import adapters
from ui.limits import Limits
from ui.line import Line
from ui.quotas import QuotaExceeded, Quotas, client_address
from ui.safe import MAX_NUMBER, error, no_server_paths, shown_path, take_refusal
from ui.visitors import visitor_id

log = logging.getLogger(__name__)

# steering and browsing: a refused click is a toast, and the view stays as it was
QUIET = {"show_progress": "hidden"}
# a run paused for review whose owner does not answer within this time is stopped
REVIEW_TIMEOUT_S = 15 * 60
# after an action that shows a run or a round (open, show, decide by hand, roll back), the
# run's stage and current image come into sight unless they are in sight already: on a
# phone those controls sit thousands of pixels below them. The stage leads where it sits
# above the image (a phone's one column) and both fit; else the image leads.
IN_SIGHT_JS = """() => {
  const img = document.getElementById('slider'), stage = document.getElementById('stage');
  if (!img || !stage) return;
  const r = img.getBoundingClientRect(), s = stage.getBoundingClientRect();
  if (r.top >= 0 && r.bottom <= window.innerHeight) return;
  const lead = s.top < r.top && r.bottom - s.top <= window.innerHeight ? stage : img;
  lead.scrollIntoView({block: 'start'});
}"""
NO_VISITOR = "this request names no visitor: open the app in a browser or with gradio_client"
# how the form names a setting in a message
FIELD_LABELS = {
    "image": "the uploaded image",
    "expectations": "cultural expectations",
    "refs": "references",
}

# the stage of a run paused for its review says this; Apply's answer begins so
REVIEW_WORDS, APPLIED = "review the instruction", "instruction applied"


@dataclass
class RunDisplay:
    """The widgets that show a run; a handler that shows one returns ``values(...)``, in
    the order of ``outputs()``."""

    stage: Any
    gallery: Any
    plot: Any
    table: Any
    checklist: Any
    slider: Any
    instruction: Any
    run_dir: Any
    languages: Any
    progress: Any
    bar: Any
    checked: Any  # the checklist's part the image gets right (after: API positions hold)
    glossary: Any  # what the numbers mean, and the EXAG variant the run used (last)
    timeline: Any  # what each round fixed and lost, descriptor by descriptor

    def outputs(self) -> list[Any]:
        return [getattr(self, f.name) for f in fields(self)]

    @staticmethod
    def values(**named: Any) -> list[Any]:
        """Every widget's value, by name, in the order of ``outputs()``."""
        names = [f.name for f in fields(RunDisplay)]
        if set(named) != set(names):
            raise TypeError(f"a run display needs {names}, got {sorted(named)}")
        return [named[n] for n in names]

    @classmethod
    def only(cls, skip: Any, **named: Any) -> list[Any]:
        """The values of the widgets named, the others left as they are (``skip``)."""
        return cls.values(**{**{f.name: skip for f in fields(cls)}, **named})

    @staticmethod
    def of_run(run: Run | None, run_dir: Path | None, k: int | None = None) -> dict[str, Any]:
        """The gallery, chart, table, checklist, before/after, instruction and languages of
        a run, at round ``k`` (default: the last)."""
        if run is None or run_dir is None or not run.rounds:
            return {
                "gallery": [],
                "plot": "",
                "table": [],
                "checklist": [],
                "checked": [],
                "slider": None,
                "instruction": "",
                "languages": [],
                "glossary": adapters.glossary_markdown(),
                "timeline": "",
            }
        k = len(run.rounds) - 1 if k is None else max(0, min(k, len(run.rounds) - 1))
        r = run.rounds[k]
        return {
            "gallery": adapters.gallery(run, run_dir),
            "plot": adapters.metric_chart(run),
            "table": adapters.rounds_table(run),
            "checklist": adapters.checklist(r, run.spec.near_margin, "fix"),
            "checked": adapters.checklist(r, run.spec.near_margin, "ok"),
            "slider": adapters.before_after(run, run_dir, k),
            "instruction": f"round {k} ({r.instruction_source}):\n{r.text}",
            "languages": adapters.language_gallery(run, run_dir, k),
            "glossary": adapters.glossary_markdown(run),
            "timeline": adapters.timeline(run),
        }

    @classmethod
    def pack(cls, message: str, path: Any, run: Run | None = None, k: int | None = None):
        """A saved run's values, with ``message`` as its stage."""
        run_dir = Path(path) if run is not None and path else None
        done = 0.0
        if run is not None and run.rounds:
            made = len(run.rounds) + len(run.refused)  # a refused round was asked for too
            done = 1.0 if run.status != "running" else made / (run.spec.rounds + 1)
        state = "not finished" if run is not None and run.status == "running" else None
        label = f"run {run.id}: {state or run.status}" if run is not None else "not started"
        bar = adapters.progress_bar(done, label)
        # where the run comes from (a roll-back) and the runs rolled back from it
        branches = branches_text(branches_of(run_dir)) if run_dir is not None else ""
        progress = " \u00b7 ".join(x for x in (progress_line(run), branches) if x)
        return cls.values(
            stage=no_server_paths(message),
            **cls.of_run(run, run_dir, k),
            run_dir=shown_path(path) if path else "",
            progress=progress,
            bar=bar,
        )

    @classmethod
    def show(cls, update: Update, skip: Any) -> list[Any]:
        """A run's progress as values (``skip``: gradio's no-change, for the widgets a
        denoising step leaves as they were)."""
        bar = adapters.progress_bar(update.fraction, update.progress or update.stage)
        text = update.stage if update.done else (update.progress or update.stage)
        if update.light:  # a denoising step: only the progress moved
            return cls.only(skip, stage=text, bar=bar)
        views = cls.of_run(update.run, update.run_dir)
        if update.error:
            text = f"error: {update.error}"
        done = len(update.run.rounds) if update.run is not None else 0
        if update.applied is not None and update.applied[0] >= done:
            # the instruction applied for the round in progress, not the last one's
            views["instruction"] = (
                f"round {update.applied[0]} (applied, editing):\n{update.applied[1]}"
            )
        if update.review is not None:
            views["instruction"] = update.review[1]
            minutes = REVIEW_TIMEOUT_S // 60
            by = f" (written by the {update.review_source})" if update.review_source else ""
            changes = "; ".join(update.review_changes)
            text = (
                f"round {update.review[0]}: {REVIEW_WORDS}{by}, then apply "
                f"(within {minutes} minutes, or the run stops); an edit of yours is "
                f"recorded as a person's" + (f"\nplanned changes: {changes}" if changes else "")
            )
        return cls.values(
            stage=no_server_paths(text),
            **views,
            run_dir=shown_path(update.run_dir) if update.run_dir else "",
            progress=progress_line(update.run),
            bar=bar,
        )


@dataclass
class MessageBox:
    """The app's message box (drawn by the run view): a message answers one action, so a
    click on any other button empties it, at once and in the browser; Stop and Apply
    write their own message there.

    The page runs the handlers of one click one after the other, each to its end, a
    streamed run included: the emptying is registered on each button as the button is
    made, before the button's own handlers, or a Start's emptying would run once its run
    had ended and wipe the "stopping now" of the Stop clicked meanwhile. (Moving handlers
    ahead afterwards is no way out: the page's API recorder finds a handler by its place.)
    The box is made before the views, so that it exists when their buttons are made."""

    box: Any = None
    gr: Any = None

    def make(self, gr: Any) -> Any:
        self.gr = gr
        self.box = gr.Textbox(label="message", interactive=False, elem_id="notice", render=False)
        return self.box

    def tells_refusals(self, *events: Any) -> None:
        """A refusal of any of ``events`` (:func:`ui.safe.error`) is said in the box, where
        it stays until the next action; the outputs stay as they were (the page's styles
        keep Gradio's error cover off them, see ``ui.app.APP_CSS``)."""
        gr = self.gr

        def refused(request=None):
            said = take_refusal(getattr(request, "session_hash", None))
            return f"refused: {said}" if said else gr.skip()

        refused.__annotations__["request"] = gr.Request  # found by its type
        for event in events:
            event.failure(refused, None, self.box, queue=False, api_name=False, **QUIET)

    def emptied_by(self, button: Any) -> None:
        if self.box is None:
            raise RuntimeError("the message box is made (MessageBox.make) before any button")
        button.click(None, None, self.box, js="() => ''", queue=False, api_name=False, **QUIET)


@dataclass
class VisitorGate:
    """The app's buttons, made here so that each empties the message box first
    (:class:`MessageBox`). Those that act as the visitor (start, stop and steer a run,
    build and save references, rate, tune) are drawn disabled, and enabled by the page's
    load event once it has read the browser's token into the session
    (:func:`ui.app.build_app`). Before that, a click acts as the page's session only, which
    a reload forgets: a run started in that moment would no longer be its starter's after a
    reload."""

    buttons: list[tuple[Any, bool]] = field(default_factory=list)
    message: MessageBox = field(default_factory=MessageBox)

    def button(
        self,
        gr: Any,
        label: str,
        enabled: bool = True,
        answers: bool = False,
        shows_run: bool = False,
        **extra: Any,
    ) -> Any:
        """A button that waits for the visitor; ``enabled``: whether it is enabled then
        (a view off on this profile keeps its buttons disabled); ``answers``: its handler
        writes the message box itself (it is not emptied first); ``shows_run``: a click
        brings the run's stage and image into sight (:func:`in_sight`)."""
        made = gr.Button(label, interactive=False, **extra)
        self.buttons.append((made, enabled))
        if not answers:
            self.message.emptied_by(made)
        if shows_run:
            in_sight(made.click)
        return made

    def plain(self, gr: Any, label: str, shows_run: bool = False, **extra: Any) -> Any:
        """A button that does not act as the visitor (browse, show, download)."""
        made = gr.Button(label, **extra)
        self.message.emptied_by(made)
        if shows_run:
            in_sight(made.click)
        return made

    def opened(self, gr: Any) -> list[Any]:
        """Each button's update once the visitor is known, in the order of :attr:`buttons`."""
        return [gr.update(interactive=enabled) for _, enabled in self.buttons]


def in_sight(listener: Any) -> None:
    """``listener`` (a button's ``click``, a list's ``select``) first brings the run's stage
    and current image into sight, in the browser (:data:`IN_SIGHT_JS`). Registered before
    the listener's own handlers: the page runs one click's handlers one after the other,
    each to its end, a roll-back's whole run included (see :class:`MessageBox`)."""
    listener(None, None, None, js=IN_SIGHT_JS, queue=False, api_name=False, **QUIET)


@dataclass
class Session:
    """The app's service and the operator's limits and quotas, as every view uses them."""

    service: RunService
    limits: Limits
    quotas: Quotas | None
    trust_proxy: bool
    token: Any  # this browser session's visitor token (a gr.State)
    ready: Any = None  # the check of the profile's models (ui.views.ready.Readiness)
    gate: VisitorGate = field(default_factory=VisitorGate)  # buttons that wait for the visitor
    line: Line = field(default_factory=Line)  # visitors waiting for the device

    def check_ready(self) -> None:
        """Nothing when the profile's models answer; else a ValueError in one line."""
        if self.ready is not None:
            from ui.views.ready import check_before_start

            check_before_start(self.ready)

    @staticmethod
    def visitor(token: Any, request: Any) -> str | None:
        """The visitor a request comes from (see :mod:`ui.visitors`)."""
        return visitor_id(request, token)

    def admitted(self, visitor: str | None, request: Any, calls: int | None = None) -> Any:
        """The start reserved against the visitor's quota (a :class:`ui.quotas.Reservation`,
        None without quotas), checked and counted in one step so that visitors who start
        together cannot all pass; ``calls``: the run's most. Give it to :meth:`counted` once
        the run has started, or to :meth:`released` if it never does."""
        if self.quotas is None or visitor is None:
            return None
        address = client_address(request, self.trust_proxy)
        try:
            return self.quotas.reserve(visitor, address, calls)
        except QuotaExceeded as err:
            raise error(err) from err

    def checked(self, visitor: str | None, request: Any) -> None:
        """The visitor's quota allows spending now (a build of references: its calls are
        counted as they are sent, :meth:`counting`; nothing is reserved)."""
        if self.quotas is None or visitor is None:
            return
        try:
            self.quotas.check_start(visitor, client_address(request, self.trust_proxy))
        except QuotaExceeded as err:
            raise error(err) from err

    @contextmanager
    def holding(self, held: Any):
        """The block between a start's reservation and its run's start: a failure, or a
        page that leaves while it waits in line, releases the reservation."""
        try:
            yield held
        except BaseException:
            self.released(held)
            raise

    def released(self, held: Any) -> None:
        """A reserved start whose run never started (refused, or its page left in line)."""
        if self.quotas is not None and held is not None:
            self.quotas.release(held)

    def capped(self, held: Any, calls: int | None) -> int | None:
        """A run's most calls, held to what the day's allowance reserved for it."""
        if held is None or self.quotas is None or self.quotas.daily_calls is None:
            return calls
        return held.calls if calls is None else min(calls, held.calls)

    @contextmanager
    def counting(self, visitor: str | None):
        """Spending outside a run (a build of references, a run's cultural expectations):
        every request it sends is counted against the daily calls, failed ones included.
        The quota is checked before, with :meth:`admitted`."""
        from refine import usage

        with usage.collecting() as spent:
            try:
                yield
            finally:
                n = sum(int(row.get("sent", 0)) for row in spent.values())
                if self.quotas is not None and visitor is not None and n:
                    self.quotas.spent(visitor, n)

    @staticmethod
    def follow(job: Any, skip: Any, attach: bool = False):
        """The job's updates as widget values (with ``attach``: from the run as it stands
        now). A page that stops following (closed, reloaded, an API client's cancel) leaves
        the run going on: it belongs to its visitor, whose next page attaches to it
        (:meth:`attach`); only Stop, the review's timeout and the operator's limits end it."""
        done = False
        try:
            # while nothing happens (a review waiting), an empty update each second: Gradio
            # closes a page's stream between two updates, and a stream that never yields
            # cannot be closed (a cancel then waits for it)
            # the page shows the run as it stands: events that came while it was being
            # sent the last update are one update
            for update in job.updates(attach=attach, idle_s=1.0, latest=True):
                yield RunDisplay.only(skip) if update is None else RunDisplay.show(update, skip)
            done = True
        finally:
            if not done and job.live:
                log.info("a page stopped following run %s; the run goes on", job.run_dir)

    def attach(self, token: Any, request: Any, skip: Any):
        """The visitor's run in progress (or paused for review), followed from where it
        stands: what a page opened during one of the visitor's runs shows."""
        job = self.service.job
        who = self.visitor(token, request)
        if job is None or not job.live or who is None or job.owner != who:
            yield RunDisplay.only(skip)
            return
        yield from self.follow(job, skip, attach=True)

    def wait_turn(self, ticket: object, who: str | None, skip: Any, most_s: float):
        """Before a start, a roll-back: wait in the app's line (:mod:`ui.line`) for
        ``ticket``'s turn, saying how many runs are ahead; yields the stage values."""
        for words in self.line.turn(ticket, self.service, who, most_s):
            yield RunDisplay.only(skip, stage=words)

    def wait_quietly(self, who: str | None, say: Any) -> None:
        """(A build of references) wait in the app's line, with no stream to yield to:
        each line of words goes to ``say``; the visitor's own run is waited for too."""
        ticket = self.line.join()
        try:
            most_s = self.limits.run_minutes * 60 + 60
            for words in self.line.turn(ticket, self.service, who, most_s, own_waits=True):
                say(words)
        finally:
            self.line.leave(ticket)

    def counted(self, job: Any, visitor: str, held: Any, skip: Any, base: int = 0):
        """Follow a started run, its reserved start (:meth:`admitted`) written to the
        quotas' ledger now and settled with its model calls once it has ended, whether or
        not a page still follows it."""
        quotas = self.quotas
        if quotas is not None and held is not None:
            n = quotas.started(held)
            log.info("run started by visitor %s (%d this hour)", visitor_hash(visitor)[:12], n)

            def settle(ended: Any) -> None:
                run = ended.run
                quotas.settle(held, run.model_calls - base if run is not None else 0)

            job.when_done(settle)
        yield from self.follow(job, skip)


def saved_stage(run: Run) -> str:
    """A saved run's state in words: "run R: finished, stopped by the user"; a record left
    "running" by a run that is not going on was cut off (the app stopped during it)."""
    if run.status == "running":
        k = len(run.rounds)
        return (
            f"run {run.id}: cut off after {k} round(s): the app stopped during the run "
            "(roll back to a round to go on from it)"
        )
    return f"run {run.id}: {run.status}" + (f", {run.stop_reason}" if run.stop_reason else "")


def index(value: Any, what: str) -> int:
    """A round or candidate number from a client: a whole number, or a ValueError."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"the {what} must be a whole number, got {value!r}") from None
    if not number.is_integer():
        raise ValueError(f"the {what} must be a whole number, got {value!r}")
    return int(number)


def settings_message(err: settings.SettingsError) -> str:
    """A settings problem in the form's words: ``CAIRE knowledge base: ... (fill in CAIRE
    cultures)``."""
    hint = f" (fill in {label_of(err.related)})" if err.related else ""
    return f"{label_of(err.field)}: {err.message}{hint}"


def by_name(
    fn: Callable[..., Any], names: Sequence[str], request_type: Any, optional: Sequence[str] = ()
) -> Callable:
    """A Gradio handler that takes one positional input per name (the form's run settings
    among them, however many the table has) and the request, and calls
    ``fn(values, request)`` with the inputs by name. Gradio passes the request only to a
    parameter it can place by position, so each input is a parameter of its own
    (``__signature__``), never ``*args``. A direct call may name its inputs instead
    (``handler(tok=None, rounds=2)``; an input not named is empty). A generator stays a
    generator (a run's updates). ``optional``: inputs an API caller may leave out (None).
    """
    import inspect

    n = len(names)

    def split(args: tuple, request: Any, named: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        if len(args) > n:  # Gradio places the request after the inputs
            request = args[n]
        unknown = set(named) - set(names)
        if unknown:
            raise TypeError(f"{fn.__name__} takes no input named {', '.join(sorted(unknown))}")
        if named:  # called by name in Python: an input not named is empty
            return {
                **dict.fromkeys(names),
                **dict(zip(names, args, strict=False)),
                **named,
            }, request
        return dict(zip(names, args[:n], strict=False)), request

    if inspect.isgeneratorfunction(fn):

        def handler(*args: Any, request: Any = None, **named: Any) -> Any:
            values, request = split(args, request, named)
            yield from fn(values, request)

    else:

        def handler(*args: Any, request: Any = None, **named: Any) -> Any:
            values, request = split(args, request, named)
            return fn(values, request)

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    # an input with no value of its own on the page (an upload) is optional to an API
    # caller where it defaults to None here: it and the inputs after it take None
    first = min((names.index(x) for x in optional), default=len(names))
    params = [
        inspect.Parameter(x, kind, **({"default": None} if k >= first else {}))
        for k, x in enumerate(names)
    ]
    params.append(inspect.Parameter("request", kind, default=None))
    handler.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    handler.__annotations__ = {"request": request_type}
    handler.__name__ = handler.__qualname__ = fn.__name__
    return handler


MAX_TEXT = 500  # characters in a text setting of the form (a list of names, a folder)


def label_of(name: str) -> str:
    """A field's name in the form's words: the run setting's label (``target FAITH``),
    else the form's own (``the uploaded image``), else the name."""
    if name in FIELD_LABELS:
        return FIELD_LABELS[name]
    return SETTINGS[name].label if name in SETTINGS else name


def numbers(
    values: dict[str, Any], spec: type[RunSpec] = RunSpec, limits: Any = None
) -> dict[str, Any]:
    """The form's run settings by name (None where a field is empty: the default), each
    checked against the settings table: a number's kind and bounds, a choice among its
    choices; a number above the app's own limit (``limits``: :class:`ui.limits.Limits`),
    first, with that limit (the table's bound, 64 candidates say, is no bound a visitor of
    this app can reach). The boxes carry no bounds (Gradio's own check says only "Value 50
    is greater than maximum value 10"): a refusal here names its field."""
    table = SETTINGS if spec is RunSpec else settings.table(spec)
    out = {}
    for name, value in values.items():
        setting, label = table[name], label_of(name)
        if value is None or value == "":
            out[name] = None
        elif setting.kind is bool:
            # a client's "false" is no tick: only a checkbox's own true or false
            if not isinstance(value, bool):
                raise ValueError(f"{label}: {str(value)[:40]!r} is not true or false")
            out[name] = value
        elif setting.kind in (int, float):
            out[name] = _number(value, setting, label, limits, name)
        elif not isinstance(value, str) or len(value) > MAX_TEXT:
            raise ValueError(f"{label}: a text of at most {MAX_TEXT} characters")
        elif setting.choices and value not in setting.choices:
            raise ValueError(f"{label}: {value[:40]!r} is not {' or '.join(setting.choices)}")
        else:
            out[name] = value.strip() or None
    return out


def _number(
    value: Any, setting: Any, label: str, limits: Any = None, name: str = ""
) -> float | int:
    try:  # a text box's number (--keep-fixes: a box that may be empty) is as short as any
        if isinstance(value, str) and len(value.strip()) > 40:
            raise ValueError
        number = setting.kind(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{label}: {str(value)[:40]!r} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{label}: {value!r} is not a number")
    if abs(number) > MAX_NUMBER:  # as the number boxes refuse it (ui.safe.number_box)
        raise ValueError(f"{label}: {number:g} is past the largest number this app takes, 1e15")
    if limits is not None:
        limits.refuse_above(name, number)
    if setting.lower is not None and number < setting.lower:
        raise ValueError(f"{label}: {number:g} is below the least allowed, {setting.lower:g}")
    if setting.above is not None and number <= setting.above:
        raise ValueError(f"{label}: {number:g} must be above {setting.above:g}")
    if setting.upper is not None and number > setting.upper:
        raise ValueError(f"{label}: {number:g} is above the most allowed, {setting.upper:g}")
    return number
