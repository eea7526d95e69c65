"""The app in a real headless Chromium (Debian's, driven by Playwright): rounds appear one
by one, pause mode lets the user rewrite an instruction, screenshots show the images."""

from __future__ import annotations

import contextlib
import io
import re
import threading
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

from refine.service import RunService
from tests.fakes.gemini_world import GREEN, RED
from tests.ui.clients import served
from tests.ui.strokes import draw
from ui.app import build_app, launch_options

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian's chromium is needed (apt-get install chromium)"
    ),
]


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for the module's tests (starting one took about 1 s of each
    test); they share one page of it, emptied after each test (:func:`page`)."""
    from playwright.sync_api import sync_playwright

    from tests.leaks import short_tmpdir

    with contextlib.ExitStack() as stack:
        with short_tmpdir():  # the driver makes Chromium's profile (its sockets) there
            p = stack.enter_context(sync_playwright())
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def app(siglip_path, tmp_path_factory):
    """One app and its server for the module's tests, on one service that each test makes
    anew on a folder of its own (:func:`page`). Building the app, launching its server and
    the app's first check of its models cost about 1.2 CPU-s a test; the Python side of
    serving the page and Chromium's, the rest of a test's start, are each test's own."""
    service = RunService("gemini", out=tmp_path_factory.mktemp("app"))
    demo = build_app(service, "test profile: the fake Gemini world")
    # every test's folder is under the session's temporary folder: files are served from
    # there as from --out
    with served(demo, **launch_options(tmp_path_factory.getbasetemp())) as url:
        yield url, service, demo


STILL = """document.addEventListener('DOMContentLoaded', () => {
    const still = document.createElement('style');
    still.textContent = '*, *::before, *::after '
        + '{ animation: none !important; transition: none !important; }';
    document.head.appendChild(still);
});
{
    // the region editor's canvas (PixiJS) draws every frame through WebGL, which Chromium
    // runs on the CPU here (SwiftShader): its ticker (the callback that keeps its
    // _requestId) gets a frame at most every 100 ms. Every other callback keeps its frame.
    const frame = window.requestAnimationFrame.bind(window);
    const cancel = window.cancelAnimationFrame.bind(window);
    const cancelled = new Set();
    let last = 0;
    window.requestAnimationFrame = (callback) => {
        if (!String(callback).includes('_requestId')) return frame(callback);
        window.framesHeld = (window.framesHeld || 0) + 1;  // the region test reads it
        const id = --last;  // below zero: never one of the browser's own ids
        setTimeout(() => frame((t) => { if (!cancelled.delete(id)) callback(t); }), 100);
        return id;
    };
    window.cancelAnimationFrame = (id) => { if (id < 0) cancelled.add(id); else cancel(id); };
}"""


@pytest.fixture(scope="module")
def shared_page(chromium):
    """One page, in one browser context, for the module's tests; emptied of what the
    app's origin stored and of the context's cookies after each (:func:`page`). The
    app's scripts and styles then come from the context's cache (serving them anew cost
    about 0.8 CPU-s of the server's Python a page), and the page's renderer is Chromium's
    already (a new page cost about 0.8 CPU-s of Chromium's more than going to the app
    again)."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1300})
    # no animation runs in the module's page: what the tests look at is where things are
    # and what they say, never how they move, and Gradio's pulse on every output that
    # waits for an answer kept Chromium drawing frames (12 % of its CPU); the region
    # editor's canvas is drawn ten times a second, not sixty (Chromium's CPU in the test
    # that draws regions: 17-20 CPU-s at every frame, 10-12 so, two runs each)
    context.add_init_script(STILL)
    try:
        yield context.new_page()
    finally:
        context.close()


TOKENS: list[str] = []  # each browser token the app made, the latest last


@pytest.fixture(scope="module", autouse=True)
def tokens_kept():
    """The app's browser tokens, as it makes them (:data:`TOKENS`): a test then makes a
    run of the page's visitor through the service (:func:`own_run`), without the page."""
    import ui.app

    made = ui.app.new_token

    def kept(value):
        token = made(value)
        TOKENS.append(token)
        return token

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ui.app, "new_token", kept)
        yield
    TOKENS.clear()


def own_run(pg, service, activity: str, country: str, **raw) -> str:
    """A finished run of ``activity`` in ``country`` with ``raw`` settings, made through
    the service as the visitor's of ``pg`` (the last browser token the app made, once the
    page's load event has read it: the buttons wait for it); its folder's name under
    --out, as the page names it. What the page shows of a run as it is made is the other
    tests'; a run made through the page cost its form's filling and the rounds' streaming
    (a run the page follows as it is reloaded is made through the page)."""
    from tests.runs import prepared

    pg.wait_for_selector("#start:not([disabled])")
    job = service.start(*prepared(activity, country, **raw), owner=f"browser:{TOKENS[-1]}")
    job.wait()
    assert job.run is not None and job.run.status == "finished", job.error
    return str(job.run_dir.relative_to(service.out))


@pytest.fixture
def page(shared_page, app, world, backends, options, tmp_path):
    """The app on a service of the test's own (out: ``tmp_path``), in the module's page
    (1400 x 1300; a test that looks at the layout resizes it: see :func:`resize`) with
    nothing stored by an earlier test: a new visitor. The app holds one service object,
    so it is made anew in place; a run still going at the test's end is stopped and
    waited for, so none reaches the next test's."""
    url, service, _ = app
    RunService.__init__(service, "gemini", out=tmp_path, backends=backends, backend_options=options)
    pg = shared_page
    pg.set_viewport_size({"width": 1400, "height": 1300})
    try:
        pg.goto(url)
        pg.wait_for_selector("#start")
        yield pg, service
    finally:
        forget(pg, url)
        job = service.job
        if job is not None and job.live:
            job.stop("the test ended")
            job.join(60)
            assert not job.live, f"the run in {job.run_dir} did not stop"


def forget(pg, url: str) -> None:
    """Close every other page of ``pg``'s context, and empty what the app's origin stored
    there (the visitor's token) and the context's cookies; ``pg`` is left on a blank
    page, its app closed."""
    for other in pg.context.pages:
        if other is not pg:
            other.close()
    if pg.url.split("?")[0].rstrip("/") != url.rstrip("/"):
        pg.goto(url)  # the origin's storage is emptied from a page of the origin
    pg.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
    pg.goto("about:blank")
    pg.context.clear_cookies()


def until(pg, expression: str, arg=None, timeout: float | None = None) -> None:
    """Wait until ``expression`` (a JS function) is truthy in ``pg``, testing it every
    100 ms. Playwright's default tests it on each animation frame, and Chromium stops
    drawing frames for a page that is not in front (a second visitor's page opened
    beside the first): the wait then never sees a state that has long been reached."""
    pg.wait_for_function(expression, arg=arg, timeout=timeout, polling=100)


# the two widths the layout is checked at. One page is resized from one to the other within
# a test where the scenario is the same at both (a page per width cost a page load, a
# server and the scenario's run again: about 6 s a test)
DESKTOP, PHONE = (1440, 900), (390, 844)


def resize(pg, size) -> None:
    """The page at ``size`` (width, height), once the page has laid itself out anew."""
    pg.set_viewport_size({"width": size[0], "height": size[1]})
    until(pg, "s => window.innerWidth === s[0] && window.innerHeight === s[1]", arg=list(size))
    pg.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def fill(pg, elem_id: str, value: str) -> None:
    """Type ``value`` into a field and check that it holds. A field just drawn (the Options
    opened a moment before) can take the typing before its handlers are attached, and then
    shows its default again as it loses the focus: about 1 fill in 6 at the start of a
    page (seen as a run with the default rounds). The typing is then repeated."""
    pg.wait_for_selector("#start:not([disabled])")
    box = pg.locator(f"#{elem_id} input, #{elem_id} textarea").first
    times = 1
    if not box.is_visible():  # an optional setting: the Options accordion opens first
        open_options(pg)
        # a field just drawn holds the typing twice in a row: typing that the field shows
        # may still not have reached the page's own value when it came before the field's
        # handlers (seen under load as a run with the default rounds although the box
        # showed the typed number)
        times = 2
    held = 0
    for _ in range(10):
        box.fill(value)
        box.press("Tab")
        # the page's own tasks run before the value is read: a field whose handlers missed
        # the typing draws its default again in them (a read straight after the Tab can
        # still see the typing)
        pg.evaluate("() => new Promise(r => setTimeout(() => setTimeout(r, 0), 0))")
        held = held + 1 if box.input_value() == value else 0
        if held == times:
            return
    raise AssertionError(f"#{elem_id} does not keep {value!r}: it shows {box.input_value()!r}")


def open_options(pg) -> None:
    """Open the Options accordion (folded on the first screen) unless it is open."""
    if not pg.locator("#rounds input").first.is_visible():
        pg.locator("#options").get_by_text("Options", exact=True).first.click()
    pg.locator("#rounds input").first.wait_for(state="visible")


def images_loaded(pg, n: int) -> None:
    """Wait until the gallery shows at least ``n`` images, all of them decoded. Gradio's
    gallery loads its images lazily: one out of sight (below a phone's screen) is never
    loaded, so the gallery is brought into sight first, as the person looking at it does."""
    pg.locator("#gallery").first.scroll_into_view_if_needed()
    until(
        pg,
        """n => {
            const imgs = [...document.querySelectorAll('#gallery img')];
            return imgs.length >= n && imgs.every(i => i.complete && i.naturalWidth > 0);
        }""",
        arg=n,
    )


def stage(pg) -> str:
    return pg.locator("#stage textarea").input_value()


def wait_finished(pg, seconds: float = 120) -> float:
    """Wait until the stage reads "finished"; returns the deadline for later waits."""
    deadline = time.monotonic() + seconds
    while stage(pg) != "finished":
        assert time.monotonic() < deadline, f"the run did not finish (stage {stage(pg)!r})"
        time.sleep(0.1)
    return deadline


