"""Record the losses ``refine tune`` gives on the tiny models of
``tests/integration/test_tune.py``: ``python tools/make_tune_golden.py``.
``test_the_losses_are_the_recorded_ones`` compares a tune today with them (to 1e-6). Both
run on one CPU thread: the sums of a matrix product split over threads differ in their
last bits, which DPO's beta magnifies. Rerun it only when a change to the training is meant
to change its numbers, and say why in the commit."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "tune_losses.json"

# each case: the settings that differ from the tests' config(); a few steps each
CASES: dict[str, dict] = {
    "sd-dpo": {"steps": 5, "beta": 100.0},
    "sd-dpo-accumulated": {"steps": 3, "beta": 100.0, "batch_size": 2, "grad_accum": 2},
    "sd-dpo-bf16": {"steps": 3, "beta": 100.0, "mixed_precision": "bf16"},
    "sd-sft": {"steps": 5, "method": "sft", "data": "images"},
    "sdxl-dpo": {"steps": 3, "beta": 100.0, "base": "sdxl"},
    "flux2-dpo": {"steps": 3, "beta": 100.0, "base": "flux2"},
}


def run_case(world, models: dict[str, str], name: str, out: Path) -> dict:
    """One case's per-step losses and reward accuracies, and the held-out accuracy."""
    from refine.train.tune import Tuner
    from tests.integration.test_tune import config

    kw = dict(CASES[name])
    if kw.get("data") == "images":
        kw["data"] = str(world[2])
    if "base" in kw:
        kw["base"] = f"diffusers:{models[kw['base']]}"
    tuner = Tuner(config(world, out / name, **kw))
    summary = tuner.run()
    return {
        "losses": [x[1] for x in tuner.losses],
        "accuracies": [x[2] for x in tuner.losses],
        "held_out_accuracy": summary["held_out_accuracy"],
    }


def models_under(root: Path) -> dict[str, str]:
    from tests.fakes.tiny_models import build_tiny_flux2_klein, build_tiny_sdxl

    return {
        "sdxl": str(build_tiny_sdxl(root / "sdxl")),
        "flux2": str(build_tiny_flux2_klein(root / "flux2")),
    }


def main() -> int:
    sys.path.insert(0, str(ROOT))
    import torch

    torch.set_num_threads(1)
    from tests.integration.test_tune import build_world

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        world = build_world(root / "world")
        models = models_under(root)
        doc = {name: run_case(world, models, name, root / "out") for name in CASES}
    GOLDEN.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {GOLDEN.relative_to(ROOT)}: {', '.join(doc)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
