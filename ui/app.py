"""The Gradio app: start a run, watch it round by round, steer it, open saved runs, rate
images and tune from accepted rounds.

``build_app`` composes the views of ``ui/views`` (run, steering, saved runs) and the Rate
and Tune views on a :class:`refine.service.RunService`; each view builds its block and
wires its own events, and every widget value comes from ``ui.adapters``. There is no model
code here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refine.backends.imports import require
from refine.evaluate.references import load_pack
from refine.present.charts import CHART_CSS
from refine.records import RunSpec
from refine.service import RunService
from ui.limits import Limits
from ui.line import Line, line_length
from ui.quotas import Quotas
from ui.safe import hide_paths_of
from ui.views.common import Session
from ui.views.common import index as _index  # noqa: F401 (the app's rule for numbers)
from ui.views.rate import add_rate_view
from ui.views.ready import Readiness, add_ready_line
from ui.views.references import ready_activities, references_note  # noqa: F401
from ui.views.run import MAX_UPLOAD_MB, add_run_view
from ui.views.saved import add_saved_view
from ui.views.steer import add_steer_view, follow_form
from ui.views.tune import add_tune_view
from ui.visitors import browser_secret, new_token


def build_app(
    service: RunService,
    status: str = "",
    limits: Limits | None = None,
    login: bool = False,
    quotas: Quotas | None = None,
    trust_proxy: bool = False,
    spec: type[RunSpec] = RunSpec,
) -> Any:
    """The app on ``service``; ``spec``: the run settings' table its form is made from
    (RunSpec, or one with more fields); ``limits``: the operator's limits on each visitor's run
    (default :class:`ui.limits.Limits`); ``login``: a Hugging Face login button (a Space
    with ``hf_oauth: true``), whose user name then names the visitor; ``quotas``: runs per
    visitor and address per hour, calls per day (:mod:`ui.quotas`), the address read from
    ``X-Forwarded-For`` only with ``trust_proxy``."""
    limits = (limits or Limits()).check()
    gr = require("gradio", "gradio", "the app", "app")
    hide_paths_of(service)  # its messages and boxes name paths under --out relative to it
    service.orphan_s = ORPHAN_S  # a paused run whose visitor left frees the device
    with gr.Blocks(title="Culturally faithful image refinement") as demo:
        # who the visitor is: a token kept in the browser (encrypted with a key kept in
        # --out), read into this session's state on load; see ui.visitors
        token_store = gr.BrowserState(
            None, storage_key="refine-visitor", secret=browser_secret(service.out)
        )
        token = gr.State(None)
        gr.Markdown("# Culturally faithful image refinement")
        gr.Markdown(status or f"profile: {service.profile}", elem_id="status")
        ready = Readiness(service)
        add_ready_line(gr, demo, ready)
        if login:
            gr.LoginButton()
        session = Session(service, limits, quotas, trust_proxy, token, ready)
        session.line = Line(line_length(limits.run_minutes))  # starts wait here, in words
        session.gate.message.make(gr)  # before any button: each empties it first
        run = add_run_view(gr, session, list(load_pack().countries), spec)
        branched = add_steer_view(gr, session, run)
        opening, refreshed = add_saved_view(gr, demo, session, run.display)
        for made in (run.started, branched):  # the saved runs list a new run at once
            refreshed(made)
        keys_js = add_rate_view(service, token, session.gate)
        add_tune_view(service, token, session.gate)

        def on_visit(kept):
            """The browser's token (made on the first visit), into this session's state;
            then the buttons that act as the visitor are enabled (see VisitorGate)."""
            made = new_token(kept)
            return [made, made, *session.gate.opened(gr)]

        gated = [button for button, _ in session.gate.buttons]
        visit = demo.load(
            on_visit, token_store, [token_store, token, *gated], api_name=False, queue=False
        )

        def on_attach(tok, request=None):
            """A page opened (or reloaded) during the visitor's run follows that run: its
            progress, images and any instruction under review, with Stop and Apply."""
            yield from session.attach(tok, request, gr.skip())

        on_attach.__annotations__["request"] = gr.Request  # found by its type

        # its own line, never held up by the one a start waits in: one page per visitor
        # runs it for as long as that visitor's run goes on
        visit.then(
            on_attach,
            token,
            run.display.outputs(),
            api_name=False,
            concurrency_limit=None,
            concurrency_id="attach",
            show_progress="hidden",
        )
        # an opened run, or the visitor's run in progress after a reload, fills the form (a
        # roll-back continues with its settings)
        follow_form(gr, service, run.form, run.display, opening, visit, session)
        demo.load(None, None, None, js=keys_js, api_name=False)  # the Rate view's keys
    demo.queue(default_concurrency_limit=1, **queue_options())
    paced(demo)
    return demo


def serve(
    profile: str | None = None,
    out: str | Path = "runs",
    host: str = "127.0.0.1",
    port: int = 7860,
    share: bool = False,
    auth: tuple[str, str] | None = None,
    backends: dict[str, str] | None = None,
    admins: list[str] | tuple[str, ...] = (),
    limits: Limits | None = None,
    quotas: Quotas | None = None,
    trust_proxy: bool = False,
) -> None:
    """Serve the app (``refine app``); the profile is chosen from what can run unless given.
    ``admins``: user names that change the shared references and tune from every run;
    ``quotas``: runs per visitor per hour and calls per day (:mod:`ui.quotas`)."""
    from refine.profiles import choose_profile, load_profile, slow_notice

    budget = (limits or Limits()).run_minutes  # how many slow rounds fit in a run
    if profile:
        status = slow_notice(load_profile(profile), run_minutes=budget)
    else:
        profile, status = choose_profile()
        if profile == "cpu":
            status = slow_notice(load_profile(profile), True, budget)
    if quotas is not None and quotas.describe():
        status += f" · quotas: {quotas.describe()}"
    Path(out).mkdir(parents=True, exist_ok=True)
    service = RunService(profile, out=out, backends=backends, admins=[f"user:{a}" for a in admins])
    demo = build_app(service, status, limits, quotas=quotas, trust_proxy=trust_proxy)
    launch(demo, server_name=host, server_port=port, share=share, auth=auth, **launch_options(out))


# events Gradio's queue holds at once, all visitors together: a bound on memory, not on
# the device (one SSE stream each). Runs and builds are bounded by the app's own line
# (ui.line, its length from the operator's limits); browsing, opening, rating and
# refreshing take milliseconds each, one at a time, and a study's raters clicking together
# must not be told "Queue is full" (with the line's 8 as Gradio's limit, 30 of 40
# simultaneous clicks were)
MAX_QUEUED = 1000
# a run paused for its owner's review, with none of the owner's pages following it (all
# closed: a reload re-attaches in about 1.3 s), is stopped after this many seconds, its
# rounds kept: the device is not held for 15 minutes for a visitor who has gone
ORPHAN_S = 120.0


def queue_options() -> dict[str, Any]:
    """Gradio's queue bounds memory only (:data:`MAX_QUEUED`); starts, roll-backs and builds
    wait in the app's own line of :func:`ui.line.line_length`, refused past it."""
    return {"max_size": MAX_QUEUED}