def has_colour(png: bytes, colour, tolerance: int = 12) -> bool:
    """Whether some pixel of ``png`` is within ``tolerance`` of ``colour`` in each channel.
    In numpy: the pixels one by one in Python took 1.5 s of CPU for a page that lacks it."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        pixels = np.asarray(im.convert("RGB"), dtype=np.int16)
    near = np.abs(pixels - np.asarray(colour, dtype=np.int16)) <= tolerance
    return bool(near.all(axis=-1).any())


# the module's longest test comes first: the module is the run's last stretch, and the
# workers end together only when what is left at the end is short
def test_the_file_route_serves_nothing_under_out(app, tmp_path):
    """Asked with no cookie, as anyone can: no file under --out is served, by any spelling
    of its path: neither the private files (the raters' profiles and answers, the ledger,
    a run's owner, a visitor's references) nor a run's record or images, which pages get
    as copies in Gradio's cache (ui/private.py). A copy there is served."""
    import httpx
    from gradio import processing_utils

    from tests.fakes.gemini_world import png_bytes

    url, _, demo = app
    png = png_bytes(RED, (8, 8))
    files = [
        tmp_path / "runs" / "r1" / "round0.png",
        tmp_path / "runs" / "r1" / "run.json",
        tmp_path / "set" / ".attention" / "quick.png",
        tmp_path / ".usage.jsonl",
        tmp_path / ".app-secret",
        tmp_path / "runs" / "r1" / ".owner",
        tmp_path / "set" / ".profiles.json",
        tmp_path / "set" / ".raters.json",
        tmp_path / "set" / "ratings.jsonl",
        tmp_path / "references" / "visitors" / "ab12" / "refs.json",
        # a folder an operator named with %: decoded twice, its name looked like a path
        # out of --out, which the route then served
        tmp_path / "runs" / "x%2F..%2F..%2F..%2Fy" / "run.json",
    ]
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png if path.suffix == ".png" else b'{"secret": 1}')
    with httpx.Client(base_url=url, timeout=30) as client:
        spellings = [
            "/gradio_api/file={}",
            "/file={}",
            "/gradio_api/file/{}",
            "/gradio_api/file={}".replace("=", "%3D"),
        ]
        for path in files:
            odd = str(path.parent / "." / ".." / path.parent.name / path.name)
            percent = "/gradio_api/file=" + str(path).replace("%", "%25")  # decoded once: path
            asked_all = [*(s.format(path) for s in spellings), f"/gradio_api/file={odd}", percent]
            for asked in asked_all:
                got = client.get(asked)
                assert got.status_code in (403, 404), asked
                assert b"secret" not in got.content and png not in got.content, asked
        # what a page is given is copied into the app's cache (Gradio's, in the tests'
        # temporary folder), and served from there
        copy = Path(processing_utils.save_file_to_cache(files[0], demo.GRADIO_CACHE))
        try:
            got = client.get(f"/gradio_api/file={copy}")
            assert got.status_code == 200 and got.content == png
        finally:
            copy.unlink()
            with contextlib.suppress(OSError):
                copy.parent.rmdir()


def test_every_bundled_protocol_is_drawn_and_rated(page, app):
    """Each bundled protocol's image rated after the rater's profile and consent. The
    protocols whose forms change as they are answered are drawn in the page:
    CulturalFrames' follow-ups appear only below 1 and its marked words and explanation
    are required; CUBE's justification for "no" is required and its faithfulness hidden
    then; AHEaD's repeated item comes again. Each is drawn at a phone's width too, where
    every question fits the page's width, and at a desktop's, where it is rated (one page
    for both: a page per width cost 35 s). The forms of fixed questions (quick, CAIRE's,
    SoS', and a set's own with an attention check, which flags a rater who fails it) are
    rated through the app's API, which the page calls (drawing them in the page cost 12 s,
    the attention check's about 2 s more, and showed nothing more)."""
    import ast
    import json

    from gradio_client.exceptions import AppError

    from refine.human.study import Study
    from tests.ui.clients import app_client, rate_begin, rate_profile, rate_save

    pg, service = page
    study_sets(service.out)
    api = app_client(app[0])

    def rated_through_the_api(name: str, answers: dict, offered: int | None = None) -> list:
        folder = str(service.out / f"study-{name}")
        rate_begin(api, folder, "Rhea", name)
        shown = rate_profile(api, folder, "Rhea")
        assert "0 of 1 rated by Rhea" in shown[0]
        if offered is not None:  # the choices the form offers, as the app names them
            with pytest.raises(AppError, match="is not in the list of choices") as err:
                rate_save(api, folder, "Rhea", shown, {0: "Martian"})
            choices = ast.literal_eval(str(err.value).split("list of choices: ")[1])
            assert len(choices) == offered and {"Iranian", "French"} <= set(choices)
        return rate_save(api, folder, "Rhea", shown, answers)

    done = "All 1 images rated"
    assert done in rated_through_the_api("quick", {0: "4", 2: "5"})[0]
    assert done in rated_through_the_api("caire", {0: "3"})[0]
    assert done in rated_through_the_api("sos", {0: "Iranian"}, offered=5)[0]

    def begin(name: str, protocol: str | None, kind: str = "bench") -> None:
        rate_begin_in_page(pg, f"{kind}: study-{name}", "Rhea", protocol)
        give_profile_in_page(pg)
        until(pg, "() => document.querySelector('#rate-status').innerText.includes('0 of 1')")
        until(pg, "() => document.querySelector('#rate-image img') !== null")
        questions_fit(pg, PHONE)
        questions_fit(pg, DESKTOP)

    begin("ahead", "ahead")
    assert (
        "How well does this image show drinking tea in your country?"
        in pg.locator("#rate-q0-text").inner_text()
    )
    for slot in range(4):
        choose(pg, slot, "3")
    refused(pg, "answer: Describe the errors in the image")
    write(pg, 4, "the tea glasses look Turkish")
    saved_then(pg, "this image comes again")  # AHEaD's repeated item, for consistency
    for slot in range(4):
        choose(pg, slot, "4")
    write(pg, 4, "still Turkish glasses")
    saved_then(pg, done)

    begin("culturalframes", "culturalframes")
    assert not shown(pg, "rate-q1") and not shown(pg, "rate-q3")
    choose(pg, 0, "0.5")
    until_shown(pg, "rate-q1")
    assert shown(pg, "rate-q2") and shown(pg, "rate-q3")
    questions_fit(pg, PHONE)  # the follow-ups too
    questions_fit(pg, DESKTOP)
    tick(pg, 1, "Explicit elements")
    choose(pg, 4, "No")
    choose(pg, 5, "1")
    choose(pg, 6, "4")
    refused(pg, "answer: Select words from the prompt")
    tick(pg, 2, "tea")
    refused(pg, "answer: Please explain what aspects")
    write(pg, 3, "no samovar, and the glasses are wrong")
    choose(pg, 0, "1")  # a full match after all: the follow-ups go
    until_shown(pg, "rate-q1", False)
    choose(pg, 0, "0.5")
    until_shown(pg, "rate-q1")
    saved_then(pg, done)

    begin("cube", "cube")
    choose(pg, 0, "No:", exact=False)
    until_shown(pg, "rate-q0-reason")
    questions_fit(pg, PHONE)  # the justification too
    questions_fit(pg, DESKTOP)
    assert "(required)" in pg.locator("#rate-q0-reason").first.inner_text()
    # faithfulness and realism only when the image is relevant (yes or maybe)
    assert not shown(pg, "rate-q1") and not shown(pg, "rate-q2")
    refused(pg, "a justification is required")
    write(pg, 0, "a Turkish lamp, not ours", box="reason")
    saved_then(pg, done)

    # the protocol of the set's own, through the API: a failed attention check flags the
    # rater (the form's questions are fixed)
    check = str(service.out / "study-check")
    rate_begin(api, check, "Rhea")
    form = rate_save(api, check, "Rhea", rate_profile(api, check, "Rhea"), {0: "5"})
    assert "attention check" in form[0]
    assert done in rate_save(api, check, "Rhea", form, {0: "5"})[0]  # the check asks for 1
    assert Study.open(service.out / "study-check").flags()["Rhea"]["flagged"] is True

    for name in ("quick", "ahead", "culturalframes", "cube", "caire", "sos"):
        rows = [
            json.loads(x)
            for x in (service.out / f"study-{name}" / "ratings.jsonl").read_text().splitlines()
        ]
        assert rows[0]["protocol"] == name and rows[0]["rater"] == "Rhea"
        assert [r["kind"] for r in rows] == (["rate", "repeat"] if name == "ahead" else ["rate"])
    cf = json.loads((service.out / "study-culturalframes/ratings.jsonl").read_text())
    assert cf["answers"]["missing"] == ["explicit"] and cf["answers"]["missing_words"] == ["tea"]
    cube = json.loads((service.out / "study-cube/ratings.jsonl").read_text())
    assert cube["answers"] == {"relevance": "no"}
    assert cube["reasons"] == {"relevance": "a Turkish lamp, not ours"}


class EditsLetThrough:
    """The world's edit gate: each edit waits until the test has let one more through (at
    most ``timeout`` seconds), so that a round stays on the page until it has been seen,
    however loaded the machine."""

    def __init__(self) -> None:
        self.cond, self.allowed, self.passed = threading.Condition(), 0, 0

    def allow(self, n: int) -> None:
        with self.cond:
            self.allowed += n
            self.cond.notify_all()

    def wait(self, timeout: float | None = None) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.passed < self.allowed, timeout)
            self.passed += 1


