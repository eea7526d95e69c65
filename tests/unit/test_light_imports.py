"""`import refine` and `import metrics` must not pull in model libraries."""

from __future__ import annotations

import subprocess
import sys

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
        "metrics.sos, metrics.vendi, metrics.text_embedding, metrics.drift, refine.loop, "
        "refine.records, refine.references, refine.store, refine.instructions; "
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
