"""CAIRE as a per-round metric and feedback in the loop (fake Gemini world, tiny SigLIP KB)."""

from __future__ import annotations

import json

import pytest

from refine.events import StageStarted
from refine.loop.refiner import Refiner
from tests.fakes.gemini_world import CULTURE, GREEN, RED, rating_distribution
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"


@pytest.mark.slow
def test_each_round_is_rated_and_a_misreading_feeds_the_next_edit(
    world, backends, options, tmp_path, kb_dir
):
    events = []
    refiner = Refiner("gemini", backends, options, on_event=events.append)
    run = begin(
        refiner,
        ACT,
        COUNTRY,
        out=tmp_path / "runs",
        rounds=1,
        candidates=2,
        target=1.0,
        max_drift=2.0,
        caire_labels=["Turkey", "India"],
        caire_kb=str(kb_dir),
        writer="template",  # the template's lines are read below
        caire_top_k=3,
    )
    r0, r1 = run.rounds
    assert [s.label for s in r0.caire.labels] == ["Iran", "Turkey", "India"]
    # round 0 is red: the world's judge reads it as Turkey 4, Iran 2
    assert [s.score for s in r0.caire.labels] == [
        CULTURE[RED][x] for x in ("Iran", "Turkey", "India")
    ]
    assert r0.caire.labels[0].probabilities == pytest.approx(rating_distribution(2))
    assert r0.caire.mode == "kb" and r0.caire.entity["name"] == "tea"
    assert r0.caire_note == "reads more as Turkey (4/5) than Iran (2/5)"
    # the next instruction asks for that first, within max_changes
    lines = [x[2:] for x in r1.text.splitlines() if x.startswith("- ")]
    assert lines[0].startswith("Make it read as Iran rather than Turkey")
    assert len(lines) == 5
    # round 1's chosen image is green: Iran 5, no note
    assert [s.score for s in r1.caire.labels] == [
        CULTURE[GREEN][x] for x in ("Iran", "Turkey", "India")
    ]
    assert r1.caire_note is None and r1.timings["caire"] > 0
    assert StageStarted(round=1, stage="caire") in events
    # the saved record holds the same
    from refine.io.store import RunStore

    again = RunStore(tmp_path / "runs" / run.id).load()
    assert again.rounds[0].caire == r0.caire and again.rounds[0].caire_note == r0.caire_note
    # the HTML report shows each round's scores and the note
    import re

    from refine.present.report import write_report

    html = write_report(tmp_path / "runs" / run.id).read_text(encoding="utf-8")
    found = re.findall(r'class="caire-label" data-label="(\w+)" data-score="(\d)"', html)
    assert found == [
        ("Iran", "2"),
        ("Turkey", "4"),
        ("India", "1"),
        ("Iran", "5"),
        ("Turkey", "2"),
        ("India", "1"),
    ]
    assert html.count('class="caire-note"') == 1
    assert "reads more as Turkey (4/5) than Iran (2/5)" in html
    assert 'data-mode="kb"' in html and "linked to tea" in html


def test_kb_free_rounds_and_bad_settings_fail_before_any_call(world, backends, options, tmp_path):
    refiner = Refiner("gemini", backends, options)
    run = begin(refiner, ACT, COUNTRY, out=tmp_path, rounds=0, caire_labels=["Turkey"])
    assert run.rounds[0].caire.mode == "kb-free" and run.rounds[0].caire.entity is None
    assert [s.score for s in run.rounds[0].caire.labels] == [2, 4]
    calls = len(world.log)
    with pytest.raises(ValueError, match="not a knowledge base"):
        begin(
            refiner,
            ACT,
            COUNTRY,
            out=tmp_path,
            rounds=0,
            caire_labels=["Turkey"],
            caire_kb=str(tmp_path),
        )
    with pytest.raises(ValueError, match="labels given twice"):
        begin(refiner, ACT, COUNTRY, out=tmp_path, rounds=0, caire_labels=["Turkey", "turkey"])
    with pytest.raises(ValueError, match="needs culture labels"):
        begin(refiner, ACT, COUNTRY, out=tmp_path, rounds=0, caire_kb="kb")
    assert len(world.log) == calls


def test_refine_run_with_caire_flags(capsys, world, siglip_path, tmp_path, kb_dir):
    from tests.e2e.test_cli_run import run_args
    from tests.integration.test_caire_kb import run as cli

    base = run_args(tmp_path / "runs", 1, siglip_path)
    code, out, err = cli(capsys, *base, "--caire-labels", "Turkey,India", "--caire-kb", kb_dir)
    assert code == 0, err
    assert (
        "CAIRE round 0 (kb): Iran 2, Turkey 4, India 1  <- reads more as Turkey (4/5) than "
        "Iran (2/5)" in out
    )
    assert "CAIRE round 1 (kb): Iran 5, Turkey 2, India 1\n" in out
    assert "round 0: caire" in err
    code, _, err = cli(capsys, *base, "--caire-labels", "Turkey", "--caire-kb", tmp_path)
    assert code == 2 and "--caire-kb: " in err and "not a knowledge base" in err
    code, _, err = cli(capsys, *base, "--caire-kb", kb_dir)
    assert code == 2 and "--caire-kb: a CAIRE knowledge base needs culture labels" in err
    assert "(add --caire-labels)" in err


def test_batch_lines_name_caire_settings(tmp_path, kb_dir):
    from refine.harness.tasks.batch.specs import BatchSpecError, read_specs

    specs = tmp_path / "specs.csv"
    specs.write_text(
        "activity,country,caire_labels,caire_kb\n"
        f'{ACT},{COUNTRY},"Turkey, India",{kb_dir.name}\n'
        f"{ACT},{COUNTRY},Turkey,\n"
    )
    first, second = read_specs(specs)
    assert first.spec.caire_labels == ["Turkey", "India"]
    assert first.spec.caire_kb == str(kb_dir.resolve())
    assert second.spec.caire_labels == ["Turkey"] and second.spec.caire_kb is None
    bad = tmp_path / "bad.jsonl"
    line = {"activity": ACT, "country": "Iran", "caire_labels": ["Turkey"], "caire_kb": "runs"}
    bad.write_text(json.dumps(line) + "\n")
    (tmp_path / "runs").mkdir(exist_ok=True)
    with pytest.raises(BatchSpecError, match="line 1: caire_kb: .*not a knowledge base"):
        read_specs(bad)