def test_rounds_appear_one_by_one(page, world, tmp_path):
    """Each round shows as it lands: the gallery, the chart, the table, the checklist and
    the timeline (legible on a phone); the progress bar advances through the run to 100 %
    and says it finished (the one run: a run of its own for the bar cost a page load and a
    run, about 4 CPU-s)."""
    pg, _ = page
    assert "test profile: the fake Gemini world" in pg.content()
    gate = world.edit_gate = EditsLetThrough()
    fill(pg, "rounds", "2")
    fill(pg, "target", "1")
    fill(pg, "max-drift", "2")
    fill(pg, "candidates", "2")
    # every value the bar takes, noted by the page itself as it is drawn (a look from here
    # every 50 ms missed the values between 0, 50 and 100 beside two busy cores)
    pg.evaluate(
        """() => {
            window.progressSeen = [];
            const note = () => {
                const bar = document.querySelector('#progress-bar [role=progressbar]');
                const value = bar && bar.getAttribute('aria-valuenow');
                const seen = window.progressSeen;
                if (value !== null && value !== undefined && seen[seen.length - 1] !== +value)
                    seen.push(+value);
            };
            new MutationObserver(note).observe(document.body, {
                subtree: true, childList: true, attributes: true,
                attributeFilter: ['aria-valuenow'],
            });
            note();
        }"""
    )
    pg.click("#start")
    # round 0 shows alone, then round 1 (its two edits let through once 0 was seen), then 2
    for shown in (1, 2):
        until(pg, "n => document.querySelectorAll('#gallery img').length === n", arg=shown,
              timeout=120_000)  # fmt: skip
        gate.allow(2)
    deadline = time.monotonic() + 120
    while stage(pg) != "finished":
        assert time.monotonic() < deadline, f"the run did not finish (stage {stage(pg)!r})"
        time.sleep(0.1)
    assert pg.locator("#gallery img").count() >= 3
    until(
        pg,
        "() => document.querySelector('#progress-bar [role=progressbar]')"
        ".getAttribute('aria-valuenow') === '100'",
    )
    seen = pg.evaluate("() => window.progressSeen")
    assert seen == sorted(seen) and len([v for v in seen if 0 < v < 100]) >= 3, seen
    text = pg.locator("#progress-bar").inner_text()
    assert text.startswith("100% \u00b7 finished: ") and " elapsed" in text
    images_loaded(pg, 3)
    # the metric chart draws its lines (FAITH blue, ALIGN green) as the rounds come in
    chart = pg.locator("#plot .chart-wide .series")
    assert chart.count() >= 4
    plot = pg.locator("#plot").screenshot(path=str(tmp_path / "plot.png"))
    assert has_colour(plot, (0x00, 0x72, 0xB2), 20) and has_colour(plot, (0x00, 0x9E, 0x73), 20)
    shot = pg.locator("#gallery").screenshot(path=str(tmp_path / "gallery.png"))
    assert has_colour(shot, RED) and has_colour(shot, GREEN)  # round 0 red, round 1 green
    table = pg.locator("#table").inner_text()
    assert "accepted" in table and "rejected" in table and "initial" in table
    # what to fix in sight; what the image gets right folded under it
    checklist = pg.locator("#checklist").inner_text()
    assert "Sitting on floor around sofreh" in checklist and "MISSING" in checklist.upper()
    assert "ALIGNED" not in checklist.upper()
    assert not any(
        line.strip().startswith("Persian rug on floor") for line in checklist.split("\n")
    )
    pg.locator("#checked-box").get_by_text("What the image already shows").first.click()
    pg.locator("#checked").wait_for(state="visible")
    checked = pg.locator("#checked").inner_text()
    assert "Persian rug on floor" in checked  # round 2's (green) aligned descriptor
    assert "MISSING" not in checked.upper() and "Sitting on floor around sofreh" not in checked
    # the timeline: the rug missing in round 0, made in round 1, kept in round 2 (rejected)
    rug = pg.locator('#timeline tr[data-item="Persian rug on floor"] td')
    assert [rug.nth(k).get_attribute("data-state") for k in range(3)] == [
        "missing", "became aligned", "stayed aligned"
    ]  # fmt: skip
    heads = pg.locator("#timeline thead th[data-round]")
    assert [heads.nth(k).get_attribute("data-decision") for k in range(3)] == [
        "initial", "accepted", "rejected"
    ]  # fmt: skip
    assert "0 of" in pg.locator("#timeline .forgetting").inner_text()
    # legible on a phone: the table fits its column, its words at least 12 px
    resize(pg, PHONE)
    grid = pg.locator("#timeline .timeline-grid")
    grid.scroll_into_view_if_needed()
    fits = "t => t.getBoundingClientRect().right <= window.innerWidth + 1"
    assert grid.evaluate(fits), "the timeline overflows a phone's width"
    size = rug.first.evaluate("c => parseFloat(getComputedStyle(c).fontSize)")
    assert size >= 12 and rug.nth(1).bounding_box()["width"] >= 14
    resize(pg, DESKTOP)


def test_pause_rewrite_instruction_and_stop(page, app, tmp_path):
    pg, service = page
    fill(pg, "rounds", "3")
    fill(pg, "target", "1")
    fill(pg, "max-drift", "2")
    open_options(pg)
    pg.locator("#pause input").check()
    in_flight = calls_in_flight(pg, app[2]).__enter__()  # the run's own call included
    pg.click("#start")
    box = pg.locator("#instruction textarea")
    deadline = time.monotonic() + 120
    wait_for_review(pg)
    assert "review the instruction" in stage(pg)
    images_loaded(pg, 1)
    shot = pg.screenshot(path=str(tmp_path / "review.png"))
    assert has_colour(shot, RED) and not has_colour(shot, GREEN)  # round 0 only, so far
    box.fill("Put a sofreh on the floor.")
    pg.click("#apply")
    until(
        pg,
        "() => document.querySelector('#notice textarea').value.startsWith('instruction applied')",
    )
    while service.job.waiting is None or service.job.waiting[0] != 2:
        assert time.monotonic() < deadline, "round 2 never came up for review"
        time.sleep(0.1)
    # Apply's answer was about round 1's review: round 2's empties it
    wait_value(pg, "stage", "v.startsWith('round 2: review')", "round 2's review")
    wait_value(pg, "notice", "v === ''", "Apply's answer emptied by the next review")
    pg.click("#stop")
    clicked = time.monotonic()
    notice = pg.locator("#notice textarea")
    while stage(pg) != "finished":
        assert time.monotonic() < deadline, (
            f"the run did not stop {time.monotonic() - clicked:.1f} s after the click (stage "
            f"{stage(pg)!r}, message {notice.input_value()!r}, busy {service.busy}, "
            f"waiting {service.job.waiting})"
        )
        time.sleep(0.1)
    # once every call has been answered, the answer to Stop is still there (the Start
    # click's emptying of the message once ran only when the run's call had ended)
    in_flight.wait_settled()
    in_flight.__exit__()
    assert notice.input_value().startswith("stopping now"), notice.input_value()
    assert box.input_value() == "round 1 (person):\nPut a sofreh on the floor."
    run = service.open(pg.locator("#run-dir textarea").input_value())
    assert run.stop_reason == "stopped by the user" and len(run.rounds) == 2


def slider_halves(pg) -> dict:
    """The slider's box and its two images' boxes (before, after), once both are drawn."""
    until(
        pg,
        "() => [...document.querySelectorAll('#slider img')]"
        ".filter(i => i.complete && i.naturalWidth > 0).length >= 2",
    )
    return pg.evaluate(
        """() => {
            const box = r => ({top: r.top, bottom: r.bottom, left: r.left, right: r.right});
            const imgs = [...document.querySelectorAll('#slider img')];
            return {
                slider: box(document.getElementById('slider').getBoundingClientRect()),
                images: imgs.map(i => box(i.getBoundingClientRect())),
                fits: imgs.map(i => getComputedStyle(i).objectFit),
            };
        }"""
    )


