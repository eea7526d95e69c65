"""The steering view: look at a round, roll back to it and go on, or decide a round by
hand; a click on a round's image picks it."""

from __future__ import annotations

from typing import Any

from refine.loop.refiner import Refiner
from refine.service import ServiceBusy
from ui.line import IN_LINE
from ui.safe import error, number_box
from ui.views.common import (
    QUIET,
    REVIEW_TIMEOUT_S,
    RunDisplay,
    Session,
    by_name,
    in_sight,
    index,
    numbers,
)
from ui.views.run import RunView


def add_steer_view(gr: Any, session: Session, run: RunView) -> Any:
    """The view; returns the roll-back event."""
    with gr.Accordion("Steer: look at a round, roll back to it, decide by hand", open=True):
        with gr.Row():
            round_pick = number_box(0, precision=0, minimum=0, label="round", elem_id="round")
            cand_pick = number_box(
                0, precision=0, minimum=0, label="candidate", elem_id="candidate"
            )
            gate = session.gate
            show_btn = gate.plain(gr, "Show round", shows_run=True, elem_id="show")
            branch_btn = gate.button(
                gr, "Roll back: a new run from this round", shows_run=True, elem_id="branch"
            )
            accept_btn = gate.button(
                gr, "Accept candidate by hand", shows_run=True, elem_id="accept"
            )
            reject_btn = gate.button(gr, "Reject round by hand", shows_run=True, elem_id="reject")
    service, limits, token = session.service, session.limits, session.token
    display, outputs = run.display, run.display.outputs()

    def on_show(path, k):
        try:
            record, path = service.opened(path)
            k = index(k, "round")
        except (ValueError, OSError) as err:
            raise error(err) from err
        if not 0 <= k < len(record.rounds):
            raise error(f"round {k} does not exist (0..{len(record.rounds) - 1})")
        return RunDisplay.pack(f"round {k}: {record.rounds[k].decision}", path, record, k)

    def on_pick(path, evt):
        """A click on a gallery image shows that round and picks it for steering."""
        k = int(evt.index)
        return [*on_show(path, k), k]

    # set here, not as an annotation: this module's annotations are strings, and gradio
    # finds the event and request arguments by their types
    on_pick.__annotations__["evt"] = gr.SelectData

    names = list(run.form.numeric)

    def on_branch(values, request=None):
        tok, path, k, paused = values["tok"], values["path"], values["k"], values["paused"]
        who = session.visitor(tok, request)
        try:
            session.check_ready()
            old, run_dir = service.opened(path)
            service.check_owner(run_dir, who)  # a roll-back continues one's own run
            form = numbers({n: values[n] for n in names}, run.spec, limits)
            given = limits.apply(form, old.spec)
            # the run's own settings, but for what differs from them (the form shows an
            # opened run's, see follow_form); and the operator's budget of time and calls
            changed = {n: given[n] for n, v in form.items() if differs(v, getattr(old.spec, n))}
            budget = {n: given[n] for n in ("budget_seconds", "budget_calls")}
            # the start reserved against the quotas (the new run's calls: its budget counts
            # the calls it goes on from), released if the run never starts
            most = budget["budget_calls"]
            new = None if most is None else max(0, most - old.model_calls)
            held = session.admitted(who, request, new)
            with session.holding(held):
                new = session.capped(held, new)
                if new is not None:
                    budget["budget_calls"] = old.model_calls + new
                # the device taken: wait in the app's line, told how many runs are ahead
                ticket = session.line.join()
                try:
                    most_s = limits.run_minutes * 60 + 60
                    yield from session.wait_turn(ticket, who, gr.skip(), most_s)
                    job = service.branch(
                        run_dir,
                        index(k, "round"),
                        pause=bool(paused),
                        owner=who,
                        review_timeout_s=REVIEW_TIMEOUT_S,
                        **changed,
                        **budget,
                    )
                finally:
                    session.line.leave(ticket)
        except (ServiceBusy, ValueError, OSError) as err:
            raise error(err) from err
        # said at once: a roll-back is a new run, the old one is kept as it was, with the
        # run's own settings or the changes made to them
        said = "; ".join(
            f"{n} {_said(v)} (the run had {getattr(old.spec, n)})" for n, v in changed.items()
        )
        with_what = f"these changes: {said}" if said else "the run's own settings"
        started = (
            f"a new run from round {index(k, 'round')} of {old.id}: starting, with {with_what}"
        )
        yield RunDisplay.only(gr.skip(), stage=started)
        yield from session.counted(job, who, held, gr.skip(), old.model_calls)

    def on_choose(tok, path, k, j, accept, request=None):
        try:
            k, j = index(k, "round"), index(j, "candidate")
            _, path = service.opened(path)  # a run of this app, with no linked images
            service.check_owner(path, session.visitor(tok, request))  # for as long as it exists
            record = Refiner.choose(path, k, j, accept=accept)
        except (ValueError, OSError) as err:
            raise error(err) from err
        return RunDisplay.pack(f"round {k}: {record.rounds[k].reason}", path, record, k)

    def on_accept(tok, path, k, candidate, request=None):
        return on_choose(tok, path, k, candidate, True, request)

    def on_reject(tok, path, k, candidate, request=None):
        return on_choose(tok, path, k, candidate, False, request)

    for handler in (on_accept, on_reject):
        handler.__annotations__["request"] = gr.Request
    in_sight(display.gallery.select)  # the picked round is shown in the slider
    picked_round = display.gallery.select(
        on_pick, display.run_dir, [*outputs, round_pick], api_name=False, **QUIET
    )
    shown = show_btn.click(
        on_show, [display.run_dir, round_pick], outputs, api_name="show", **QUIET
    )
    form = run.form
    branched = branch_btn.click(
        by_name(on_branch, ["tok", "path", "k", *names, "paused"], gr.Request, names),
        [token, display.run_dir, round_pick, *form.numbers()],
        outputs,
        api_name="branch",
        **IN_LINE,
    )
    picked = [token, display.run_dir, round_pick, cand_pick]
    accepted = accept_btn.click(on_accept, picked, outputs, api_name="accept", **QUIET)
    rejected = reject_btn.click(on_reject, picked, outputs, api_name="reject", **QUIET)
    gate.message.tells_refusals(picked_round, shown, branched, accepted, rejected)
    follow_form(gr, service, form, display, [picked_round, shown, accepted, rejected])
    return branched


