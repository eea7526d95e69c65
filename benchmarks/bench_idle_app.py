"""An idle app's CPU: the app's server, served and left alone (no page, no event), at
Gradio's own queue pace (it looks for an event every 1 ms and for progress to send every
10 ms) and at the app's (ui.app.QUEUE_LOOK_S, ui.app.PROGRESS_LOOK_S), one after the other
in this run.

Printed, not asserted: the CPU time of the server's thread (its event loop) as a share
of one core, for each pace, and their ratio (target: the app's pace at most a third of
Gradio's). An event then waits on average half of QUEUE_LOOK_S more before it starts.

Usage: python benchmarks/bench_idle_app.py [--seconds 10] [--repeats 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def server_thread(before: set[int]) -> threading.Thread:
    """The thread the launch started (the server's event loop)."""
    started = [t for t in threading.enumerate() if t.ident not in before]
    loops = [t for t in started if t.name.endswith("(run)")]
    if len(loops) != 1:
        raise SystemExit(f"cannot tell the server's thread: {[t.name for t in started]}")
    return loops[0]


def idle_share(pace: tuple[float, float] | None, seconds: float) -> float:
    """The server thread's CPU over ``seconds`` of an idle app, as a share of a core;
    ``pace``: the queue's two waits, or None for the app's own."""
    from refine.service import RunService
    from ui.app import build_app, launch, launch_options

    with tempfile.TemporaryDirectory() as out:
        demo = build_app(RunService("gemini", out=out), "idle app benchmark")
        if pace is not None:
            demo._queue.sleep_when_free, demo._queue.progress_update_sleep_when_free = pace
        before = {t.ident for t in threading.enumerate()}
        launch(demo, block=False, server_name="127.0.0.1", quiet=True, **launch_options(out))
        try:
            clock = time.pthread_getcpuclockid(server_thread(before).ident)
            time.sleep(2.0)  # the launch's own work done
            start = time.clock_gettime(clock)
            time.sleep(seconds)
            return (time.clock_gettime(clock) - start) / seconds
        finally:
            demo.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    from ui.app import PROGRESS_LOOK_S, QUEUE_LOOK_S

    gradio, ours = [], []
    for _ in range(args.repeats):  # alternated, so that a change of the machine's pace
        gradio.append(idle_share((0.001, 0.01), args.seconds))  # meets both
        ours.append(idle_share(None, args.seconds))
    g, o = sum(gradio) / len(gradio), sum(ours) / len(ours)
    print(
        f"Gradio's pace (1 ms, 10 ms): {100 * g:.2f} % of a core (each: "
        + ", ".join(f"{100 * x:.2f}" for x in gradio)
        + ")"
    )
    print(
        f"the app's pace ({1000 * QUEUE_LOOK_S:g} ms, {1000 * PROGRESS_LOOK_S:g} ms): "
        f"{100 * o:.2f} % of a core (each: " + ", ".join(f"{100 * x:.2f}" for x in ours) + ")"
    )
    print(f"ratio: {o / g:.2f} (target <= 0.33)")


if __name__ == "__main__":
    main()
