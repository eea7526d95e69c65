"""Assemble a Hugging Face Space folder for the app: ``python tools/make_space.py DEST
[--gpu | --zerogpu]``.

DEST gets the Space's README (its YAML header), ``app.py``, this project's packages
(``refine``, ``metrics``, ``ui``, with the bundled data) copied from the checkout, since
the package is not on the registry and a Space installs only what ``requirements.txt``
names; and ``requirements.txt``: the project's dependencies from ``pyproject.toml`` with
the ``app`` extra and torch's CPU build (a CPU Space, gemini profile), or with ``--gpu``
every extra and torch's default CUDA build (a GPU Space, local-gpu profile), or with
``--zerogpu`` the same plus ``spaces`` and the entry point that leases the GPU per model call
(a ZeroGPU Space, ui/zerogpu.py). A GPU or ZeroGPU Space's README lists the local-gpu
profile's hub models under ``preload_from_hub``, so the Space's build downloads them once
instead of its first visitor. Push DEST to the Space's git repository.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "deploy" / "space"
PACKAGES = ("refine", "metrics", "ui")
CPU_TORCH = "--extra-index-url https://download.pytorch.org/whl/cpu"


def requirements(gpu: bool = False, zerogpu: bool = False) -> list[str]:
    """The Space's requirement lines: the core dependencies and the extras it needs."""
    gpu = gpu or zerogpu
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    wanted = ("local", "caire", "app") if gpu else ("app",)
    lines = list(project["dependencies"])
    for name in wanted:
        lines += [d for d in extras[name] if not d.startswith(project["name"])]
    header = ["# GPU Space (local-gpu profile): torch's CUDA build, every extra"]
    if zerogpu:
        header = ["# ZeroGPU Space (local-gpu profile): every extra, spaces"]
        lines.append("spaces")
    elif not gpu:
        header = ["# CPU Space (gemini profile): torch's CPU build, the app extra", CPU_TORCH]
    return header + lines


def hub_models(profile: str = "local-gpu") -> list[str]:
    """The hub ids of a profile's local models, each once, without revisions or adapters:
    diffusers:, img2img:, hf: and siglip: name theirs; a clip: model's is the one open_clip
    downloads its weights from. The bundled MiniLM and local paths are left out."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from refine.profiles import load_profile

    ids = []
    for name in load_profile(profile).roles.values():
        kind, _, rest = name.partition(":")
        repo = rest.split("+", 1)[0].split("@", 1)[0]
        if kind == "clip":
            import open_clip

            arch, _, tag = rest.partition("/")
            repo = (open_clip.get_pretrained_cfg(arch, tag) or {}).get("hf_hub", "").strip("/")
        elif kind not in ("diffusers", "img2img", "hf", "siglip"):
            continue
        local = not repo or repo.startswith((".", "/", "~")) or repo.count("/") != 1
        if not local and repo not in ids:
            ids.append(repo)
    return ids


def header_lines(zerogpu: bool) -> str:
    """What a GPU or ZeroGPU Space adds to the README's header after ``hf_oauth``."""
    hardware = "zero-a10g" if zerogpu else "l40sx1"
    preload = "".join(f"\n  - {repo}" for repo in hub_models("local-gpu"))
    return f"\nsuggested_hardware: {hardware}\npreload_from_hub:{preload}"


def make_space(dest: Path, gpu: bool = False, zerogpu: bool = False) -> list[str]:
    """The Space folder at ``dest`` (made or refreshed); returns the files written."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in PACKAGES:
        shutil.rmtree(dest / package, ignore_errors=True)
        shutil.copytree(ROOT / package, dest / package, ignore=ignore)
    entry = "app_zerogpu.py" if zerogpu else "app.py"
    shutil.copy(SPACE / entry, dest / "app.py")
    readme = (SPACE / "README.md").read_text(encoding="utf-8")
    if gpu or zerogpu:  # the local models want a GPU of 40 GB or more (local-gpu)
        extra = header_lines(zerogpu)
        readme = re.sub(r"(?m)^hf_oauth: true$", lambda m: m.group(0) + extra, readme)
    (dest / "README.md").write_text(readme, encoding="utf-8")
    lines = requirements(gpu, zerogpu)
    (dest / "requirements.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ["README.md", "app.py", "requirements.txt", *(f"{p}/" for p in PACKAGES)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="the Space folder to make")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--gpu", action="store_true", help="a GPU Space (local-gpu profile)")
    kind.add_argument(
        "--zerogpu", action="store_true", help="a ZeroGPU Space: the GPU leased per model call"
    )
    args = parser.parse_args()
    written = make_space(args.dest, args.gpu, args.zerogpu)
    print(f"{args.dest}: {', '.join(written)}")


if __name__ == "__main__":
    main()
