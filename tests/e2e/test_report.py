"""HTML reports of a run and of a batch, parsed and checked against the records."""

from __future__ import annotations

import base64
import io
import json
import math
import re
from html import escape as html_escape
from html.parser import HTMLParser

import pytest
from PIL import Image

from refine.cli import main
from refine.events import EntryChanged
from refine.harness.tasks.batch.specs import open_batch
from refine.harness.tasks.batch.task import run_batch
from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from refine.present.report import write_report
from refine.present.views import metric_series
from tests.fakes.gemini_world import BLUE, GREEN, RED
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"


class Page(HTMLParser):
    """Collects what the tests check: rounds, images, chart lines, checklist items."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.rounds, self.images, self.series, self.items, self.bars = [], [], {}, [], []
        self.runs, self.entries, self.pres = [], [], []
        self._item = self._pre = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "data-round" in a:
            self.rounds.append((int(a["data-round"]), a["data-decision"]))
        if tag == "section" and "data-run" in a:
            self.runs.append(a["data-run"])
        if tag == "img":
            self.images.append(a)
        if "data-name" in a and "data-values" in a:  # a chart's line
            self.series[a["data-name"]] = json.loads(a["data-values"])
        if a.get("class") == "bar" and a.get("id", "").startswith("w-"):  # the wide drawing's
            self.bars.append(float(a["data-value"]))
        if tag == "tr" and "data-status" in a:
            self.entries.append(a["data-status"])
        if tag == "li" and "data-kind" in a:
            self._item = [a["data-kind"], "", len(self.rounds) - 1]
        if tag == "pre":
            self._pre = ""

    def handle_data(self, data):
        if self._item is not None:
            self._item[1] += data
        if self._pre is not None:
            self._pre += data

    def handle_endtag(self, tag):
        if tag == "li" and self._item is not None:
            self.items.append(tuple(self._item))
            self._item = None
        if tag == "pre" and self._pre is not None:
            self.pres.append(self._pre)
            self._pre = None


def decoded_colour(img_attrs):
    prefix = "data:image/png;base64,"
    assert img_attrs["src"].startswith(prefix)
    with Image.open(io.BytesIO(base64.b64decode(img_attrs["src"][len(prefix) :]))) as im:
        return im.convert("RGB").getpixel((im.width // 2, im.height // 2))


def self_contained(html: str) -> bool:
    lowered = html.lower()
    return "<script" not in lowered and "<link" not in lowered and 'src="http' not in lowered


@pytest.mark.slow
def test_run_report_shows_every_round(world, backends, options, tmp_path, capsys):
    run = begin(
        Refiner("gemini", backends=backends, backend_options=options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=5,
        candidates=2,
        target=0.99,
        max_drift=2.0,
    )
    run_dir = tmp_path / run.id
    with pytest.raises(SystemExit) as done:
        main(["report", str(run_dir)])
    assert done.value.code == 0
    path = run_dir / "report.html"
    assert capsys.readouterr().out.strip() == str(path)
    html = path.read_text()
    assert self_contained(html)
    page = Page(html)
    assert page.rounds == [(r.index, r.decision) for r in run.rounds]
    assert [d for _, d in page.rounds] == ["initial", "accepted", "rejected", "rejected"]
    # every candidate's image is inline, the chosen one first, and shows the stored pixels
    store = RunStore(run_dir)
    expected = []
    for r in run.rounds:
        order = [r.chosen] + [j for j in range(len(r.candidates)) if j != r.chosen]
        expected += [r.candidates[j].image for j in order]
    assert [i["data-file"] for i in page.images] == expected
    for attrs in page.images:
        stored = store.load_image(attrs["data-file"])
        assert decoded_colour(attrs) == stored.getpixel((stored.width // 2, stored.height // 2))
    assert decoded_colour(page.images[0]) == RED and decoded_colour(page.images[1]) == GREEN
    # the curves carry the per-round values of the chosen candidates
    faith = [r.best.scores.faith for r in run.rounds]
    assert page.series["FAITH"] == pytest.approx(faith, abs=1e-6)
    assert page.series["EXAG"] == pytest.approx([r.best.scores.exag for r in run.rounds], abs=1e-6)
    # quality beside FAITH: the world's judge rates red 7 and green 8 of 10 (first tokens)
    from tests.fakes.gemini_world import QUALITY, quality_logprobs

    def by_hand(colour):
        lp = quality_logprobs(QUALITY[colour])
        z = sum(math.exp(v) for v in lp.values())
        return sum(int(k) * math.exp(v) / z for k, v in lp.items()) / 10

    quality = [r.best.scores.quality for r in run.rounds]
    assert quality[0] == pytest.approx(by_hand(RED)) and quality[1] == pytest.approx(by_hand(GREEN))
    assert page.series["quality"] == pytest.approx(quality, abs=1e-6)
    shown = [float(x) for x in re.findall(r'data-quality="([0-9.]+)"', html)]
    assert shown == pytest.approx(quality, abs=1e-6)
    assert "naturalness 7.0, artifacts 7.0 of 10 (gemini:gemini-3.8-flash, logprobs)" in html
    # best-so-far only moves on accepted rounds
    assert page.series["best FAITH"] == pytest.approx([faith[0]] + [faith[1]] * 3, abs=1e-6)
    assert metric_series(run)["ALIGN"] == [r.best.scores.align for r in run.rounds]
    # checklist of round 0: hamburgers hallucinated, the hookah stereotype seen
    r0 = [(k, text) for k, text, idx in page.items if idx == 0]
    assert any(k == "hallucinated" and "hamburgers" in t for k, t in r0)
    assert any(k == "exaggerated" and "oversized hookahs" in t for k, t in r0)
    assert any(k == "missing" for k, _ in r0) and any(k == "aligned" for k, _ in r0)
    # the prompt of round 0 and the instruction of round 1
    assert page.pres[0] == run.rounds[0].text and page.pres[1] == run.rounds[1].text
    assert "needs at least +0.01" in html


@pytest.mark.slow
def test_batch_report_with_a_failed_run(world, backends, options, tmp_path):
    Image.new("RGB", (64, 48), BLUE).save(tmp_path / "blue.png")
    specs = tmp_path / "b.jsonl"
    specs.write_text(
        json.dumps({"activity": ACT, "country": COUNTRY, "rounds": 1, "max_drift": 2})
        + "\n"
        + json.dumps({"activity": ACT, "country": COUNTRY, "image": "blue.png", "name": "blue"})
        + "\n"
    )
    world.fail_edit_of = BLUE
    refiner = Refiner("gemini", backends=backends, backend_options=options)
    batch, store = open_batch(specs, tmp_path / "out", "gemini", backends)
    midway = []

    def on_event(event):  # a report of the batch so far, as the first run ends
        if isinstance(event, EntryChanged) and event.done == 1:
            midway.append(Page(write_report(store.dir).read_text()).entries)

    batch = run_batch(batch, store, refiner, on_event=on_event)
    assert midway == [["finished", "pending"]]
    path = write_report(store.dir)
    html = path.read_text()
    assert self_contained(html)
    page = Page(html)
    assert page.entries == ["finished", "failed"]
    assert len(page.runs) == 2  # the failed run's completed round is shown too
    gains = [e.best_faith - e.initial_faith for e in batch.entries]
    assert page.bars == pytest.approx(gains, abs=1e-6) and gains[0] > 0.2 and gains[1] == 0
    assert "success rate 50% (1/2, 1 failed)" in html
    assert "1.0 editing round(s) per finished run" in html
    assert batch.entries[1].error and "500" in batch.entries[1].error
    assert html.count(html_escape(batch.entries[1].error)) >= 1
    assert [d for _, d in page.rounds] == ["initial", "accepted", "initial"]
    # the page is read from the results record: a folder without one names the command
    (store.dir / "results.json").unlink()
    with pytest.raises(ValueError, match=r"no results record yet.*--resume` writes it"):
        write_report(store.dir)
    run_batch(*open_batch(specs, tmp_path / "out", "gemini", backends, resume=True), refiner)
    again = Page(write_report(store.dir).read_text())  # the failed run was tried again
    assert again.entries == ["finished", "failed"] and again.bars[0] == page.bars[0]


def test_report_of_a_folder_that_is_neither(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        main(["report", str(tmp_path)])
    assert done.value.code == 2
    assert "neither a run directory" in capsys.readouterr().err


def test_report_of_a_tune_folder_draws_its_loss_or_says_what_is_missing(tmp_path, capsys):
    """``refine report`` on a tune's --out writes loss.html from loss.csv; a folder that
    is not a finished tune is named with what it lacks, in one line."""
    (tmp_path / "tune.json").write_text('{"method": "dpo"}')
    for fix, said in (
        (None, "tune.json: no 'base'"),
        (
            ("tune.json", '{"method": "dpo", "base": "b", "steps": 2, "rows": 3}'),
            "no loss.csv (refine tune writes it",
        ),
        (("loss.csv", "step,loss,accuracy,grad_norm\n1,0.5,,1\nx,y,,\n"), "line 3 is not"),
    ):
        if fix:
            (tmp_path / fix[0]).write_text(fix[1])
        with pytest.raises(SystemExit) as done:
            main(["report", str(tmp_path)])
        err = capsys.readouterr().err
        assert done.value.code == 2 and said in err and "Traceback" not in err, err
        assert not (tmp_path / "loss.html").exists()
    (tmp_path / "loss.csv").write_text("step,loss,accuracy,grad_norm\n1,0.5,,1\n2,0.25,0.5,1\n")
    with pytest.raises(SystemExit) as done:
        main(["report", str(tmp_path)])
    assert done.value.code == 0 and capsys.readouterr().out.strip().endswith("loss.html")
    html = (tmp_path / "loss.html").read_text()
    found = re.search(r"data-name=\"dpo loss\" data-steps='([^']+)' data-values='([^']+)'", html)
    assert json.loads(found.group(1)) == [1, 2] and json.loads(found.group(2)) == [0.5, 0.25]
    assert "data-name=\"reward accuracy\" data-steps='[2]' data-values='[0.5]'" in html
