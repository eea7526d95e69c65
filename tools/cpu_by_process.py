"""CPU seconds per process while a command runs: where a suite's CPU goes, Chromium's,
Ray's workers' and the commands' it starts included, which a profiler of one Python
process does not see.

    python tools/cpu_by_process.py [--every S] [--top N] [--json FILE] -- COMMAND ...

Every ``--every`` seconds (0.2) the user and system time of every process on the machine
(the command's and any other: measure on a quiet machine) is read from
``/proc/<pid>/stat``; a process is counted from its first reading to its last, less what
it had used before the command started, and is named by its latest command line (Ray's
workers retitle themselves ``ray::...``). A process that starts and ends between two
readings is missed. The report: the busy CPU seconds of the whole machine
(``/proc/stat``) and the wall time, then the processes, most CPU first; the command's exit
code is this tool's. Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def readings() -> dict[int, tuple[float, str]]:
    """Each process's CPU seconds so far and its command line, now."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile
            continue
        head, _, tail = stat.rpartition(")")  # the name may hold spaces and parentheses
        fields = tail.split()
        # a kernel thread has no command line: its name, in brackets as ps shows it
        cmd = cmd or f"[{head.partition('(')[2]}]"
        out[int(name)] = ((int(fields[11]) + int(fields[12])) / HZ, cmd)
    return out


def busy() -> float:
    """The machine's busy CPU seconds so far (all but idle and iowait)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / HZ


def measure(command: list[str], every: float) -> tuple[int, float, float, dict]:
    """Run ``command``; its exit code, the wall and busy seconds, and per process
    (pid: [CPU seconds, command line])."""
    before = {pid: cpu for pid, (cpu, _) in readings().items()}
    busy0, start = busy(), time.monotonic()
    seen: dict[int, list] = {}
    me = os.getpid()
    proc = subprocess.Popen(command)
    while True:
        done = proc.poll() is not None
        for pid, (cpu, cmd) in readings().items():
            if pid == me:
                continue
            used = cpu - before.get(pid, 0.0)
            row = seen.setdefault(pid, [0.0, cmd])
            row[0] = max(row[0], used)
            row[1] = cmd or row[1]
        if done:
            break
        time.sleep(every)
    return proc.returncode, time.monotonic() - start, busy() - busy0, seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.2, help="seconds between readings")
    parser.add_argument("--top", type=int, default=40, help="processes to list")
    parser.add_argument("--json", help="write every process's reading here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    code, wall, total, seen = measure(command, args.every)
    rows = sorted(((cpu, pid, cmd) for pid, (cpu, cmd) in seen.items() if cpu > 0), reverse=True)
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
