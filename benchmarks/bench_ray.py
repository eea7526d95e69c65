"""refine batch: the local engine (N threads, one set of models) against the Ray engine
(N actors, a set of models each) on a local Ray instance, through the stand-in Gemini API
with an injected latency per answer: runs per minute for N = 2, 4 (and 8 with --max 8),
and the Ray engine's overhead per run (scheduling, state writes, the driver's bookkeeping:
the driver's wall time for a run minus the run's own) as a share of the run's wall time;
the median leaves out the first run of each worker, which loads its models.

Usage: python benchmarks/bench_ray.py [--runs 32] [--latency 0.3] [--max 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per API answer")
    parser.add_argument("--max", type=int, default=4, help="largest N (2, 4, 8)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("REFINE_CACHE_DIR", tempfile.mkdtemp(prefix="bench-ray-"))

    import ray

    from refine.harness.engine import EngineOptions
    from refine.harness.tasks.batch.specs import open_batch
    from refine.harness.tasks.batch.task import run_batch
    from refine.loop.refiner import Refiner
    from tests.fakes.gemini_server import FakeGemini
    from tests.fakes.gemini_world import World
    from tests.fakes.tiny_models import build_tiny_siglip

    server = FakeGemini().start()
    os.environ["GEMINI_API_KEY"] = "stand-in"
    os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
    server.handler = World(delay_s=args.latency)
    options = {
        "image_embedder": {"device": "cpu"},
        "text_embedder": {"device": "cpu"},
        **{r: {"max_retries": 0} for r in ("generator", "editor", "observer", "judge")},
    }
    ray.init(include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
            root = Path(tmp)
            backends = {"image_embedder": f"siglip:{build_tiny_siglip(root / 'siglip')}"}
            specs = root / "specs.jsonl"
            specs.write_text(
                "".join(
                    json.dumps(
                        {
                            "activity": "people eating food at home",
                            "country": "Iran",
                            "rounds": 1,
                            "seed": k,
                            "target": 1.0,
                            "max_drift": 2,
                        }
                    )
                    + "\n"
                    for k in range(args.runs)
                )
            )
            print(
                f"refine batch: {args.runs} runs (1 editing round, 2 candidates), stand-in "
                f"API {args.latency:g} s per answer"
            )
            print(f"{'N':>2} {'local runs/min':>15} {'ray runs/min':>13} {'ray overhead':>24}")
            for n in (2, 4, 8):
                if n > args.max:
                    break
                batch, store = open_batch(specs, root / f"local{n}", "gemini", backends)
                t = time.perf_counter()
                run_batch(
                    batch,
                    store,
                    Refiner("gemini", backends, options),
                    engine=EngineOptions(workers=n),
                )
                local = args.runs / (time.perf_counter() - t) * 60
                batch, store = open_batch(specs, root / f"ray{n}", "gemini", backends)
                timings: list[tuple[int, float, float, bool]] = []
                t = time.perf_counter()
                run_batch(
                    batch,
                    store,
                    backend_options=options,
                    timings=timings,
                    engine=EngineOptions("ray", workers=n),
                )
                remote = args.runs / (time.perf_counter() - t) * 60
                # each worker's first run loads its models: left out
                warm = [(wall - own) / wall for _, wall, own, first in timings if not first]
                median = statistics.median(warm)
                met = "met" if median < 0.02 else "not met"
                print(f"{n:>2} {local:15.1f} {remote:13.1f} {100 * median:8.2f}% median ({met})")
    finally:
        ray.shutdown()
        server.stop()


if __name__ == "__main__":
    main()
