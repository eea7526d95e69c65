"""Every report page in a real headless Chromium at 1440x900 and 390x844: the pages are
made afresh from the golden outputs' data (bench, concepts, SoS, agreement, batch) and
from the tau and tune writers, and every chart shown is read as a person sees it: text
at least 11 px, no text cut off by the chart's edge, no two legend entries or row labels
over each other, and nothing wider than the screen but a table that scrolls by itself."""

from __future__ import annotations

import contextlib
import json
import random
import re
import shutil
from pathlib import Path

import pytest

from refine.harness.results import Results
from refine.human.agree import agreement
from refine.human.ratings import load_ratings
from refine.human.stored import stored_metrics
from refine.io.files import atomic_write_text
from refine.present.report import write_report
from refine.present.report.agreement import render_agreement
from refine.present.report.bench import render_bench_leaderboard
from refine.present.report.concepts import render_concepts
from refine.present.report.sos import render as render_sos
from refine.present.report.tau import render_tau
from refine.train.outputs import loss_csv
from tests.ui.test_browser import CHROMIUM

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "data"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian's chromium is needed (apt-get install chromium)"
    ),
]

# what each chart shown looks like to a reader, measured in the page
MEASURE = """() => {
    const box = e => { const r = e.getBoundingClientRect();
                       return [r.left, r.top, r.right, r.bottom]; };
    const charts = [...document.querySelectorAll('svg.chart')]
        .filter(s => s.getBoundingClientRect().width > 0);
    return {
        width: window.innerWidth,
        page: document.documentElement.scrollWidth,
        charts: charts.map(svg => {
            const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
            const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim());
            return {
                id: svg.closest('figure')?.className || '',
                box: box(svg),
                sizes: texts.map(t => parseFloat(getComputedStyle(t).fontSize) * scale),
                texts: texts.map(t => [t.textContent, ...box(t)]),
                legend: [...svg.querySelectorAll('.legend-item')].map(box),
                ticks: [...svg.querySelectorAll('[id^=ytick_] text')].map(box),
                marks: svg.querySelectorAll('[data-values],[data-value],[data-mean],'
                    + '[data-points],[data-sos],[data-count]').length,
            };
        }),
    };
}"""


def _overlap(a, b) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def _pages(root: Path) -> dict[str, Path]:
    """Each kind of report page, written afresh into ``root`` from the golden data."""
    pages = {}

    def put(name: str, html: str) -> None:
        pages[name] = root / f"{name}.html"
        atomic_write_text(pages[name], html)

    bench = GOLDEN / "bench"
    put("bench", render_bench_leaderboard(bench, Results.read(bench, "bench")))
    concepts = GOLDEN / "concepts"
    put("concepts", render_concepts(concepts, Results.read(concepts, "concepts")))
    put("sos", render_sos(json.loads((GOLDEN / "sos" / "analysis.json").read_text()), top=2))
    ratings = load_ratings(GOLDEN / "inputs" / "rating" / "ratings.csv")
    put("agree", render_agreement(agreement(ratings, stored_metrics([bench]), seed=3, reps=50)))
    batch = root / "batch"
    shutil.copytree(next((GOLDEN / "batch").iterdir()), batch)
    pages["batch"] = write_report(batch)
    rng = random.Random(0)
    put("tau", render_tau([rng.random() for _ in range(300)], 0.61, 0.75, "300 descriptors"))
    tune = root / "tune"
    tune.mkdir()
    history = [(s, 0.7 / s**0.3, min(1.0, 0.4 + s / 100), 1.0) for s in range(1, 61)]
    atomic_write_text(tune / "loss.csv", loss_csv(history))
    summary = {"method": "dpo", "base": "diffusers:tiny", "steps": 60, "rows": 12}
    atomic_write_text(tune / "tune.json", json.dumps({**summary, "held_out_accuracy": 0.75}))
    pages["tune"] = write_report(tune)
    return pages


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    return _pages(tmp_path_factory.mktemp("pages"))


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
def test_every_chart_reads_at_both_widths(pages, size):
    from playwright.sync_api import sync_playwright

    kinds = {
        "bench": 4,  # FAITH per country, per category, and the scatter
        "concepts": 2,
        "sos": 2,
        "agree": 2,
        "batch": 1,
        "tau": 1,
        "tune": 2,
    }
    from tests.leaks import short_tmpdir

    with contextlib.ExitStack() as stack:
        with short_tmpdir():  # the driver makes Chromium's profile (its sockets) there
            p = stack.enter_context(sync_playwright())
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        pg = browser.new_page(viewport={"width": size[0], "height": size[1]})
        for name, path in pages.items():
            pg.goto(path.as_uri())
            seen = pg.evaluate(MEASURE)
            assert seen["page"] <= seen["width"], f"{name}: the page is wider than the screen"
            assert len(seen["charts"]) >= kinds[name] - (name == "bench"), name
            for chart in seen["charts"]:
                where = f"{name} {chart['id']} at {size[0]} px"
                assert chart["marks"] >= 1, where  # its numbers are in the page
                assert min(chart["sizes"]) >= 11, (where, chart["sizes"])
                left, top, right, bottom = chart["box"]
                assert right <= seen["width"], where
                for text, *b in chart["texts"]:  # nothing cut off at the chart's edge
                    inside = b[0] >= left - 1 and b[2] <= right + 1
                    assert inside and b[1] >= top - 1 and b[3] <= bottom + 1, (where, text, b)
                for boxes in (chart["legend"], chart["ticks"]):
                    for i, a in enumerate(boxes):
                        assert not any(_overlap(a, b) for b in boxes[i + 1 :]), where
        browser.close()


def test_the_charts_say_the_numbers_of_their_data(pages):
    """What the drawings carry is what the results hold, read back from the pages."""
    bench = json.loads((GOLDEN / "bench" / "results.json").read_text())["summary"]
    html = pages["bench"].read_text()
    bars = re.findall(
        r'id="w-bar-\d+" class="bar" data-label="([^"]+)" data-mean="([0-9.]+)" '
        r'data-lo="([0-9.]+)" data-hi="([0-9.]+)"',
        html,
    )
    means = {
        f"{c} \u00b7 {g}": s["faith"] for g, by in bench["countries"].items() for c, s in by.items()
    }
    country_bars = [b for b in bars if b[0] in means]
    assert len(country_bars) == len(means) == 4
    for label, mean, lo, hi in country_bars:
        assert float(mean) == pytest.approx(means[label]["mean"], abs=1e-6)
        assert [float(lo), float(hi)] == pytest.approx(means[label]["interval"], abs=1e-6)
    sos = json.loads((GOLDEN / "sos" / "analysis.json").read_text())
    html = pages["sos"].read_text()
    cells = re.findall(
        r'id="w-cell-\d+-\d+" class="cell" data-culture="([^"]+)" data-language="(\w+)" '
        r'data-sos="([-0-9.]+)"',
        html,
    )
    assert {(c, g): float(v) for c, g, v in cells} == pytest.approx(
        {(p["culture"], p["language"]): p["sos"] for p in sos["pairs"]}, abs=1e-6
    )
    # the tune's loss page draws loss.csv
    html = pages["tune"].read_text()
    found = re.search(r"data-name=\"dpo loss\" data-steps='([^']+)' data-values='([^']+)'", html)
    assert json.loads(found.group(1)) == list(range(1, 61))
    assert json.loads(found.group(2))[0] == pytest.approx(0.7, abs=1e-6)
