"""A built wheel, installed (not editable) into a fresh virtual environment that has only
the core dependencies (no diffusers, peft, accelerate, gradio or faiss: an API-only
install), carries its bundled data and runs: ``refine refs show``, ``refine metrics ahead``
on the example, and ``refine run`` with the gemini profile against the fake server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.e2e.test_cli_run import run_args

pytestmark = pytest.mark.slow  # a wheel built and installed

ROOT = Path(__file__).resolve().parents[2]
ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")


def built_from() -> list[str]:
    """What pyproject.toml builds the wheel from: itself, its readme and the top-level
    packages its package search includes."""
    import fnmatch
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [
        p.name
        for p in sorted(ROOT.iterdir())
        if (p / "__init__.py").is_file() and any(fnmatch.fnmatch(p.name, x) for x in patterns)
    ]
    assert {"refine", "metrics", "ui"} <= set(packages), packages
    return ["pyproject.toml", config["project"]["readme"], *packages]


# what the extras bring: left out of the fresh environment
EXTRAS_ONLY = ("diffusers", "peft", "accelerate", "gradio", "gradio_client", "faiss", "faiss_cpu")


def _core_only(site: Path, into: Path) -> None:
    """``into``: links to everything installed in ``site`` but the extras' packages."""
    into.mkdir()
    for entry in site.iterdir():
        stem = entry.name.split("-")[0].split(".")[0].lower()
        if stem in EXTRAS_ONLY or entry.suffix == ".pth" or entry.name.startswith("__editable__"):
            continue
        if stem == "cultural_refine":
            continue
        (into / entry.name).symlink_to(entry)


# refine's commands, each as its console script runs it (refine.cli.main with its argv),
# one after the other in one process: each one's exit code, output and errors as JSON
COMMANDS = """
import contextlib, io, json, sys
from refine.cli import main
done = []
for argv in json.loads(sys.argv[1]):
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    done.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(done))
"""


def test_the_wheel_carries_its_data_and_runs(tmp_path, world, siglip_path):
    # build from a copy of what the wheel is made of, so the checkout gets no build folders
    src = tmp_path / "src"
    src.mkdir()
    for name in built_from():
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
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
    _core_only(Path(sysconfig.get_paths()["purelib"]), tmp_path / "core")
    (site / "deps.pth").write_text(str(tmp_path / "core") + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REFINE_ASSETS")}
    env["HF_HUB_OFFLINE"] = "1"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )

    # where the data is, the gemini profile's observer and whether diffusers is there, in
    # one process (each asked alone was a process start and an import of refine)
    facts = run(
        str(python),
        "-c",
        "import importlib.util as u, json, refine.assets as a; "
        "from refine.profiles import load_profile as p; "
        "print(json.dumps([str(a.assets_dir()), p('gemini').roles['observer'], "
        "u.find_spec('diffusers') is None]))",
    )
    assert facts.returncode == 0, facts.stderr
    where, observer, no_diffusers = json.loads(facts.stdout.strip().splitlines()[-1])
    assets = Path(where)
    assert assets.is_relative_to(venv) and (assets / "profiles" / "gemini.toml").is_file()
    refine = str(venv / "bin" / "refine")
    shown = run(refine, "refs", "show", "people eating food at home", "--country", "Iran")
    assert shown.returncode == 0, shown.stderr
    assert "stereotype candidates:" in shown.stdout and "source:" in shown.stdout
    assert observer.startswith("gemini:"), observer
    # an API-only install: the extras are missing, and the gemini profile runs
    assert no_diffusers
    example = assets / "examples" / "iran_eating_home"
    # the two commands that load models and the two that need an extra, in one process of
    # the fresh environment, as the console script runs each (started alone, each spent
    # 5 s importing torch and transformers, or 1 s importing the command line; the console
    # script itself is the one refs show ran)
    out = tmp_path / "runs"
    ahead = ["metrics", "ahead", "--refs", str(example / "refs.json")]
    ahead += ["--preds", str(example / "observed.json"), "--json"]
    refined = [*map(str, run_args(out, 1, siglip_path)), "--json"]
    tune = ["tune", "--data", str(out), "--base", "diffusers:x", "--out", str(tmp_path)]
    app = ["app", "--port", "7999"]
    done = run(str(python), "-c", COMMANDS, json.dumps([ahead, refined, tune, app]))
    assert done.returncode == 0, done.stderr
    scored, ran, tune, app = json.loads(done.stdout.strip().splitlines()[-1])
    assert scored["code"] == 0, scored["err"]
    doc = json.loads(scored["out"])
    assert 0.0 <= doc["align"] <= 1.0 and 0.0 <= doc["hal"] <= 1.0 and "ddiv" in doc
    assert ran["code"] == 0, ran["err"]
    record = json.loads(ran["out"])
    assert [r["decision"] for r in record["rounds"]] == ["initial", "accepted"]
    assert "diffusers" not in record["packages"] and record["packages"]["cultural-refine"]
    assert tune["code"] == 1 and "Traceback" not in tune["err"], tune["err"]
    assert tune["err"].strip().splitlines() == [
        "error: refine tune needs the package 'diffusers' (the cultural-refine[local] extra: "
        "pip install '.[local]' in a clone)"
    ]
    assert app["code"] == 1 and "Traceback" not in app["err"], app["err"]
    assert (
        "error: the app needs the package 'gradio' (the cultural-refine[app] extra: "
        "pip install '.[app]' in a clone)" in (app["err"])
    )
