"""Scores are a value per catalog name, with the variant and the judge's reading beside it;
records written before (a field per metric, the variant in words) open into the same
names. The earlier files are the golden run.json and bench cells.jsonl as they were
written then (tests/golden/earlier/)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from metrics.catalog import names
from refine.harness.results import write_csv
from refine.harness.tasks.bench.cells import BenchStore
from refine.harness.tasks.bench.summary import image_rows, row_fields
from refine.records import Run, Scores

EARLIER = Path(__file__).resolve().parents[1] / "golden" / "earlier"
VALUES = ("align", "hal", "exag", "faith", "quality", "clip_iqa")


def test_an_earlier_run_json_opens_with_every_value_under_its_catalog_name():
    raw = json.loads((EARLIER / "run.json").read_text())
    run = Run.model_validate(raw)
    seen = 0
    for r_raw, r in zip(raw["rounds"], run.rounds, strict=True):
        for c_raw, c in zip(r_raw["candidates"], r.candidates, strict=True):
            old, new = c_raw["scores"], c.scores
            for name in VALUES:
                assert new.value(name) == old[name], name
                seen += old[name] is not None
            assert new.variants == {"exag": "exag:judge-rubric", "faith": "faith:ahead"}
            assert new.readings["exag"].mode == old["judge_mode"] == "logprobs"
            assert new.per_dimension == old["per_dimension"] and new.tau == old["tau"]
            # read by log-probabilities: the sampling error recorded as 0 (null before)
            assert old["quality_reading"]["stderr"] is None
            assert new.quality_reading.model_dump() == {**old["quality_reading"], "stderr": 0.0}
            assert new.readings["exag"].stderr == 0.0 and new.stderr("exag") is None
    assert seen >= 4 * len(run.rounds)
    # written again, it is this layout, and opens to the same record
    again = Run.model_validate(json.loads(run.model_dump_json()))
    assert (
        again == run
        and "values" in json.loads(run.model_dump_json())["rounds"][0]["candidates"][0]["scores"]
    )


def test_an_earlier_bench_cells_file_gives_its_values_under_catalog_names(tmp_path):
    shutil.copy(EARLIER / "cells.jsonl", tmp_path / "cells.jsonl")
    lines = [json.loads(x) for x in (EARLIER / "cells.jsonl").read_text().splitlines()]
    store = BenchStore(tmp_path)
    rows = [row for line in store.records() for row in image_rows(line)]
    write_csv(tmp_path / "rows.csv", row_fields(), rows)
    rows = list(csv.DictReader((tmp_path / "rows.csv").open()))
    images = [(line, im) for line in lines for im in line["images"]]
    assert len(rows) == len(images) > 0
    compared = set()
    for row, (line, im) in zip(rows, images, strict=True):
        assert im["exag_variant"].startswith("judge-rating")  # the words of then
        assert row["exag_variant"] == "exag:judge-rubric"  # the name now
        # every value the earlier file holds, per image and per prompt, by catalog name
        for name in (*names(level="image"), *names(level="prompt")):
            if name not in im and name not in line:
                continue
            held = im.get(name, line.get(name))
            if isinstance(held, bool):  # a cell's expectations flag
                continue
            if held is None:  # missing then, blank now (CLIP-IQA with an API judge)
                assert row[name] == "", name
            else:
                assert float(row[name]) == pytest.approx(held, rel=1e-15), name
            compared.add(name)
    assert len(compared) == 11, compared  # AHEaD's 4, quality and CLIP-IQA, the prompt's 5


@pytest.mark.parametrize(
    ("said", "mode", "variants", "notes", "reading"),
    [
        (
            "judge-rating (1-5 rubric, (E[rating] - 1) / 4) [judge sampled k=8, EXAG s.e. 0.012]",
            "sampled k=8",
            {"exag": "exag:judge-rubric", "faith": "faith:ahead"},
            {},
            ("sampled", 8, 0.012),
        ),
        (
            "reference-yes (judge yes-probability vs reference images) [judge sampled k=5]",
            "sampled k=5",
            {"exag": "exag:ita", "faith": "faith:ahead"},
            {},
            ("sampled", 5, None),
        ),
        (
            "not computed: no stereotype candidates; FAITH = mean(ALIGN, 1 - HAL) without EXAG",
            None,
            {"faith": "faith:no-exag"},
            {"exag": "no stereotype candidates"},
            None,
        ),
    ],
    ids=["sampled rubric", "sampled ita", "no candidates"],
)
def test_every_earlier_wording_has_its_name(said, mode, variants, notes, reading):
    exag = None if "not computed" in said else 0.25
    old = {"align": 0.5, "hal": 0.2, "exag": exag, "faith": 0.6, "exag_variant": said}
    old |= {"judge_mode": mode, "exag_stderr": reading[2] if reading else None}
    s = Scores.model_validate(old)
    assert s.values == {"align": 0.5, "hal": 0.2, "exag": exag, "faith": 0.6}
    assert (s.variants, s.notes) == (variants, notes)
    got = s.readings.get("exag")
    assert (None if got is None else (got.method, got.k, got.stderr)) == reading


def test_scores_hold_only_the_catalogs_metrics_and_variants():
    with pytest.raises(ValidationError, match=r"\['fidelity'\] are no metrics of the catalog"):
        Scores(values={"align": 0.5, "fidelity": 0.9})
    with pytest.raises(ValidationError, match="'faith:ahead' is no variant of exag"):
        Scores(values={"exag": 0.1}, variants={"exag": "faith:ahead"})
    with pytest.raises(ValidationError, match="not a number"):
        Scores(values={"align": float("nan")})
    with pytest.raises(ValidationError, match="k >= 2"):
        Scores(values={"exag": 0.1}, readings={"exag": {"method": "sampled", "k": 1}})


def test_sampled_values_carry_their_error_into_the_bench_cell_and_read_ones_none():
    from types import SimpleNamespace

    from metrics.judge import Reading
    from refine.harness.tasks.bench.cells import _image_record
    from refine.records import Feedback, QualityReading

    values = {"align": 0.5, "hal": 0.2, "exag": 0.3, "faith": 0.6667, "quality": 0.7}
    quality = {"naturalness": 7.0, "artifacts": 7.0, "judge": "j"}
    sampled = Scores(
        values=values,
        readings={"exag": Reading("sampled", 2, 0.09), "faith": Reading("sampled", 2, 0.03)},
        quality_reading=QualityReading(**quality, method="sampled k=8", stderr=0.05),
    )
    read = Scores(
        values=values,
        readings={"exag": Reading(), "faith": Reading()},
        quality_reading=QualityReading(**quality, method="logprobs"),
    )
    assert [sampled.stderr(m) for m in ("faith", "exag", "quality", "align")] == [
        0.03,
        0.09,
        0.05,
        None,
    ]
    assert [read.stderr(m) for m in ("faith", "exag", "quality")] == [None] * 3

    def record(scores):
        assessed = SimpleNamespace(scores=scores, observed={}, feedback=Feedback())
        return _image_record("a.png", 0, assessed, None)

    assert record(sampled)["stderr"] == {"exag": 0.09, "faith": 0.03, "quality": 0.05}
    assert "stderr" not in record(read)


@pytest.mark.parametrize("stderr", [float("inf"), float("nan"), -0.1, "0.1 ± 9"])
def test_a_record_whose_error_is_no_number_at_least_0_is_refused(stderr):
    """A run.json from a folder is shown ± its errors: one that is not a finite number
    >= 0 is refused on opening, for the judge's readings and the quality's."""
    from refine.records import QualityReading

    with pytest.raises((ValidationError, ValueError)):
        Scores(
            values={"align": 0.5, "hal": 0.2},
            readings={"exag": {"method": "sampled", "k": 2, "stderr": stderr}},
        )
    with pytest.raises(ValidationError):
        QualityReading(naturalness=1, artifacts=1, judge="j", method="sampled k=8", stderr=stderr)


def test_a_reading_by_log_probabilities_records_no_sampling_error():
    """The model's own probabilities, read once: its error is recorded as 0 (a record
    written before, null, opens so), shown as none (no ±), and a record that gives it
    another is refused."""
    from refine.records import QualityReading

    s = Scores(values={"exag": 0.2}, readings={"exag": {"method": "logprobs", "stderr": None}})
    assert s.readings["exag"].stderr == 0.0 and s.stderr("exag") is None
    q = QualityReading(naturalness=6, artifacts=2, judge="j", method="logprobs")
    assert q.stderr == 0.0
    with pytest.raises((ValidationError, ValueError), match="no sampling error"):
        Scores(values={"exag": 0.2}, readings={"exag": {"method": "logprobs", "stderr": 0.1}})
    with pytest.raises(ValidationError, match="no sampling error"):
        QualityReading(naturalness=6, artifacts=2, judge="j", method="logprobs", stderr=0.1)