def in_sight(pg, elem_id: str, what: str) -> None:
    """Wait (briefly: the page scrolls at the click) until ``#elem_id`` is wholly in the
    viewport, or fail saying after ``what``."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        until(
            pg,
            """id => {
                const r = document.getElementById(id).getBoundingClientRect();
                return r.top >= -1 && r.bottom <= window.innerHeight + 1;
            }""",
            arg=elem_id,
            timeout=10_000,
        )
    except PlaywrightTimeout:
        raise AssertionError(
            f"after {what}, #{elem_id} is out of sight: {box_in_view(pg, elem_id)}"
        ) from None


def test_show_a_round_and_roll_back_to_it(page, tmp_path):
    """Show, decide by hand, roll back and open: each brings the run's stage and image into
    sight (on a phone they sit thousands of pixels above those controls); the slider fits
    both halves whole in its box, level with each other; and the small things read whole
    (see small_things_read_whole, rating_scales_on_one_line). The finished run is looked
    at on a desktop and on a phone; Show is pressed on a desktop, the rest on a phone."""
    pg, service = page
    resize(pg, DESKTOP)
    fill(pg, "rounds", "1")
    fill(pg, "target", "1")
    fill(pg, "max-drift", "2")
    pg.click("#start")
    deadline = wait_finished(pg)
    first_dir = pg.locator("#run-dir textarea").input_value()
    for size in (PHONE, DESKTOP):
        resize(pg, size)
        # the slider: both halves inside its box (the 4:3 pictures fitted whole), level
        halves = slider_halves(pg)
        box, (before, after) = halves["slider"], halves["images"]
        for half in (before, after):
            assert box["top"] - 1 <= half["top"] and half["bottom"] <= box["bottom"] + 1, halves
            assert box["left"] - 1 <= half["left"] and half["right"] <= box["right"] + 1, halves
        assert abs(before["top"] - after["top"]) <= 1, halves
        assert abs(before["bottom"] - after["bottom"]) <= 1, halves
        assert halves["fits"] == ["contain", "contain"], halves
        pg.locator("#slider").screenshot(path=str(tmp_path / f"slider-{size[0]}.png"))
        small_things_read_whole(pg, size, tmp_path)
    # a click on round 1's image in the gallery shows it and picks it for steering
    images_loaded(pg, 2)
    # the images come from Gradio's cache of what the page was given, never from --out
    # (ui/private.py), and the run is named by its folder, not the server's path
    sources = pg.eval_on_selector_all("#gallery img", "imgs => imgs.map(i => i.src)")
    assert sources and not any(str(service.out.resolve()) in unquote(s) for s in sources)
    assert first_dir and not Path(first_dir).is_absolute() and (service.out / first_dir).is_dir()
    pg.locator("#gallery img").nth(1).click()
    until(pg, "() => document.querySelector('#stage textarea').value.startsWith('round 1: ')")
    assert pg.locator("#round input").first.input_value() == "1"
    # round 1 rejected by hand, on a phone: its reason, and the image, in sight
    resize(pg, PHONE)
    pg.click("#reject")
    wait_value(pg, "stage", "v.startsWith('round 1: ') && v.includes('by hand')", "a reject")
    in_sight(pg, "slider", "Reject round by hand")
    # round 0 shown on a desktop; rolled back and opened on a phone
    resize(pg, DESKTOP)
    fill(pg, "round", "0")
    pg.click("#show")
    until(pg, "() => document.querySelector('#stage textarea').value === 'round 0: initial'")
    in_sight(pg, "slider", "Show round")
    assert "hamburgers" in pg.locator("#checklist").inner_text()  # round 0's checklist
    resize(pg, PHONE)
    pg.click("#branch")
    in_sight(pg, "slider", "Roll back")
    while (
        pg.locator("#run-dir textarea").input_value() in ("", first_dir) or stage(pg) != "finished"
    ):
        assert time.monotonic() < deadline, "the rolled-back run did not finish"
        time.sleep(0.1)
    branch_dir = pg.locator("#run-dir textarea").input_value()
    branch = service.open(branch_dir)
    assert branch.branched_from["round"] == 0 and len(branch.rounds) == 2
    images_loaded(pg, 2)
    shot = pg.locator("#gallery").screenshot(path=str(tmp_path / "branch.png"))
    assert has_colour(shot, RED) and has_colour(shot, GREEN)
    # the new run names its parent, and the parent, opened again, names it
    parent, child = Path(first_dir).name, Path(branch_dir).name
    so_far = pg.locator("#progress textarea").input_value()
    said = "1 further round(s), with the run's own settings"
    assert so_far.startswith(f"a new run from round 0 of {parent}: {said} · "), so_far
    pg.locator("#saved-runs").get_by_text("Open a saved run").first.click()
    label = next(label for label, run in service.saved() if run == parent)
    pick(pg, "saved", f"{label} - yours")  # the list marks the visitor's own runs
    pg.click("#open")
    until(
        pg,
        "c => document.querySelector('#progress textarea').value.includes(c)",
        arg=f"continued from round 0 in {child}",
    )
    in_sight(pg, "slider", "Open")
    rating_scales_on_one_line(pg)  # at a phone's width they wrapped


def test_other_prompt_languages_and_caire_show_per_round(page, world, tmp_path):
    from tests.fakes.gemini_world import BLUE, build_activity_bank

    pg, service = page
    build_activity_bank(world, service.refiner().backends, tmp_path / "bank")
    fill(pg, "rounds", "1")
    fill(pg, "target", "1")
    fill(pg, "max-drift", "2")
    fill(pg, "prompt-languages", "fr")
    fill(pg, "sos-bank", str(tmp_path / "bank"))
    fill(pg, "caire-labels", "Turkey")
    pg.click("#start")
    wait_finished(pg)
    until(
        pg,
        """() => {
            const imgs = [...document.querySelectorAll('#languages img')];
            return imgs.length >= 1 && imgs.every(i => i.complete && i.naturalWidth > 0);
        }""",
    )
    run = service.open(pg.locator("#run-dir textarea").input_value())
    fr = run.rounds[1].languages["fr"].sos
    assert f"round 1, fr: SoS {fr:+.3f}" in pg.locator("#languages").inner_text()
    shot = pg.locator("#languages").screenshot(path=str(tmp_path / "languages.png"))
    assert has_colour(shot, BLUE) and not has_colour(shot, RED)  # the French image stayed blue
    table = pg.locator("#table").inner_text()
    assert "reads more as Turkey (4/5) than Iran (2/5)" in table
    assert f"fr {fr:+.3f}" in table
    pg.screenshot(path=str(tmp_path / "app.png"), full_page=True)


def test_a_wrong_steering_click_is_a_toast_and_the_view_stays(page, world, tmp_path):
    """Rejecting a round that is not the last shows the reason as a toast; the gallery and
    the table stay as they were. At phone width the first screen holds Start."""
    pg, service = page
    fill(pg, "rounds", "1")
    fill(pg, "target", "1")
    fill(pg, "max-drift", "2")
    pg.click("#start")
    wait_finished(pg)
    images_loaded(pg, 2)
    table = pg.locator("#table").inner_text()
    fill(pg, "round", "0")
    pg.click("#reject")
    toast = pg.get_by_text("only the last editing round can be decided by hand")
    toast.first.wait_for(timeout=20_000)
    images_loaded(pg, 2)  # the gallery is still there
    # the rows are unchanged (Gradio marks the refused event's outputs, the values stay)
    assert pg.locator("#table").inner_text().removeprefix("Error\n\n") == table
    assert stage(pg) == "finished"
    shot = pg.locator("#gallery").screenshot(path=str(tmp_path / "after-toast.png"))
    assert has_colour(shot, RED) and has_colour(shot, GREEN)
    pg.set_viewport_size({"width": 390, "height": 844})
    start = pg.locator("#start").bounding_box()
    assert start is not None and start["y"] + start["height"] <= 844


def test_first_screen_country_activities_and_examples(page, app, tmp_path):
    """The first screen holds activity, country and Start, on a desktop and on a phone; a
    country lists only its own activities; an example fills the form (on a phone)."""
    pg, _ = page
    # whether the profile's models answer is said as the page opens, above the form
    until(pg, "() => document.querySelector('#ready').innerText.includes('models answer')")
    for size in (DESKTOP, PHONE):
        resize(pg, size)
        for elem in ("#ready", "#activity", "#country", "#start", "#progress-bar"):
            box = pg.locator(elem).bounding_box()
            assert box is not None and box["y"] + box["height"] <= size[1], (elem, size)
        assert not pg.locator("#rounds input").first.is_visible()  # folded into Options
        pg.screenshot(path=str(tmp_path / f"first-{size[0]}.png"))
    # a visitor's first click: an example fills activity and country, and they stay once
    # every handler has run (the country's change does not reset the example's activity)
    for act, ctry in (
        ("wedding celebration", "India"),
        ("people participating in New Yam Festival", "Nigeria"),
    ):
        with calls_in_flight(pg, app[2]) as in_flight:
            pg.locator("#examples").get_by_text(act).first.click()
            until(pg, "a => document.querySelector('#refs-note').innerText.includes(a)", arg=act)
            in_flight.wait_settled()
        assert pg.locator("#activity input").first.input_value() == act
        assert pg.locator("#country input").first.input_value() == ctry
        assert "CULTIVate" in pg.locator("#refs-note").inner_text()
    # India's activities only, once India is picked
    from ui.app import ready_activities

    india = ready_activities("India")
    assert "people dancing Garba" in india and "people participating in Nowruz" not in india
    pick(pg, "country", "India")
    deadline = time.monotonic() + 20
    while (options := dropdown_options(pg, "activity")) != india:
        assert time.monotonic() < deadline, f"the activities did not follow: {options[:5]}"
        time.sleep(0.2)


def server_idle(demo) -> bool:
    """Whether the app's server (in this process) holds no event of any visitor that is
    waiting, running or not yet answered: Gradio's queue keeps an event's id for its
    visitor until a stream of answers has sent its end."""
    try:
        return not any(demo._queue.pending_event_ids_session.values())
    except RuntimeError:  # changed by the server's loop while read: look again
        return False


class calls_in_flight:  # noqa: N801 (a context manager read as a phrase)
    """The page's calls to ``demo``'s handlers made while in the block: ``wait_settled``
    waits until none is in flight and none has started over a further look (a chained
    handler's call is sent as the first one's answer is read). File downloads and the
    page's heartbeat are not handlers' calls; a call made before the block is not
    followed."""

    def __init__(self, pg, demo) -> None:
        self.pg, self.demo, self.open, self.started = pg, demo, set(), 0

    def _start(self, request) -> None:
        url = request.url
        if "/gradio_api/" in url and "/file=" not in url and "heartbeat" not in url:
            self.open.add(request)
            self.started += 1

    def _end(self, request) -> None:
        self.open.discard(request)

    def __enter__(self):
        self.pg.on("request", self._start)
        self.pg.on("requestfinished", self._end)
        self.pg.on("requestfailed", self._end)
        return self

    def __exit__(self, *exc) -> None:
        self.pg.remove_listener("request", self._start)
        self.pg.remove_listener("requestfinished", self._end)
        self.pg.remove_listener("requestfailed", self._end)

    def wait_settled(self, seconds: float = 30) -> None:
        """Until no call is in flight and none started over a further look. Streams of
        answers (``queue/data``) left alone in flight count as settled once the server
        holds no event unanswered (:func:`server_idle`). Gradio serves all of a page's
        streams from one queue of answers (``queue_data_helper`` in gradio/routes.py): a
        stream opened while another is still reading can lose the answer that would
        close it to the other, and then stays open with nothing left to answer (seen in
        fresh clones' suites, 30 s open after every handler had answered; waiting 10 s
        for such a stream cost one run 20 s)."""
        deadline, seen = time.monotonic() + seconds, -1
        while True:
            self.pg.wait_for_timeout(50)  # lets Playwright deliver the page's events
            streams_only = all("/queue/data" in r.url for r in self.open)
            stale = bool(self.open) and streams_only and server_idle(self.demo)
            if (not self.open or stale) and self.started == seen:
                # and the page has drawn what the last answer changed
                self.pg.evaluate("() => new Promise(r => requestAnimationFrame(r))")
                return
            seen = self.started if (not self.open or stale) else -1
            assert time.monotonic() < deadline, f"handlers' calls still in flight: {self.open}"


def pick(pg, elem_id: str, value: str) -> None:
    box = pg.locator(f"#{elem_id} input").first
    box.click()
    box.fill(value)
    pg.locator(f"li[role=option][aria-label='{value}']").first.click()


def dropdown_options(pg, elem_id: str) -> list[str]:
    """The choices a dropdown offers (opened, its filter cleared)."""
    box = pg.locator(f"#{elem_id} input").first
    box.click()
    box.fill("")
    items = pg.locator(f"#{elem_id} li[role=option]")
    items.first.wait_for()
    names = [items.nth(i).get_attribute("aria-label") for i in range(items.count())]
    box.press("Escape")
    return names


def test_build_references_review_them_in_a_table_then_run(page, world):
    """References built in the browser are reviewed as a table (dimension, phrase): a row
    added (on a desktop), a row clicked and removed (on a phone), saved; the run uses
    them."""
    pg, service = page
    resize(pg, DESKTOP)
    act = "people celebrating Nowruz at home"
    box = pg.locator("#activity input").first
    box.click()
    box.fill(act)
    box.press("Enter")
    pg.locator("#build-refs").wait_for(state="visible")
    assert "no references yet" in pg.locator("#refs-note").inner_text()
    pg.click("#build-refs")
    pg.locator("#refs-review").wait_for(state="visible")
    until(pg, "() => document.querySelector('#refs-note').innerText.includes('references built')")
    table = pg.locator("#refs-review")
    assert "Sabzeh sprouts" in table.inner_text() and "stereotype" in table.inner_text()
    pg.locator("#refs-phrase textarea, #refs-phrase input").first.fill("Samanu pudding")
    pg.click("#refs-add")
    until(pg, "() => document.querySelector('#refs-review').innerText.includes('Samanu pudding')")
    resize(pg, PHONE)
    table.get_by_text("Painted eggs", exact=True).first.click()
    pg.keyboard.press("Escape")  # a click opens the cell for editing: leave it as it is
    # the button names the clicked row once the click has reached the server (clicking
    # Remove before that, on a busy machine, found no row picked)
    until(pg, "() => document.querySelector('#refs-remove').innerText.includes('Painted eggs')")
    pg.click("#refs-remove")
    until(pg, "() => !document.querySelector('#refs-review').innerText.includes('Painted eggs')")
    assert pg.locator("#refs-remove").inner_text().strip() == "Remove the clicked row"
    pg.click("#save-refs")
    until(pg, "() => document.querySelector('#refs-note').innerText.includes('references saved')")
    fill(pg, "rounds", "0")
    pg.click("#start")
    wait_finished(pg)
    run = service.open(pg.locator("#run-dir textarea").input_value())
    objects = run.references.descriptors["objects"]
    assert run.references.activity == act and "Goldfish bowl" in objects
    assert "Samanu pudding" in objects and "Painted eggs" not in objects
    assert run.references.source.startswith("reviewed in the app (")


def toast_text(pg, words: str) -> str:
    toast = pg.get_by_text(words)
    toast.first.wait_for(timeout=20_000)
    return toast.first.inner_text()


def test_an_uploaded_image_is_previewed_and_refined(page, tmp_path):
    """An image is previewed, and it is the image the run refines. What a refused upload
    shows (not an image, too large) is test_start_refuses_an_unreadable_upload_and_runs_nothing's;
    too many pixels is refused by the same check (settings.check_image), whose message
    test_settings' decompression bomb test reads."""
    from PIL import Image

    pg, service = page
    open_options(pg)
    chooser = pg.locator("#upload input[type=file]")
    good = tmp_path / "mine.png"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(good)
    chooser.set_input_files(str(good))
    # the preview's image loads lazily: brought into sight, as the person looking does
    preview = pg.locator("#upload-preview").first
    preview.wait_for()
    preview.scroll_into_view_if_needed()
    pg.locator("#upload-preview img").first.wait_for()
    until(
        pg,  # decoded, not only in the page
        """() => [...document.querySelectorAll('#upload-preview img')]
                   .some(i => i.complete && i.naturalWidth > 0)""",
    )
    # decoded is not yet painted (seen once): wait until the preview shows the image
    shown = time.monotonic() + 30
    while not has_colour(pg.locator("#upload-preview").screenshot(), (200, 30, 30)):
        assert time.monotonic() < shown, "the preview never showed the uploaded image"
        time.sleep(0.1)
    # and it is the image the run refines
    fill(pg, "rounds", "0")
    pg.click("#start")
    wait_finished(pg)
    run = service.open(pg.locator("#run-dir textarea").input_value())
    assert run.rounds[0].text == "input image mine.png"
    # the Options left as they were: fix keeping and memory off (an empty box, no tick)
    assert run.spec.keep_fixes is None and not run.spec.memory


