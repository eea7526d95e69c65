"""`refine agree` on many rated images against scipy alone: prints figures, asserts nothing.

Workload: a bench folder of N distinct images (default 5,000) with 8 stored metrics each
(faith, align, hal, exag, quality, clip_iqa, explicit_met, implicit_met), each metric a
noisy reading of a hidden score; a ratings file in which 3 raters answer both questions
(alignment, faithfulness, 1-5) for every image.

Printed, in the same run on the same data:
  (a) the whole command, `refine agree --ratings ... --source ... --metrics <8>` in this
      process: reading and hashing the ratings' images and the bench's, joining them,
      three correlations per metric and question with 1,000-resample bootstrap intervals,
      Krippendorff's alpha at two levels, agree.json and agree.html;
  (b) scipy alone: for each metric and question, scipy.stats.spearmanr, kendalltau and
      pearsonr of the metric against the raters' mean, and the same three on each of 1,000
      resamples (the straightforward bootstrap).
Target: (a) / (b) <= 2.

Usage: python benchmarks/bench_agree.py [--images 5000] [--reps 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

METRICS = ("faith", "align", "hal", "exag", "quality", "clip_iqa", "explicit_met", "implicit_met")
RATERS = ("ana", "ben", "chen")
QUESTIONS = ("alignment", "faithfulness")


def build(root: Path, n: int, seed: int = 0) -> tuple[Path, Path, dict, dict]:
    """The bench folder and the ratings file; the metrics and the raters' means by image."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    bench, rating = root / "bench", root / "rating"
    (bench / "images").mkdir(parents=True)
    rating.mkdir()
    hidden = rng.random(n)
    metrics = {m: np.clip(hidden + rng.normal(0, 0.3, n), 0, 1) for m in METRICS}
    metrics["hal"] = 1 - metrics["hal"]
    metrics["exag"] = 1 - metrics["exag"]
    answers = {
        (r, q): np.clip(np.rint(1 + 4 * hidden + rng.normal(0, 0.8, n)), 1, 5).astype(int)
        for r in RATERS
        for q in QUESTIONS
    }
    images = []
    for k in range(n):
        pixels = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(bench / "images" / f"{k:05d}.png")
        (rating / f"{k:05d}.png").write_bytes((bench / "images" / f"{k:05d}.png").read_bytes())
        images.append(
            {"file": f"images/{k:05d}.png", "seed": k}
            | {m: float(metrics[m][k]) for m in METRICS}
            | {"observed": {}}
        )
    cells = [
        {
            "generator": "g",
            "activity": "a",
            "country": "c",
            "seeds": [],
            "images": images[i : i + 50],
        }
        for i in range(0, n, 50)
    ]
    (bench / "cells.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cells))
    with open(rating / "ratings.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image", "rater", *QUESTIONS])
        for k in range(n):
            for r in RATERS:
                w.writerow([f"{k:05d}.png", r, *(answers[(r, q)][k] for q in QUESTIONS)])
    means = {q: np.mean([answers[(r, q)] for r in RATERS], axis=0) for q in QUESTIONS}
    return bench, rating / "ratings.csv", metrics, means


def scipy_alone(metrics: dict, means: dict, reps: int, seed: int = 0) -> float:
    from scipy import stats

    start = time.perf_counter()
    for q in QUESTIONS:
        y = means[q]
        for m in METRICS:
            x = metrics[m]
            for fn in (stats.spearmanr, stats.kendalltau, stats.pearsonr):
                fn(x, y)
                rng = np.random.default_rng(seed)
                values = []
                for _ in range(reps):
                    idx = rng.integers(0, x.size, size=x.size)
                    values.append(fn(x[idx], y[idx]).statistic)
                np.percentile(values, [2.5, 97.5])
    return time.perf_counter() - start


def refine_agree(bench: Path, ratings: Path, out: Path) -> tuple[float, dict]:
    from refine.cli import main

    args = ["agree", "--ratings", str(ratings), "--source", str(bench), "--out", str(out)]
    args += ["--metrics", ",".join(METRICS), "--json"]
    buf = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(buf):
        try:
            main(args)
        except SystemExit as done:
            if done.code:
                raise
    return time.perf_counter() - start, json.loads(buf.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=1000)
    args = parser.parse_args()
    if args.reps != 1000:
        print("note: refine agree always draws 1,000 resamples; --reps sets scipy's only")
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        bench, ratings, metrics, means = build(Path(tmp), args.images)
        print(
            f"{args.images} images, {len(RATERS)} raters, {len(METRICS)} metrics "
            f"(built in {time.perf_counter() - t:.1f} s)"
        )
        ours, doc = refine_agree(bench, ratings, Path(tmp) / "out")
        theirs = scipy_alone(metrics, means, args.reps)
    from scipy import stats

    row = doc["metrics"]["faith"]["faithfulness"]
    check = stats.kendalltau(metrics["faith"], means["faithfulness"]).statistic
    print(f"  kendall(faith, faithfulness): {row['kendall']:.6f} (scipy {check:.6f})")
    print(f"(a) refine agree, the whole command: {ours:7.2f} s")
    print(f"(b) scipy alone, statistics only:    {theirs:7.2f} s")
    print(f"(a) / (b) = {ours / theirs:.2f}  (target <= 2)")


if __name__ == "__main__":
    main()
