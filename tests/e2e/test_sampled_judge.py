"""A judge model without log-probabilities: the fake server answers 400 "Logprobs is not
enabled", the judge falls back to sampled answers, and every score names the method."""

from __future__ import annotations

import pytest

import refine.backends.gemini as gemini
import refine.backends.judging as judging
from metrics.judge import rating_stderr
from refine.loop.refiner import Refiner
from tests.fakes.gemini_world import (
    AMBER,
    BLUE,
    CULTURE,
    GREEN,
    RATING,
    RED,
    rating_distribution,
    sampled_rating,
    seed_draw,
)
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"
K = 8
# a judge 3/4 sure of its rating, else one below (one above a rating of 1), as its
# log-probabilities state and its answers are drawn
THREE_QUARTERS = {0: 0.75, -1: 0.25}
# benchmarks/bench_decisions.py's torn judge: 0.5 on its rating, 0.2 below, 0.3 above
TORN = {0: 0.5, -1: 0.2, 1: 0.3}


@pytest.fixture
def no_logprobs(world):
    world.no_logprobs = True
    judging.forget()  # the model is found out anew (its readings wait for the first answer)
    yield world
    judging.forget()  # other tests' judges read log-probabilities again


def frequencies(peak: int, odds=None) -> list[float]:
    answers = [sampled_rating(peak, seed, odds) for seed in range(K)]
    return [answers.count(r) / K for r in range(1, 6)]


def yes_share(p: float, seeds) -> float:
    """The share of "Yes" a judge that follows the seed answers at P(Yes) = p."""
    return sum(seed_draw(s) < p for s in seeds) / len(seeds)


def one_round(backends, options, tmp_path, **settings):
    """A run of one editing round in the world, whose edits are accepted."""
    refiner = Refiner("gemini", backends, options)
    settings = {"rounds": 1, "target": 1.0, "max_drift": 2.0, **settings}
    return begin(refiner, ACT, COUNTRY, out=tmp_path, **settings)


@pytest.mark.slow
def test_a_run_finishes_with_the_sampled_judge(no_logprobs, backends, options, tmp_path):
    world = no_logprobs
    world.odds = THREE_QUARTERS  # answers that differ
    # every reading takes all k answers (the profile's agree = 2 is tested below)
    options = {**options, "judge": {**options["judge"], "agree": 0}}
    run = one_round(backends, options, tmp_path, caire_labels=["Turkey"])
    assert run.status == "finished" and [r.decision for r in run.rounds] == ["initial", "accepted"]
    # one refused log-probability request, remembered: every later judgement samples
    assert world.log.count("judge") == 1
    # EXAG of round 0's image and of round 1's two candidates, CAIRE of 2 labels per round,
    # the quality of the 3 images (2 questions each): 13 judgements of k samples each
    assert world.log.count("sampled") == (7 + 2 * 3) * K
    for r, colour in zip(run.rounds, (RED, GREEN), strict=True):
        s = r.best.scores
        dist = frequencies(RATING[colour], THREE_QUARTERS)
        assert 0 < dist[RATING[colour] - 1] < 1
        expected = sum((i + 1) * p for i, p in enumerate(dist))
        assert s.exag == pytest.approx((expected - 1) / 4)
        # the reading is a field beside the variant's name, not words inside it
        reading = s.readings["exag"]
        assert (reading.method, reading.k) == ("sampled", K)
        assert s.variants["exag"] == "exag:mllm"
        # the posterior's error of the expected rating (metrics.judge, tested against
        # scipy's Dirichlet there), carried through EXAG's map (r - 1) / 4
        assert reading.stderr == pytest.approx(rating_stderr(dist, K) / 4)
        assert r.caire.judge_mode == f"sampled k={K}"
        for label in r.caire.labels:
            got = frequencies(CULTURE[colour][label.label], THREE_QUARTERS)
            assert label.probabilities == pytest.approx(got)
            assert label.stderr is not None and label.stderr > 0
    # every sample counts as a model call; the refused request is no answer
    assert run.model_calls == len(world.log) - 1
    shows_each_value_with_its_error(run, tmp_path / run.id)


