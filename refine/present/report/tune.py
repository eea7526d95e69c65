"""The page of a finished tune (``loss.html`` beside its adapter): the loss per step and,
for DPO, the implicit reward accuracy per step, read back from ``loss.csv`` and
``tune.json``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from refine.io.files import atomic_write_text
from refine.present.charts import step_chart
from refine.present.html import document, escape


def read_history(folder: str | Path) -> list[tuple[int, float, float | None]]:
    """(step, loss, reward accuracy or None) per step of a tune's ``loss.csv``; a
    ValueError names a missing file or a bad line."""
    path = Path(folder) / "loss.csv"
    if not path.is_file():
        raise ValueError(f"{folder}: no loss.csv (refine tune writes it when a tune ends)")
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(f), start=2):
            try:
                acc = row.get("accuracy") or ""
                out.append((int(row["step"]), float(row["loss"]), float(acc) if acc else None))
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{path}: line {n} is not step,loss,accuracy,...") from None
    return out


def loss_charts(history: list[tuple[int, float, float | None]], method: str) -> str:
    """The loss per step, and the reward accuracy per step where the method has one."""
    html = step_chart(
        {f"{method} loss": [(s, loss) for s, loss, _ in history]},
        "training loss per step",
        y_title="loss \u2193",
    )
    accuracy = [(s, a) for s, _, a in history if a is not None]
    if accuracy:
        html += step_chart(
            {"reward accuracy": accuracy},
            "implicit reward accuracy per step (the share of pairs the tune prefers rightly)",
            y_title="reward accuracy \u2191 (0 to 1)",
        )
    return html


def render_tune(folder: str | Path) -> str:
    """The loss page of the tune in ``folder``; a ValueError says what is missing."""
    folder = Path(folder)
    try:
        summary = json.loads((folder / "tune.json").read_text(encoding="utf-8"))
        summary = {k: summary[k] for k in ("method", "base", "steps", "rows")} | {
            "held_out_accuracy": summary.get("held_out_accuracy")
        }
    except KeyError as err:
        raise ValueError(
            f"{folder / 'tune.json'}: no {err.args[0]!r} (not a tune's summary)"
        ) from None
    except (OSError, ValueError, TypeError, AttributeError) as err:
        raise ValueError(f"{folder / 'tune.json'} is not a tune's summary ({err})") from None
    history = read_history(folder)
    held = summary.get("held_out_accuracy")
    body = (
        f"<p>{escape(summary['method'])} on {escape(summary['base'])}, {summary['steps']} "
        f"steps, {summary['rows']} training rows"
        + (f", held-out reward accuracy {held:.3f}" if held is not None else "")
        + "</p>"
        + loss_charts(history, summary["method"])
    )
    return document("Tune loss", body)


def write_tune_page(folder: str | Path) -> Path:
    """``loss.html`` in a tune's output folder (``tune.json`` and ``loss.csv``)."""
    target = Path(folder) / "loss.html"
    atomic_write_text(target, render_tune(folder))
    return target