def differs(value: Any, had: Any) -> bool:
    """Whether a value from the form changes a run's setting (an empty field does not)."""
    if value is None:
        return False
    if isinstance(value, int | float) and isinstance(had, int | float):
        return abs(float(value) - float(had)) > 1e-9
    return value != had


def _said(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def follow_form(
    gr: Any,
    service: Any,
    form: Any,
    display: Any,
    events: list[Any],
    visit: Any = None,
    session: Session | None = None,
) -> None:
    """After each of ``events`` (opening a run, showing a round), the form shows that run's
    activity, country and settings, so that a roll-back from it continues with them unless
    the visitor changes one (said as the roll-back starts). After ``visit`` (a page opened
    or reloaded), the form shows the visitor's run in progress, if any (``session`` tells
    whose), its pause for review included."""
    from ui.views.references import ready_activities

    names = list(form.numeric)
    outputs = [form.activity, form.country, *(form.settings[n] for n in names)]

    def settings_of(path):
        try:
            spec = service.open(path).spec
        except (ValueError, OSError):
            return [gr.skip()] * len(outputs)
        # the country's activities, as a pick of that country offers them
        offered = ready_activities(spec.country)
        if spec.activity not in offered:
            offered = [spec.activity, *offered]
        activity = gr.update(choices=offered, value=spec.activity)
        return [activity, spec.country, *(getattr(spec, n) for n in names)]

    for event in events:
        event.success(settings_of, display.run_dir, outputs, api_name=False, queue=False)
    if visit is None or session is None:
        return

    def live(tok, request=None):
        """The visitor's run in progress: its settings, and whether it pauses for review
        (not a setting of its record: a roll-back from it pauses as it does)."""
        job = service.job
        who = session.visitor(tok, request)
        if job is None or not job.live or who is None or job.owner != who or not job.run_dir:
            return [gr.skip()] * (len(outputs) + 1)
        return [*settings_of(job.run_dir), bool(job.pause)]

    live.__annotations__["request"] = gr.Request  # found by its type
    visit.then(live, session.token, [*outputs, form.pause], api_name=False, queue=False)