def shows_each_value_with_its_error(run, run_dir):
    """The app's rounds table and chart, the command line's summary and the report show
    every sampled value with its standard error."""
    from refine.present.report.run import _round_html
    from refine.present.views import TABLE_HEADERS, summary_lines
    from ui.adapters import metric_chart, rounds_table

    at = {h: TABLE_HEADERS.index(h) for h in ("FAITH ↑", "quality ↑", "EXAG ↓", "ALIGN ↑")}
    summary = "\n".join(summary_lines(run, run_dir))
    # the report's rounds (its chart is the app's, drawn below)
    page = "".join(_round_html(run, r, run_dir) for r in run.rounds)
    for row, r in zip(rounds_table(run), run.rounds, strict=True):
        s = r.best.scores
        # FAITH's error is EXAG's over 3 (ALIGN and HAL are no judge readings)
        assert s.stderr("faith") == pytest.approx(s.stderr("exag") / 3) and s.stderr("faith") > 0
        assert s.stderr("quality") > 0 and s.stderr("align") is None
        for head, name in (("FAITH ↑", "faith"), ("quality ↑", "quality"), ("EXAG ↓", "exag")):
            assert row[at[head]] == f"{s.value(name):.3f} \u00b1 {s.stderr(name):.3f}"
        assert row[at["ALIGN ↑"]] == round(s.align, 3)
        assert f"{s.faith:.3f} \u00b1 {s.stderr('faith'):.3f}" in summary
        assert f'data-faith-stderr="{s.stderr("faith"):.6f}"' in page
    chart = metric_chart(run)
    assert chart.count('class="error-band"') == 2 * 3  # FAITH, EXAG, quality; two widths
    band = f"data-errors='[{run.rounds[0].best.scores.stderr('faith'):.6f}"
    assert band.rstrip("0") in chart


def test_logprobs_mode_does_not_fall_back(no_logprobs, backends, options, tmp_path):
    options = {**options, "judge": {**options["judge"], "judge_mode": "logprobs"}}
    with pytest.raises(gemini.GeminiError, match="Logprobs is not enabled"):
        begin(Refiner("gemini", backends, options), ACT, COUNTRY, out=tmp_path, rounds=0)
    assert not judging._NO_LOGPROBS


def test_sampled_yes_probabilities_are_answer_frequencies(world, backends, options):
    from PIL import Image

    judging._NO_LOGPROBS.clear()
    world.odds = {0: 0.8, -1: 0.2}  # a rating of 1 answered 2 at 0.2
    judge = gemini.GeminiJudge("gemini-2.5-flash", judge_mode="sampled", samples=10, max_retries=0)
    red = Image.new("RGB", (8, 8), RED)
    # RED's P(Yes) is 0.9 and GREEN's peak rating 1: seeds 0-9 draw under 0.8 but 0 and 2,
    # under 0.9 but 2
    assert judge.yes_probability([red], ["Does this image show hookahs?"]) == [0.9]
    (rating,) = judge.rate([Image.new("RGB", (8, 8), GREEN)], ["How exaggerated? 1-5"])
    assert rating.method == "sampled k=10" and rating.probabilities[0] == pytest.approx(0.8)
    assert world.log.count("sampled") == 20 and world.log.count("judge") == 0
    with pytest.raises(ValueError, match="judge_mode 'maybe'"):
        gemini.GeminiJudge("m", judge_mode="maybe")


def test_a_run_whose_readings_agree_takes_two_answers_each(
    no_logprobs, backends, options, tmp_path
):
    """The gemini profile's reading: the first 2 answers, which in this world always agree
    (seeds 0 and 1 answer the peak), end it; the record says k=2 and counts 2 calls. A run
    of 2 rounds of 4 candidates sends at most 60 requests, every role and round 0 counted."""
    world = no_logprobs
    world.edits = {RED: (AMBER, BLUE), AMBER: (AMBER, BLUE)}  # a step toward green
    run = one_round(backends, options, tmp_path, rounds=2, candidates=4)
    assert [r.decision for r in run.rounds] == ["initial", "accepted", "rejected"]
    # one refused log-probability request (the quality readings waited for its answer),
    # then EXAG of 9 images and the quality of the 3 pictures among them (2 questions each):
    # 15 readings of 2; the accepted edit's gain (red to amber), read from agreeing pairs,
    # is read again from fresh seeds (2 answers for the chosen image and 2 for its parent),
    # which say the same; the rejected one is not read again
    assert world.log.count("judge") == 1
    assert world.log.count("sampled") == 15 * 2 + 2 * 2
    assert len(world.log) <= 60, len(world.log)
    assert run.rounds[1].reason.endswith("; reproduced on 4 fresh answers"), run.rounds[1].reason
    for r, colour in zip(run.rounds[:2], (RED, AMBER), strict=True):
        reading = r.best.scores.readings["exag"]
        # two agreeing answers leave an error: the posterior's, never 0
        assert (reading.method, reading.k) == ("sampled", 2)
        one_answer = [float(v == RATING[colour]) for v in range(1, 6)]
        assert reading.stderr == pytest.approx(rating_stderr(one_answer, 2) / 4)
        assert reading.stderr > 0.05
        assert r.best.scores.exag == pytest.approx((RATING[colour] - 1) / 4)
    assert run.model_calls == len(world.log) - 1


