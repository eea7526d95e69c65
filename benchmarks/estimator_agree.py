"""The sampled judge's estimator against k fixed answers, computed exactly (no sampling).

A sampled reading (``refine.backends.judging``) sends its first ``agree`` answers together;
when they are all the same answer the reading is that answer, else the rest of the k go out
and the reading is the mean of all k. For a model whose answers to one question follow a
distribution p over its answers (the ratings 1..5, or no and yes), this prints the
estimator's expected number of answers, its bias and root-mean-square error as an estimate
of the expected rating (or of P(Yes)), the mean standard error it records
(:func:`metrics.judge.rating_stderr`, the posterior's) and how often the number read lies
within two recorded standard errors of the truth; beside them, the RMSE and the recorded
error of k answers always (unbiased, RMSE sigma / sqrt(k)). Every outcome of the k answers
is enumerated with its multinomial probability.

Usage: python benchmarks/estimator_agree.py [--k 8] [--agree 2]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metrics.judge import rating_stderr  # noqa: E402

# answer distributions over the ratings 1..5, from a sure model to an unsure one, and over
# (No, Yes) for a yes-or-no reading (VQAScore)
CASES = {
    "sure (0.95 on one rating)": (0.0, 0.0, 0.95, 0.05, 0.0),
    "peaked (0.8, neighbours 0.1)": (0.0, 0.1, 0.8, 0.1, 0.0),
    "the stand-in world's (0.75, 0.25)": (0.0, 0.0, 0.25, 0.75, 0.0),
    "torn (0.5, 0.3, 0.2)": (0.0, 0.2, 0.5, 0.3, 0.0),
    "flat (0.2 each)": (0.2, 0.2, 0.2, 0.2, 0.2),
    "bimodal (0.3 on 1, 0.7 on 4)": (0.3, 0.0, 0.0, 0.7, 0.0),
    "yes or no, P(Yes) 0.5": (0.5, 0.5),
    "yes or no, P(Yes) 0.75": (0.25, 0.75),
    "yes or no, P(Yes) 0.9": (0.1, 0.9),
}


def compositions(n: int, m: int):
    """Every way of counting n answers over m answers."""
    for cut in itertools.combinations(range(n + m - 1), m - 1):
        edges = (-1, *cut, n + m - 1)
        yield tuple(edges[i + 1] - edges[i] - 1 for i in range(m))


def multinomial(counts: tuple[int, ...], p: tuple[float, ...]) -> float:
    n = sum(counts)
    w = math.factorial(n)
    for c, q in zip(counts, p, strict=True):
        w = w / math.factorial(c) * q**c
    return w


class Tally:
    """Answers taken, error and recorded error of a reading, weighed by probability."""

    def __init__(self, mu: float) -> None:
        self.mu = mu
        self.answers = self.bias = self.mse = self.se = self.covered = 0.0

    def add(self, w: float, counts: tuple[int, ...]) -> None:
        k = sum(counts)
        freq = [c / k for c in counts]
        value = sum(i * f for i, f in enumerate(freq))
        se = rating_stderr(freq, k)
        self.answers += w * k
        self.bias += w * (value - self.mu)
        self.mse += w * (value - self.mu) ** 2
        self.se += w * se
        self.covered += w * (abs(value - self.mu) <= 2 * se)


def readings(p: tuple[float, ...], k: int, agree: int) -> tuple[Tally, Tally]:
    """The adaptive reading's tally and that of k answers always."""
    m = len(p)
    mu = sum(i * q for i, q in enumerate(p))
    adaptive, fixed = Tally(mu), Tally(mu)
    for counts in compositions(k, m):
        w = multinomial(counts, p)
        if w:
            fixed.add(w, counts)
    for first in itertools.product(range(m), repeat=agree):
        w = math.prod(p[v] for v in first)
        if w == 0:
            continue
        seen = tuple(first.count(v) for v in range(m))
        if len(set(first)) == 1:
            adaptive.add(w, seen)
            continue
        for rest in compositions(k - agree, m):
            wr = multinomial(rest, p)
            if wr:
                adaptive.add(w * wr, tuple(a + b for a, b in zip(seen, rest, strict=True)))
    return adaptive, fixed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--agree", type=int, default=2)
    args = parser.parse_args(argv)
    k = args.k
    print(f"k = {k}, agree = {args.agree}; the expected rating on 1..5, or P(Yes)")
    print(
        "| answers (p) | expected | answers taken | bias | RMSE | recorded s.e. | within 2 s.e. "
        f"| RMSE of {k} always | its recorded s.e. | its within 2 s.e. |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, p in CASES.items():
        a, f = readings(p, k, args.agree)
        mu = a.mu + (1 if len(p) == 5 else 0)  # ratings start at 1
        print(
            f"| {name} | {mu:.2f} | {a.answers:.2f} | {a.bias:+.3f} | {math.sqrt(a.mse):.3f} "
            f"| {a.se:.3f} | {a.covered:.0%} | {math.sqrt(f.mse):.3f} | {f.se:.3f} "
            f"| {f.covered:.0%} |"
        )


if __name__ == "__main__":
    main()
