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
    out = tmp_path / "cpu.json"
    tool = [sys.executable, str(ROOT / "tools" / "cpu_by_process.py"), "--every", "0.05"]
    done = subprocess.run(
        [*tool, "--json", str(out), "--", sys.executable, "-c", SPIN],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("busy CPU-s "), done.stdout
    rows = json.loads(out.read_text())
    # the spinner, named by the command line it had while it ran, where its last readings
    # came once it had exited (a zombie has none); its parent's holds its code as a string
    (spinner,) = [r for r in rows if r["command"].partition(" -c ")[2].startswith("import time")]
    assert 0.3 <= spinner["cpu_s"] <= 1.0, rows
    assert any(f"{spinner['pid']:>7}" in line for line in done.stdout.splitlines())
    bad = subprocess.run(tool, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "give the command to measure after --" in bad.stderr
