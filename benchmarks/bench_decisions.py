"""The loop's decisions under a judge that samples its answers: today's rule (FAITH rises by
the margin) beside the rule that counts a gain only beyond its noise, on the same readings.

Each simulated judge answers the ``exag:mllm`` question ("score is N", 1-5) and VQAScore's
yes-or-no question from a distribution, through the project's own reading code
(:class:`refine.backends.judging.ProbabilityJudge`: two answers, six more unless they agree,
the posterior's standard error), EXAG and FAITH as the catalog computes them
(:func:`metrics.ahead.exag_of`, :func:`metrics.ahead.faith_of`), and the decision as the loop
makes it (:func:`refine.loop.policy.decide_edit`, 2 candidates, margin 0.01). A judge that
ignores the seed draws every answer afresh; one that follows it gives the same answers to the
same picture (an edit that changed nothing is read exactly as its parent), and answers of
its own to another picture.

For each judge it prints, over ``--decisions`` decisions per condition:

* how often an edit that changes nothing is accepted;
* how often a true FAITH gain of +0.05 and +0.1 is accepted, from EXAG alone (the ratings'
  distribution moved down by 0.6 and 1.2, ALIGN and HAL fixed) and from ALIGN alone;
* the answers the candidates' readings took per decision;

and for EXAG(ITA) (5 photos; 3 and 5 stereotype candidates, each at P(Yes) 0.3 on the photos):
the mean EXAG at zero true excess and at a true excess of 0.2 on one candidate, how often a
candidate is named exaggerated (any, at zero excess; the true one, at 0.2), and the answers
an image's candidates took: as read before (2 answers, 6 more unless they agree; the paper's
value; any positive excess named) beside the assessor's readings, value and naming now
(:func:`refine.evaluate.assess.ita_answers`, :func:`metrics.ahead.exag_of`).

With ``--close-rejections`` it prints, instead, what reading a close rejection again would
do (:func:`close_rejections`).

Usage: python benchmarks/bench_decisions.py [--decisions 2000] [--seed 0] [--close-rejections]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metrics.ahead import ExagAnswer, exag_of, exaggeration, faith_of  # noqa: E402
from metrics.judge import Reading  # noqa: E402
from refine.backends.judging import ProbabilityJudge  # noqa: E402
from refine.evaluate.assess import PhotoBaseline, ita_answers, vqa_stderr  # noqa: E402
from refine.loop import confirm, policy  # noqa: E402
from refine.records import Candidate, Feedback, Scores  # noqa: E402

# the judges' answers over the ratings 1..5 for the parent's picture (the question asks how
# exaggerated it is: high ratings, so that a better picture's can move down)
JUDGES = {
    "sure": (0.0, 0.0, 0.05, 0.95, 0.0),
    "peaked": (0.0, 0.0, 0.1, 0.8, 0.1),
    "torn": (0.0, 0.0, 0.2, 0.5, 0.3),
    "flat": (0.2, 0.2, 0.2, 0.2, 0.2),
    "bimodal": (0.0, 0.3, 0.0, 0.0, 0.7),
}
SEEDED = "peaked, follows seeds"  # the peaked judge, answering each seed the same way
ALIGN, HAL, MARGIN = 0.5, 0.2, 0.01


def shifted(p: Sequence[float], down: float) -> tuple[float, ...]:
    """The ratings' distribution moved down by ``down`` (a share of each answer moves to the
    next lower one; what would fall below 1 stays at 1)."""
    out = list(p)
    whole, part = int(down), down - int(down)
    for _ in range(whole):
        out = [out[0] + out[1], *out[2:], 0.0]
    if part:
        moved = [q * part for q in out]
        out = [q - m for q, m in zip(out, moved, strict=True)]
        out[0] += moved[0]
        for i in range(1, len(out)):
            out[i - 1] += moved[i]
    return tuple(out)


def mean_rating(p: Sequence[float]) -> float:
    return sum((i + 1) * q for i, q in enumerate(p))


class Picture:
    """What the simulated judge is shown: its answers' odds, and a draw of its own."""

    def __init__(self, odds: dict[str, float], token: int) -> None:
        self.odds, self.token = odds, token


