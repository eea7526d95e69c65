"""AHEaD speed on a batch: prints figures, asserts nothing.

Workload: 1,000 images of 20 activities, 5 dimensions, 10 reference and 8 predicted
descriptors per dimension. References are shared by the images of an activity; predictions
are drawn from a pool of 60 phrases per activity and dimension, so phrases repeat as they
do when an observer describes many images of one activity.

Printed, all in the same run with the same loaded model:
  (a) encoding the unique phrases alone with sentence-transformers (the lower bound),
  (b) the full metric computation (metrics.ahead.score_images with an empty cache:
      normalisation, de-duplication, encoding, batched similarities, verdicts, feedback),
  (c) a straightforward per-image implementation: encode the references and predictions of
      each image and dimension per call, best matches by Python loops.
Targets: (b) within 5% of (a); (c) / (b) >= 20.

Usage: python benchmarks/bench_ahead.py [--images 1000] [--naive-images N] [--device cpu]
``--naive-images`` times (c) on the first N images and scales it linearly to all images
(each image costs (c) the same work); by default (c) runs on every image.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from metrics import ahead  # noqa: E402
from metrics.descriptors import DIMENSIONS  # noqa: E402
from metrics.text_embedding import PhraseEmbeddingCache  # noqa: E402

ADJECTIVES = (
    "low wooden carved painted ornate simple colourful woven embroidered bright dark round "
    "long narrow traditional modern brass copper silver clay ceramic glass silk cotton "
    "patterned plain large small red blue green golden white"
).split()
NOUNS = (
    "table rug carpet cushion lantern bowl plate tray teapot cup basket cloth dress scarf "
    "shirt robe hat sash drum flag garland candle window arch doorway courtyard wall tile "
    "bench stool curtain shelf jar pot platter bread rice stew fruit flower ribbon"
).split()
CONTEXTS = (
    "on the floor|near the wall|in the centre|beside the guests|under the window|"
    "on a low table|in a courtyard|by the entrance|in the corner|across the room|"
    "held by a woman|worn by a man|shared by the family|passed between guests|"
    "in the background|in the foreground|on a shelf|hanging from the ceiling"
).split("|")


def phrase(rng: random.Random) -> str:
    words = [rng.choice(ADJECTIVES), rng.choice(NOUNS)]
    if rng.random() < 0.7:
        words.append(rng.choice(CONTEXTS))
    if rng.random() < 0.3:
        words.insert(0, rng.choice(ADJECTIVES))
    return " ".join(words)


def distinct_phrases(rng: random.Random, n: int) -> list[str]:
    out: dict[str, None] = {}
    while len(out) < n:
        out[phrase(rng)] = None
    return list(out)


def make_workload(n_images: int, n_activities: int = 20, seed: int = 0):
    rng = random.Random(seed)
    refs, pools = [], []
    for _ in range(n_activities):
        refs.append({d: distinct_phrases(rng, 10) for d in DIMENSIONS})
        pool = {}
        for d in DIMENSIONS:
            # some predictions reuse the wording of references, most are observer phrasing
            pool[d] = list(dict.fromkeys(refs[-1][d][:4] + distinct_phrases(rng, 56)))
        pools.append(pool)
    image_refs, image_preds = [], []
    for i in range(n_images):
        a = i % n_activities
        image_refs.append(refs[a])
        image_preds.append({d: rng.sample(pools[a][d], 8) for d in DIMENSIONS})
    return image_refs, image_preds


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def naive_scores(refs, preds, embedder, tau=ahead.DEFAULT_TAU):
    """Per image and dimension: encode per call, Python loops over pairs."""
    out = []
    for ref, pred in zip(refs, preds, strict=True):
        aligns, hals = [], []
        for d in DIMENSIONS:
            r, p = list(dict.fromkeys(ref[d])), list(dict.fromkeys(pred[d]))
            if not r:
                continue
            er = embedder.encode(r).tolist()
            ep = embedder.encode(p).tolist() if p else []
            hit = 0
            for vr in er:
                best = max((dot(vr, vp) for vp in ep), default=-2.0)
                hit += best > tau
            hal = 0
            for vp in ep:
                best = max(dot(vr, vp) for vr in er)
                hal += best <= tau
            aligns.append(hit / len(r))
            hals.append(hal / len(p) if p else 0.0)
        out.append((sum(aligns) / len(aligns), sum(hals) / len(hals)))
    return out


def timed(fn, repeats: int = 1):
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--naive-images", type=int, default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import torch

    from refine.backends import create

    embedder = create("text_embedder", "st:all-MiniLM-L6-v2", device=args.device).load()
    embedder.encode(["warm up the model", "and its kernels"])
    refs, preds = make_workload(args.images)

    occurrences = sum(len(m[d]) for maps in (refs, preds) for m in maps for d in DIMENSIONS)
    unique = list(
        dict.fromkeys(p for maps in (refs, preds) for m in maps for d in DIMENSIONS for p in m[d])
    )
    print(f"device: {embedder.device}; torch threads: {torch.get_num_threads()}")
    print(
        f"workload: {args.images} images x {len(DIMENSIONS)} dimensions, "
        f"{occurrences} phrase occurrences, {len(unique)} unique "
        f"({100 * len(unique) / occurrences:.1f}%)"
    )

    t_a, _ = timed(lambda: embedder.encode(unique), args.repeats)
    t_b, scores = timed(
        lambda: ahead.score_images(refs, preds, embedder, cache=PhraseEmbeddingCache()),
        args.repeats,
    )
    cache = PhraseEmbeddingCache()
    ahead.score_images(refs, preds, embedder, cache=cache)
    t_warm, _ = timed(lambda: ahead.score_images(refs, preds, embedder, cache=cache), 1)

    n_naive = args.naive_images or args.images
    t_c_part, naive = timed(lambda: naive_scores(refs[:n_naive], preds[:n_naive], embedder), 1)
    t_c = t_c_part * args.images / n_naive
    for (a, h), s in zip(naive, scores[:n_naive], strict=True):
        if abs(a - s.align) > 1e-4 or abs(h - s.hal) > 1e-4:
            raise SystemExit("the per-image implementation disagrees with metrics.ahead")

    print(f"(a) encode unique phrases only : {t_a:8.3f} s")
    print(f"(b) full AHEaD computation     : {t_b:8.3f} s   (b)/(a) = {t_b / t_a:.3f}")
    scaled = f" (timed on {n_naive} images, scaled)" if n_naive != args.images else ""
    print(f"(c) per-image implementation   : {t_c:8.3f} s{scaled}   (c)/(b) = {t_c / t_b:.1f}")
    print(f"    repeat round, all phrases cached: {t_warm:.3f} s")
    print(
        f"targets: (b) within 5% of (a): {'met' if t_b <= 1.05 * t_a else 'NOT met'}; "
        f"(c)/(b) >= 20: {'met' if t_c / t_b >= 20 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
