"""A metric is one catalog entry and one function: a toy metric registered here (nothing
else changed) is computed by the assessor for every image, kept in run.json under its
name, drawn in the run's chart and report and explained in the glossary, and it is a
column of the app's rounds table, of a bench's rows.csv, results.json and leaderboard and
of refine agree's table; where its readings cannot be taken, the scores say why."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from metrics.catalog import Metric, registered
from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from refine.present import views
from refine.present.report import write_report
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"


def redness(images):
    """The share of red in each image's mean colour."""
    out = []
    for im in images:
        r, g, b = np.asarray(im.convert("RGB"), dtype=np.float64).reshape(-1, 3).mean(axis=0)
        out.append(float(r / (r + g + b)))
    return out


TOY = Metric(
    "toy_redness",
    "redness",
    0,
    1,
    "lower",
    "",
    ("images",),
    "image",
    "toy",
    "The share of red in the image's mean colour.",
    compute=redness,
    reads=("images",),
)


@pytest.mark.slow
def test_a_registered_metric_reaches_the_record_the_chart_the_report_and_the_glossary(
    world, backends, options, tmp_path
):
    with registered(TOY):
        run = begin(
            Refiner("gemini", backends=backends, backend_options=options),
            ACT,
            COUNTRY,
            out=tmp_path,
            rounds=1,
            candidates=2,
            target=0.99,
            max_drift=2.0,
        )
        store = RunStore(tmp_path / run.id)
        for r in run.rounds:
            for c in r.candidates:
                want = redness([store.load_image(c.image)])[0]
                assert c.scores.value("toy_redness") == pytest.approx(want, abs=1e-12)
        saved = json.loads((tmp_path / run.id / "run.json").read_text())
        first = saved["rounds"][0]["candidates"][0]["scores"]["values"]
        assert first["toy_redness"] == pytest.approx(run.rounds[0].best.scores.value("toy_redness"))
        # the run's chart has its series, the glossary its line, the report both
        series = views.metric_series(run)
        assert series["redness"] == [
            pytest.approx(r.best.scores.value("toy_redness")) for r in run.rounds
        ]
        assert (
            "redness ↓",
            "lower is better, 0 to 1. The share of red in the image's mean colour.",
        ) in views.glossary()
        page = write_report(tmp_path / run.id, tmp_path / "run.html").read_text()
        # a column of each round's table, its value in it
        assert page.count("<th>redness</th>") == len(run.rounds)
        toy = run.rounds[0].best.scores.value("toy_redness")
        assert f'<td data-metric="toy_redness">{toy:.3f}</td>' in page
        assert RunStore(tmp_path / run.id).load() == run  # it opens as written
        # the app built with it: a column of the rounds table after drift, and the glossary
        from refine.service import RunService
        from ui.adapters import rounds_table
        from ui.app import build_app

        service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
        config = build_app(service, "test profile").config["components"]
        props = {c.get("props", {}).get("elem_id"): c.get("props", {}) for c in config}
        headers = props["table"]["value"]["headers"]
        at = headers.index("redness ↓")
        assert headers[at - 1] == "drift ↓" and len(props["table"]["column_widths"]) == len(headers)
        assert [row[at] for row in rounds_table(run)] == [
            round(r.best.scores.value("toy_redness"), 3) for r in run.rounds
        ]
        assert "**redness ↓**: lower is better, 0 to 1." in props["glossary-text"]["value"]
    # out of the catalog, the chart no longer has it, and a record naming it says which
    # metric to register before it can be opened
    assert "redness" not in views.series_names()
    with pytest.raises(ValueError, match=r"\[.toy_redness.\] are no metrics of the catalog"):
        RunStore(tmp_path / run.id).load()


def test_a_metric_whose_readings_are_missing_is_noted_not_made_up(
    world, backends, options, tmp_path
):
    toy = Metric(
        *[getattr(TOY, f) for f in ("name", "label", "low", "high", "better", "unit")],
        ("image_embedder",),
        "image",
        "toy",
        TOY.help,
        compute=lambda logit_scale: [],
        reads=("logit_scale",),
    )
    with registered(toy):
        run = begin(
            Refiner("gemini", backends=backends, backend_options=options),
            ACT,
            COUNTRY,
            out=tmp_path,
            rounds=0,
            candidates=1,
        )
    scores = run.rounds[0].best.scores
    assert scores.value("toy_redness") is None
    assert "has no softmax logit scale (not a CLIP)" in scores.notes["toy_redness"]


@pytest.mark.slow
def test_a_registered_metric_reaches_the_bench_and_the_agreement(
    world, siglip_path, options, tmp_path
):
    import csv

    from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
    from refine.harness.tasks.bench.task import run_bench
    from refine.human.agree import agreement
    from refine.human.ratings import load_ratings
    from refine.human.stored import stored_metrics
    from refine.present.report.bench import write_bench_page
    from tests.fakes.gemini_world import GREEN, RED

    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    gens = ["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"]
    plan = BenchPlan(
        generators=gens,
        prompts=plan_prompts(["Iran"], [ACT]),
        images_per_prompt=2,
        backends={"image_embedder": f"siglip:{siglip_path}"},
    )
    out = tmp_path / "bench"
    with registered(TOY):
        summary = run_bench(plan, out, backend_options=options).summary
        rows = list(csv.DictReader((out / "rows.csv").open()))
        # each image's redness under its name in rows.csv, after the quality readings and
        # the baselines (asked for with --baselines)
        from refine.harness.tasks.bench.summary import row_fields

        # the columns in the catalog's order, read where they are made: no position pinned
        assert list(rows[0]) == list(row_fields()) and "toy_redness" in rows[0]
        for row in rows:
            with Image.open(out / row["file"]) as im:
                assert float(row["toy_redness"]) == pytest.approx(redness([im])[0])
        # results.json: its mean over the prompts (one prompt: the mean of its images)
        saved = json.loads((out / "results.json").read_text())["summary"]
        for g in gens:
            mine = [float(r["toy_redness"]) for r in rows if r["generator"] == g]
            mean = summary["generators"][g]["toy_redness"]["mean"]
            assert mean == pytest.approx(sum(mine) / len(mine))
            assert saved["generators"][g]["toy_redness"]["mean"] == pytest.approx(mean)
        red, green = (summary["generators"][g]["toy_redness"]["mean"] for g in gens)
        assert red > 0.7 > 0.3 > green
        # the leaderboard's column, with its label
        page = write_bench_page(out).read_text()
        assert '<th data-metric="toy_redness">redness</th>' in page
        # people's ratings against it: the redder, the worse
        ratings = tmp_path / "ratings.jsonl"
        with ratings.open("w") as f:
            for row in rows:
                score = 1 if float(row["toy_redness"]) > 0.5 else 5
                for rater in ("ana", "ben"):
                    line = {"image": str(out / row["file"]), "rater": rater, "faithfulness": score}
                    f.write(json.dumps(line) + "\n")
        found = agreement(load_ratings(ratings), stored_metrics([out]), ["faith", "toy_redness"])
        assert found.table["toy_redness"]["faithfulness"]["spearman"] == pytest.approx(-1.0)