def test_rate_three_images_by_keyboard_reload_and_go_on(page, tmp_path):
    """The Rate view: four images in a folder inside --out, rated by keyboard (1-5 for
    alignment, q-t for faithfulness, Enter to save); after a reload the same rater goes on
    with the fourth; ratings.jsonl holds every answer with the image's hash."""
    import json

    from PIL import Image

    from refine.io.files import file_sha256

    pg, service = page
    folder = tmp_path / "to-rate"
    folder.mkdir()
    colours = [(200, 30, 30), (30, 160, 60), (40, 40, 200), (128, 128, 128)]
    for k, colour in enumerate(colours):
        Image.new("RGB", (64, 48), colour).save(folder / f"im{k}.png")
    (folder / "prompts.json").write_text(
        json.dumps({f"im{k}.png": f"prompt {k}" for k in range(4)})
    )

    def begin():
        rate_begin_in_page(pg, "images: to-rate", "Ana")

    def rate(align_key: str, faith_key: str, before: str) -> None:
        until(pg, "t => document.querySelector('#rate-status').innerText.includes(t)", arg=before)
        until(pg, "() => document.querySelector('#rate-image img') !== null")
        pg.locator("#rate-prompt").click()  # focus off the text boxes
        pg.keyboard.press(align_key)
        pg.keyboard.press(faith_key)
        pg.keyboard.press("Enter")

    begin()
    give_profile_in_page(pg)  # once per set, before the first image
    rate("4", "w", "0 of 4 rated by Ana")
    rate("2", "t", "1 of 4 rated by Ana")
    rate("5", "q", "2 of 4 rated by Ana")
    until(pg, "() => document.querySelector('#rate-status').innerText.includes('3 of 4 rated')")
    rows = [json.loads(x) for x in (folder / "ratings.jsonl").read_text().splitlines()]
    got = [(r["answers"]["alignment"], r["answers"]["faithfulness"]) for r in rows]
    assert got == [("4", "2"), ("2", "5"), ("5", "1")]
    pg.reload()
    pg.wait_for_selector("#start")
    begin()
    rate("3", "e", "3 of 4 rated by Ana")
    until(
        pg, "() => document.querySelector('#rate-status').innerText.includes('All 4 images rated')"
    )
    rows = [json.loads(x) for x in (folder / "ratings.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["image"] for r in rows} == {f"im{k}.png" for k in range(4)}
    assert rows[-1]["answers"] == {"alignment": "3", "faithfulness": "3"}
    for r in rows:
        assert r["rater"] == "Ana" and r["image_sha256"] == file_sha256(folder / r["image"])
        assert r["prompt"] == f"prompt {r['image'][2]}" and r["time"]
    # the order is the rater's own, the same after the reload
    from refine.human.rating import RatingSet

    order = [it.image for it in RatingSet.open(folder).order("Ana")]
    assert [r["image"] for r in rows] == order


def test_a_reload_keeps_the_visitor_and_another_browser_is_refused(page, monkeypatch, tmp_path):
    """The browser keeps its visitor token: after a reload the owner still decides their
    run (made through the service as theirs: :func:`own_run`) by hand; a second browser
    (its own storage) is refused and nothing changes. A
    model's answer carrying markup shows as text, never as an element. The saved run's
    thumbnail shows the whole picture (never cropped), with its country, activity, best
    FAITH and date in sight, on a desktop and on a phone, and a click (on a phone) opens
    the run."""
    import re

    from tests.fakes import gemini_world

    hostile = "<img src=x onerror=window.__owned=1>"
    monkeypatch.setitem(gemini_world.SEEN[gemini_world.RED], "objects", [hostile, "hamburgers"])
    pg, service = page
    raw = {"rounds": 1, "target": 1, "max_drift": 2, "candidates": 1}
    run_dir = own_run(pg, service, "people eating food at home", "Iran", **raw)
    made = service.open(run_dir)
    assert len(made.rounds) == 2 and made.rounds[1].decision == "accepted"

    def open_saved(p) -> None:
        p.wait_for_selector("#start")
        p.locator("#saved-runs").get_by_text("Open a saved run").first.click()
        p.locator("#saved-gallery img").first.click()
        until(p, "() => document.querySelector('#run-dir textarea').value !== ''")
        # the opened run's outputs are all in (they set the round field too) before it is
        # filled in: under load they can arrive after the run folder's
        until(p, "() => document.querySelector('#stage textarea').value.startsWith('run ')")
        fill(p, "round", "1")

    # another browser: its own storage, so another visitor; it may watch, not decide
    other = pg.context.browser.new_page(viewport={"width": 1400, "height": 1300})
    try:  # closed whatever happens: the browser is the module's
        other.goto(pg.url)
        open_saved(other)
        before = (service.out / run_dir / "run.json").read_bytes()
        other.click("#reject")
        toast_text(other, "this run belongs to another visitor")
        assert (service.out / run_dir / "run.json").read_bytes() == before
    finally:
        other.context.close()
    # the owner, after a reload, opens it from its thumbnail
    pg.reload()
    pg.wait_for_selector("#start")
    pg.locator("#saved-runs").get_by_text("Open a saved run").first.click()
    thumbs = pg.locator("#saved-gallery img")
    thumbs.first.wait_for()
    assert thumbs.count() == 1
    caption = pg.locator("#saved-gallery").get_by_text("Iran: people eating food at home")
    for size in (DESKTOP, PHONE):
        resize(pg, size)
        assert thumbs.first.evaluate("i => getComputedStyle(i).objectFit") == "contain"
        caption.first.wait_for()
        text = caption.first.inner_text()
        assert re.search(r"best FAITH 0\.\d{3} · \d{4}-\d\d-\d\d \d\d:\d\d", text), text
        thumbs.first.scroll_into_view_if_needed()
        thumb, label = thumbs.first.bounding_box(), caption.first.bounding_box()
        assert label["width"] > 0 and label["height"] > 0, size  # in sight, not clipped away
        assert label["y"] >= thumb["y"] + thumb["height"] - 2 or label["width"] <= thumb["width"]
        # the gallery's own label stands above the first picture, never over it
        named = pg.locator('#saved-gallery [data-testid="block-label"]').first.bounding_box()
        assert named["y"] + named["height"] <= thumb["y"] + 1, (size, named, thumb)
    thumbs.first.click()
    until(pg, "() => document.querySelector('#run-dir textarea').value !== ''")
    assert pg.locator("#run-dir textarea").input_value() == run_dir
    images_loaded(pg, 1)
    until(pg, "() => document.querySelector('#stage textarea').value.startsWith('run ')")
    fill(pg, "round", "0")
    pg.click("#show")
    until(pg, "() => document.querySelector('#stage textarea').value === 'round 0: initial'")
    assert hostile in pg.locator("#checklist").inner_text()  # shown as text
    assert pg.locator("img[src='x']").count() == 0 and pg.evaluate("window.__owned") is None
    fill(pg, "round", "1")
    pg.click("#reject")
    until(
        pg, "() => document.querySelector('#stage textarea').value === 'round 1: rejected by hand'"
    )
    assert service.open(run_dir).rounds[1].decision == "rejected"


def test_the_buttons_wait_for_the_visitor_so_a_run_started_at_once_stays_the_starters(
    page, monkeypatch
):
    """Under load the page's load event, which reads the browser's token into the session,
    can answer after the first click. A run started in that moment would belong to the
    page's session only, and a reload would take it from its starter. So every button that
    acts as the visitor is disabled until the token is read, and the run started next is
    the browser token's."""
    import threading

    import ui.app as app_module
    from refine.service import visitor_hash

    pg, service = page
    read, release = [], threading.Event()
    real = app_module.new_token

    def slow(kept):
        release.wait(30)
        read.append(real(kept))
        return read[-1]

    # the first visit's token is made and kept before the load event is held back
    until(pg, "() => !document.querySelector('#start').disabled")
    monkeypatch.setattr(app_module, "new_token", slow)
    pg.reload()
    pg.wait_for_selector("#start")
    for button in ("start", "stop", "apply", "branch", "accept", "reject"):
        assert pg.locator(f"#{button}").is_disabled(), button
    release.set()
    until(pg, "() => !document.querySelector('#start').disabled")
    assert pg.locator("#reject").is_enabled() and pg.locator("#branch").is_enabled()
    fill(pg, "rounds", "1")
    fill(pg, "candidates", "1")
    pg.click("#start")
    wait_finished(pg)
    run_dir = service.out / pg.locator("#run-dir textarea").input_value()
    assert len(read) == 1  # the reload's visit, which kept the first visit's token
    assert service.owner_of(run_dir) == visitor_hash(f"browser:{read[0]}")


def test_metric_words_and_a_message_that_answers_one_action(page):
    """Every metric label says which way is better and what it means: the table's headers
    and the chart's legend carry arrows, the legend says on hover what each line measures,
    and the glossary under the table explains every metric a run shows, all from the metric
    catalog. The table shows each round's reason whole. The message box answers one
    action: the next one clears it. The finished run is looked at on a desktop and on a
    phone; the actions are taken on a phone."""
    from metrics.catalog import CATALOG
    from refine.present.views import run_metrics

    pg, service = page
    resize(pg, DESKTOP)
    fill(pg, "rounds", "1")
    fill(pg, "target", "1")
    fill(pg, "max-drift", "2")
    pg.click("#start")
    wait_finished(pg)
    reasons = [r.reason for r in service.open(pg.locator("#run-dir textarea").input_value()).rounds]
    for size in (DESKTOP, PHONE):
        resize(pg, size)
        metric_words_read_whole(pg, size, reasons)
    # the glossary (under the table, folded: see metric_words_read_whole), opened, explains
    # every metric
    pg.locator("#glossary").get_by_text("What the numbers mean").first.click()
    text = pg.locator("#glossary-text").inner_text()
    for name in run_metrics():
        m = CATALOG[name]
        assert f"{m.heading}: {m.better} is better" in text and m.help in text, name
    assert "tau:" in text and "target:" in text
    # Stop's answer stays until the next action, which clears it
    notice = pg.locator("#notice textarea")
    pg.click("#stop")
    until(pg, "() => document.querySelector('#notice textarea').value !== ''")
    assert notice.input_value() == "no run in progress"
    pg.click("#show")
    until(pg, "() => document.querySelector('#notice textarea').value === ''")
    until(pg, "() => document.querySelector('#stage textarea').value.startsWith('round 0')")
    pg.click("#apply")  # an action with an answer of its own puts it there
    until(pg, "() => document.querySelector('#notice textarea').value.startsWith('no instruction')")


def metric_words_read_whole(pg, size, reasons: list[str]) -> None:
    """At ``size``: the table's headers carry arrows, each round's reason is shown whole
    (on a desktop with the columns up to it in sight), the legend explains each line, and
    the chart's words are legible and apart."""
    from metrics.catalog import CATALOG

    headers = " | ".join(pg.locator("#table th").all_inner_texts())
    for heading in ("FAITH ↑", "ALIGN ↑", "HAL ↓", "EXAG ↓", "drift ↓"):
        assert heading in headers, headers
    # each round's reason is shown whole, wrapped in its column, and on a desktop the
    # columns up to it are in sight without scrolling the table
    shown_reasons = pg.evaluate(
        """reasons => {
            const box = document.querySelector('#table').getBoundingClientRect();
            return [...document.querySelectorAll('#table span')]
                .filter(e => reasons.includes(e.textContent.trim()))
                .map(e => [e.textContent.trim(), e.getBoundingClientRect().right - box.right,
                           e.scrollWidth - e.clientWidth]);
        }""",
        reasons,
    )
    assert {text for text, _, _ in shown_reasons} == set(reasons), shown_reasons
    for text, beyond, clipped in shown_reasons:
        assert clipped <= 0, text
        if size[0] >= 1000:
            assert beyond <= 0, text
    for name in ("faith", "hal", "exag"):
        item = pg.locator("#plot .legend-item", has_text=CATALOG[name].heading).first
        assert item.locator("title").text_content() == CATALOG[name].explain()
    assert pg.locator("#plot .chart-wide .legend-item", has_text="best FAITH ↑").count() == 1
    # the chart shown fits the width: its text is at least 11 px, no two legend entries or
    # round labels overlap, and every line of the chart is in the legend
    shown = pg.evaluate(
        """() => {
            const svg = [...document.querySelectorAll('#plot svg.chart')]
                .find(s => s.getBoundingClientRect().width > 0);
            const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
            const sizes = [...svg.querySelectorAll('text')].map(
                t => parseFloat(getComputedStyle(t).fontSize) * scale);
            const boxes = sel => [...svg.querySelectorAll(sel)].map(e => {
                const r = e.getBoundingClientRect();
                return [r.left, r.top, r.right, r.bottom];
            });
            return {
                sizes, legend: boxes('.legend-item'), ticks: boxes('#xtick_1, [id^=xtick_] text'),
                series: svg.querySelectorAll('.series').length,
                entries: svg.querySelectorAll('.legend-item').length,
            };
        }"""
    )
    assert min(shown["sizes"]) >= 11, shown["sizes"]

    def overlap(a, b):
        return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1

    for boxes in (shown["legend"],):
        assert not any(overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert shown["entries"] == shown["series"] + 1  # every line, and the target
    # the glossary sits under the table
    table, glossary = pg.locator("#table").bounding_box(), pg.locator("#glossary").bounding_box()
    assert 0 <= glossary["y"] - (table["y"] + table["height"]) < 80, size


def box_in_view(pg, elem_id: str) -> dict:
    """Where ``#elem_id`` is in the viewport now (top, bottom), and the viewport's height."""
    return pg.evaluate(
        """id => {
            const r = document.getElementById(id).getBoundingClientRect();
            return {top: r.top, bottom: r.bottom, height: window.innerHeight};
        }""",
        elem_id,
    )


def wait_value(pg, elem_id: str, test: str, what: str, seconds: float = 120) -> None:
    """Wait until the text of ``#elem_id``'s box passes ``test`` (a JS expression of
    ``v``), or fail naming ``what``."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        until(
            pg,
            f"() => {{ const b = document.querySelector('#{elem_id} textarea'); "
            f"const v = b ? b.value : ''; return {test}; }}",
            timeout=seconds * 1000,
        )
    except PlaywrightTimeout:
        box = pg.locator(f"#{elem_id} textarea").first.input_value()
        notice = pg.locator("#notice textarea").first.input_value()
        raise AssertionError(
            f"{what}: #{elem_id} reads {box!r} after {seconds} s (message: {notice!r})"
        ) from None


def wait_for_review(pg, seconds: float = 120) -> str:
    """Wait until the run's instruction is up for review; returns it."""
    wait_value(pg, "instruction", "v.startsWith('Edit this photo')", "no review", seconds)
    return pg.locator("#instruction textarea").input_value()


def start_paused(pg, rounds: str, candidates: str | None = None) -> str:
    """Start a run (target 1, max drift 2) that pauses for review, and wait for its first
    instruction; returns it."""
    fill(pg, "rounds", rounds)
    fill(pg, "target", "1")
    fill(pg, "max-drift", "2")
    if candidates is not None:
        fill(pg, "candidates", candidates)
    pg.locator("#pause input").check()
    pg.click("#start")
    return wait_for_review(pg)


def rounds_on_record(service) -> int:
    job = service.job
    if job is None or job.run_dir is None or not (job.run_dir / "run.json").is_file():
        return 0
    try:
        return len(service.open(job.run_dir).rounds)
    except (OSError, ValueError):  # being written
        return 0


def test_a_reload_mid_run_leaves_the_run_going_and_the_page_follows_it(page, world):
    """A run belongs to its visitor, not to the page: reloading during a run (as a phone
    does when the visitor switches apps) does not stop it, and the reloaded page shows its
    progress up to its end. Started on a desktop, reloaded at a phone's width."""
    pg, service = page
    resize(pg, DESKTOP)
    import threading

    world.edit_gate = threading.Event()  # the edits wait: the run outlasts the reload
    fill(pg, "rounds", "4")
    fill(pg, "target", "1")
    fill(pg, "max-drift", "2")
    fill(pg, "candidates", "1")
    pg.click("#start")
    deadline = time.monotonic() + 120
    while rounds_on_record(service) < 1:
        assert time.monotonic() < deadline, "round 0 never landed"
        time.sleep(0.1)
    spec = service.open(service.job.run_dir).spec
    assert (spec.rounds, spec.candidates) == (4, 1), spec
    pg.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})  # laid out as it loads
    pg.reload()
    pg.wait_for_selector("#start")
    # the reloaded page attaches: the run's progress, not "not started"
    until(
        pg,
        "() => /round \\d of 4/.test(document.querySelector('#progress-bar').innerText)",
        timeout=60_000,
    )
    assert service.busy, "the run had ended before the page attached: the test proves nothing"
    world.edit_gate.set()  # the page follows the run from here to its end
    wait_finished(pg)
    run = service.open(pg.locator("#run-dir textarea").input_value())
    # to its own end: its rounds, or two rejected edits in a row (the fake world's)
    assert run.status == "finished" and len(run.rounds) >= 3, [r.decision for r in run.rounds]
    assert not run.stop_reason.startswith("stopped"), run.stop_reason
    images_loaded(pg, len(run.rounds))


def test_a_paused_run_survives_a_reload_and_apply_continues_it(page, world):
    """Reloading a run paused for review shows the instruction under review, and the form
    ticks its pause (unticked, a roll-back from it went on with no review); opened from
    the saved runs it shows its stage and that instruction; Apply continues the run.
    Started on a desktop, reloaded and applied at a phone's width."""
    pg, service = page
    resize(pg, DESKTOP)
    pg.locator("#examples").get_by_text("wedding celebration").first.click()
    until(pg, "() => document.querySelector('#country input').value === 'India'")
    proposed = start_paused(pg, rounds="1", candidates="1")
    pg.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})  # laid out as it loads
    box = pg.locator("#instruction textarea")
    pg.reload()
    pg.wait_for_selector("#start")
    wait_value(pg, "instruction", "v.startsWith('Edit this photo')", "the instruction after reload")
    assert box.input_value() == proposed
    # the form names the run followed, not the form's defaults (Iran), and it pauses for
    # review (a roll-back from it then pauses too)
    until(pg, "() => document.querySelector('#country input').value === 'India'")
    assert pg.locator("#activity input").first.input_value() == "wedding celebration"
    assert "round 1: review the instruction" in stage(pg)
    open_options(pg)
    until(pg, "() => document.querySelector('#pause input').checked")
    # opened from the saved runs: the same stage and instruction, never the record's
    # round-0 prompt or a literal None (the box is blanked first, so that the open's answer
    # is seen to arrive: it would otherwise overwrite what is typed next)
    box.fill("")
    pg.locator("#saved-runs").get_by_text("Open a saved run").first.click()
    pg.locator("#saved-gallery img").first.click()
    wait_value(pg, "instruction", "v.startsWith('Edit this photo')", "the opened instruction")
    wait_value(pg, "stage", "v.startsWith('round 1: review the instruction')", "the stage")
    assert box.input_value() == proposed and "None" not in stage(pg)
    box.fill("Put a sofreh on the floor.")
    pg.click("#apply")
    wait_value(pg, "notice", "v.startsWith('instruction applied')", "Apply's answer")
    wait_finished(pg)
    run = service.open(pg.locator("#run-dir textarea").input_value())
    assert len(run.rounds) == 2 and not run.stop_reason.startswith("stopped"), run.stop_reason
    assert run.rounds[1].instruction_source == "person"
    assert run.rounds[1].text == "Put a sofreh on the floor."