def judge(**options):
    judging.forget()
    return gemini.GeminiJudge("gemini-3.8-flash", max_retries=0, **options)


@pytest.mark.parametrize(("agree", "odds"), [(2, None), (4, None), (2, THREE_QUARTERS), (0, None)])
def test_a_reading_ends_when_its_first_answers_agree(no_logprobs, agree, odds):
    """A sure judge (0.98 on its peak): the first 2 or 4 answers agree, and the reading is
    the peak from that many; a torn one: seed 1 answers the rating below, so all k are
    taken; agree 0: always k."""
    from PIL import Image

    no_logprobs.odds = odds
    red = Image.new("RGB", (8, 8), RED)
    (rating,) = judge(judge_mode="sampled", samples=K, agree=agree).rate_prefixed(
        [red], ["Rate it; answer as score is <num>"], "score is "
    )
    k = agree if agree and odds is None else K
    assert rating.method == f"sampled k={k}"
    assert no_logprobs.log.count("sampled") == k
    answers = [sampled_rating(RATING[RED], seed, odds) for seed in range(k)]
    dist = [answers.count(v) / k for v in range(1, 6)]
    assert rating.probabilities == pytest.approx(dist)
    # the posterior's error, never 0: more where the answers differ than where as many
    # agree
    assert rating.stderr == pytest.approx(rating_stderr(dist, k))
    peak = [float(v == RATING[RED]) for v in range(1, 6)]
    assert rating.stderr > 0 and (rating.stderr > rating_stderr(peak, k)) == (odds is not None)


@pytest.mark.slow
def test_a_model_that_ignores_the_seed_reads_at_its_own_odds(no_logprobs, gemini_env):
    """Gemini 3.6 Flash and later fix their sampling: no temperature is sent (the stand-in
    refuses one), the seed still is, and a model may ignore it too. Then a reading is no
    longer repeatable: the same image read 40 times gives different readings, where a
    model that follows the seed gives one reading every time (8 here). Each reading still
    says its answers and standard error, and their mean is the agree-2 estimator's
    expectation at the model's own odds (peak a with 3/4, its neighbour b with 1/4,
    docs/metrics.md): a with 9/16, b with 1/16, else the mean of 8 answers, (5.5a + 2.5b)
    / 8, with 6/16: (105a + 23b) / 128 in all."""
    from PIL import Image

    world = no_logprobs
    world.odds = THREE_QUARTERS
    red, prompt, n = Image.new("RGB", (8, 8), RED), "How exaggerated? 1-5", 40
    # one request at a time: the world's draws go to the answers in one order
    reader = judge(judge_mode="sampled", samples=K, agree=2, concurrency=1)
    seeded = reader.rate([red] * 8, [prompt] * 8)
    assert len({r.probabilities for r in seeded}) == 1  # the same answers every time
    world.ignores_seed = True
    drawn = reader.rate([red] * n, [prompt] * n)
    assert len({r.probabilities for r in drawn}) > 1
    for r in drawn:
        k = int(r.method.removeprefix("sampled k="))
        assert k in (2, K) and r.stderr > 0
    a, b = RATING[RED], RATING[RED] - 1
    expected = (105 * a + 23 * b) / 128
    mean = sum(r.expectation for r in drawn) / n
    # one reading's spread is under 0.5 (its values lie in [b, a]): the mean of 40 is
    # within 5 of its standard errors (0.4) of the expectation but once in 1.7 million
    assert mean == pytest.approx(expected, abs=0.4) and b < mean < a
    last = gemini_env.requests[-1]["generationConfig"]
    assert "seed" in last and "temperature" not in last


