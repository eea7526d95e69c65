"""A round at the speed of its slowest call: candidates at once for API models, in one
batch for local models, and no round that stalls on loading a model.

Scenarios (figures printed, not asserted; each ratio against a baseline measured in the
same run):

* ``api``: the real loop and the real google-genai client against the test suite's
  stand-in Gemini server, every answer delayed by ``--latency`` seconds. For N = 1, 2, 4
  candidates, the editing rounds' mean wall time over the round's critical path, taken as
  the same round with one candidate (one chain of dependent calls: edit, observe, judge,
  plus the local scoring and drift). Candidates at once (target <= 1.15 for every N) and,
  for comparison, one after the other (the code before this change: about N).
* ``stall``: in the same runs, round 1's wall time over round 2's (target <= 1.1): the
  models are loaded before round 0, so the first editing round pays nothing extra.
* ``local``: tiny Stable Diffusion and InstructPix2Pix pipelines on this machine's CPU (or
  on a GPU when there is one; the line says which): the time to make N = 4 images in one
  batched call over the time for one image, next to four single calls (the old way).
  The target (<= 1.5 at N = 4) is for a GPU, where a batch fills the device; a CPU has no
  such headroom, so its figure is printed for the record only.

Usage: python benchmarks/bench_parallel.py [--latency 0.5] [--rounds 3] [--scenario NAME]...
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ACT, COUNTRY = "people eating food at home", "Iran"


def api_rounds(refiner, out: Path, n: int, rounds: int) -> list[float]:
    """Wall seconds of each round of one run (round 0 first)."""
    from refine.events import RoundDecided, RunStarted

    marks: list[float] = []

    def on_event(event) -> None:
        if isinstance(event, RunStarted | RoundDecided):
            marks.append(time.perf_counter())

    refiner.on_event = on_event
    from refine import settings

    raw = {"activity": ACT, "country": COUNTRY, "rounds": rounds, "candidates": n}
    raw |= {"target": 1.0, "patience": rounds + 1, "max_drift": 2.0}
    run = refiner.start(*settings.load(raw), out=out)
    assert run.status == "finished" and len(run.rounds) == rounds + 1, run.error
    return [b - a for a, b in zip(marks, marks[1:], strict=False)]


def api_scenario(latency: float, rounds: int, root: Path) -> None:
    from refine.loop.refiner import Refiner
    from tests.fakes.gemini_server import FakeGemini
    from tests.fakes.gemini_world import World
    from tests.fakes.tiny_models import build_tiny_siglip

    server = FakeGemini().start()
    os.environ["GEMINI_API_KEY"] = "stand-in"
    os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
    world = World(delay_s=latency)
    server.handler = world
    siglip = build_tiny_siglip(root / "siglip")
    options = {
        "image_embedder": {"device": "cpu"},
        "text_embedder": {"device": "cpu"},
        **{r: {"max_retries": 0} for r in ("generator", "editor", "observer", "judge")},
    }
    refiner = Refiner("gemini", {"image_embedder": f"siglip:{siglip}"}, options)
    try:
        api_rounds(refiner, root / "warmup", 1, 1)  # caches warm (embeddings of references)
        print(f"\napi: stand-in Gemini server, {latency:g} s per answer, {rounds} editing rounds")
        print(f"{'N':>2} {'mode':>8} {'round s':>8} {'path s':>7} {'ratio':>6}  stall (r1/r2)")
        path = None
        for n in (1, 2, 4):
            for parallel in (True, False):
                refiner.parallel = parallel
                walls = api_rounds(refiner, root / f"n{n}-{parallel}", n, rounds)
                edit = statistics.mean(walls[1:])
                if n == 1 and parallel:
                    path = edit  # one chain: the critical path of a round
                ratio = edit / path
                mode = "at once" if parallel else "one by one"
                target = ""
                if parallel:
                    target = "  (<= 1.15)" if ratio <= 1.15 else "  (> 1.15)"
                stall = walls[1] / walls[2] if len(walls) > 2 else float("nan")
                print(
                    f"{n:>2} {mode:>10} {edit:8.2f} {path:7.2f} {ratio:6.2f}{target:12}"
                    f" {stall:5.2f}{'  (<= 1.1)' if stall <= 1.1 else '  (> 1.1)'}"
                )
    finally:
        server.stop()


def local_scenario(root: Path) -> None:
    import torch

    from refine.backends import create
    from tests.fakes.tiny_models import build_tiny_sd

    device = "cuda" if torch.cuda.is_available() else "cpu"
    sd, ip2p = build_tiny_sd(root / "sd", 4), build_tiny_sd(root / "ip2p", 8)
    gen = create("generator", f"diffusers:{sd}", device=device, steps=4, width=64, height=64)
    edit = create("editor", f"diffusers:{ip2p}", device=device, steps=4, shared=False)
    from PIL import Image

    source = Image.new("RGB", (64, 64), (120, 60, 30))

    def timed(fn, repeat: int = 3) -> float:
        fn()  # warm
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        return best

    print(f"\nlocal: tiny pipelines on {device} ({'GPU figure' if device == 'cuda' else 'CPU'})")
    print(f"{'stage':>8} {'1 image s':>10} {'4 batched s':>12} {'ratio':>6} {'4 single s':>11}")
    for name, one in (
        ("generate", lambda s: gen.generate("x", s)),
        ("edit", lambda s: edit.edit(source, "add a sofreh", s)),
    ):
        t1 = timed(lambda one=one: one([1]))
        t4 = timed(lambda one=one: one([1, 2, 3, 4]))
        singles = timed(lambda one=one: [one([s]) for s in (1, 2, 3, 4)])
        verdict = ""
        if device == "cuda":
            verdict = "  (<= 1.5)" if t4 / t1 <= 1.5 else "  (> 1.5)"
        print(f"{name:>8} {t1:10.3f} {t4:12.3f} {t4 / t1:6.2f} {singles:11.3f}{verdict}")


def main(argv: list[str] | None = None) -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per API answer")
    parser.add_argument("--rounds", type=int, default=3, help="editing rounds per run")
    parser.add_argument("--scenario", action="append", choices=["api", "local"])
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("REFINE_CACHE_DIR", tempfile.mkdtemp(prefix="bench-parallel-"))
    with tempfile.TemporaryDirectory(prefix="bench-parallel-") as tmp:
        for name in args.scenario or ["api", "local"]:
            if name == "api":
                api_scenario(args.latency, args.rounds, Path(tmp) / "api")
            else:
                local_scenario(Path(tmp) / "local")


if __name__ == "__main__":
    main()