def error_covers(pg, elem_id: str) -> int:
    """How many of Gradio's "Error" covers are drawn over ``#elem_id``."""
    return pg.locator(f"#{elem_id} [data-testid=status-tracker] .error").evaluate_all(
        "els => els.filter(e => e.getClientRects().length > 0).length"
    )


def saved_thumbnail(pg, caption: str):
    """The saved runs' thumbnail whose caption holds ``caption``."""
    item = pg.locator("#saved-gallery button.thumbnail-item", has_text=caption)
    return item.locator("img").first


def test_a_roll_back_continues_with_the_opened_runs_settings_and_anothers_is_refused(
    page, tmp_path
):
    """Opened from the saved runs after a reload (the form back at its defaults), a run
    puts its settings in the form, and a roll back continues with them, saying so; the
    saved runs list it at once, marked as the visitor's and as a roll back. Another
    visitor's run, opened then, is refused a roll back: the images, the stage and the
    table stay as they were, no output is covered by an error, and the message box says
    why, the reason staying there until the next action. Both runs are made through the
    service (:func:`own_run`; the other by its owner): what the page shows of a run as it
    is made is the other tests'. The page is reloaded, and the runs opened and rolled
    back, at a phone's width; what stays of the refused one is looked at there and on a
    desktop (one page for both: a reload and a run fewer than a test each)."""
    from refine.service import visitor_hash
    from tests.runs import prepared

    pg, service = page
    raw = {"rounds": 1, "target": 1, "max_drift": 2, "candidates": 1}
    job = service.start(
        *prepared("people eating food at home", "Iran", **raw), owner=visitor_hash("owner")
    )
    job.wait()
    assert (job.run_dir / ".owner").exists()
    others = str(job.run_dir.relative_to(service.out))
    first = own_run(pg, service, "wedding celebration", "India", **raw, seed=43)
    pg.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})  # laid out as it loads
    pg.reload()  # the saved runs as they are now
    pg.wait_for_selector("#start:not([disabled])")
    open_options(pg)
    assert pg.locator("#seed input").first.input_value() == "42"  # the form's default
    assert pg.locator("#country input").first.input_value() == "Iran"
    pg.locator("#saved-runs").get_by_text("Open a saved run").first.click()
    saved_thumbnail(pg, "India: wedding celebration").click()
    wait_value(pg, "run-dir", f"v === {first!r}", "the opened run")
    until(
        pg,
        "() => document.querySelector('#seed input').value === '43' && "
        "document.querySelector('#candidates input').value === '1' && "
        "document.querySelector('#rounds input').value === '1' && "
        "document.querySelector('#country input').value === 'India'",
    )
    assert pg.locator("#activity input").first.input_value() == "wedding celebration"
    assert "people dancing Garba" in dropdown_options(pg, "activity")  # India's activities
    fill(pg, "round", "0")
    pg.click("#branch")
    # (what the roll back says as it starts, the changes or "the run's own settings",
    # lasts a moment on the page: tests/ui/test_app.py reads it from the API)
    wait_value(pg, "run-dir", f"v !== '' && v !== {first!r}", "the rolled-back run")
    wait_finished(pg)
    branch = service.open(pg.locator("#run-dir textarea").input_value())
    assert branch.branched_from["round"] == 0
    assert (branch.spec.seed, branch.spec.candidates, branch.spec.rounds) == (43, 1, 1)
    # the saved runs list it at once, marked as the visitor's and as a roll back
    until(pg, "() => document.querySelectorAll('#saved-gallery img').length === 3")
    mark = f"yours, rolled back from round 0 of {Path(first).name}"
    pg.locator("#saved-gallery").get_by_text(mark).first.wait_for()

    # another visitor's run: nothing of the owner's is in this visitor's storage
    saved_thumbnail(pg, "Iran: people eating food at home").click()
    wait_value(pg, "run-dir", f"v === {others!r}", "the other visitor's run")
    # its stage, not the roll back's before it: under load an open's outputs can come
    # after its folder's name, and the round typed next must not be overwritten by them
    opened = f"run {job.run.id}: "
    wait_value(pg, "stage", f"v.startsWith({opened!r})", "the opened run's stage")
    images_loaded(pg, 2)
    before = (stage(pg), pg.locator("#table").inner_text())
    fill(pg, "round", "1")
    pg.click("#branch")
    wait_value(pg, "notice", "v.startsWith('refused: ')", "the refusal in the box")
    said = pg.locator("#notice textarea").input_value()
    assert "this run belongs to another visitor" in said, said
    for size in (PHONE, DESKTOP):
        resize(pg, size)
        images_loaded(pg, 2)  # the gallery is still there
        if size == PHONE:  # the width the rows were read at (their text follows it)
            assert (stage(pg), pg.locator("#table").inner_text()) == before
        for elem in ("gallery", "slider", "table", "stage", "plot"):
            assert error_covers(pg, elem) == 0, (elem, size)
        # the pointer off the pictures (the click brought the run into sight, and a
        # picture under the pointer is drawn brighter)
        pg.mouse.move(0, 0)
        shot = pg.locator("#gallery").screenshot(path=str(tmp_path / f"refused-{size[0]}.png"))
        assert has_colour(shot, RED) and has_colour(shot, GREEN), size
    assert len(service.runs()) == 3  # no new run
    # the reason stays until the next action (the toast fades; the box does not)
    pg.locator("#show").click()
    wait_value(pg, "notice", "v === ''", "the box emptied by the next action")