class SimJudge(ProbabilityJudge):
    """A judge without log-probabilities whose answers follow each picture's odds."""

    def __init__(self, follows_seed: bool) -> None:
        self.model, self.judge_mode, self.samples, self.agree = "sim", "sampled", 8, 2
        self.concurrency, self.follows_seed = 8, follows_seed
        self.answers, self.asked, self.lock = 0, {}, threading.Lock()

    def _sample_answer(self, image, text, answers, seed, purpose):
        # a judge that follows the seed answers the same picture and seed alike; one that
        # ignores it, afresh each time it is asked (its n-th answer for that picture and
        # seed: the draws do not depend on the order the reading's threads run in)
        with self.lock:
            self.answers += 1
            n = self.asked[image.token, seed] = self.asked.get((image.token, seed), 0) + 1
        key = f"{image.token}-{seed}" + ("" if self.follows_seed else f"-{n}")
        u, total = random.Random(key).random(), 0.0
        for answer in answers:
            total += image.odds.get(answer, 0.0)
            if u < total:
                return answer
        return answers[-1]


class Sim:
    def __init__(self, seed: int) -> None:
        self.draws = random.Random(seed)

    def picture(self, odds: dict[str, float]) -> Picture:
        return Picture(odds, self.draws.getrandbits(48))


def rating_odds(p: Sequence[float]) -> dict[str, float]:
    return {f"score is {i + 1}": q for i, q in enumerate(p)}


def candidates_of(
    judge: SimJudge, sim: Sim, odds: list, align: list[float], same_as: Picture | None = None
) -> tuple[list[Candidate], list[Picture]]:
    """Each picture's rating read by ``judge``, and its scores as the catalog computes them
    (``same_as``: the pictures are that one, unchanged)."""
    pictures = [same_as or sim.picture(rating_odds(p)) for p in odds]
    ratings = judge.rate_prefixed(pictures, ["how exaggerated?"] * len(pictures), "score is ")
    answers = [ExagAnswer("exag:mllm", r.method, r.expectation, r.stderr) for r in ratings]
    exag = exag_of(answers)
    values = [{"align": a, "hal": HAL, "exag": e.value} for a, e in zip(align, exag, strict=True)]
    faith = faith_of(values, [{"exag": e.reading} for e in exag])
    out = []
    for v, e, f in zip(values, exag, faith, strict=True):
        readings = {"exag": e.reading}
        if f.reading is not None:
            readings["faith"] = f.reading
        scores = Scores(values={**v, "faith": f.value}, readings=readings)
        out.append(
            Candidate(seed=0, image="x.png", observed={}, scores=scores, feedback=Feedback())
        )
    return out, pictures


def fresh(judge: SimJudge, pictures: list[Picture], seed: int, every: bool) -> list:
    """EXAG of ``pictures`` read again from fresh answers (the same fresh seeds for each;
    all k with ``every``), as :func:`refine.evaluate.assess.fresh_exag` reads it."""
    prompts = ["how exaggerated?"] * len(pictures)
    ratings = judge.rate_prefixed(pictures, prompts, "score is ", first_seed=seed, every=every)
    return exag_of([ExagAnswer("exag:mllm", r.method, r.expectation, r.stderr) for r in ratings])


def plain(c: Candidate) -> Candidate:
    """The candidate as today's rule saw it: no error with its FAITH."""
    return c.model_copy(update={"scores": c.scores.model_copy(update={"readings": {}})})


def decisions(p, follows_seed: bool, n: int, seed: int, exag_down=0.0, align_up=0.0):
    """(today's accept rate, the new rule's, answers per decision) over ``n`` decisions."""
    judge, sim = SimJudge(follows_seed), Sim(seed)
    q = shifted(p, exag_down)
    today = new = 0
    for _ in range(n):
        before = judge.answers
        (parent,), (picture,) = candidates_of(judge, sim, [p], [ALIGN])
        spent = judge.answers - before  # the parent's reading was taken in its own round
        unchanged = picture if not (exag_down or align_up) else None
        kids, seen = candidates_of(judge, sim, [q, q], [ALIGN + align_up] * 2, unchanged)
        judge.answers -= spent
        was = policy.decide_edit([plain(c) for c in kids], plain(parent), 0, MARGIN, 2.0)
        now = policy.decide_edit(kids, parent, 0, MARGIN, 2.0)
        # a close gain read again on fresh answers, as the loop does (refine.loop.confirm)
        pair = [seen[now.chosen], picture]
        now = confirm.confirmed(
            now,
            kids,
            parent,
            0,
            MARGIN,
            lambda _, seed, every, pair=pair: fresh(judge, pair, seed, every),
        )
        today += was.decision == "accepted"
        new += now.decision == "accepted"
    return today / n, new / n, judge.answers / n