# how often Gradio's queue looks for an event to start, and for progress to send, while it
# has none. Its own pace (every 1 ms and 10 ms) kept an idle app's server at 4.6-5.0 % of
# a core here; at these an idle app takes 1.3-1.5 % (benchmarks/bench_idle_app.py, two
# runs of each, alternated), and an event waits 10 ms more on average before it starts
QUEUE_LOOK_S = 0.02
PROGRESS_LOOK_S = 0.05


def paced(demo: Any) -> None:
    """``demo``'s queue looks for work at :data:`QUEUE_LOOK_S` and
    :data:`PROGRESS_LOOK_S`. Gradio has no setting for it: its queue's two attributes
    are set, each only where the queue has it (a Gradio that renames them keeps its own
    pace; tests/ui/test_views.py then fails)."""
    queue = demo._queue
    for name, seconds in (
        ("sleep_when_free", QUEUE_LOOK_S),
        ("progress_update_sleep_when_free", PROGRESS_LOOK_S),
    ):
        if hasattr(queue, name):
            setattr(queue, name, seconds)


# the charts drawn for a wide column or a phone, the one that fits shown; the saved runs'
# thumbnails: each whole picture with its caption under it, in full (Gradio's gallery lays
# the caption over the picture, cut to one line)
APP_CSS = (
    CHART_CSS
    + """
/* a refused click leaves every output as it was: Gradio's error cover, which hides an
   image or a table under "Error", is not drawn; the reason is in the message box */
[data-testid="status-tracker"]:has(> .error) { display: none !important; }
/* the before/after slider: Gradio draws its first image in the flow, up to 500 px tall in
   a box of 360, and the second one over it, centred, so that about 28% of the picture was
   cut off and the two halves stood about 70 px apart; both now fill the same box, each
   fitted whole (contain), so that the seam joins the same picture */
#slider .slider-wrap .wrap img {
  position: absolute !important; inset: 0; width: 100% !important; height: 100% !important;
  max-height: 100% !important; object-fit: contain !important;
}
/* the rounds and the saved runs: each caption whole under its picture (Gradio draws it
   over the picture, on one line, cut at the picture's width) */
:is(#saved-gallery, #gallery) .grid-wrap.fixed-height { min-height: 0; max-height: none; }
/* the gallery's own label ("saved runs, newest first ...") is drawn over its top left
   corner: the pictures start under it */
:is(#saved-gallery, #gallery) .grid-wrap { padding-top: 32px; }
:is(#saved-gallery, #gallery) .grid-container {
  grid-template-rows: none; grid-auto-rows: auto;
  grid-template-columns: repeat(auto-fill, minmax(140px, 1fr));
}
:is(#saved-gallery, #gallery) .thumbnail-lg {
  display: flex; flex-direction: column; height: auto; aspect-ratio: auto;
}
:is(#saved-gallery, #gallery) .thumbnail-lg > img { height: 150px; object-fit: contain; }
:is(#saved-gallery, #gallery) .caption-label {
  position: static; max-width: 100%; white-space: normal; overflow: visible;
  border: none; border-radius: 0; font-size: 13px; text-align: center;
}
/* the checklist's chips break between words, never inside one (Gradio breaks anywhere:
   on a phone "Floor" became "Floo / r") */
:is(#checklist, #checked) :is(.textfield, .token-container, .token, .text) {
  word-break: normal; overflow-wrap: break-word;
}
/* the other prompt languages' images: no empty panel for a run without them */
#languages:not(:has(img)) { display: none; }
/* the rating scales on one line at a phone's width (5 choices of 57 px wrapped in 274);
   choices that are sentences (CUBE's, CAIRE's levels) one under another, read whole */
.rate-scale .wrap { flex-wrap: nowrap; }
.rate-scale .wrap > label {
  flex: 1 1 0; min-width: 0; padding: 6px 8px; justify-content: center;
}
.rate-choices .wrap { flex-direction: column; align-items: stretch; }
"""
)


