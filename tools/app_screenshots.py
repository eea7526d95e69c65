"""Screenshots of the app for docs/screenshots: the first screen at desktop (1440x900) and
phone (390x844) width, a run in progress and a finished two-round run, the Rate view on
that run at both widths (the CulturalFrames protocol, after a rater's profile, with its
follow-up questions open), the point-and-say controls of a paused run at both widths and
the timeline of its changed references, served by the
app on the test suite's stand-in Gemini world (no key, no network). Needs Debian's
chromium and the test extras. Usage:

    .venv/bin/python tools/app_screenshots.py OUT_DIR
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(out_dir: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("REFINE_CACHE_DIR", tempfile.mkdtemp(prefix="refine-shots-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from playwright.sync_api import sync_playwright

    from refine.service import RunService
    from tests.fakes.gemini_server import FakeGemini
    from tests.fakes.gemini_world import World
    from tests.fakes.tiny_models import build_tiny_siglip
    from ui.app import build_app, launch, launch_options

    server = FakeGemini().start()
    os.environ["GEMINI_API_KEY"] = "stand-in"
    os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
    server.handler = World(edit_delay_s=2.0)  # time to see the run going
    tmp = Path(tempfile.mkdtemp(prefix="refine-shots-"))
    siglip = build_tiny_siglip(tmp)
    options = {
        "image_embedder": {"device": "cpu"},
        "text_embedder": {"device": "cpu"},
        **{r: {"max_retries": 0} for r in ("generator", "editor", "observer", "judge")},
    }
    runs = tmp / "runs"
    service = RunService(
        "gemini", out=runs, backends={"image_embedder": f"siglip:{siglip}"}, backend_options=options
    )
    demo = build_app(service, "profile: gemini (a local stand-in for the Gemini API)")
    url = launch(demo, block=False, quiet=True, **launch_options(runs))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            for name, (w, h) in (("desktop", (1440, 900)), ("phone", (390, 844))):
                page = browser.new_page(viewport={"width": w, "height": h})
                page.goto(url)
                page.wait_for_selector("#start")
                time.sleep(1.5)
                page.screenshot(path=str(out / f"first-screen-{name}.png"))
                page.close()
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            page = context.new_page()
            page.goto(url)
            page.wait_for_selector("#start")
            start(page, rounds="2")
            # while the run is going: its first image in, the first edit under way
            page.wait_for_function(
                """() => {
                    const stage = document.querySelector('#stage textarea').value;
                    return document.querySelector('#gallery img') !== null
                        && stage !== '' && stage !== 'finished';
                }""",
                timeout=120_000,
            )
            page.screenshot(path=str(out / "running-desktop.png"), full_page=True)
            finished(page, "the run")
            page.screenshot(path=str(out / "finished-desktop.png"), full_page=True)
            page.set_viewport_size({"width": 390, "height": 844})
            time.sleep(1)
            page.screenshot(path=str(out / "finished-phone.png"), full_page=True)
            # the Rate view on the finished run, at both widths
            run_box = page.locator("#run-dir textarea, #run-dir input").first
            run_id = Path(run_box.input_value()).name
            # the same browser (its context keeps the visitor token): a run is rated by
            # the visitor who made it
            for name, (w, h) in (("desktop", (1440, 900)), ("phone", (390, 844))):
                rate = context.new_page()
                rate.set_viewport_size({"width": w, "height": h})
                rate.goto(url)
                rate.wait_for_selector("#start")
                rate.locator("#rate").get_by_text("Rate images (human ratings)").first.click()
                rate.locator("#rate-set textarea, #rate-set input").first.fill(run_id)
                protocol = rate.locator("#rate-protocol input").first
                protocol.click()
                protocol.fill("culturalframes")
                rate.locator("li[role=option][aria-label='culturalframes']").first.click()
                rate.locator("#rate-rater textarea, #rate-rater input").first.fill("Ana")
                rate.locator("#rate-begin").click()
                rate.wait_for_selector("#rate-profile, #rate-image img")
                if rate.locator("#rate-profile").first.is_visible():  # once per set
                    for field in ("born", "raised", "residence", "nationality"):
                        rate.locator(f"#rate-{field} textarea, #rate-{field} input").first.fill(
                            "Iran"
                        )
                    rate.locator("#rate-languages textarea").first.fill("Persian, English")
                    age = rate.locator("#rate-age input").first
                    age.click()
                    rate.locator("li[role=option][aria-label='25-34']").first.click()
                    rate.locator("#rate-consent input").check()
                    rate.locator("#rate-give").click()
                rate.wait_for_selector("#rate-image img")
                # a partial match: CulturalFrames' follow-up questions appear
                rate.locator("#rate-q0-single label").filter(has_text="0.5").first.click()
                rate.wait_for_selector("#rate-q1", state="visible")
                time.sleep(1)
                rate.locator("#rate").scroll_into_view_if_needed()
                rate.locator("#rate").screenshot(path=str(out / f"rate-{name}.png"))
                rate.close()
            point_shots(browser, url, service, out)
            browser.close()
    finally:
        demo.close()
        server.stop()
    print(f"screenshots in {out}")


def finished(page, what: str) -> None:
    """Wait (at most 120 s) for the page's run to finish, then for its last pictures to
    be drawn."""
    deadline = time.monotonic() + 120
    while page.locator("#stage textarea").input_value() != "finished":
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not finish")
        time.sleep(0.2)
    time.sleep(2)


def start(page, rounds: str, paused: bool = False) -> None:
    """A run of ``rounds`` editing rounds (target 1, any drift) started from the Options,
    pausing for review where ``paused``."""
    page.locator("#options").get_by_text("Options", exact=True).first.click()
    for elem, value in (("rounds", rounds), ("target", "1"), ("max-drift", "2")):
        box = page.locator(f"#{elem} input").first
        box.fill(value)
        box.press("Tab")
    if paused:
        page.locator("#pause input").check()
    page.click("#start")


def point_shots(browser, url: str, service, out: Path) -> None:
    """A paused run's point-and-say controls, at both widths: a region drawn on the image
    under review, a reference descriptor not wanted here and one of the visitor's own;
    then, applied, the timeline's row of the changed references from that round on."""
    from tests.ui.strokes import draw

    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(url)
    page.wait_for_selector("#start")
    start(page, rounds="1", paused=True)
    page.wait_for_function(
        "() => document.querySelector('#stage textarea').value.includes('review the instruction')",
        timeout=120_000,
    )
    page.locator("#point-box").get_by_text("Point and say", exact=False).first.click()
    page.wait_for_function(
        "() => (document.querySelector('#region')?.innerText || '').includes('round 1:')"
    )
    page.locator("#region").first.scroll_into_view_if_needed()
    draw(page, service.job.review_image().size, (0.55, 0.5))
    remove = page.locator("#refs-remove input").first
    remove.click()
    remove.fill("objects: Basket of flatbreads")
    page.locator("li[role=option][aria-label='objects: Basket of flatbreads']").first.click()
    page.locator("#refs-add textarea").fill("objects: Grandmother's brass samovar")
    time.sleep(1)
    page.locator("#point-box").screenshot(path=str(out / "point-desktop.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    time.sleep(1)
    page.locator("#point-box").screenshot(path=str(out / "point-phone.png"))
    page.set_viewport_size({"width": 1440, "height": 900})
    page.click("#apply")
    finished(page, "the paused run")
    page.locator("#timeline").scroll_into_view_if_needed()
    page.locator("#timeline").screenshot(path=str(out / "references-timeline-desktop.png"))
    page.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots/now")
