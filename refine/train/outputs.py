"""What a finished tune leaves beside its adapter: ``tune.json`` (the summary), ``loss.csv``
(step, loss, reward accuracy, gradient norm) and the model card ``README.md``; the loss
page (``loss.html``) is drawn from them by ``refine.present.report.tune``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from refine.io.files import atomic_write_text
from refine.train.objectives import WHAT


def write_outputs(out: Path, summary: dict[str, Any], history: list[tuple]) -> None:
    atomic_write_text(out / "tune.json", json.dumps(summary, indent=1))
    atomic_write_text(out / "loss.csv", loss_csv(history))
    atomic_write_text(out / "README.md", model_card(summary))


def loss_csv(history: list[tuple]) -> str:
    def cell(x: float | None, fmt: str) -> str:
        return "" if x is None else format(x, fmt)

    return "step,loss,accuracy,grad_norm\n" + "".join(
        f"{s},{loss:.6f},{cell(a, '.4f')},{cell(g, '.6g')}\n" for s, loss, a, g in history
    )


def model_card(summary: dict[str, Any]) -> str:
    c = summary["config"]
    acc = summary["held_out_accuracy"]
    return (
        "---\nlibrary_name: diffusers\ntags: [lora, cultural-refine]\n"
        f"base_model: {summary['base']}\n---\n\n"
        f"# Culture LoRA for {summary['base']}\n\n"
        f"Trained by `refine tune` with **{summary['method']}** "
        f"({WHAT[summary['method']]}) "
        f"from refinement runs exported with `refine export`.\n\n"
        f"- data: `{c['data']}`, {summary['rows']} training rows, "
        f"{summary['held_out_rows']} held out\n"
        f"- steps: {summary['steps']}, rank {c['rank']}, lr {c['lr']}, batch {c['batch_size']} x "
        f"{c['grad_accum']}"
        + (f" x {summary['processes']} processes" if summary.get("processes", 1) > 1 else "")
        + f", resolution {c['resolution']}"
        + (f", beta {c['beta']}" if summary["method"] == "dpo" else "")
        + f"\n- final loss: {summary['final_loss']}\n"
        + (f"- held-out implicit reward accuracy: {acc}\n" if acc is not None else "")
        + "\nLoad with `pipe.load_lora_weights(THIS_FOLDER)`, or in this toolkit "
        '`--generator "diffusers:BASE+lora=THIS_FOLDER"` (bench) / '
        '`--backend "generator=diffusers:BASE+lora=THIS_FOLDER"`.\n'
    )