@pytest.mark.slow
def test_exag_ita_reads_photos_and_images_from_more_answers_and_stops_only_below_doubt(
    no_logprobs,
):
    """EXAG(ITA) by sampling: a photo's VQAScore from 4k answers, an image's from up to 8k,
    k at a time, the same seeds for each; a candidate whose excess is below 0 beyond doubt
    stops after its first k, one above 0 never early. A judge that reads every answer
    (agree 0) takes them all at once."""
    from PIL import Image

    from refine.evaluate.assess import (
        ITA_STAGES,
        PHOTO_STAGES,
        PhotoBaseline,
        ita_answers,
        vqa_stderr,
    )

    world = no_logprobs
    reader = judge(judge_mode="sampled", samples=K, agree=2)
    photos = [Image.new("RGB", (8, 8), c) for c in (RED, GREEN)]
    # the photos answer Yes at 0.9 (RED) and 0.3 (GREEN), drawn by seed: two candidates
    photo = ita_answers(reader, photos, ["first", "second"])
    assert world.log.count("sampled") == 2 * PHOTO_STAGES * K
    assert [a.mode for a in photo] == [f"sampled k={PHOTO_STAGES * K}"] * 2
    baseline = PhotoBaseline.of([photo])
    seeds = range(PHOTO_STAGES * K)
    assert baseline.mean == pytest.approx([yes_share(0.9, seeds), yes_share(0.3, seeds)])
    assert baseline.stderr == pytest.approx([vqa_stderr(a) for a in photo])
    # the image: BLUE (0.2 of seeds) for the first candidate, far below its 0.91 on the
    # photos; AMBER (0.7) for the second, above its 0.34
    image = [Image.new("RGB", (8, 8), c) for c in (BLUE, AMBER)]
    most = ITA_STAGES * K
    for agree in (2, 0):
        reader = judge(judge_mode="sampled", samples=K, agree=agree)
        before = world.log.count("sampled")
        below, above = ita_answers(reader, image, ["first", "second"], baseline)
        taken = world.log.count("sampled") - before
        if agree:
            assert (below.mode, above.mode) == (f"sampled k={K}", f"sampled k={most}")
            got = (below.value, above.value)
            assert got == (yes_share(0.2, range(K)), yes_share(0.7, range(most)))
            assert taken == K + most
        else:
            assert below.mode == above.mode == f"sampled k={most}" and taken == 2 * most


def test_a_readings_answers_go_out_together(no_logprobs):
    """The 8 answers of a reading are sent at once: the world answers the first and holds
    the others until 7 are held together (sent one after another, none would be)."""
    from PIL import Image

    world = no_logprobs
    world.hold_after_first, world.hold_give_up_s = ("sampled", K), 10.0
    red = Image.new("RGB", (8, 8), RED)
    (rating,) = judge(judge_mode="sampled", samples=K, concurrency=K).rate(
        [red], ["How exaggerated? 1-5"]
    )
    assert world.held_peak == K - 1 and rating.method == f"sampled k={K}"


def test_the_call_limit_holds_across_readings_and_answers(no_logprobs):
    """Two readings of 8 answers under concurrency 4: 4 requests at once and never more
    (the world answers the first and holds the others until 4 are held together)."""
    from PIL import Image

    world = no_logprobs
    world.hold_after_first, world.hold_give_up_s = ("sampled", 5), 10.0
    red, green = Image.new("RGB", (8, 8), RED), Image.new("RGB", (8, 8), GREEN)
    ratings = judge(judge_mode="sampled", samples=K, concurrency=4).rate(
        [red, green], ["How exaggerated? 1-5"] * 2
    )
    assert [r.method for r in ratings] == [f"sampled k={K}"] * 2
    assert world.log.count("sampled") == 2 * K
    assert world.held_peak == 4 and world.busy[1] == 4


