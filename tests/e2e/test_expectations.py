"""Cultural expectations (CulturalFrames): built by the language model (cached), checked by
the judge per image, the met shares by hand, and missed ones asked for in the next edit;
through the fake Gemini world and the real CLI."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from refine.io.store import RunStore
from tests.e2e.test_cli_run import cli, run_args, scored
from tests.fakes.gemini_world import EXPECT_P, GREEN, NOWRUZ_REFS, RED

PROMPT = "a family celebrating Nowruz at home"


def statements(kind):
    return [e["statement"].rstrip(".") for e in NOWRUZ_REFS["expectations"][kind]]


def p_of(colour, statement):
    return next(v for k, v in EXPECT_P[colour].items() if k in statement)


@pytest.fixture
def built(world, tmp_path):
    out = tmp_path / "nowruz.json"
    done = cli("expectations", "build", PROMPT, "--country", "Iran", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, done


def test_build_lists_both_kinds_and_is_cached(built, world, tmp_path):
    out, done = built
    doc = json.loads(out.read_text())
    assert doc["prompt"] == PROMPT and doc["country"] == "Iran"
    got = {
        k: [e["statement"] for e in doc["expectations"] if e["kind"] == k]
        for k in ("explicit", "implicit")
    }
    assert got == {"explicit": statements("explicit"), "implicit": statements("implicit")}
    assert doc["expectations"][2]["reason"] == "every Nowruz home has one"
    assert "implicit:\n  - A haft-sin table is set  (every Nowruz home has one)" in done.stdout
    asked = world.refs_asked.count("expectations")
    again = cli("expectations", "build", PROMPT, "--country", "Iran", "--json")
    assert again.returncode == 0 and world.refs_asked.count("expectations") == asked  # cached
    bad = cli("expectations", "build", "x\x07y", "--country", "Iran")
    assert bad.returncode == 2 and "printable" in bad.stderr


def test_score_checks_each_image(built, world, tmp_path):
    out, _ = built
    red, green = tmp_path / "red.png", tmp_path / "green.png"
    Image.new("RGB", (64, 48), RED).save(red)
    Image.new("RGB", (64, 48), GREEN).save(green)
    done = cli(
        "score",
        str(red),
        str(green),
        "--activity",
        "people eating food at home",
        "--country",
        "Iran",
        "--expectations",
        str(out),
        "--json",
        "--out",
        tmp_path / "score",
    )
    assert done.returncode == 0, done.stderr
    rows = scored(done.stdout)
    for row, colour in zip(rows, (RED, GREEN), strict=True):
        ex = row["expectations"]
        for check in ex["checks"]:
            assert check["p_yes"] == pytest.approx(p_of(colour, check["statement"]), abs=1e-6)
            assert check["met"] == (p_of(colour, check["statement"]) > 0.5)
        for kind in ("explicit", "implicit"):
            mine = [p_of(colour, s) for s in statements(kind)]
            assert ex[f"{kind}_met"] == pytest.approx(sum(p > 0.5 for p in mine) / len(mine))
    assert rows[0]["expectations"]["explicit_met"] == 0.5  # red: family yes, Nowruz no
    assert rows[1]["expectations"]["implicit_met"] == pytest.approx(2 / 3)
    text = cli(
        "score",
        str(red),
        "--activity",
        "people eating food at home",
        "--country",
        "Iran",
        "--expectations",
        str(out),
        "--out",
        tmp_path / "score-red",
    )
    assert "implicit expectations met: 33%; missed: A haft-sin table is set; " in text.stdout
    broken = tmp_path / "broken.json"
    broken.write_text('{"prompt": "x", "country": "Iran", "expectations": [{"kind": "vague"}]}')
    bad = cli(
        "score",
        str(red),
        "--activity",
        "people eating food at home",
        "--country",
        "Iran",
        "--expectations",
        str(broken),
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: --expectations: ")
    assert "broken.json" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_run_checks_every_round_and_asks_for_what_is_missed(built, world, siglip_path, tmp_path):
    out, _ = built
    args = [*run_args(tmp_path / "runs", 1, siglip_path), "--expectations", str(out), "--json"]
    done = cli(*args, "--candidates", "1", "--writer", "template")
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    r0, r1 = run["rounds"]
    # the changes the instruction was built from: the missed expectations first
    assert [c["kind"] for c in r1["changes"][:3]] == ["other"] * 3
    assert len(run["spec"]["expectations"]) == 5
    ex = r0["expectations"]
    assert [c["p_yes"] for c in ex["checks"]] == pytest.approx(
        [p_of(RED, c["statement"]) for c in ex["checks"]], abs=1e-6
    )
    # red misses three (haft-sin 0.1, goldfish 0.2, Nowruz 0.3); max_changes 5 leaves them 3
    assert (
        "- Show that a haft-sin table is set.\n- Show that a goldfish bowl stands on the table.\n"
        "- Show that people are celebrating Nowruz." in r1["text"]
    )
    assert r1["expectations"]["implicit_met"] is not None
    stored = RunStore(next((tmp_path / "runs").iterdir())).load()
    assert stored.rounds[1].expectations.judge == "gemini:gemini-3.8-flash"


@pytest.mark.slow
def test_the_report_chart_and_app_checklist_show_them(built, world, siglip_path, tmp_path):
    out, _ = built
    args = [*run_args(tmp_path / "runs", 1, siglip_path), "--expectations", str(out)]
    assert cli(*args, "--candidates", "1").returncode == 0
    run_dir = next((tmp_path / "runs").iterdir())
    run = RunStore(run_dir).load()
    from refine.present import views
    from refine.present.report import write_report
    from ui import adapters

    series = views.metric_series(run)
    assert series["explicit met"][0] == 0.5 and series["implicit met"][0] == pytest.approx(1 / 3)
    html = write_report(run_dir).read_text()
    import re

    first = html.split('<section class="round ')[1]  # round 0's section comes first
    found = re.findall(
        r'data-kind="(explicit|implicit)" data-met="(true|false)" data-p="([0-9.]+)"', first
    )
    assert [(k, m == "true", float(p)) for k, m, p in found][:5] == [
        (c.kind, c.met, pytest.approx(c.p_yes, abs=1e-6))
        for c in sorted(run.rounds[0].expectations.checks, key=lambda c: c.kind != "explicit")
    ]
    pairs = adapters.checklist(run.rounds[0])
    assert ("explicit expectations (1/2 met): ", None) in pairs
    assert ("A haft-sin table is set (0.10) ", "not met") in pairs
    assert views.expectations_text(run.rounds[0]) == "explicit 1/2 met, implicit 1/3 met"
