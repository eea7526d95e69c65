"""A built wheel, installed (not editable) into a fresh virtual environment, carries its
bundled data and runs: ``refine refs show`` and ``refine metrics ahead`` on the example."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".git", ".venv", "runs", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache"}


def test_the_wheel_carries_its_data_and_runs(tmp_path):
    # build from a copy, so the checkout gets no build folders
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        symlinks=True,
        ignore=lambda d, names: [n for n in names if n in SKIP or n.endswith(".egg-info")],
    )
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(wheels)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("cultural_refine-*.whl")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    for data in (
        "refine/assets/packs/cultivate.json",
        "refine/assets/profiles/gemini.toml",
        "refine/assets/prompts/observe.txt",
        "refine/assets/examples/iran_eating_home/refs.json",
        "refine/assets/sos/multilingual_person_prompts.csv",
    ):
        assert data in names, data
    # a fresh environment with only the wheel installed; its dependencies are read from
    # this environment's site-packages (the project itself is not)
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REFINE_ASSETS")}
    env["HF_HUB_OFFLINE"] = "1"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )

    where = run(str(python), "-c", "import refine.assets as a; print(a.assets_dir())")
    assets = Path(where.stdout.strip())
    assert where.returncode == 0, where.stderr
    assert assets.is_relative_to(venv) and (assets / "profiles" / "gemini.toml").is_file()
    refine = str(venv / "bin" / "refine")
    shown = run(refine, "refs", "show", "people eating food at home", "--country", "Iran")
    assert shown.returncode == 0, shown.stderr
    assert "stereotype candidates:" in shown.stdout and "source:" in shown.stdout
    profile = run(
        str(python),
        "-c",
        "from refine.profiles import load_profile as p; print(p('gemini').roles['observer'])",
    )
    assert profile.returncode == 0 and profile.stdout.startswith("gemini:"), profile.stderr
    example = assets / "examples" / "iran_eating_home"
    scored = run(
        refine,
        "metrics",
        "ahead",
        "--refs",
        str(example / "refs.json"),
        "--preds",
        str(example / "observed.json"),
        "--json",
    )
    assert scored.returncode == 0, scored.stderr
    doc = json.loads(scored.stdout)
    assert 0.0 <= doc["align"] <= 1.0 and 0.0 <= doc["hal"] <= 1.0 and "ddiv" in doc