def test_a_model_that_drops_the_format_is_read_at_its_digit(world):
    """A model that gives log-probabilities but answers "4" where Tab. 31 asks for
    "score is 4": the digit's distribution is read where it is, one call, no sampling."""
    from PIL import Image

    world.bare_digit = True
    red = Image.new("RGB", (8, 8), RED)
    from tests.fakes.gemini_world import MLLM_FORMAT

    (rating,) = judge().rate_prefixed([red], [f"Rate it; answer as {MLLM_FORMAT}"], "score is ")
    assert rating.method == "logprobs"
    assert rating.probabilities == pytest.approx(rating_distribution(RATING[RED]))
    assert world.log == ["judge"]


def test_agree_is_checked():
    for bad in (1, -1, 9, "2"):
        with pytest.raises(ValueError, match="agree must be 0"):
            gemini.GeminiJudge("m", samples=8, agree=bad)


def test_a_new_process_remembers_a_model_without_log_probabilities(
    no_logprobs, tmp_path, monkeypatch
):
    """The first process finds out with one refused request and writes it down; the next
    (the process's memory forgotten) samples at once, sending no such request; an answer
    older than 30 days, or a memory file that cannot be read, is asked again."""
    import json
    import time

    from PIL import Image

    memory = tmp_path / "memory.json"
    monkeypatch.setenv("REFINE_JUDGE_MEMORY", str(memory))
    world = no_logprobs
    red = Image.new("RGB", (8, 8), RED)

    def rate() -> str:
        (rating,) = judge(samples=K, agree=2).rate([red], ["How exaggerated? 1-5"])
        return rating.method

    assert rate() == "sampled k=2" and world.log == ["judge", "sampled", "sampled"]
    (key, entry), *_ = json.loads(memory.read_text()).items()
    assert key.startswith("gemini-3.8-flash@http://127.0.0.1:") and entry["logprobs"] is False
    assert world.log.count("judge") == 1
    world.log.clear()
    assert rate() == "sampled k=2" and world.log == ["sampled", "sampled"]  # a new process
    entry["seen"] = time.time() - 31 * 86400
    memory.write_text(json.dumps({key: entry}))
    world.log.clear()
    assert rate() == "sampled k=2" and world.log[0] == "judge"  # too old: asked again
    memory.write_text("{not json")
    world.log.clear()
    assert rate() == "sampled k=2" and world.log[0] == "judge"
    assert json.loads(memory.read_text())[key]["logprobs"] is False  # rewritten
    # a model that gives them is remembered so too, under its own key
    world.no_logprobs = False
    judging.forget()
    other = gemini.GeminiJudge("gemini-3.5-flash", max_retries=0, samples=K, agree=2)
    (rating,) = other.rate([red], ["How exaggerated? 1-5"])
    assert rating.method == "logprobs"
    remembered = json.loads(memory.read_text())
    assert remembered[key]["logprobs"] is False
    assert [v["logprobs"] for k, v in remembered.items() if k != key] == [True]


def steady_runs(backends, options, tmp_path, n: int, **settings) -> list:
    """``n`` runs, one after another, whose judge's answers are drawn from the world's
    generator in one order: candidates one at a time, one request at a time."""
    options = {**options, "judge": {**options["judge"], "concurrency": 1}}
    runs = []
    for k in range(n):
        refiner = Refiner("gemini", backends, options, parallel=False)
        runs.append(begin(refiner, ACT, COUNTRY, out=tmp_path / f"r{k}", target=1.0,
                          max_drift=2.0, seed=40 + k, **settings))  # fmt: skip
    return runs


