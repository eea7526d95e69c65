"""The sampled judge's estimator against k fixed answers, computed exactly (no sampling).

A sampled reading (``refine.backends.judging``) sends its first ``agree`` answers together;
when they are all the same answer the reading is that answer, else the rest of the k go out
and the reading is the mean of all k. For a model whose answers to one question follow a
distribution p over the ratings 1..5, this prints the estimator's expected number of
answers, its bias and root-mean-square error as an estimate of the expected rating (the
number the metrics use), beside those of k answers always (unbiased, RMSE sigma / sqrt(k)).

Usage: python benchmarks/estimator_agree.py [--k 8] [--agree 2]
"""

from __future__ import annotations

import argparse
import itertools
import math

# answer distributions over the ratings 1..5, from a sure model to an unsure one
CASES = {
    "sure (0.95 on one rating)": (0.0, 0.0, 0.95, 0.05, 0.0),
    "fairly sure (0.8, neighbours 0.1)": (0.0, 0.1, 0.8, 0.1, 0.0),
    "the stand-in world's (0.75, 0.25)": (0.0, 0.0, 0.25, 0.75, 0.0),
    "torn (0.5, 0.3, 0.2)": (0.0, 0.2, 0.5, 0.3, 0.0),
    "unsure (0.3, 0.3, 0.2, 0.1, 0.1)": (0.1, 0.3, 0.3, 0.2, 0.1),
}


def moments(p: tuple[float, ...]) -> tuple[float, float]:
    mu = sum((i + 1) * q for i, q in enumerate(p))
    var = sum(q * (i + 1 - mu) ** 2 for i, q in enumerate(p))
    return mu, var


def adaptive(p: tuple[float, ...], k: int, agree: int) -> tuple[float, float, float]:
    """(expected answers, bias, RMSE) of the estimator, exactly: every first wave of
    ``agree`` answers is enumerated, and the rest of the k enter through their mean and
    variance."""
    mu, var = moments(p)
    values = range(1, len(p) + 1)
    answers = bias = mse = 0.0
    for first in itertools.product(values, repeat=agree):
        w = math.prod(p[v - 1] for v in first)
        if w == 0:
            continue
        if len(set(first)) == 1:
            answers += w * agree
            bias += w * (first[0] - mu)
            mse += w * (first[0] - mu) ** 2
            continue
        rest = k - agree  # their sum has mean rest * mu and variance rest * var
        shift = (sum(first) + rest * mu) / k - mu
        answers += w * k
        bias += w * shift
        mse += w * (shift**2 + rest * var / k**2)
    return answers, bias, math.sqrt(mse)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--agree", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"k = {args.k}, agree = {args.agree}; the expected rating on 1..5")
    print(
        f"| answers (p of 1..5) | expected rating | answers taken | bias | RMSE | "
        f"RMSE of {args.k} always |"
    )
    print("|---|---|---|---|---|---|")
    for name, p in CASES.items():
        mu, var = moments(p)
        n, bias, rmse = adaptive(p, args.k, args.agree)
        fixed = math.sqrt(var / args.k)
        print(f"| {name} | {mu:.2f} | {n:.2f} | {bias:+.3f} | {rmse:.3f} | {fixed:.3f} |")


if __name__ == "__main__":
    main()
