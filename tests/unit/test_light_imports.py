"""`import refine` and `import metrics` must not pull in model libraries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "torch",
    "transformers",
    "diffusers",
    "google.genai",
    "open_clip",
    "gradio",
    "sentence_transformers",
)


def test_top_level_imports_are_light():
    code = (
        "import sys, refine, metrics, refine.backends, refine.assets, metrics.ahead, "
        "metrics.sos, metrics.vendi, metrics.text_embedding, metrics.drift, refine.loop.refiner, "
        "refine.records, refine.evaluate.references, refine.io.store, refine.io.files, "
        "refine.loop.instructions, refine.settings, "
        "refine.evaluate.assess, refine.loop.policy, refine.present.views, refine.events, "
        "refine.loop.steps, refine.loop.steps.caire, refine.loop.steps.languages, "
        "refine.backends.selection, refine.service; "
        "from refine import Refiner; "
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_creating_backends_imports_no_torch():
    code = (
        "import sys; from refine.backends import create; "
        "create('text_embedder', 'st:all-MiniLM-L6-v2'); "
        "create('generator', 'diffusers:some/model', steps=2); "
        "create('image_embedder', 'clip:ViT-B-32/openai'); "
        "create('image_embedder', 'siglip:google/siglip-base-patch16-224'); "
        "create('observer', 'hf:Qwen/Qwen2.5-VL-3B-Instruct'); "
        "from refine.profiles import load_profile; load_profile('local-gpu').create('editor'); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_the_app_imports_no_torch():
    code = "import sys, ui.app, ui.adapters; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _imports(path: Path) -> set[str]:
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.slow
def test_imports_go_one_way():
    """ui and refine.cli -> service -> harness, train -> human -> loop -> evaluate ->
    backends, io and metrics (a recipe's agreement table and agree --compute read human;
    human reads no task); metrics imports nothing from refine; nothing imports a layer
    above its own (present and the shared flat modules sit beside them and import no front
    end)."""
    root = Path(__file__).resolve().parents[2]
    for path in (root / "metrics").rglob("*.py"):
        assert not {m for m in _imports(path) if m.split(".")[0] in ("refine", "ui")}, path
    fronts = ("refine.cli", "ui", "refine.service")
    above = {
        "loop": (*fronts, "refine.harness", "refine.train", "refine.human"),
        "evaluate": (*fronts, "refine.harness", "refine.train", "refine.human", "refine.loop"),
        "backends": (*fronts, "refine.harness", "refine.loop", "refine.evaluate", "refine.human"),
        "io": (*fronts, "refine.harness", "refine.loop", "refine.evaluate", "refine.present"),
        "present": fronts,
        "harness": fronts,
        "train": fronts,
        "human": (*fronts, "refine.harness", "refine.train"),
    }
    checked = 0
    for folder, banned in above.items():
        for path in (root / "refine" / folder).rglob("*.py"):
            found = {m for m in _imports(path) if m.startswith(banned)}
            assert not found, f"{path.relative_to(root)} imports {found}"
            checked += 1
    for name in ("settings", "records", "events", "profiles", "progress", "usage"):
        path = root / "refine" / f"{name}.py"
        found = {m for m in _imports(path) if m.startswith((*fronts, "refine.loop.refiner"))}
        assert not found, f"{path.relative_to(root)} imports {found}"
    assert checked > 40


@pytest.mark.slow
def test_no_task_imports_a_renderer():
    """Tasks return results; the CLI and the app render them with refine.present."""
    root = Path(__file__).resolve().parents[2]
    fronts = (root / "refine" / "present", root / "refine" / "cli")
    for path in (root / "refine").rglob("*.py"):
        if any(f in path.parents for f in fronts):
            continue
        found = {m for m in _imports(path) if m.startswith("refine.present")}
        assert not found, f"{path.relative_to(root)} imports {found}"


@pytest.mark.slow
def test_the_command_line_sets_the_collectors_pace_and_an_import_does_not():
    """`refine` runs the cycle collector at steady_collector's pace from its start; a
    process that only imports the toolkit keeps Python's own (700 new objects a pass)."""
    code = (
        "import gc, sys; import refine, refine.cli, refine.harness.ray; "
        "print(gc.get_threshold()[0]); sys.argv = ['refine', '--version']\n"
        "try:\n    refine.cli.main()\nexcept SystemExit:\n    pass\n"
        "print(gc.get_threshold()[0])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    from refine.backends.imports import YOUNG_OBJECTS

    assert out.stdout.split()[0] == "700" and out.stdout.split()[-1] == str(YOUNG_OBJECTS)
