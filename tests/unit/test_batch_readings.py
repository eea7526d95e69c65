"""A sampled reading sent as a batch job (all its answers at once) is the live reading of
the same answers: where the first two agree, both read those two; else both read all k; a
staged VQAScore stops at the same stage. Only the requests sent differ."""

from __future__ import annotations

import threading

import pytest

from refine.backends.judging import RETRY_SEED, ProbabilityJudge


class Picture:
    """What the judge is shown: the answer it gives to each seed ('' withheld)."""

    def __init__(self, by_seed: dict[int, str], default: str) -> None:
        self.by_seed, self.default = by_seed, default


class SeededJudge(ProbabilityJudge):
    """A judge without log-probabilities that follows seeds; ``batch``: it cannot wait
    for a reading's first answers (a batch job's)."""

    def __init__(self, batch: bool) -> None:
        self.model, self.judge_mode, self.samples, self.agree = "seeded", "sampled", 8, 2
        self.concurrency, self.batch = 8, batch
        self.seeds: list[int] = []
        self.lock = threading.Lock()

    def _prefetched(self) -> bool:
        return self.batch

    def _sample_answer(self, image, text, answers, seed, purpose):
        with self.lock:
            self.seeds.append(seed)
        return image.by_seed.get(seed, image.default)


AGREE = Picture({0: "score is 4", 1: "score is 4"}, "score is 2")  # reads 4 from two
DIFFER = Picture({0: "score is 4", 1: "score is 3"}, "score is 2")  # all 8
WITHHELD = Picture({1: "", RETRY_SEED + 1: ""}, "score is 3")  # seed 1 withheld twice
# the first two agree; seed 5, which is then not read, withheld
UNREAD = Picture({0: "score is 4", 1: "score is 4", 5: "", RETRY_SEED + 5: ""}, "score is 2")


@pytest.mark.parametrize(
    ("picture", "mode", "expected", "live_asked"),
    [
        (AGREE, "sampled k=2", 4.0, 2),
        (DIFFER, "sampled k=8", 2.375, 8),
        (WITHHELD, "sampled k=7", 3.0, 9),
        (UNREAD, "sampled k=2", 4.0, 2),
    ],  # fmt: skip
)
def test_a_batch_reading_is_the_live_reading_of_the_same_answers(
    picture, mode, expected, live_asked
):
    from refine.backends.judging import withheld

    readings = {}
    for batch in (False, True):
        judge = SeededJudge(batch)
        left_out = withheld("seeded")
        (rating,) = judge.rate_prefixed([picture], ["how exaggerated?"], "score is ")
        readings[batch] = rating
        asked = len(judge.seeds)
        # live: two, then six more unless they agree (a withheld answer asked again under
        # its retry seed); batch: all 8 at once, whatever they say, then again only a
        # withheld answer the reading reads (none where the first two agree)
        assert asked == (live_asked if not batch else 8 + (picture is WITHHELD))
        assert withheld("seeded") - left_out == (picture is WITHHELD)
    live, batch = readings[False], readings[True]
    assert live.method == batch.method == mode
    assert live.expectation == pytest.approx(expected, abs=1e-12)
    assert batch.expectation == live.expectation and batch.stderr == live.stderr


def test_a_staged_batch_reading_stops_where_the_live_one_does():
    """A VQAScore read in stages of k up to ``most`` until ``enough``: the batch job sends
    all ``most`` answers and reads the stages as the live reading does."""
    yes_first = Picture({s: "Yes" for s in range(8)}, "No")  # 8 Yes, then No
    got = {}
    for batch in (False, True):
        judge = SeededJudge(batch)
        (answer,) = judge.vqa_score(
            [yes_first], ["a samovar"], most=24, enough=lambda j, a: a.mode == "sampled k=16"
        )
        got[batch] = (answer.value, answer.mode, len(judge.seeds))
    assert got[False] == (0.5, "sampled k=16", 16)  # two stages of 8, then enough
    assert got[True] == (0.5, "sampled k=16", 24)  # the same reading; all 24 were sent


def test_a_fresh_batch_reading_reads_its_own_seeds_as_the_live_one():
    """A reading read again from fresh seeds (a confirmation's, from 1,000,000 on): its
    first two seeds' answers decide, live and batched alike."""
    fresh = Picture({1_000_000: "score is 4", 1_000_001: "score is 4"}, "score is 2")
    for batch in (False, True):
        judge = SeededJudge(batch)
        (rating,) = judge.rate_prefixed(
            [fresh], ["how exaggerated?"], "score is ", first_seed=1_000_000
        )
        assert (rating.method, rating.expectation) == ("sampled k=2", 4.0)
        assert sorted(judge.seeds) == list(range(1_000_000, 1_000_000 + (8 if batch else 2)))
