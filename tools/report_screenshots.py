"""Screenshots of the report pages for docs/screenshots: the bench leaderboard, the SoS
report and the agreement page at desktop (1440 px) and phone (390 px) width, each made
afresh from the golden outputs' data (tests/golden/data) as the report-page browser test
makes them. Needs Debian's chromium and the test extras. Usage:

    .venv/bin/python tools/report_screenshots.py OUT_DIR
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = {"desktop": (1440, 900), "phone": (390, 844)}
PAGES = ("bench", "sos", "agree")


def main(out_dir: str) -> None:
    sys.path.insert(0, str(ROOT))
    from playwright.sync_api import sync_playwright

    from tests.ui.test_browser import CHROMIUM
    from tests.ui.test_report_pages import _pages

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pages = _pages(Path(tempfile.mkdtemp(prefix="refine-report-shots-")))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        for kind, size in WIDTHS.items():
            pg = browser.new_page(viewport={"width": size[0], "height": size[1]})
            for name in PAGES:
                pg.goto(pages[name].as_uri())
                target = out / f"report-{name}-{kind}.png"
                pg.screenshot(path=str(target), full_page=True)
                print(target)
            pg.close()
        browser.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
