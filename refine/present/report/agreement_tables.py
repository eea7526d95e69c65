"""The agreement as booktabs tables (``refine agree --latex``, :mod:`refine.present.latex`):
metrics as rows; questions as columns for the pooled table, with the human-human ceiling
as its last row; groups as columns for each ``--by`` grouping. Each cell is the metric's
Spearman correlation with the raters' mean and its 95% interval; the best in each column,
in bold, is the strongest agreement in the agreeing direction (HAL's and EXAG's most
negative correlation)."""

from __future__ import annotations

from typing import Any

from refine.human.groups import agreeing_sign
from refine.present.latex import Cell, Table


def _cell(row: dict[str, Any] | None, name: str) -> Cell | None:
    if row is None or row.get("spearman") is None:
        return None
    r = row["spearman"]
    return Cell(r, row.get("spearman_interval"), agreeing_sign(name) * r)


def agreement_tables(result: Any) -> list[Table]:
    """The pooled table and one table per grouping of ``result`` (an Agreement)."""
    from refine.present.report.agreement import _label

    metrics = list(result.table)
    questions = list(dict.fromkeys(q for by_q in result.table.values() for q in by_q))
    pooled = Table(
        caption=(
            f"Spearman correlation of each metric with the raters' mean answer "
            f"({result.images} images, {len(result.raters)} raters), with 95% bootstrap "
            "intervals; best agreement per question in bold (HAL and EXAG agree when negative)."
        ),
        label="tab:agreement",
        rows=[_label(m) for m in metrics],
        columns=questions,
        corner="metric",
    )
    for m in metrics:
        for q in questions:
            cell = _cell(result.table[m].get(q), m)
            if cell is not None:
                pooled.cells[(_label(m), q)] = cell
    if result.ceiling:
        pooled.rows.append("human-human")
        for q, c in result.ceiling.items():
            if q in questions and c.get("spearman") is not None:
                # the ceiling is not a metric: never the column's best
                pooled.cells[("human-human", q)] = Cell(c["spearman"], None, float("-inf"))
    tables = [pooled]
    q = "faithfulness" if "faithfulness" in questions else (questions[0] if questions else None)
    for by, groups in result.by.items():
        names = list(groups)
        t = Table(
            caption=(
                f"Spearman correlation with the raters' mean ({q}) per {by}, with 95% "
                "intervals; best agreement per group in bold; images per group: "
                + ", ".join(f"{k} {g['images']}" for k, g in groups.items())
                + "."
            ),
            label=f"tab:agreement-{by}",
            rows=[_label(m) for m in metrics],
            columns=names,
            corner="metric",
        )
        for m in metrics:
            for key in names:
                cell = _cell(groups[key]["metrics"].get(m, {}).get(q), m)
                if cell is not None:
                    t.cells[(_label(m), key)] = cell
        ceilings = {
            k: (g.get("ceiling") or {}).get(q, {}).get("spearman") for k, g in groups.items()
        }
        if any(v is not None for v in ceilings.values()):
            t.rows.append("human-human")
            for key, v in ceilings.items():
                if v is not None:
                    t.cells[("human-human", key)] = Cell(v, None, float("-inf"))
        tables.append(t)
        tables.append(_scores_table(by, groups))
    return tables


def _scores_table(by: str, groups: dict[str, Any]) -> Table:
    """The answers' mean (SD) per group and question (AHEaD Tab. 13, by country)."""
    asked = list(dict.fromkeys(q for g in groups.values() for q in g.get("scores", {})))
    t = Table(
        caption=f"People's answers per {by}: mean (standard deviation) over the images of "
        "each image's mean answer.",
        label=f"tab:answers-{by}",
        rows=list(groups),
        columns=asked,
        corner=by,
        best=None,
        digits=2,
    )
    for key, g in groups.items():
        for q, s in g.get("scores", {}).items():
            t.cells[(key, q)] = Cell(s["mean"], sd=s["sd"])
    return t
