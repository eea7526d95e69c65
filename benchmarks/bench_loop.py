"""The refinement loop's own overhead per round, as a fraction of the round's time.

Everything but model calls is overhead: saving images and run records (atomic, fsynced),
loading the parent, SSIM, AHEaD arithmetic, instruction building, bookkeeping. Model
calls run real tiny models (Stable Diffusion, InstructPix2Pix, SigLIP, MiniLM) plus an
injected fixed latency per call or per image that emulates real models; the observer
and judge are scripted (only their latency matters here). Images are scaled to the size
real models make (1024 px by default) so saving and SSIM cost what they cost in use.

Scenarios (latencies per image or call, seconds):
* ``none``: the tiny models alone (no latency added), the worst case for the ratio;
* ``local-gpu``: FLUX.2-klein 4 steps 1.0 generate, 1.2 edit; Qwen2.5-VL-7B 2.5 observe,
  0.15 judge; 0.01 text and 0.02 image embeddings (typical H100 figures);
* ``gemini``: 8 generate, 9 edit, 3 observe, 1 judge; local embedders as above.

Usage: python benchmarks/bench_loop.py [--rounds 3] [--size 1024] [--scenario NAME]...
Prints per scenario the mean round time, model time, overhead and overhead fraction
(target under 2% for the realistic scenarios).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCENARIOS = {
    "none": {},
    "local-gpu": {
        "generate": 1.0,
        "edit": 1.2,
        "describe": 2.5,
        "rate": 0.15,
        "yes_probability": 0.15,
        "encode": 0.01,
        "encode_images": 0.02,
    },
    "gemini": {
        "generate": 8.0,
        "edit": 9.0,
        "describe": 3.0,
        "rate": 1.0,
        "yes_probability": 1.0,
        "encode": 0.01,
        "encode_images": 0.02,
    },
}
TINY = 64  # the tiny pipelines' working size
PER_ITEM = {"generate": "seeds", "edit": "seeds", "rate": "images", "yes_probability": "images"}

ANSWERS = [
    {
        "setting": ["modern restaurant with neon lights"],
        "objects": ["hamburgers", "Large rice platter"],
        "attire": ["turbans and robes"],
        "interaction": ["Engaging in conversation"],
        "spatial": [],
    },
    {
        "setting": ["Persian rug on floor"],
        "objects": ["Large rice platter", "Estekan tea glasses"],
        "attire": ["Casual modern attire"],
        "interaction": ["Sharing communal dishes"],
        "spatial": ["People seated on floor"],
    },
]


class Clock:
    """Model time: every wrapped call adds its duration (real compute + latency)."""

    def __init__(self) -> None:
        self.model_s = 0.0


class Emulated:
    """Wraps a backend: each call sleeps its latency, runs the backend, and is timed; images
    are scaled to the realistic size (part of the emulated model)."""

    def __init__(self, backend, latency: dict[str, float], clock: Clock, size: int) -> None:
        self._backend, self._latency, self._clock, self._size = backend, latency, clock, size
        self.id = getattr(backend, "id", type(backend).__name__)

    def __getattr__(self, name):
        target = getattr(self._backend, name)
        if not callable(target):
            return target

        def call(*args, **kwargs):
            start = time.perf_counter()
            n = 1
            if name in PER_ITEM:
                n = len(args[-1] if name in ("generate", "edit") else args[0])  # seeds, images
            if self._latency.get(name):
                time.sleep(self._latency[name] * n)
            if name == "edit":  # the tiny editor works at its own small size
                args = (args[0].resize((TINY, TINY)), *args[1:])
            out = target(*args, **kwargs)
            if name in ("generate", "edit"):
                out = [im.resize((self._size, self._size)) for im in out]
            self._clock.model_s += time.perf_counter() - start
            return out

        return call


class ScriptedObserver:
    id = "scripted:observer"

    def __init__(self) -> None:
        self.calls = 0

    def describe(self, image, dimensions, max_per_dimension=10):
        self.calls += 1
        # the second candidate of each edit round looks better than round 0
        return ANSWERS[min(1, self.calls // 2) if self.calls % 2 else 0]


class ScriptedJudge:
    id = "scripted:judge"

    def rate(self, images, prompts):
        from refine.backends.rating import Rating

        return [Rating((0.4, 0.3, 0.15, 0.1, 0.05)) for _ in images]

    def yes_probability(self, images, questions):
        return [0.5 for _ in images]


def build_models(root: Path):
    from refine.backends import create
    from tests.fakes.tiny_models import build_tiny_sd, build_tiny_siglip

    sd, ip2p, siglip = build_tiny_sd(root, 4), build_tiny_sd(root, 8), build_tiny_siglip(root)
    cpu = {"device": "cpu"}
    return {
        "generator": create("generator", f"diffusers:{sd}", steps=2, width=64, height=64, **cpu),
        "editor": create("editor", f"diffusers:{ip2p}", steps=2, **cpu),
        "text_embedder": create("text_embedder", "st:all-MiniLM-L6-v2", **cpu),
        "image_embedder": create("image_embedder", f"siglip:{siglip}", **cpu),
    }


def measure(models: dict, latency: dict[str, float], rounds: int, size: int, out: Path):
    from refine.events import RoundDecided, RunStarted
    from refine.loop.refiner import Refiner

    clock = Clock()
    instances = {
        role: Emulated(backend, latency, clock, size)
        for role, backend in {
            **models,
            "observer": ScriptedObserver(),
            "judge": ScriptedJudge(),
        }.items()
    }
    marks: list[tuple[float, float]] = []

    def on_event(event):
        if isinstance(event, RunStarted | RoundDecided):
            marks.append((time.perf_counter(), clock.model_s))

    refiner = Refiner("local-gpu", instances=instances, on_event=on_event)
    from refine import settings

    raw = {"activity": "people eating food at home", "country": "Iran", "rounds": rounds}
    raw |= {"candidates": 2, "target": 1.0, "patience": rounds + 1, "max_drift": 2.0}
    run = refiner.start(*settings.load(raw), out=out)
    assert len(run.rounds) == rounds + 1, run.stop_reason
    rows = []
    for (t0, m0), (t1, m1) in zip(marks, marks[1:], strict=False):
        wall, model = t1 - t0, m1 - m0
        rows.append((wall, model, wall - model))
    return run, rows


def main(argv: list[str] | None = None) -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="editing rounds per run")
    parser.add_argument("--size", type=int, default=1024, help="image side in pixels")
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS), help="default: all")
    args = parser.parse_args(argv)
    scenarios = args.scenario or list(SCENARIOS)
    with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
        root = Path(tmp)
        print("building tiny models ...", file=sys.stderr)
        models = build_models(root / "models")
        measure(models, {}, 1, args.size, root / "warmup")  # load weights, warm caches
        print(
            f"loop overhead per round: {args.rounds} editing rounds + round 0, 2 candidates "
            f"per round, {args.size} px images"
        )
        header = f"{'scenario':10} {'round s':>8} {'model s':>8} {'overhead s':>10} {'overhead':>9}"
        print(header)
        for name in scenarios:
            _, rows = measure(models, SCENARIOS[name], args.rounds, args.size, root / name)
            wall = statistics.mean(r[0] for r in rows)
            model = statistics.mean(r[1] for r in rows)
            over = statistics.mean(r[2] for r in rows)
            worst = max(r[2] / r[0] for r in rows)
            verdict = "" if name == "none" else ("  (< 2%)" if over / wall < 0.02 else "  (>= 2%)")
            print(
                f"{name:10} {wall:8.3f} {model:8.3f} {over:10.4f} {100 * over / wall:8.2f}%"
                f"{verdict}  worst round {100 * worst:.2f}%"
            )


if __name__ == "__main__":
    main()