def test_start_refuses_an_unreadable_upload_and_runs_nothing(page, tmp_path):
    """A file over the upload limit, and one that is not an image, are each named with the
    limits as they are chosen, and nothing is previewed. The one that is not an image
    stays named in the box: Start refuses it, naming the file (never a server path) and
    the reason, and writes no run. Done on a phone; no error covers an output there or on
    a desktop."""
    pg, service = page
    resize(pg, PHONE)
    open_options(pg)
    chooser = pg.locator("#upload input[type=file]")
    # a file over the upload limit is refused as it is chosen, named with the limit
    big = tmp_path / "big.png"
    big.write_bytes(b"\x89PNG" + bytes(21 * 1024 * 1024))
    chooser.set_input_files(str(big))
    toast_text(pg, 'exceed the maximum allowed size of 20.0 Mb: "big.png"')
    fake = tmp_path / "notes.png"
    fake.write_text("not an image")
    chooser.set_input_files(str(fake))
    text = toast_text(pg, "notes.png: not an image that can be read")
    assert "PNG, JPEG or WebP, at most 20 MB" in text
    assert not pg.locator("#upload-preview").is_visible()
    pg.click("#start")
    wait_value(pg, "notice", "v.startsWith('refused: ')", "Start's refusal in the box")
    said = pg.locator("#notice textarea").input_value()
    assert "notes.png: not an image that can be read" in said, said
    assert "/" not in said.split("notes.png")[0][-40:] and "/tmp" not in said, said
    assert service.job is None and service.runs() == []
    for size in (PHONE, DESKTOP):
        resize(pg, size)
        assert error_covers(pg, "stage") == 0 and error_covers(pg, "gallery") == 0, size


def test_a_start_behind_another_run_says_how_many_are_ahead(page):
    """Another visitor's run holds the device (paused for its review): Start says on its
    stage, in words, how many runs are ahead and what the one in progress is doing, and no
    output shows Gradio's "queue: 1/1"; when that run ends, this one starts and finishes.
    Started on a phone, where the stage is furthest from Start."""
    from tests.ui.clients import app_client, start

    pg, service = page
    resize(pg, PHONE)
    url = pg.url
    # another visitor, through the app: its call follows its run, as a page does
    followed = start(app_client(url), rounds=1, candidates=1, paused=True)
    deadline = time.monotonic() + 120
    while service.job is None or service.job.waiting is None:
        assert time.monotonic() < deadline, "the other run never paused"
        time.sleep(0.1)
    other = service.job
    try:
        fill(pg, "rounds", "1")
        fill(pg, "candidates", "1")
        pg.click("#start")
        wait_value(
            pg,
            "stage",
            "v.startsWith('waiting: 1 run ahead of yours (one in progress: round 1')"
            " && v.endsWith('yours starts when it ends')",
            "the words of the line",
        )
        in_sight(pg, "stage", "Start")
        assert "its owner's review" in stage(pg)  # not "your review": it is not theirs
        assert "queue:" not in pg.locator("body").inner_text()
    finally:
        other.stop()
    followed.result(timeout=120)
    wait_finished(pg)
    assert other.run_dir != service.out / pg.locator("#run-dir textarea").input_value()


def small_things_read_whole(pg, size, tmp_path) -> None:
    """After a 2-image run: the gallery's captions whole (not cut at the picture's width),
    the checklist's chips broken between words only, the table's numbers to 3 decimals as
    everything else, no empty panel of other languages, and every word of the chart inside
    its drawing."""
    import re

    images_loaded(pg, 2)
    cut = pg.evaluate(
        """() => [...document.querySelectorAll('#gallery .caption-label')]
            .filter(c => c.scrollWidth > c.clientWidth + 1 || c.scrollHeight > c.clientHeight + 1)
            .map(c => c.innerText)"""
    )
    captions = pg.locator("#gallery .caption-label").all_inner_texts()
    assert len(captions) == 2 and not cut, (captions, cut)
    pg.locator("#gallery").screenshot(path=str(tmp_path / f"gallery-{size[0]}.png"))
    breaks = pg.evaluate(
        """() => [...document.querySelectorAll('#checklist .text')]
            .map(t => getComputedStyle(t).wordBreak)"""
    )
    assert breaks and set(breaks) == {"normal"}, set(breaks)
    table = pg.locator("#table").inner_text()
    numbers = re.findall(r"^\s*\d+\.(\d+)\s*$", table, flags=re.M)
    assert numbers and max(len(d) for d in numbers) <= 3, table
    assert not pg.locator("#languages").is_visible()
    # the chart's every word (axis titles, ticks, legend) inside its drawing, and the
    # drawing inside the page
    outside = pg.evaluate(
        """() => [...document.querySelectorAll('#plot svg')]
            .filter(svg => svg.getBoundingClientRect().width > 0)
            .flatMap(svg => {
                const s = svg.getBoundingClientRect();
                const out = s.left < -1 || s.right > window.innerWidth + 1 ? ['the chart'] : [];
                return out.concat([...svg.querySelectorAll('text')].filter(t => {
                    const r = t.getBoundingClientRect();
                    return r.width > 0 && (r.left < s.left - 1 || r.right > s.right + 1
                        || r.top < s.top - 1 || r.bottom > s.bottom + 1);
                }).map(t => t.textContent));
            })"""
    )
    assert pg.locator("#plot svg text").count() > 5 and not outside, outside


def rating_scales_on_one_line(pg) -> None:
    """The Rate view's two 1-5 scales (the quick questions, on the run shown), each on one
    line (at a phone's width they wrapped)."""
    rate_begin_in_page(pg, None, "Rhea")
    give_profile_in_page(pg)
    for scale in ("rate-q0-single", "rate-q2-single"):
        choices = pg.locator(f"#{scale} label")
        choices.first.wait_for(state="visible")
        tops = {round(choices.nth(k).bounding_box()["y"]) for k in range(choices.count())}
        assert choices.count() == 5 and len(tops) == 1, (scale, tops)


def rate_begin_in_page(pg, label: str | None, rater: str, protocol: str | None = None) -> None:
    """Open the Rate view, pick the set listed as ``label`` (the first listed when None),
    name the rater and the protocol, and press Begin."""
    if not pg.locator("#rate-set input").first.is_visible():
        pg.locator("#rate").get_by_text("Rate images (human ratings)").first.click()
    pg.locator("#rate-set input").first.click()
    listed = pg.locator("#rate-set li[role=option]")
    option = listed.first if label is None else pg.locator(f"li[role=option][aria-label='{label}']")
    option.first.click()
    if protocol is not None:
        pick(pg, "rate-protocol", protocol)
    pg.locator("#rate-rater textarea, #rate-rater input").first.fill(rater)
    pg.locator("#rate-begin").click()