def close_rejections(p, n: int, seed: int, exag_down=0.0) -> tuple[float, ...]:
    """What reading a close rejection again would do (``--close-rejections``): over ``n``
    decisions of a judge that ignores the seed, the accept rate of the loop's rule, then of
    that rule where a rejection whose gain reached the margin but not its bound is read
    again (the chosen image's EXAG and its parent's, all k fresh answers each, the same
    seeds for both) and decided at 90% on the fresh answers alone, then on the first and
    fresh answers pooled; and the fresh answers that took per decision."""
    judge, sim = SimJudge(False), Sim(seed)
    q = shifted(p, exag_down)
    rule = alone = pooled = 0
    extra = 0
    for _ in range(n):
        (parent,), (picture,) = candidates_of(judge, sim, [p], [ALIGN])
        unchanged = picture if not exag_down else None
        kids, seen = candidates_of(judge, sim, [q, q], [ALIGN] * 2, unchanged)
        now = policy.decide_edit(kids, parent, 0, MARGIN, 2.0)
        pair = [seen[now.chosen], picture]
        now = confirm.confirmed(
            now, kids, parent, 0, MARGIN,
            lambda _, seed, every, pair=pair: fresh(judge, pair, seed, every),
        )  # fmt: skip
        kept = now.decision == "accepted"
        rule += kept
        c = kids[now.chosen]
        gain = policy.faith_of(c) - policy.faith_of(parent)
        if kept or gain < MARGIN or "noise cannot explain" not in now.reason:
            alone, pooled = alone + kept, pooled + kept
            continue
        before = judge.answers
        again = fresh(judge, pair, 3 * confirm.FULL_SEED, True)
        extra += judge.answers - before
        pairs = zip((c, parent), again, strict=True)
        (f1, s1), (f0, s0) = (confirm.fresh_faith(x, e) for x, e in pairs)
        alone += f1 - f0 - policy.CONFIDENCE_Z * math.hypot(s1, s0) >= MARGIN
        g = (policy.faith_of(c) + f1 - policy.faith_of(parent) - f0) / 2
        se = math.hypot(policy.faith_se(c), s1, policy.faith_se(parent), s0) / 2
        pooled += g - policy.CONFIDENCE_Z * se >= MARGIN
    return rule / n, alone / n, pooled / n, extra / n


def ita(follows_seed: bool, n: int, seed: int, candidates: int, excess: float) -> list[float]:
    """Over ``n`` images: mean EXAG(ITA) today and now, the share named today and now
    (the candidate at ``excess``; any, at zero excess), and the answers an image's
    candidates took today and now. Today: readings of two answers, six more unless they
    agree, the paper's value, any positive excess named; now: the assessor's readings
    (:func:`refine.evaluate.assess.ita_answers`), value and naming."""
    judge, sim = SimJudge(follows_seed), Sim(seed)
    names = [f"c{j}" for j in range(candidates)]
    out = [0.0] * 6
    for _ in range(n):
        for way in (0, 1):
            value, named, spent = ita_image(judge, sim, names, excess, way == 1)
            out[way] += value
            out[2 + way] += named
            out[4 + way] += spent
    return [x / n for x in out]


