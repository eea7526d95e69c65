"""tools/cpu_by_process.py: the CPU seconds a command's processes used, its children's
included, and the command's exit code passed on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# a child that spins for 0.4 CPU-s and then idles for 1 s, in which the tool reads what it
# used (a process is read every --every seconds while it lives: beside three busy loops on
# two cores the readings came 0.056 s apart, at most 0.062), then its parent exits with 3
SPIN = (
    "import subprocess, sys; subprocess.run([sys.executable, '-c', "
    "'import time\\nwhile time.process_time() < 0.4: pass\\ntime.sleep(1.0)']); sys.exit(3)"
)


@pytest.mark.slow  # the child's second of idling
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
    # the spinner's own command line (its parent's holds its code as a string)
    (spinner,) = [r for r in rows if r["command"].partition(" -c ")[2].startswith("import time")]
    assert 0.3 <= spinner["cpu_s"] <= 1.0, rows
    assert any(f"{spinner['pid']:>7}" in line for line in done.stdout.splitlines())
    bad = subprocess.run(tool, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "give the command to measure after --" in bad.stderr
