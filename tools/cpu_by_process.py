"""CPU seconds per process while a command runs: where a suite's CPU goes, Chromium's,
Ray's workers' and the commands' it starts included, which a profiler of one Python
process does not see.

    python tools/cpu_by_process.py [--every S] [--top N] [--json FILE] -- COMMAND ...

Every ``--every`` seconds (0.2) the user and system time of every process on the machine
(the command's and any other: measure on a quiet machine) is read (psutil); a process
(its pid and start time) is counted from its first reading to its last, less what it had
used before the command started, and is named by its latest command line (Ray's workers
retitle themselves ``ray::...``). A process that starts and ends between two readings is
missed. The report: the busy CPU seconds of the whole machine and the wall time, then the
processes, most CPU first; the command's exit code is this tool's.

With ``--tree`` only the command and its descendants are counted (as found at each
reading: a process that outlives its parent is still counted, one that its parent left
before the first reading of it is not), so that two trees can be measured side by side:
run at the same time, they meet the same speed of the machine, which moved by a third
within minutes here, and their totals compare where runs made one after the other did not.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import psutil

Key = tuple[int, float]  # a process: its pid and start time (a pid may be used again)


def readings() -> dict[Key, tuple[float, str]]:
    """Each process's CPU seconds so far and its command line, now."""
    out = {}
    for p in psutil.process_iter(["cmdline", "cpu_times", "create_time", "name"]):
        info = p.info
        if info["cpu_times"] is None or info["create_time"] is None:  # gone, or not ours
            continue
        # a kernel thread has no command line: its name, in brackets as ps shows it
        cmd = " ".join(info["cmdline"] or []) or f"[{info['name']}]"
        used = info["cpu_times"].user + info["cpu_times"].system
        out[(p.pid, info["create_time"])] = (used, cmd)
    return out


def busy() -> float:
    """The machine's busy CPU seconds so far (all but idle and waiting on I/O)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def tree_of(pid: int) -> set[int]:
    """``pid`` and its descendants, now."""
    try:
        return {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
    except psutil.NoSuchProcess:
        return {pid}


def measure(command: list[str], every: float, tree: bool = False) -> tuple[int, float, float, dict]:
    """Run ``command``; its exit code, the wall and busy seconds, and per process
    ((pid, start time): [CPU seconds, command line]); with ``tree``, only the command's
    process and its descendants."""
    before = {key: cpu for key, (cpu, _) in readings().items()}
    busy0, start = busy(), time.monotonic()
    seen: dict[Key, list] = {}
    me = os.getpid()
    proc = subprocess.Popen(command)
    while True:
        done = proc.poll() is not None
        ours = tree_of(proc.pid) if tree else None
        for key, (cpu, cmd) in readings().items():
            if key[0] == me or (ours is not None and key not in seen and key[0] not in ours):
                continue
            row = seen.setdefault(key, [0.0, cmd])
            row[0] = max(row[0], cpu - before.get(key, 0.0))
            if not cmd.startswith("["):  # an exited process (a zombie) has no command line
                row[1] = cmd
        if done:
            break
        time.sleep(every)
    return proc.returncode, time.monotonic() - start, busy() - busy0, seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.2, help="seconds between readings")
    parser.add_argument("--top", type=int, default=40, help="processes to list")
    parser.add_argument("--json", help="write every process's reading here")
    parser.add_argument(
        "--tree",
        action="store_true",
        help="count only the command and its descendants (to compare two runs side by side)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    code, wall, total, seen = measure(command, args.every, args.tree)
    rows = sorted(
        ((cpu, pid, cmd) for (pid, _), (cpu, cmd) in seen.items() if cpu > 0), reverse=True
    )
    print(f"busy CPU-s {total:.1f} over {wall:.1f} s of wall, {os.cpu_count()} cores")
    print(f"processes {sum(r[0] for r in rows):.1f} CPU-s in all; the top {args.top}:")
    for cpu, pid, cmd in rows[: args.top]:
        print(f"{cpu:8.1f}  {pid:>7}  {cmd[:120]}")
    if args.json:
        doc = [{"pid": pid, "cpu_s": cpu, "command": cmd} for cpu, pid, cmd in rows]
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return code


if __name__ == "__main__":
    sys.exit(main())
