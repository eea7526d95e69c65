"""tools/cpu_by_process.py: the CPU seconds a command's processes used, its children's
included, and the command's exit code passed on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# a child that spins for 0.4 CPU-s and exits; its parent leaves it a zombie (exited, not
# reaped: no command line left to read) for 1 s, in which the tool reads it (a process is
# read every --every seconds: beside three busy loops on two cores the readings came
# 0.064 s apart, at most 0.072), then reaps it and exits with 3
SPIN = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
                          "import time\\nwhile time.process_time() < 0.4: pass"])
os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
time.sleep(1.0)
child.wait()
sys.exit(3)
"""


@pytest.mark.slow  # the zombie kept for 1 s
def test_a_childs_cpu_is_counted_and_the_exit_code_passed_on(tmp_path):
    """Two measurements side by side: the machine's counts both spinners, the one with
    --tree only its own command's."""
    tool = [sys.executable, str(ROOT / "tools" / "cpu_by_process.py"), "--every", "0.05"]
    out = {"all": tmp_path / "all.json", "tree": tmp_path / "tree.json"}
    runs = {
        way: subprocess.Popen(
            [*tool, *(["--tree"] if way == "tree" else []), "--json", str(out[way])]
            + ["--", sys.executable, "-c", SPIN],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for way in out
    }
    done = {way: (run.communicate(timeout=60), run.returncode) for way, run in runs.items()}
    spinners = {}
    for way, ((stdout, stderr), code) in done.items():
        assert code == 3, stderr
        assert stdout.startswith("busy CPU-s "), stdout
        rows = json.loads(out[way].read_text())
        # a spinner, named by the command line it had while it ran, where its last
        # readings came once it had exited (a zombie has none); its parent's holds its
        # code as a string
        spinners[way] = [
            r for r in rows if r["command"].partition(" -c ")[2].startswith("import time")
        ]
        assert all(0.3 <= r["cpu_s"] <= 1.0 for r in spinners[way]), rows
        assert all(f"{r['pid']:>7}" in stdout for r in spinners[way])  # in the report too
    assert len(spinners["all"]) == 2 and len(spinners["tree"]) == 1, spinners
    assert spinners["tree"][0]["pid"] in {r["pid"] for r in spinners["all"]}
    bad = subprocess.run(tool, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "give the command to measure after --" in bad.stderr
