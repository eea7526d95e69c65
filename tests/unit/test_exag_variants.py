"""EXAG variants are never mixed: a bench's means of EXAG and FAITH and an agreement's
correlations are taken per variant where images were scored by different ones."""

from __future__ import annotations

import pytest

from metrics.stats import mean_interval
from refine.harness.cells import Cell
from refine.harness.tasks.bench.summary import _stats, exag_variant, summarise
from refine.human.agree import _metric_keys
from refine.human.stored import with_variant


def cell(act: str, gen: str, variant: str, exag: float, faith: float) -> Cell:
    image = {"exag": exag, "faith": faith, "align": 0.5, "hal": 0.2, "exag_variant": variant}
    return Cell(
        key=(gen, act, "Iran", (0,)),
        inputs={"generator": gen, "activity": act, "country": "Iran", "category": "eating"},
        outputs={"pooled_align": 0.5, "ddiv": 0.1, "sdiv": 0.0, "vendi": 1.0},
        images=[image],
    )


def test_a_bench_never_averages_exag_over_two_variants():
    cells = [
        cell("a", "g", "exag:ita", 0.05, 0.70),
        cell("b", "g", "exag:ita", 0.10, 0.60),
        cell("c", "g", "exag:mllm", 0.50, 0.40),
    ]
    assert [exag_variant(c) for c in cells] == ["exag:ita", "exag:ita", "exag:mllm"]
    row = _stats(cells, seed=0)
    # ALIGN does not depend on the variant: one mean over the three prompts
    assert row["align"]["mean"] == pytest.approx(0.5)
    for m, ita, mllm in (("exag", [0.05, 0.10], [0.50]), ("faith", [0.70, 0.60], [0.40])):
        assert row[m]["mean"] is None  # no mean over both
        by = row[m]["by_variant"]
        assert by["exag:ita"]["mean"] == pytest.approx(sum(ita) / 2)
        assert by["exag:ita"]["interval"] == mean_interval(ita, 0)
        assert by["exag:ita"]["prompts"] == 2
        assert by["exag:mllm"] == {"prompts": 1, "mean": pytest.approx(mllm[0]), "interval": None}
    # one variant: the plain mean, named
    one = _stats(cells[:2], seed=0)
    assert one["exag"]["mean"] == pytest.approx(0.075) and one["exag"]["variant"] == "exag:ita"
    # ranked and drawn by the variant with the most prompts, named
    from refine.harness.results import headline

    assert headline(row["faith"]) == (pytest.approx(0.65), mean_interval([0.7, 0.6], 0), "exag:ita")
    assert headline(one["faith"])[2] == "exag:ita"
    # prompts without an EXAG (FAITH of ALIGN and HAL alone) are a group of their own
    bare = cell("d", "g", "exag:ita", 0.0, 0.9)
    bare.images[0].update(exag=None, exag_variant=None)
    mixed = _stats([*cells[:2], bare], seed=0)
    assert mixed["faith"]["mean"] is None
    assert set(mixed["faith"]["by_variant"]) == {"exag:ita", "no EXAG"}


def test_generators_are_compared_on_prompts_of_the_same_variant():
    cells = [
        cell("a", "g1", "exag:ita", 0.05, 0.70),
        cell("a", "g2", "exag:ita", 0.05, 0.80),
        cell("b", "g1", "exag:mllm", 0.50, 0.40),
        cell("b", "g2", "exag:ita", 0.05, 0.90),  # b scored with photos for g2 only
    ]
    (paired,) = summarise(cells, ["g1", "g2"], seed=0)["paired"]
    assert paired["prompts"] == 1 and paired["mean_difference"] == pytest.approx(0.10)


def test_agreement_correlates_each_variant_apart():
    found = {
        "a": with_variant({"faith": 0.7, "align": 0.5}, "exag:ita"),
        "b": with_variant({"faith": 0.4, "align": 0.6}, "exag:mllm"),
        "c": with_variant({"faith": 0.6, "align": 0.4}, None),  # a record before variants
    }
    assert found["a"] == {"faith@exag:ita": 0.7, "align": 0.5}
    plan = _metric_keys(["faith", "align"], found)
    assert plan == [
        ("faith", "faith", "faith [no variant]", None),
        ("faith", "faith@exag:ita", "faith [exag:ita]", "exag:ita"),
        ("faith", "faith@exag:mllm", "faith [exag:mllm]", "exag:mllm"),
        ("align", "align", "align", None),
    ]
    # one variant only: the plain name, its variant said
    only = _metric_keys(["faith"], {"a": found["a"]})
    assert only == [("faith", "faith@exag:ita", "faith", "exag:ita")]


class _Words:
    """A tokenizer that writes each word as a token, with the digits either as words of
    their own (" 4": the space a token too) or with their space (" 4" one token)."""

    def __init__(self, spaced_digits: bool) -> None:
        self.spaced = spaced_digits
        self.vocab: dict[str, int] = {}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        pieces = []
        for k, word in enumerate(text.split(" ")):
            if word.isdigit() and not self.spaced:
                pieces += [" ", word]
            else:
                pieces.append(word if k == 0 else f" {word}")
        return [self.vocab.setdefault(p, len(self.vocab)) for p in pieces]

    def decode(self, ids: list[int]) -> str:
        names = {v: k for k, v in self.vocab.items()}
        return "".join(names[i] for i in ids)


@pytest.mark.parametrize("spaced", [False, True], ids=["space-token", "spaced-digit"])
def test_the_local_judge_begins_the_answer_as_its_tokenizer_writes_it(spaced):
    from refine.backends.hf_judging import HFJudging

    class Judge(HFJudging):
        processor = None

        def __init__(self):
            self.tok = _Words(spaced)

        def _tokenizer(self, processor):
            return self.tok

    judge = Judge()
    begun, ids = judge._digits_after("score is ")
    names = {v: k for k, v in judge.tok.vocab.items()}
    if spaced:  # " 4" is one token: the answer begun without the space
        assert begun == "score is" and [names[i] for i in ids] == [f" {d}" for d in "12345"]
    else:  # the space is a token: begun with it, the digits alone after it
        assert begun == "score is " and [names[i] for i in ids] == list("12345")
