"""One run on the gemini profile against its critical path: ``refine run "people eating food
at home" --country Iran --profile gemini --rounds 2 --candidates 4``, with every stand-in
answer delayed by ``--latency`` seconds, as the ratio of its wall time to the path a run
cannot beat (round 0: generate, observe, judge; each editing round: write, edit, observe,
judge: 3 + 4 x rounds answers' wait), and the requests it sent, by purpose.

Three worlds: the developer API's (no log-probabilities: a request for them is refused with
HTTP 400 "Logprobs is not enabled"), one that gives first-token log-probabilities, and one
that gives them but answers a "score is N" rating with the digit alone (the reading cannot
find its position after "score is"). Targets: at most 1.2x and 60 requests without
log-probabilities, at most 1.15x with them. Then the same run whose second round finds the
editor's daily quota spent (a 429 as the API words it, with a RetryInfo delay of 23 s):
target, the run ends within 20 s with no retry.

The real loop, gemini backends and google-genai client run against the test suite's
stand-in Gemini server; the embedders are the real MiniLM and a tiny SigLIP on this
machine's CPU. A first run (not timed, no latency) loads the models. Each timed run starts
with an empty cache, as a new user's first run does.

Usage: python benchmarks/bench_gemini_run.py [--latency 1] [--rounds 2] [--candidates 4]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def purpose(kind: str, text: str) -> str:
    """What a stand-in request was for, from its kind and prompt."""
    from tests.fakes.gemini_world import QUALITY_PROMPT, WRITER_PROMPT

    if kind in ("generate", "edit"):
        return "image"
    if kind in ("judge", "sampled"):
        return "quality" if QUALITY_PROMPT in text else "exag"
    return "instruction" if WRITER_PROMPT in text else "observe"


def main(argv: list[str] | None = None) -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per API answer")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument(
        "--timeline", action="store_true", help="print when each request was sent, and why"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from refine.backends import judging
    from refine.loop.refiner import Refiner
    from tests.fakes.gemini_server import FakeGemini
    from tests.fakes.gemini_world import World
    from tests.fakes.tiny_models import build_tiny_siglip
    from tests.runs import begin

    server = FakeGemini().start()
    os.environ["GEMINI_API_KEY"] = "stand-in"
    os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
    path_s = (3 + 4 * args.rounds) * args.latency
    try:
        with tempfile.TemporaryDirectory(prefix="bench-gemini-run-") as tmp:
            root = Path(tmp)
            backends = {"image_embedder": f"siglip:{build_tiny_siglip(root / 'siglip')}"}
            options = {"image_embedder": {"device": "cpu"}, "text_embedder": {"device": "cpu"}}

            def run(world: World, name: str, latency: float) -> tuple[float, list[str], object]:
                os.environ["REFINE_CACHE_DIR"] = str(root / f"cache-{name}")
                judging.forget()
                texts: list[str] = []
                sent: list[float] = []

                def handler(path: str, body: dict):
                    parts = body["contents"][0]["parts"]
                    sent.append(time.perf_counter())
                    texts.append(" ".join(p.get("text", "") for p in parts))
                    return world(path, body)

                world.delay_s = latency
                server.handler = handler
                refiner = Refiner("gemini", backends, options)
                t = time.perf_counter()
                record = begin(
                    refiner,
                    "people eating food at home",
                    "Iran",
                    out=root / name,
                    rounds=args.rounds,
                    candidates=args.candidates,
                    target=1.0,
                    max_drift=2.0,  # the tiny SigLIP's random embeddings drift far
                )
                wall = time.perf_counter() - t
                by = [purpose(k, x) for k, x in zip(world.log, texts, strict=True)]
                if args.timeline and latency:
                    for when, kind, why in zip(sent, world.log, by, strict=True):
                        print(f"  {when - t:6.2f} s  {kind:8} {why}")
                return wall, by, record

            run(World(no_logprobs=True), "warm", 0.0)
            print(
                f"stand-in API {args.latency:g} s per answer; {args.rounds} rounds of "
                f"{args.candidates} candidates; critical path {path_s:g} s"
            )
            print(f"{'world':24} {'wall s':>7} {'ratio':>6} {'requests':>8}  by purpose")
            worlds = (
                ("no log-probabilities", World(no_logprobs=True), 1.2, 60),
                ("first-token logprobs", World(), 1.15, None),
                ("digit without 'score is'", World(bare_digit=True), None, None),
            )
            for name, world, target, most in worlds:
                wall, by, record = run(world, name.split()[0], args.latency)
                counts = collections.Counter(by)
                ratio = wall / path_s
                said = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                aim = []
                if target is not None:
                    aim.append(f"<= {target}x " + ("met" if ratio <= target else "NOT MET"))
                if most is not None:
                    aim.append(f"<= {most} requests " + ("met" if len(by) <= most else "NOT MET"))
                print(f"{name:24} {wall:7.1f} {ratio:6.2f} {len(by):8d}  {said}")
                print(f"{'':24} rounds {[r.decision for r in record.rounds]}  {'; '.join(aim)}")
            from refine.usage import QuotaSpent

            spent = World(no_logprobs=True, daily_spent_from=("edit", 5))  # round 2's first
            try:
                run(spent, "spent", args.latency)
            except QuotaSpent as err:
                ended = time.monotonic()
                first = spent.refused_at[0]
                print(
                    f"daily quota spent: the run ended {ended - first:.2f} s after the first "
                    f"429, {len(spent.refused_at)} refused request(s) (the edits in flight), "
                    f"no retry ({'met' if ended - first <= 20 else 'NOT MET'}): {err}"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