@pytest.mark.slow
def test_edits_that_change_nothing_are_not_taken_for_gains_and_real_gains_are_kept(
    no_logprobs, backends, options, tmp_path, monkeypatch
):
    """A judge that samples at its own odds, ignoring the seed (the benchmark's torn judge:
    0.5 on its rating, 0.2 below, 0.3 above, as its log-probabilities state): where edits
    change nothing the observer or the judge can see, readings of the same picture still
    differ. Each run is made under this rule and under the rule before (a FAITH gain of
    0.01 and the quality limit alone, on the same readings, nothing read again), meeting
    the same draws for what both ask (the world's paired draws), so that the two compare
    run by run. Six runs of 4
    editing rounds whose edits change nothing: the rule before takes noise for a gain in 5
    of the 24 rounds (8 of 24 on the world's draws in order); only a gain beyond its noise
    counts now, and a close one only where fresh answers confirm it: 2 of 24, at most 1.28
    times the requests of the rule before in any run (47, 76, 92, 120, 76 and 76 against
    46, 76, 76, 94, 76 and 76). An edit that truly raises FAITH (red to green: EXAG 0.75 to
    0, FAITH +0.42 to +0.47) is kept in each of 5 runs, at the requests of the rule before
    (56, 32, 62, 44 and 44, measured so): a gain that large is clear from agreeing pairs
    without another answer."""
    from refine.loop import confirm, policy

    world = no_logprobs
    world.ignores_seed, world.paired, world.odds = True, True, TORN
    world.edits = {RED: (RED, RED)}  # an edit gives back the same picture
    null = steady_runs(backends, options, tmp_path / "null", 6, rounds=4, patience=4)
    decisions = [r.decision for run in null for r in run.rounds[1:]]
    assert len(decisions) == 24 and decisions.count("accepted") <= 3, decisions
    reasons = [r.reason for run in null for r in run.rounds[1:]]
    # close gains were read again on fresh answers; each gain kept was close, and kept
    # only where they confirmed it
    assert any("fresh answers" in why for why in reasons), reasons
    kept = [why for why, d in zip(reasons, decisions, strict=True) if d == "accepted"]
    assert all("; confirmed on 8 fresh answers each" in why for why in kept), kept
    world.edits = {RED: (GREEN, GREEN)}
    real = steady_runs(backends, options, tmp_path / "real", 5, rounds=1)
    assert [run.rounds[1].decision for run in real] == ["accepted"] * 5
    # a gain that large is clear at once: no answer read again, so each run asks what it
    # asks under the rule before (the rules differ in the decision and what it reads again)
    for run in real:
        reason = run.rounds[1].reason
        assert "; 90% >= +" in reason and float(reason.split("90% >= ")[1][:6]) >= 0.01
        assert "confirmed" not in reason and "reproduced" not in reason
    # the null runs under the rule before, on the same draws: more noise taken for gains,
    # and at most 1.5 times the requests in each run
    world.asked_so.clear()
    judging.forget()  # the model found out anew, as in the first runs
    world.edits = {RED: (RED, RED)}
    with monkeypatch.context() as m:
        # FAITH and quality read as exact: the margin alone, the quality guard's limit alone
        m.setattr(policy, "faith_se", lambda c: 0.0)
        m.setattr(policy, "quality_se", lambda c: 0.0)
        m.setattr(confirm, "confirmed", lambda verdict, *args, **kwargs: verdict)
        before = steady_runs(backends, options, tmp_path / "before", 6, rounds=4, patience=4)
    taken = [r.decision for run in before for r in run.rounds[1:]].count("accepted")
    assert taken >= 4 and taken > decisions.count("accepted") + 2, taken
    for now, then in zip(null, before, strict=True):
        assert now.model_calls <= 1.5 * then.model_calls, (now.model_calls, then.model_calls)


def test_an_answer_withheld_is_asked_again_then_left_out(no_logprobs):
    """A sampled answer that comes back with no content (finish reason OTHER) is asked
    once more from a seed of its own; withheld again, it is left out and counted, and the
    reading goes on with the others; with fewer than 2 left, it fails in one line."""
    from PIL import Image

    world = no_logprobs
    red = Image.new("RGB", (8, 8), RED)
    reader = judge(judge_mode="sampled", samples=K, agree=2)

    def read(n: int):
        (rating,) = reader.rate_prefixed([red], [f"Rate it ({n}); as score is <num>"], "score is ")
        return rating

    world.bare, world.bare_seeds = {"sampled": "OTHER"}, {1}
    # seed 1 withheld, asked again from RETRY_SEED + 1: the pair agrees (a sure judge)
    assert read(1).method == "sampled k=2" and world.log.count("sampled") == 3
    before = judging.withheld()
    world.bare_seeds = {1, judging.RETRY_SEED + 1}
    # left out: one answer of the first two, so the other six are asked too
    rating = read(2)
    assert rating.method == "sampled k=7" and judging.withheld() == before + 1
    assert rating.probabilities[RATING[RED] - 1] == 1.0
    assert world.log.count("sampled") == 3 + 3 + 6
    world.bare_seeds = None  # every answer withheld
    with pytest.raises(gemini.GeminiError, match="8 of 8 sampled answers withheld"):
        read(3)
    assert world.log.count("sampled") == 12 + 16
