"""What a finished tune leaves beside its adapter: ``tune.json`` (the summary), ``loss.csv``
(step, loss, reward accuracy, gradient norm), ``loss.html`` (the loss curve) and the model
card ``README.md``."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from refine.io.files import atomic_write_text
from refine.train.objectives import WHAT


def write_outputs(out: Path, summary: dict[str, Any], history: list[tuple]) -> None:
    atomic_write_text(out / "tune.json", json.dumps(summary, indent=1))
    atomic_write_text(out / "loss.csv", loss_csv(history))
    atomic_write_text(out / "loss.html", loss_page(history, summary))
    atomic_write_text(out / "README.md", model_card(summary))


def loss_csv(history: list[tuple]) -> str:
    def cell(x: float | None, fmt: str) -> str:
        return "" if x is None else format(x, fmt)

    return "step,loss,accuracy,grad_norm\n" + "".join(
        f"{s},{loss:.6f},{cell(a, '.4f')},{cell(g, '.6g')}\n" for s, loss, a, g in history
    )


def loss_page(history: list[tuple], summary: dict[str, Any]) -> str:
    width, height, pad = 680, 260, 40
    if history:
        top = max(x[1] for x in history) or 1.0
        n = max(1, history[-1][0])
        xs = [pad + (width - 2 * pad) * x[0] / n for x in history]
        ys = [height - pad - (height - 2 * pad) * x[1] / top for x in history]
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=True))
    else:
        top, pts = 1.0, ""
    svg = (
        f'<svg width="100%" viewBox="0 0 {width} {height}" role="img" aria-label="loss">'
        f'<polyline fill="none" stroke="#0969da" points="{pts}"/>'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="#888"/>'
        f'<text x="{width / 2}" y="{height - 8}" font-size="12" text-anchor="middle">step</text>'
        f'<text x="4" y="16" font-size="11">{top:.4f}</text></svg>'
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Tune loss</title>'
        "</head><body><h1>Tune loss</h1>"
        f"<p>{escape(summary['method'])} on {escape(summary['base'])}, {summary['steps']} steps, "
        f"{summary['rows']} training rows</p>{svg}</body></html>\n"
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
