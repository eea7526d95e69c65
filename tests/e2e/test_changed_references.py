"""A person changes what a run aims for mid-run (refine.loop.aims, through --review FILE):
from round 1 on the references lose a descriptor and gain one of the person's own, and a
stereotype candidate. The instruction follows the change; round 0 is re-matched before it
is compared (no model call); every candidate keeps FAITH against the pack, which equals a
rescore of the same observations against the pack; a roll back and a resume keep the
change; what cannot be is refused in one line."""

from __future__ import annotations

import json
import re

import pytest

from metrics.ahead import faith, score_images
from refine.io.store import RunStore
from refine.present.report.run import render_run
from refine.present.views import rounds_table, summary_lines
from refine.records import Run
from tests.e2e.test_cli_run import cli
from tests.e2e.test_loop import ACT, COUNTRY, refiner
from tests.runs import begin

GONE = "Basket of flatbreads"  # round 0's hamburgers are matched to it: "Replace ... with"
MINE = "Brass samovar on a <low> tray"  # text a page must escape
CHANGE = {
    "removed": [
        {"dimension": "objects", "phrase": GONE},
        {"dimension": "interaction", "phrase": "Engaging in conversation"},
    ],
    "added": [{"dimension": "objects", "phrase": MINE}],
    "stereotypes_removed": ["oversized hookahs"],
}


def _start(backends, options, tmp_path, lines, **kw):
    review = tmp_path / "review.jsonl"
    review.write_text("".join(json.dumps(x) + "\n" for x in lines))
    made = refiner(backends, options)
    run = begin(
        made, ACT, COUNTRY, out=tmp_path, candidates=1, target=0.99, max_drift=2.0,
        writer="template", review_file=str(review), **{"rounds": 2, **kw},
    )  # fmt: skip
    return made, run


