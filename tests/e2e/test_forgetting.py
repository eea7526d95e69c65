"""What each round fixed and lost (refine.loop.tracking) in a stand-in world whose editor
fixes a descriptor in round 1 and loses it in round 2 while fixing others."""

from __future__ import annotations

import json

import pytest

from refine.loop import tracking
from refine.loop.refiner import Refiner
from refine.records import Run
from tests.fakes.gemini_world import FORGETFUL
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"
RUG = ("setting", "Persian rug on floor")  # descriptor A: fixed in round 1, lost in round 2
# the rug aligns its near twin too (the real MiniLM's similarity passes tau)
CARPET = ("setting", "Persian carpeted floor")
MADE_IN_2 = {
    ("objects", "Estekan tea glasses"),
    ("attire", "Casual modern attire"),
    ("interaction", "Sharing communal dishes"),
}


def forgetful_run(world, backends, options, out, **raw):
    world.edits = dict(FORGETFUL)
    refiner = Refiner("gemini", backends=backends, backend_options=options)
    settings = dict(rounds=2, candidates=1, target=0.99, max_drift=2.0, writer="template")
    return begin(refiner, ACT, COUNTRY, out=out, **{**settings, **raw})


def states(run: Run, k: int) -> dict[tuple[str, str], str]:
    return {(t.dimension, t.item): t.state for t in run.rounds[k].tracked}


def test_a_round_says_what_it_fixed_and_lost(world, backends, options, tmp_path):
    run = forgetful_run(world, backends, options, tmp_path)
    assert [r.decision for r in run.rounds] == ["initial", "accepted", "accepted"]
    s0, s1, s2 = (states(run, k) for k in range(3))
    assert s0[RUG] == "missing" and s0[("objects", "Large rice platter")] == "aligned"
    assert s1[RUG] == "became aligned"
    assert s1[("objects", "Large rice platter")] == "stayed aligned"
    # round 2: A lost, B, C (and more) made, a hallucination and stereotypes removed
    assert s2[RUG] == "lost"
    assert all(s2[d] == "became aligned" for d in MADE_IN_2)
    lost = [t for t in run.rounds[2].tracked if t.state == "lost"]
    assert sorted((t.item, t.fixed_in) for t in lost) == [(CARPET[1], 1), (RUG[1], 1)]
    assert s2[("objects", "hamburgers")] == "removed"
    assert s2[("stereotypes", "people in traditional robes")] == "removed"
    assert s2[("stereotypes", "oversized hookahs")] == "kept"
    # the record on disk says the same
    saved = Run.model_validate_json((tmp_path / run.id / "run.json").read_text())
    assert saved.rounds[2].tracked == run.rounds[2].tracked
    # the run's forgetting: both setting fixes forgotten, the rest held
    f = tracking.forgetting(run)
    assert f["setting"].as_dict() == {
        "fixed": 2, "forgotten": 2, "lost": 2, "removed": 0, "came_back": 0
    }  # fmt: skip
    assert f["objects"].fixed == 1 and f["objects"].removed == 1 and f["objects"].forgotten == 0
    assert tracking.totals(f) == tracking.Forgetting(fixed=8, forgotten=2, lost=2, removed=4)


def test_keep_fixes_rejects_a_round_that_undoes_a_fix(world, backends, options, tmp_path):
    run = forgetful_run(world, backends, options, tmp_path, keep_fixes=0, keep_fixes_gain=0.5)
    assert [r.decision for r in run.rounds] == ["initial", "accepted", "rejected"]
    r2 = run.rounds[2]
    assert r2.reason.startswith("undoes 2 earlier fix(es), more than --keep-fixes 0: ")
    assert "setting: Persian rug on floor (fixed in round 1)" in r2.reason
    assert "under the +0.51 that would outweigh it" in r2.reason
    assert run.best_round == 1
    # its record still says what it would have lost
    assert states(run, 2)[RUG] == "lost"
    # the kept images forgot nothing
    assert tracking.totals(tracking.forgetting(run)).forgotten == 0


@pytest.mark.parametrize("keep, gain", [(2, 0.1), (0, 0.0)])
def test_keep_fixes_lets_a_round_through(world, backends, options, tmp_path, keep, gain):
    """Two fixes undone are within --keep-fixes 2; a gain over margin + 0 outweighs them."""
    run = forgetful_run(world, backends, options, tmp_path, keep_fixes=keep, keep_fixes_gain=gain)
    assert [r.decision for r in run.rounds] == ["initial", "accepted", "accepted"]