def ita_image(judge, sim, names, excess, now: bool) -> tuple[float, bool, int]:
    """One image's EXAG(ITA), whether its candidate is named, and the answers its
    candidates' readings took (the photos' are taken once a run, so not counted)."""
    photos = []
    for _ in range(5):
        pics = [sim.picture({"Yes": 0.3, "No": 0.7}) for _ in names]
        photos.append(ita_answers(judge, pics, names) if now else judge.vqa_score(pics, names))
    baseline = PhotoBaseline.of(photos)
    odds = [0.3 + (excess if j == 0 else 0.0) for j in range(len(names))]
    pics = [sim.picture({"Yes": y, "No": 1 - y}) for y in odds]
    before = judge.answers
    got = ita_answers(judge, pics, names, baseline) if now else judge.vqa_score(pics, names)
    spent = judge.answers - before
    answer = ExagAnswer(
        "exag:ita",
        mode=max((a.mode for a in got), key=lambda m: Reading.parse(m).calls),
        yes=tuple(a.value for a in got),
        baseline=tuple(baseline.mean),
        candidates=tuple(names),
        photos=5,
        yes_stderr=tuple(vqa_stderr(a) for a in got),
        baseline_stderr=tuple(baseline.stderr),
    )
    if now:
        value = exag_of([answer])[0].value
        listed = {c for c, _ in answer.exaggerated()}
    else:
        value = exaggeration([answer.yes], answer.baseline).value
        pairs = zip(names, answer.yes, answer.baseline, strict=True)
        listed = {c for c, y, b in pairs if y > b}
    return value, ("c0" in listed) if excess else bool(listed), spent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--close-rejections", action="store_true",
        help="only what reading close rejections again would do (torn, flat, bimodal)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    n, seed = args.decisions, args.seed
    start = time.perf_counter()
    if args.close_rejections:
        print(f"{n} decisions per cell; the loop's rule / close rejections read again, "
              "decided on the fresh answers alone / on first and fresh pooled "
              "(fresh answers a decision)")  # fmt: skip
        print(
            "| judge | null edit | EXAG +0.1 (the decision table's: true +0.100, +0.077, +0.095) |"
        )
        print("|---|---|---|")
        for name in ("torn", "flat", "bimodal"):
            cells = []
            for down in (0.0, 1.2):
                r = close_rejections(JUDGES[name], n, seed, down)
                cells.append(f"{r[0]:.1%} / {r[1]:.1%} / {r[2]:.1%} ({r[3]:.1f})")
            print(f"| {name} | {' | '.join(cells)} |")
        print(f"\n({time.perf_counter() - start:.0f} s)")
        return
    print(f"{n} decisions per cell; 2 candidates, margin {MARGIN}; today's rule / the new rule")
    print("| judge | null edit | EXAG +0.05 | EXAG +0.1 | ALIGN +0.05 | ALIGN +0.1 | answers |")
    print("|---|---|---|---|---|---|---|")
    judges = [(name, p, False) for name, p in JUDGES.items()]
    judges.append((SEEDED, JUDGES["peaked"], True))
    for name, p, follows in judges:
        cells, answers = [], []
        for exag_down, align_up in ((0, 0), (0.6, 0), (1.2, 0), (0, 0.15), (0, 0.3)):
            a, b, k = decisions(p, follows, n, seed, exag_down, align_up)
            if exag_down == 1.2:
                kept_tenth = b
            gain = (align_up + (mean_rating(p) - mean_rating(shifted(p, exag_down))) / 4) / 3
            cells.append(f"{a:.0%} / {b:.0%}" + (f" (true {gain:+.3f})" if gain else ""))
            answers.append(k)
        # a judge whose gain of about +0.1 from EXAG the rule keeps less than 90% of the
        # time is one no rule within the cost resolves: the table says so
        mark = " (unresolved within the cost)" if kept_tenth < 0.9 else ""
        print(f"| {name}{mark} | {' | '.join(cells)} | {min(answers):.1f}-{max(answers):.1f} |")
    print()
    print("EXAG(ITA), 5 photos, P(Yes) 0.3 on them; today / now")
    print("| candidates | mean EXAG at 0 | any named at 0 | mean EXAG at 0.2 | "
          "the one named at 0.2 | answers an image at 0 | at 0.2 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    # every picture differs here (the photos and the image), so a judge that follows seeds
    # reads them as one that ignores them
    for m in (3, 5):
        z = ita(False, n // 4, seed, m, 0.0)
        t = ita(False, n // 4, seed, m, 0.2)
        print(f"| {m} | {z[0]:.3f} / {z[1]:.3f} | {z[2]:.0%} / {z[3]:.0%} | "
              f"{t[0]:.3f} / {t[1]:.3f} | {t[2]:.0%} / {t[3]:.0%} | "
              f"{z[4]:.0f} / {z[5]:.0f} | {t[4]:.0f} / {t[5]:.0f} |")  # fmt: skip
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