@pytest.mark.slow
def test_a_change_of_references_steers_the_next_round(world, backends, options, tmp_path):
    loop, run = _start(backends, options, tmp_path, [{"round": 1, "references": CHANGE}])
    pack, now = run.pack_references, run.references
    assert GONE in pack.descriptors["objects"] and GONE not in now.descriptors["objects"]
    assert now.descriptors["objects"][-1] == MINE
    assert "oversized hookahs" in pack.stereotypes and "oversized hookahs" not in now.stereotypes
    (change,) = run.reference_changes
    assert (change.round, change.source, change.removed[0].phrase) == (1, "review file", GONE)
    assert change.describe() == (
        f"-objects: {GONE}; -interaction: Engaging in conversation; +objects: {MINE}; "
        "-stereotype: oversized hookahs"
    )
    # round 1's instruction is written against the person's references: the hamburgers are
    # no longer replaced by the removed basket, the hookahs are no longer toned down
    lines = [x[2:].rstrip(".") for x in run.rounds[1].text.splitlines() if x.startswith("- ")]
    assert not any("flatbread" in x.lower() for x in lines), lines
    assert "Tone down the oversized hookahs" not in lines
    print("TEXT", lines)
    r0 = run.rounds[0].best
    assert MINE in [m.phrase for m in r0.feedback.missing]
    assert GONE not in [m.phrase for m in r0.feedback.missing + r0.feedback.aligned]
    assert "oversized hookahs" not in [e.candidate for e in r0.feedback.exaggerated]
    # what --keep-fixes and --memory read, each round's fixes and losses, is re-matched too
    tracked = {(t.kind, t.item) for t in run.rounds[0].tracked}
    assert ("descriptor", MINE) in tracked and ("descriptor", GONE) not in tracked
    # every round is scored against them (re-matched for round 0, before the compare), and
    # keeps its figures against the pack: a rescore of the same observations against it
    assert [r.references for r in run.rounds] == [1, 1, 1]
    with loop.backends.using("text_embedder") as embedder:
        for r in run.rounds:
            for c in r.candidates:
                s = c.scores
                for refs, figures in ((pack, c.against_pack), (now, s.values)):
                    (a,) = score_images(refs.descriptors, [c.observed], embedder, tau=run.spec.tau)
                    # the same embedder on the same phrases: float32 sums in one order
                    assert figures["align"] == pytest.approx(a.align, abs=1e-9)
                    assert figures["hal"] == pytest.approx(a.hal, abs=1e-9)
                    want = faith(a.align, a.hal, s.exag)[0]
                    assert figures["faith"] == pytest.approx(want, abs=1e-9)
    # round 0 showed the removed "Engaging in conversation": its ALIGN against the pack was
    # 4 of 50, against the person's 3 of 50
    assert (r0.against_pack["align"], r0.scores.align) == (pytest.approx(0.08), pytest.approx(0.06))
    # round 1 was compared with round 0 re-matched, never across the change
    assert run.rounds[1].reason.startswith(f"FAITH {r0.scores.faith:.3f} -> ")
    assert f"{r0.scores.faith:.3f}" != f"{r0.against_pack['faith']:.3f}"
    # the record on disk is the record returned, at layout 4
    doc = json.loads((tmp_path / run.id / "run.json").read_text())
    assert doc["schema_version"] == 4
    assert Run.read(doc).model_copy(update={"schema_version": run.schema_version}) == run
    # the report: the change in the timeline from round 1, FAITH both ways per round, the
    # person's text escaped; the rounds table and the summary say so too
    page = render_run(tmp_path / run.id)
    assert "&lt;low&gt;" in page and "<low>" not in page
    assert page.count('data-state="changed"') == 2  # rounds 1 and 2 of the change's row
    pattern = r'<tr data-round="(\d+)" data-faith="([^"]+)" data-faith-pack="([^"]+)"'
    both = {int(k): (float(a), float(b)) for k, a, b in re.findall(pattern, page)}
    assert both == {  # the page's data attributes: 6 decimals
        r.index: (
            pytest.approx(r.best.scores.faith, abs=1e-6),
            pytest.approx(r.best.against_pack["faith"], abs=1e-6),
        )
        for r in run.rounds
    }
    assert all(row[1].endswith(" · your references") for row in rounds_table(run))
    said = summary_lines(run, "x")
    start = f"references changed by hand from round 1 (review file, {change.at}): "
    assert [x for x in said if x.startswith(start)] == [start + change.describe()]
    best = run.best().best
    assert (
        f"FAITH of the best round ({run.best_round}): {best.scores.faith:.3f} against your "
        f"references, {best.against_pack['faith']:.3f} against the pack"
    ) in said
    # a roll back to round 0 keeps the person's references and the change
    again = loop.branch(tmp_path / run.id, 0, rounds=1)
    assert again.references == now and again.pack_references == pack
    assert again.reference_changes == run.reference_changes
    assert not any("flatbread" in x.lower() for x in again.rounds[1].text.splitlines())
    # a run stopped part-way and resumed keeps them too, the change made once
    store = RunStore(tmp_path / again.id)
    cut = again.model_copy(update={"rounds": again.rounds[:1], "status": "interrupted",
                                   "stop_reason": None, "best_round": 0})  # fmt: skip
    store.save(cut)
    resumed = loop.resume(store.dir)
    assert len(resumed.rounds) == 2 and resumed.references == now
    assert resumed.reference_changes == run.reference_changes


def test_a_change_that_cannot_be_is_refused(world, backends, options, tmp_path):
    # a descriptor over 120 characters: refused in one line naming the line, nothing made
    review = tmp_path / "review.jsonl"
    long = {"round": 1, "references": {"added": [{"dimension": "objects", "phrase": "x" * 121}]}}
    review.write_text(json.dumps(long) + "\n")
    done = cli("run", ACT, "--country", COUNTRY, "--review", review, "--out", tmp_path / "no")
    assert done.returncode == 2 and not (tmp_path / "no").exists()
    assert "line 1: references.added.0.phrase: a descriptor is at most 120 characters" in (
        done.stderr
    )
    # a descriptor that is not there: the run stops before the round, saying how to go on
    gone = {"removed": [{"dimension": "objects", "phrase": "Hamburgers"}]}
    _, run = _start(backends, options, tmp_path, [{"round": 1, "references": gone}])
    assert len(run.rounds) == 1 and not run.reference_changes and run.pack_references is None
    assert run.stop_reason == (
        "stopped before round 1: the review file's change of references cannot be made "
        "('Hamburgers' is no reference descriptor of objects); mend it and go on with "
        "refine run --resume"
    )
