"""Cells in flight on the local engine with API models: twelve prompts at 12 workers against
one prompt at one worker, for ``refine bench`` and ``refine batch``, as a ratio of wall
times measured in the same run (target: at most 1.5x, i.e. the twelve cells wait on the
API together instead of in line), with the most requests the API answered at once and
their mean while any was in flight.

The real bench and batch code and google-genai client run against the test suite's
stand-in Gemini server, every answer delayed by ``--latency`` seconds; the embedders are
the real MiniLM and a tiny SigLIP on this machine's CPU. A first prompt (not timed) loads
the models and fills the caches every later prompt shares. Each timed job starts cold for
the judge, as a new process does: whether its model gives log-probabilities is forgotten,
so the job's first judgement finds out and the others wait for that answer (the first
wave; image quality is judged too, as by default).

Usage: python benchmarks/bench_in_flight.py [--latency 2] [--prompts 12]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class Flight:
    """Samples the server's requests in flight every 50 ms while a job runs."""

    def __init__(self, server) -> None:
        self.server, self.samples, self.stop = server, [], threading.Event()

    def __enter__(self) -> Flight:
        self.server.reset_peak()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.stop.is_set():
            self.samples.append(self.server.in_flight)
            time.sleep(0.05)

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        busy = [s for s in self.samples if s]
        self.mean = sum(busy) / len(busy) if busy else 0.0
        self.peak = self.server.peak_in_flight


def main(argv: list[str] | None = None) -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per API answer")
    parser.add_argument("--prompts", type=int, default=12, help="prompts (and workers)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("REFINE_CACHE_DIR", tempfile.mkdtemp(prefix="bench-flight-"))

    from refine.backends import judging
    from refine.harness.engine import EngineOptions
    from refine.harness.tasks.batch.specs import open_batch
    from refine.harness.tasks.batch.task import run_batch
    from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
    from refine.harness.tasks.bench.task import run_bench
    from refine.loop.refiner import Refiner
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
    n = args.prompts
    try:
        with tempfile.TemporaryDirectory(prefix="bench-flight-") as tmp:
            root = Path(tmp)
            backends = {"image_embedder": f"siglip:{build_tiny_siglip(root / 'siglip')}"}
            prompts = plan_prompts(["Iran", "India", "Nigeria", "USA"])[: n + 2]

            def bench(chosen, workers: int, folder: str) -> tuple[float, Flight, int]:
                plan = BenchPlan(
                    generators=["gemini:gemini-3.1-flash-image"],
                    prompts=chosen,
                    images_per_prompt=2,
                    backends=backends,
                )
                calls = len(world.log)
                with Flight(server) as flight:
                    t = time.perf_counter()
                    run_bench(
                        plan,
                        root / folder,
                        backend_options=options,
                        engine=EngineOptions(workers=workers),
                    )
                    wall = time.perf_counter() - t
                return wall, flight, len(world.log) - calls

            refiner = Refiner("gemini", backends, options)

            def batch(runs: int, workers: int, folder: str, seed: int):
                specs = root / f"{folder}.jsonl"
                rows = [
                    {
                        "activity": "people eating food at home",
                        "country": "Iran",
                        "rounds": 1,
                        "seed": seed + k,
                        "target": 1.0,
                        "max_drift": 2,
                    }
                    for k in range(runs)
                ]
                specs.write_text("".join(json.dumps(r) + "\n" for r in rows))
                record, store = open_batch(specs, root / folder, "gemini", backends)
                calls = len(world.log)
                with Flight(server) as flight:
                    t = time.perf_counter()
                    record = run_batch(
                        record, store, refiner, engine=EngineOptions(workers=workers)
                    )
                    wall = time.perf_counter() - t
                assert record.summary["finished"] == runs, record.summary
                return wall, flight, len(world.log) - calls

            bench(prompts[:1], 1, "warm-bench")
            batch(1, 1, "warm-batch", 0)

            def cold(job):
                """``job`` with the judge's model not yet known to give log-probabilities."""

                def run():
                    judging._HAS_LOGPROBS.clear()
                    judging._NO_LOGPROBS.clear()
                    return job()

                return run

            world.delay_s = args.latency
            print(f"stand-in API {args.latency:g} s per answer; {n} cells at {n} workers")
            print(
                f"{'job':6} {'one cell s':>10} {'calls':>5} {f'{n} cells s':>10} {'calls':>5} "
                f"{'ratio':>6} {'peak':>5} {'mean':>5}  target <= 1.5x"
            )
            for name, one, many in (
                (
                    "bench",
                    lambda: bench(prompts[1:2], 1, "one"),
                    lambda: bench(prompts[2:], n, "n"),
                ),
                ("batch", lambda: batch(1, 1, "one-run", 100), lambda: batch(n, n, "n-runs", 200)),
            ):
                w1, _, c1 = cold(one)()
                wn, flight, cn = cold(many)()
                ratio = wn / w1
                met = "met" if ratio <= 1.5 else "not met"
                print(
                    f"{name:6} {w1:10.2f} {c1:5d} {wn:10.2f} {cn:5d} {ratio:6.2f} "
                    f"{flight.peak:5d} {flight.mean:5.1f}  {met}"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