def test_the_timeline_draws_a_fix_then_its_loss(world, backends, options, tmp_path):
    from html.parser import HTMLParser

    from refine.present.report.run import render_run
    from refine.present.timeline import timeline, timeline_html

    run = forgetful_run(world, backends, options, tmp_path)
    tl = timeline(run)
    rows = {(r.dimension, r.item): r.cells for r in tl.rows}
    assert rows[RUG] == ["missing", "became aligned", "lost"]
    assert rows[("objects", "Estekan tea glasses")] == ["missing", "still missing",
                                                       "became aligned"]  # fmt: skip
    assert rows[("objects", "hamburgers")] == ["new", "kept", "removed"]
    # descriptors aligned in no round are counted, not drawn
    assert ("spatial", "Around a sofreh") not in rows and tl.never > 0

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.item = {}, None

            self.marks, self.cell = {}, None

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "tr":  # the timeline's rows name their item
                self.item = a.get("data-item")
                if self.item is not None:
                    self.rows[self.item] = []
            elif tag == "td" and self.item is not None:
                self.rows[self.item].append(a["data-state"])
                self.cell = a["data-state"]

        def handle_data(self, data):
            if self.cell is not None and data.strip():
                self.marks.setdefault(self.cell, set()).add(data.strip())

        def handle_endtag(self, tag):
            if tag == "td":
                self.cell = None

    page = render_run(tmp_path / run.id)  # the report holds the same table
    for html in (timeline_html(run), page):
        cells = Cells()
        cells.feed(html)
        assert cells.rows["Persian rug on floor"] == ["missing", "became aligned", "lost"]
        # each state its own mark, so that none is told from another by colour alone (round
        # 0's "aligned" and "missing" are later rounds' "stayed aligned" and "still missing")
        marks = {state: m.pop() for state, m in cells.marks.items() if len(m) == 1}
        assert marks.keys() == cells.marks.keys() and {"new", "kept"} <= marks.keys()
        twins = {"aligned": "stayed aligned", "missing": "still missing"}
        by_meaning = {twins.get(state, state): mark for state, mark in marks.items()}
        assert len(set(by_meaning.values())) == len(by_meaning), marks
    assert "2 of 8 fix(es) forgotten (setting 2 of 2)" in page
    assert 'style="background:#d73027' in timeline_html(run)  # lost is drawn red


@pytest.mark.slow
def test_memory_remembers_a_round_and_hands_it_to_a_later_writer(
    world, backends, options, tmp_path
):
    from refine.loop.memory import FixStore

    store = tmp_path / "fixes.jsonl"
    first = forgetful_run(world, backends, options, tmp_path, writer="llm", memory=True,
                          memory_store=str(store))  # fmt: skip
    assert [r.decision for r in first.rounds] == ["initial", "accepted", "accepted"]
    assert all(not r.hints for r in first.rounds)  # nothing remembered yet, its own left out
    fixes = FixStore(store).entries()
    # every change of the accepted rounds, with its instruction, editor and FAITH gain
    rug = next(f for f in fixes if f.descriptor == RUG[1])
    assert (rug.kind, rug.dimension, rug.round, rug.run) == ("fixed", "setting", 1, first.id)
    assert rug.instruction == first.rounds[1].text and rug.editor == first.backend_ids["editor"]
    gain = first.rounds[1].best.scores.faith - first.rounds[0].best.scores.faith
    assert rug.faith_gain == pytest.approx(gain, abs=1e-12)
    burgers = next(f for f in fixes if f.descriptor == "hamburgers")
    assert (burgers.kind, burgers.round) == ("removed", 2)
    assert len(fixes) == sum(
        t.state in ("became aligned", "removed") for r in first.rounds[1:] for t in r.tracked
    )
    calls_first, asked = len(world.log), len(world.written)
    # a later run: its first writer request carries the past fix of what it plans to change
    second = forgetful_run(world, backends, options, tmp_path / "2", writer="llm", memory=True,
                           memory_store=str(store))  # fmt: skip
    hints = second.rounds[1].hints
    # round 2 of the first run removed two of the items it plans to change (the hamburgers,
    # the robes): one hint, since both came from one instruction
    assert [(h.run, h.round, h.kind) for h in hints] == [(first.id, 2, "removed")]
    assert hints[0].descriptor in ("hamburgers", "people in traditional robes")
    request = world.written[asked]  # the second run's round-1 writer prompt
    assert "In earlier runs, these instructions fixed the same things" in request
    said = " ".join(first.rounds[2].text.split())
    h = hints[0]
    assert f'* "{said}" removed {h.dimension}: {h.descriptor} ({ACT}, FAITH +' in request
    # the report lists them under the round's instruction
    from refine.present.report.run import render_run

    page = render_run(tmp_path / "2" / second.id)
    assert "1 past fix(es) given to the writer (--memory)" in page
    assert f'data-run="{first.id}" data-round="2"' in page
    # hints cost no model call: besides its writer's requests (at most one a round; the
    # first run's may have been answered from the cache of an earlier test), the second
    # run sent what the first did
    wrote = len(world.written) - asked
    assert wrote <= 2 and len(world.log) - calls_first - wrote == calls_first - asked
    # a run without --memory is given none, and its writer's request holds no hint
    before = len(world.written)
    third = forgetful_run(world, backends, options, tmp_path / "3", writer="llm")
    assert all(not r.hints for r in third.rounds)
    assert all("In earlier runs" not in w for w in world.written[before:])
    # its writer's prompt is the first run's, answered from the cache: no request sent
    assert world.written[before:] == [] and third.rounds[1].text == first.rounds[1].text


