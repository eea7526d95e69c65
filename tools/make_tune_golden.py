"""Record the losses ``refine tune`` gives on the tiny models of
``tests/integration/test_tune.py``: ``python tools/make_tune_golden.py``.
``test_the_losses_are_the_recorded_ones`` compares a tune today with them, within the
tolerance float32 arithmetic has (``tests/integration/test_tune.py`` says how it was
found); with each DPO step it records every pair's margin ``-beta / 2 * d``, so that the
test knows which pairs rounding could flip. Rerun it only when a change to the training is
meant to change its numbers, and say why in the commit. The bf16 case has no recording: it
is compared with its float32 twin, run in the same test."""

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
    "sd-sft": {"steps": 5, "method": "sft", "data": "images"},
    "sdxl-dpo": {"steps": 3, "beta": 100.0, "base": "sdxl"},
    "flux2-dpo": {"steps": 3, "beta": 100.0, "base": "flux2"},
}
# cases compared with a twin run beside them rather than with a recording
TWINS: dict[str, tuple[str, dict]] = {
    "sd-dpo-bf16": ("sd-dpo", {"steps": 3, "mixed_precision": "bf16"}),
}


def run_case(world, models: dict[str, str], name: str, out: Path, **changes) -> dict:
    """One case's per-step losses and reward accuracies, and the held-out accuracy; for DPO
    each step's margins (every pair of its micro-batches) and the held-out pairs' margins.
    ``changes`` override the case's settings."""
    import torch

    from refine.train.tune import Tuner
    from tests.integration.test_tune import config

    kw = {**CASES[name], **changes}
    if kw.get("data") == "images":
        kw["data"] = str(world[2])
    if kw.get("base") in models:
        kw["base"] = f"diffusers:{models[kw['base']]}"
    tuner = Tuner(config(world, out / name, **kw))
    margins: dict[str, list] = {"steps": [], "held": []}
    loss = tuner.objective.loss

    def recorded(model, batch):
        out = loss(model, batch)
        if out[1] is not None:  # dpo: with gradients a training micro-batch, else held out
            pairs = tuner.objective.margins.float().cpu().tolist()
            if not torch.is_grad_enabled():
                margins["held"] += pairs
            elif len(margins["steps"]) < tuner.step + 1:
                margins["steps"].append(pairs)
            else:
                margins["steps"][-1] += pairs
        return out

    tuner.objective.loss = recorded
    summary = tuner.run()
    got = {
        "losses": [x[1] for x in tuner.losses],
        "accuracies": [x[2] for x in tuner.losses],
        "held_out_accuracy": summary["held_out_accuracy"],
    }
    if margins["steps"]:
        got["margins"], got["held_out_margins"] = margins["steps"], margins["held"]
    return got


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
