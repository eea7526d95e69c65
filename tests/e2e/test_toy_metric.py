"""A metric is one catalog entry and one function: a toy metric registered here (nothing
else changed) is computed by the assessor for every image of a run, kept in run.json under
its name, drawn in the run's chart and report, and explained in the glossary; where its
readings cannot be taken, the scores say why."""

from __future__ import annotations

import json

import pytest

from metrics.catalog import Metric, registered
from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from refine.present import views
from refine.present.report import write_report

ACT, COUNTRY = "people eating food at home", "Iran"


def redness(images):
    """The share of red in each image's mean colour."""
    out = []
    for im in images:
        r, g, b = (sum(c) / len(c) for c in zip(*im.convert("RGB").getdata(), strict=True))
        out.append(r / (r + g + b))
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


def test_a_registered_metric_reaches_the_record_the_chart_the_report_and_the_glossary(
    world, backends, options, tmp_path
):
    with registered(TOY):
        run = Refiner("gemini", backends=backends, backend_options=options).run(
            ACT, COUNTRY, out=tmp_path, rounds=1, candidates=2, target=0.99, max_drift=2.0
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
        assert "redness" in page
        assert RunStore(tmp_path / run.id).load() == run  # it opens as written
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
        run = Refiner("gemini", backends=backends, backend_options=options).run(
            ACT, COUNTRY, out=tmp_path, rounds=0, candidates=1
        )
    scores = run.rounds[0].best.scores
    assert scores.value("toy_redness") is None
    assert "has no softmax logit scale (not a CLIP)" in scores.notes["toy_redness"]