def give_profile_in_page(pg, country: str = "Iran") -> None:
    """Fill the rater's profile and consent, and begin."""
    pg.locator("#rate-profile").first.wait_for(state="visible")
    for field in ("born", "raised", "residence", "nationality"):
        pg.locator(f"#rate-{field} textarea, #rate-{field} input").first.fill(country)
    pg.locator("#rate-languages textarea, #rate-languages input").first.fill("Persian, English")
    pick(pg, "rate-age", "25-34")
    pg.locator("#rate-consent input").check()
    pg.locator("#rate-give").click()
    pg.locator("#rate-panel").first.wait_for(state="visible")


CHECKED = """
name = "checked"
title = "A study with an attention check after every image"
raters_per_image = 1

[attention]
every = 1
text = "Attention check: select 1."
answers = { score = "1" }

[[questions]]
id = "score"
text = "How well does it show {activity}?"
options = [{ value = "1", score = 1 }, { value = "3", score = 3 }, { value = "5", score = 5 }]
"""


def study_sets(out) -> None:
    """One set of one image per bundled protocol (an SoS bank for sos), and one under a
    protocol of its own with an attention check after every image."""
    import json

    from PIL import Image

    from refine.human.study import Study

    for name in ("quick", "ahead", "culturalframes", "cube", "caire", "check"):
        folder = out / f"study-{name}"
        folder.mkdir()
        Image.new("RGB", (64, 48), (180, 120, 60)).save(folder / "tea.png")
        cell = {"prompt": "people drinking tea at home in Iran", "activity": "drinking tea",
                "country": "Iran", "images": [{"file": "tea.png"}]}  # fmt: skip
        (folder / "cells.jsonl").write_text(json.dumps(cell) + "\n")
    protocol = out / "checked.toml"
    protocol.write_text(CHECKED)
    Study.open(out / "study-check", protocol)
    bank = out / "study-sos"
    (bank / "images" / "iranian" / "fr").mkdir(parents=True)
    Image.new("RGB", (64, 48), (60, 120, 180)).save(bank / "images/iranian/fr/p0_s0.png")
    cells = {"Iranian|fr": {"culture": "Iranian", "language": "fr", "done": True,
                            "prompts": ["Une photo d'une personne iranienne"],
                            "images": ["images/iranian/fr/p0_s0.png"]}}  # fmt: skip
    (bank / "bank.json").write_text(json.dumps({"cells": cells}))


def choose(pg, slot: int, text: str, exact: bool = True) -> None:
    """Click the choice of a slot's scale whose label is ``text`` (or starts with it)."""
    import re

    pattern = re.compile(rf"^\s*{re.escape(text)}\s*$" if exact else rf"^\s*{re.escape(text)}")
    pg.locator(f"#rate-q{slot}-single label").filter(has_text=pattern).first.click()


def tick(pg, slot: int, text: str) -> None:
    pg.locator(f"#rate-q{slot}-multiple label").filter(has_text=text).first.click()


def write(pg, slot: int, text: str, box: str = "answer") -> None:
    pg.locator(f"#rate-q{slot}-{box} textarea").first.fill(text)


def shown(pg, elem_id: str) -> bool:
    return pg.locator(f"#{elem_id}").first.is_visible()


def until_shown(pg, elem_id: str, yes: bool = True) -> None:
    """Wait until ``#elem_id`` is drawn (or gone: gradio leaves a hidden block out)."""
    test = "e !== null && e.offsetParent !== null"
    test = test if yes else f"!({test})"
    until(pg, f"id => {{ const e = document.getElementById(id); return {test}; }}", arg=elem_id)


def saved_then(pg, words: str) -> None:
    pg.locator("#rate-save").click()
    try:
        until(pg, "t => document.querySelector('#rate-status').innerText.includes(t)", arg=words)
    except Exception:
        status = pg.locator("#rate-status").first.inner_text()
        said = pg.locator("#rate-refused").first.inner_text()
        raise AssertionError(f"not {words!r}: status {status!r}, refused {said!r}") from None


def refused(pg, words: str) -> None:
    """Save, and see the refusal under the button."""
    pg.locator("#rate-save").click()
    until(pg, "t => document.querySelector('#rate-refused').innerText.includes(t)", arg=words)
    in_view = pg.evaluate(
        "() => { const r = document.querySelector('#rate-refused').getBoundingClientRect();"
        " return r.top < window.innerHeight && r.bottom > 0; }"
    )
    assert in_view, f"the refusal {words!r} is out of sight"


def questions_fit(pg, size) -> None:
    """At ``size``, every question drawn fits the page's width."""
    resize(pg, size)
    wide = pg.evaluate(
        """w => [...document.querySelectorAll('[id^=rate-q]')]
            .filter(e => e.offsetParent !== null)
            .filter(e => e.getBoundingClientRect().right > w + 1).map(e => e.id)""",
        size[0],
    )
    assert wide == [], (size, wide)


def test_point_at_a_region_and_change_the_references_at_both_widths(page, world):
    """Paused for review, the current image, the instruction and Apply fit on one screen
    (on a desktop, the first one; on a phone, once the image is brought into sight; on a
    phone the progress and the image come right after Start, with the options folded).
    On a desktop the visitor draws a region by mouse, drops a reference descriptor and adds
    one of their own; on a phone, the next round, a region by touch. Each edit is told its
    region and keeps the parent's pixels beyond its feathered band; each round records its
    region as the visitor's, with its mask; the next round's instruction follows the
    changed references, which run.json and the report record."""
    import numpy as np
    from PIL import Image

    from refine.backends.regions import reach, region_words
    from refine.present.report.run import render_run

    pg, service = page
    # on a phone, before the run: Start, the progress, then the image, the options folded
    resize(pg, PHONE)
    assert not pg.locator("#rounds input").first.is_visible()
    start = pg.locator("#start").bounding_box()
    bar, slider = pg.locator("#progress-bar").bounding_box(), pg.locator("#slider").bounding_box()
    assert start["y"] < bar["y"] < slider["y"]
    between = slider["y"] - (start["y"] + start["height"])
    assert between < 360, between  # the progress bar, the stage and "so far" only
    for later in ("examples", "options", "gallery", "run-dir"):
        assert pg.locator(f"#{later}").bounding_box()["y"] > slider["y"], later
    resize(pg, DESKTOP)
    start_paused(pg, rounds="2", candidates="1")
    strokes = (
        (DESKTOP, (0.55, 0.55), False, (0.15, 0.15)),
        (PHONE, (0.1, 0.1), True, (0.85, 0.85)),
    )
    for size, corner, touch, away in strokes:
        resize(pg, size)
        k = 1 if size == DESKTOP else 2
        wait_value(pg, "stage", f"v.startsWith('round {k}: review')", f"round {k}'s review")
        # the image under review, its instruction and Apply on one screen (on a desktop
        # the first one; on a phone, once the image is brought into sight)
        until(
            pg, "() => [...document.querySelectorAll('#slider img')].some(i => i.naturalWidth > 0)"
        )
        if size == DESKTOP:
            pg.evaluate("window.scrollTo(0, 0)")
        else:
            pg.evaluate("document.getElementById('slider').scrollIntoView({block: 'start'})")
        where = {e: box_in_view(pg, e) for e in ("slider", "instruction", "apply")}
        for elem, b in where.items():
            assert -1 <= b["top"] and b["bottom"] <= b["height"] + 1, (elem, size, where)
        if not pg.locator("#region canvas").first.is_visible():
            pg.locator("#point-box").get_by_text("Point and say", exact=False).first.click()
        pg.locator("#region").first.scroll_into_view_if_needed()
        # the editor holds this round's image (its label says the round) before any stroke
        until(
            pg, f"() => (document.querySelector('#region')?.innerText || '').includes('round {k}:')"
        )
        until(pg, "() => document.querySelector('#region canvas') !== null")
        draw(pg, service.job.review_image().size, corner, touch, away)
        # the canvas's ticker was held to ten frames a second (STILL): a PixiJS that no
        # longer names _requestId would draw every frame again, and cost 6-8 CPU-s more
        assert pg.evaluate("() => window.framesHeld || 0") > 0
        if k == 1:
            pick(pg, "refs-remove", "objects: Basket of flatbreads")
            pg.locator("#refs-add textarea").fill("objects: Brass samovar on a low tray")
        pg.click("#apply")
        wait_value(pg, "notice", "v.startsWith('instruction applied')", f"round {k} applied")
    wait_finished(pg)
    run_dir = service.resolve(pg.locator("#run-dir textarea").input_value())
    run = service.open(run_dir)
    parent = np.asarray(Image.open(run_dir / run.rounds[0].best.image).convert("RGB"))
    for k, (_, corner, _, away) in enumerate(strokes, start=1):
        r = run.rounds[k]
        assert len(r.regions) == 1, (k, r.regions, r.text[:60])
        (mine,) = r.regions
        assert mine.source == "by hand" and mine.mask == f"round_{k:02d}_mask.png"
        mask = Image.open(run_dir / mine.mask)
        drawn = np.asarray(mask) > 127
        h, w = drawn.shape
        # the stroke's middle is in the region, the far corner is not
        assert drawn[int((corner[1] + 5 / 60) * h), int((corner[0] + 5 / 60) * w)], mine.box
        assert not drawn[int(away[1] * h), int(away[0] * w)], mine.box
        # each of the round's edits was told it (the Gemini editor: in words, after the text)
        told = [e for e in world.edited if region_words([mine.box]) in e]
        assert len(told) == len(r.candidates), (k, mine.box)
        before = (
            parent
            if k == 1
            else np.asarray(Image.open(run_dir / run.rounds[r.parent].best.image).convert("RGB"))
        )
        after = np.asarray(Image.open(run_dir / r.best.image).convert("RGB"))
        outside = ~reach([], (w, h), mask)
        assert np.array_equal(after[outside], before[outside]), k
    (change,) = run.reference_changes
    assert (change.round, change.source) == (1, "app")
    assert [d.phrase for d in change.added] == ["Brass samovar on a low tray"]
    added = [c for c in run.rounds[2].changes if c.kind == "add"]
    assert "Brass samovar on a low tray" in [c.item for c in added]
    assert "Basket of flatbreads" not in [c.item for c in added]
    # the report: FAITH both ways, a row a round (the page's attributes: 6 decimals)
    both = re.findall(r'data-round="(\d+)" data-faith="[^"]+" data-faith-pack="([^"]+)"',
                      render_run(run_dir))  # fmt: skip
    assert {int(k): float(v) for k, v in both} == {
        r.index: pytest.approx(r.best.against_pack["faith"], abs=1e-6) for r in run.rounds
    }
