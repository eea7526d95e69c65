"""Run records turned into what the app's widgets show (no model code, no gradio import)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metrics.descriptors import DIMENSIONS
from refine.records import Round, Run

CHECK_COLOURS = {
    "aligned": "#2da44e",
    "missing": "#bf8700",
    "hallucinated": "#cf222e",
    "exaggerated": "#8250df",
}
METRICS = ("FAITH", "ALIGN", "HAL", "EXAG", "drift")
TABLE_HEADERS = [
    "round",
    "decision",
    "FAITH",
    "ALIGN",
    "HAL",
    "EXAG",
    "drift",
    "reason",
    "CAIRE 1-5",
    "SoS / languages",
]


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def gallery(run: Run, run_dir: str | Path) -> list[tuple[str, str]]:
    """Every round's chosen image with a caption: round, decision, FAITH."""
    run_dir = Path(run_dir)
    items = []
    for r in run.rounds:
        s = r.best.scores
        mark = {"accepted": "\u2713", "rejected": "\u2717"}.get(r.decision, "\u25cf")
        hand = " by hand" if r.by_hand else ""
        best = " (best)" if r.index == run.best_round else ""
        faith = "n/a" if s.faith is None else f"{s.faith:.3f}"
        items.append(
            (
                str(run_dir / r.best.image),
                f"{mark} round {r.index}: {r.decision}{hand}, FAITH {faith}{best}",
            )
        )
    return items


def metric_rows(run: Run) -> list[dict[str, Any]]:
    """Long-format rows (round, metric, value) for a line plot; drift is 1 - cosine."""
    rows = []
    for r in run.rounds:
        s = r.best.scores
        values = {"FAITH": s.faith, "ALIGN": s.align, "HAL": s.hal, "EXAG": s.exag}
        if r.best.drift is not None:
            values["drift"] = 1.0 - r.best.drift.embedding_cosine
        for metric in METRICS:
            if values.get(metric) is not None:
                rows.append({"round": r.index, "metric": metric, "value": _r(values[metric])})
        sos = {"en": r.sos, **{k: v.get("sos") for k, v in r.languages.items()}}
        for lang, value in sos.items():
            if value is not None:
                rows.append({"round": r.index, "metric": f"SoS {lang}", "value": _r(value)})
        for lang, entry in r.languages.items():
            value = (entry.get("scores") or {}).get("faith")
            if value is not None:
                rows.append({"round": r.index, "metric": f"FAITH {lang}", "value": _r(value)})
        if r.caire:  # the country's 1-5 score on the plot's 0-1 scale: (score - 1) / 4
            own = r.caire["labels"][0]
            rows.append(
                {
                    "round": r.index,
                    "metric": f"CAIRE {own['label']} (0-1)",
                    "value": _r((own["score"] - 1) / 4),
                }
            )
    return rows


def metric_chart(run: Run) -> str:
    """The metrics per round as an inline SVG line chart (the rows of :func:`metric_rows`,
    one line per metric, accepted / rejected marks under the axis). The y range is [0, 1],
    widened to hold negative SoS values."""
    from refine.report import line_chart

    rows = metric_rows(run)
    names = list(dict.fromkeys(r["metric"] for r in rows))
    series: dict[str, list[float | None]] = {n: [None] * len(run.rounds) for n in names}
    for row in rows:
        series[row["metric"]][row["round"]] = row["value"]
    values = [row["value"] for row in rows]
    low = min([0.0, *values])
    y_range = (-1.0 if low < 0 else 0.0, 1.0)
    labels = [str(r.index) for r in run.rounds]
    marks = [r.decision for r in run.rounds]
    return line_chart(series, labels, marks, "metrics per round", y_range=y_range)


def rounds_table(run: Run) -> list[list[Any]]:
    """One row per round, in :data:`TABLE_HEADERS` order."""
    rows = []
    for r in run.rounds:
        s, d = r.best.scores, r.best.drift
        drift = None if d is None else _r(1.0 - d.embedding_cosine)
        decision = r.decision + (" (by hand)" if r.by_hand else "")
        rows.append(
            [
                r.index,
                decision,
                _r(s.faith),
                _r(s.align),
                _r(s.hal),
                _r(s.exag),
                drift,
                r.reason,
                caire_text(r),
                languages_text(r),
            ]
        )
    return rows


def languages_text(r: Round) -> str:
    """SoS per prompt language (``en -0.156 · fr -0.409``), or the languages followed."""
    if r.sos is None and not r.languages:
        return ""

    def one(lang: str, value: float | None, faith: float | None = None) -> str:
        text = lang if value is None else f"{lang} {value:+.3f}"
        return text if faith is None else f"{text} (FAITH {faith:.3f})"

    parts = [one("en", r.sos)] + [
        one(k, v.get("sos"), (v.get("scores") or {}).get("faith")) for k, v in r.languages.items()
    ]
    return " \u00b7 ".join(parts)


def language_gallery(run: Run, run_dir: str | Path, k: int) -> list[tuple[str, str]]:
    """Round ``k``'s image in each extra prompt language, captioned with its SoS."""
    r = run.rounds[k]
    items = []
    for lang, entry in r.languages.items():
        sos = entry.get("sos")
        caption = f"round {k}, {lang}" + ("" if sos is None else f": SoS {sos:+.3f}")
        faith = (entry.get("scores") or {}).get("faith")
        if faith is not None:
            caption += f", FAITH {faith:.3f}"
        items.append((str(Path(run_dir) / entry["image"]), caption))
    return items


def caire_text(r: Round) -> str:
    """A round's CAIRE scores in one line: labels and 1-5 scores, the linked entity, and
    the note when the image reads more as another culture; empty without CAIRE."""
    if not r.caire:
        return ""
    scores = " \u00b7 ".join(f"{s['label']} {s['score']}" for s in r.caire["labels"])
    where = r.caire["mode"]
    if r.caire.get("entity"):
        where += f", linked to {r.caire['entity']['name']}"
    note = f"; {r.caire_note}" if r.caire_note else ""
    return f"{scores} ({where}){note}"


def checklist(r: Round) -> list[tuple[str, str | None]]:
    """Highlighted-text pairs per dimension: (phrase, aligned|missing|hallucinated), then
    the stereotypes seen as exaggerated; dimension names as unlabelled headers."""
    fb = r.best.feedback
    out: list[tuple[str, str | None]] = []
    for d in DIMENSIONS:
        items = [
            (m["phrase"], kind)
            for kind in ("aligned", "missing", "hallucinated")
            for m in getattr(fb, kind)
            if m["dimension"] == d
        ]
        if items:
            out.append((f"{d}: ", None))
            out.extend((f"{phrase} ", kind) for phrase, kind in items)
            out.append(("\n", None))
    if fb.exaggerated:
        out.append(("stereotypes: ", None))
        out.extend((f"{e['candidate']} ", "exaggerated") for e in fb.exaggerated)
    return out


def before_after(run: Run, run_dir: str | Path, k: int) -> tuple[str, str] | None:
    """(parent image, this round's chosen image) of round ``k``; None for round 0."""
    r = run.rounds[k]
    if r.parent is None:
        return None
    run_dir = Path(run_dir)
    return str(run_dir / run.rounds[r.parent].best.image), str(run_dir / r.best.image)
