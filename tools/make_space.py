"""Assemble a Hugging Face Space folder for the app: ``python tools/make_space.py DEST
[--gpu]``.

DEST gets the Space's README (its YAML header), ``app.py``, this project's packages
(``refine``, ``metrics``, ``ui``, with the bundled data) copied from the checkout, since
the package is not on the registry and a Space installs only what ``requirements.txt``
names; and ``requirements.txt``: the project's dependencies from ``pyproject.toml`` with
the ``app`` extra and torch's CPU build (a CPU Space, gemini profile), or with ``--gpu``
every extra and torch's default CUDA build (a GPU Space, local-gpu profile). Push DEST to
the Space's git repository.
"""

from __future__ import annotations

import argparse
import re
import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "deploy" / "space"
PACKAGES = ("refine", "metrics", "ui")
CPU_TORCH = "--extra-index-url https://download.pytorch.org/whl/cpu"


def requirements(gpu: bool = False) -> list[str]:
    """The Space's requirement lines: the core dependencies and the extras it needs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    wanted = ("local", "caire", "app") if gpu else ("app",)
    lines = list(project["dependencies"])
    for name in wanted:
        lines += [d for d in extras[name] if not d.startswith(project["name"])]
    header = ["# GPU Space (local-gpu profile): torch's CUDA build, every extra"]
    if not gpu:
        header = ["# CPU Space (gemini profile): torch's CPU build, the app extra", CPU_TORCH]
    return header + lines


def make_space(dest: Path, gpu: bool = False) -> list[str]:
    """The Space folder at ``dest`` (made or refreshed); returns the files written."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in PACKAGES:
        shutil.rmtree(dest / package, ignore_errors=True)
        shutil.copytree(ROOT / package, dest / package, ignore=ignore)
    shutil.copy(SPACE / "app.py", dest / "app.py")
    readme = (SPACE / "README.md").read_text(encoding="utf-8")
    if gpu:  # the local models want a GPU of 40 GB or more (the local-gpu profile)
        readme = re.sub(
            r"(?m)^hf_oauth: true$", "hf_oauth: true\nsuggested_hardware: l40sx1", readme
        )
    (dest / "README.md").write_text(readme, encoding="utf-8")
    (dest / "requirements.txt").write_text("\n".join(requirements(gpu)) + "\n", encoding="utf-8")
    return ["README.md", "app.py", "requirements.txt", *(f"{p}/" for p in PACKAGES)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="the Space folder to make")
    parser.add_argument("--gpu", action="store_true", help="a GPU Space (local-gpu profile)")
    args = parser.parse_args()
    written = make_space(args.dest, args.gpu)
    print(f"{args.dest}: {', '.join(written)}")


if __name__ == "__main__":
    main()