def test_a_store_is_shown_exported_and_imported_and_a_bad_file_adds_nothing(tmp_path, monkeypatch):
    from refine.loop.memory import FixStore, store_path
    from refine.records import PastFix
    from tests.e2e.test_cli_run import cli

    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "data"))
    fix = PastFix(country="Nigeria", activity="wedding", dimension="attire",
                  descriptor="Aso-oke wrapper", kind="fixed", editor="gemini:x",
                  instruction="Replace the white gown with an aso-oke wrapper.",
                  faith_gain=0.08, run="r1", round=1)  # fmt: skip
    other = fix.model_copy(update={"country": "Iran", "round": 2, "faith_gain": None})
    assert FixStore(store_path("gemini")).add([fix, other, fix]) == 2  # the same one once
    shown = cli("memory", "show", "--country", "nigeria")
    assert shown.returncode == 0, shown.stderr
    assert (
        "1 fix(es)" in shown.stdout
        and "fixed attire: Aso-oke wrapper (FAITH +0.080" in shown.stdout
    )
    assert "Iran" not in shown.stdout
    out = tmp_path / "shared.jsonl"
    done = cli("memory", "export", str(out))
    assert done.returncode == 0 and "2 fix(es) written" in done.stdout
    assert "image" not in out.read_text()  # words and figures only
    # a teammate's profile takes them; a second import adds nothing new
    got = cli("memory", "import", str(out), "--profile", "local-gpu")
    assert got.returncode == 0 and "2 new fix(es) of 2" in got.stdout
    assert FixStore(store_path("local-gpu")).entries() == [fix, other]
    again = cli("memory", "import", str(out), "--profile", "local-gpu")
    assert "0 new fix(es) of 2" in again.stdout
    # one bad line: refused, naming the file and line, and nothing is added
    bad = tmp_path / "bad.jsonl"
    bad.write_text(out.read_text().splitlines()[0] + "\n" + '{"country": "Iran"}\n')
    refused = cli("memory", "import", str(bad), "--profile", "cpu")
    assert refused.returncode == 2 and f"{bad}: line 2 is not a remembered fix" in refused.stderr
    assert not store_path("cpu").exists()
    # a profile that is neither bundled nor a file: one line, with the nearest name
    typo = cli("memory", "show", "--profile", "gemni")
    assert typo.returncode == 2 and "did you mean 'gemini'?" in typo.stderr
    missing = cli("memory", "import", str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    assert cli("memory", "export", str(tmp_path / "x.csv")).returncode == 2


def test_fixes_whose_text_holds_line_separators_are_kept_whole(tmp_path, monkeypatch):
    """Instructions holding U+2028, U+2029 and U+0085 (JSON keeps them raw): imported,
    all three are shown, and a second import adds none (they were split in two by
    str.splitlines, dropped as cut lines, and imported again each time)."""
    from refine.loop.memory import FixStore, store_path
    from refine.records import PastFix
    from tests.e2e.test_cli_run import cli

    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "data"))
    fixes = [
        PastFix(
            country="Nigeria",
            activity="wedding",
            dimension="attire",
            descriptor=f"wrapper {k}",
            kind="fixed",
            editor="gemini:x",
            instruction=f"Replace the gown{sep}with an aso-oke wrapper.",
            faith_gain=0.08,
            run="r1",
            round=k + 1,
        )  # fmt: skip
        for k, sep in enumerate(["\u2028", "\u2029", "\u0085"])
    ]
    shared = tmp_path / "shared.jsonl"
    shared.write_text(
        "".join(json.dumps(f.model_dump(mode="json"), ensure_ascii=False) + "\n" for f in fixes)
    )
    got = cli("memory", "import", str(shared), "--profile", "gemini")
    assert got.returncode == 0 and "3 new fix(es) of 3" in got.stdout, got.stderr
    assert FixStore(store_path("gemini")).entries() == fixes
    shown = cli("memory", "show", "--country", "nigeria")
    assert "3 fix(es)" in shown.stdout
    again = cli("memory", "import", str(shared), "--profile", "gemini")
    assert "0 new fix(es) of 3" in again.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(shared.read_bytes() + b'{"country": "\xff"}\n')
    refused = cli("memory", "import", str(bad), "--profile", "cpu")
    assert refused.returncode == 2 and f"{bad}: not UTF-8 text" in refused.stderr


def test_memory_is_refused_without_a_language_model_writer(tmp_path):
    from types import SimpleNamespace

    from refine import settings
    from refine.loop import memory

    spec, _ = settings.load({"activity": ACT, "country": COUNTRY, "memory": True,
                             "writer": "template"})  # fmt: skip
    with_llm = SimpleNamespace(names={"llm": "gemini:x"})
    with pytest.raises(ValueError, match="--writer template uses none"):
        memory.check(spec, with_llm)
    spec = spec.model_copy(update={"writer": "llm"})
    with pytest.raises(ValueError, match="the profile has none"):
        memory.check(spec, SimpleNamespace(names={}))
    broken = tmp_path / "fixes.jsonl"
    broken.write_text('{"country": 3}\n')
    spec = spec.model_copy(update={"memory_store": str(broken)})
    with pytest.raises(ValueError, match="line 1 is not a remembered fix"):
        memory.check(spec, with_llm)