def launch_options(out: str | Path) -> dict[str, Any]:
    """What ``demo.launch`` needs besides the address: the upload limit, ``--out`` as the
    only folder files are served from (run images, thumbnails), but never its private files
    (:mod:`ui.private`), and the app's styles."""
    from ui.private import private_files_middleware

    return {
        "max_file_size": f"{MAX_UPLOAD_MB}mb",
        "allowed_paths": [str(Path(out).resolve())],
        "app_kwargs": {"middleware": [private_files_middleware(out)]},
        "css": APP_CSS,
    }


def launch(demo: Any, *, block: bool = True, **options: Any) -> str:
    """Start ``demo``'s server and return its local address, once its page answers; with
    ``block`` (the command line) serve until stopped, else return (tests, notebooks).

    Gradio's own ``launch`` first waits for the server's start-up events with no time limit,
    which proves the server answers on its local address, and then asks for the page once
    more with a fixed 3 s limit, giving up at the first timeout with "When localhost is not
    accessible, a shareable link must be created". The first page is built on that request:
    0.03 s on a quiet 2-core machine, 1.0 to 2.2 s measured with two busy loops and a tune
    beside it, and past 3 s now and then, which stopped the app for no fault of its own. So
    that second probe is skipped (Gradio's ``_frontend`` switch, where this Gradio has it) and
    the page is asked for here instead, waited for as long as the start-up events are, and
    a page that does not answer with success stops the launch with its status."""
    import inspect

    import httpx

    if "_frontend" in inspect.signature(demo.launch).parameters:
        options["_frontend"] = False
    try:  # whatever stops the launch (Ctrl-C included) closes the server it started
        demo.launch(prevent_thread_lock=True, **options)
        url = demo.local_url
        # this machine's own server, just started: no certificate to check (with TLS it
        # may be self-signed), and no CA bundle to load, 15 to 30 ms of CPU a launch
        answer = httpx.get(url, timeout=None, follow_redirects=False, verify=False)
        if answer.status_code not in (200, 301, 302, 303, 307, 308, 401):
            raise RuntimeError(
                f"the app's page at {url} answered {answer.status_code}: {answer.text[:300]}"
            )
    except BaseException:
        demo.close()
        raise
    if block:
        demo.block_thread()
    return url
