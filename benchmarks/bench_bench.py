"""refine bench's throughput with API models: prompts per second with 1, 2, 4 and 8 workers
(each ratio against one worker, measured in the same run; target >= 0.8 x N), and the
share of one worker's wall time not spent waiting on the API (the same bench with instant
answers, over the bench with latency).

The real bench code and google-genai client run against the test suite's stand-in Gemini
server, every answer delayed by ``--latency`` seconds; the embedders are the real MiniLM
and a tiny SigLIP on this machine's CPU (their time counts as not waiting on the API).

Then the share at typical Gemini latencies (an image 6 s, an observation 2 s, a judgement
1 s; the figures bench_loop.py uses), over ``--typical-prompts`` prompts.

Usage: python benchmarks/bench_bench.py [--latency 0.3] [--prompts 16] [--images 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per API answer")
    parser.add_argument("--prompts", type=int, default=16, help="prompts per bench")
    parser.add_argument("--images", type=int, default=2, help="images per prompt")
    parser.add_argument(
        "--typical-prompts", type=int, default=4, help="prompts at typical latencies (0: skip)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("REFINE_CACHE_DIR", tempfile.mkdtemp(prefix="bench-bench-"))

    from refine.harness.engine import EngineOptions
    from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
    from refine.harness.tasks.bench.task import run_bench
    from tests.fakes.gemini_server import FakeGemini
    from tests.fakes.gemini_world import World
    from tests.fakes.tiny_models import build_tiny_siglip

    server = FakeGemini().start()
    os.environ["GEMINI_API_KEY"] = "stand-in"
    os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
    world = World()
    server.handler = world
    options = {
        "image_embedder": {"device": "cpu"},
        "text_embedder": {"device": "cpu"},
        **{r: {"max_retries": 0} for r in ("generator", "editor", "observer", "judge")},
    }
    try:
        with tempfile.TemporaryDirectory(prefix="bench-bench-") as tmp:
            root = Path(tmp)
            siglip = build_tiny_siglip(root / "siglip")
            prompts = plan_prompts(["Iran", "India", "Nigeria", "USA"])[: args.prompts]

            def bench(workers: int, folder: str) -> tuple[float, int]:
                plan = BenchPlan(
                    generators=["gemini:gemini-3.1-flash-image"],
                    prompts=prompts,
                    images_per_prompt=args.images,
                    backends={"image_embedder": f"siglip:{siglip}"},
                )
                calls = len(world.log)
                t = time.perf_counter()
                run_bench(
                    plan,
                    root / folder,
                    backend_options=options,
                    engine=EngineOptions(workers=workers),
                )
                return time.perf_counter() - t, len(world.log) - calls

            bench(1, "warmup")  # models loaded, references embedded
            # the same bench with instant answers: everything that is not waiting on the API
            instant, _ = bench(1, "instant")
            world.delay_s = args.latency
            print(
                f"refine bench: {len(prompts)} prompts x {args.images} images, stand-in API "
                f"{args.latency:g} s per answer"
            )
            print(f"{'workers':>7} {'wall s':>7} {'prompts/s':>9} {'x one':>6}  target")
            base = None
            for workers in (1, 2, 4, 8):
                wall, calls = bench(workers, f"w{workers}")
                rate = len(prompts) / wall
                base = base or rate
                ratio = rate / base
                met = "met" if ratio >= 0.8 * workers else "not met"
                target = "" if workers == 1 else f"  (>= {0.8 * workers:.1f}: {met})"
                print(f"{workers:>7} {wall:7.2f} {rate:9.2f} {ratio:6.2f}{target}")
                if workers == 1:
                    print(
                        f"        one worker: {calls} API answers; with instant answers the "
                        f"bench takes {instant:.2f} s, {100 * instant / wall:.1f}% of this wall "
                        "time (embedders, saving, scoring: not waiting on the API)"
                    )
            if args.typical_prompts:
                few = prompts[: args.typical_prompts]
                prompts[:] = few
                world.delay_s = 0.0
                world.delay_by_kind = {}
                instant, _ = bench(1, "instant-few")
                world.delay_by_kind = {"generate": 6.0, "observe": 2.0, "judge": 1.0}
                wall, _ = bench(1, "typical")
                share = 100 * instant / wall
                met = "met" if share < 2 else "not met"
                print(
                    f"typical latencies (image 6 s, observation 2 s, judgement 1 s), "
                    f"{len(few)} prompts, one worker: {wall:.1f} s; not waiting on the API: "
                    f"{instant:.2f} s = {share:.2f}% (target < 2%: {met})"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
