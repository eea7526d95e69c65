"""A recipe's table as files (``refine bench --recipe``): ``table-NAME.csv`` (a row per
cell, with the paper's figure beside the value), ``table-NAME.tex`` (the toolkit's one
LaTeX writer, :mod:`refine.present.latex`: a document, and its fragment
``table-NAME-LABEL.tex``) and ``table-NAME.html`` (the same table, and the paper's own
rows under it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refine.harness.recipe_tables import RecipeTable
from refine.harness.ways import words as made_words
from refine.numbers import p_text
from refine.present.html import document, escape, num, write_page
from refine.present.latex import Cell, Table, write_tables

CSV_FIELDS = (
    "row",
    "block",
    "group",
    "column",
    "value",
    "low",
    "high",
    "p",
    "n",
    "paper",
    "difference",
    "paper_differs",
    "way",
    "made_with",
    "note",
)


def csv_rows(table: RecipeTable) -> list[dict[str, Any]]:
    """One row per cell: the value, its interval, n, the paper's figure and the value
    minus it; then the paper's own table, a row per figure (``row`` "paper: LABEL")."""
    out = []
    for row in table.rows:
        for key, header, _, _ in table.columns:
            c = table.cells.get((row.label, key))
            if c is None:
                continue
            lo, hi = c.interval or (None, None)
            diff = None
            if c.value is not None and c.paper is not None and not c.paper_differs:
                diff = c.value - c.paper
            out.append(
                {
                    "row": row.label,
                    "block": row.block,
                    "group": row.group,
                    "column": header,
                    "value": c.value,
                    "low": lo,
                    "high": hi,
                    "p": c.p,
                    "n": c.n,
                    "paper": c.paper,
                    "difference": diff,
                    "paper_differs": c.paper_differs,
                    "way": c.way,
                    "made_with": made_words(c.made),
                    "note": c.note,
                }
            )
    headers = {key: header for key, header, _, _ in table.columns}
    for p in table.recipe.table.paper:
        for key, v in p.values.items():
            out.append(
                {
                    "row": f"paper: {p.row}",
                    "block": p.generator or p.metric or p.setting or "",
                    "group": p.group,
                    "column": headers.get(key, key),
                    "value": None,
                    "n": None,
                    "paper": v,
                }
            )
    return out


def _score(table: RecipeTable, row_key: str, value: float | None) -> float | None:
    """What "best" compares: an agreement is best at its agreeing direction's strongest
    (HAL's and EXAG's most negative correlation)."""
    if value is None or table.kind != "agreement":
        return value
    from refine.human.groups import agreeing_sign

    return agreeing_sign(row_key) * value


def latex_table(table: RecipeTable) -> Table:
    t = table.recipe.table
    cells = {}
    for row in table.rows:
        for key, header, _, _ in table.columns:
            c = table.cells.get((row.label, key))
            if c is not None:
                cells[(row.label, header)] = Cell(
                    c.value,
                    c.interval,
                    _score(table, row.key, c.value),
                    c.paper,
                    apart=bool(c.paper_differs),
                )
    note = f"{table.recipe.paper}, {table.recipe.source}."
    if table.paper_figures():
        note += " The paper's figure is in parentheses after each value made its way."
    if table.apart_figures():
        note += (
            " A figure marked with a dagger is the paper's, made another way (below): it is "
            "no measure of this value's difference."
        )
    if table.notes:
        note += " " + " ".join(f"{n[0].upper()}{n[1:]}." for n in table.notes)
    if any(c.p is not None for c in table.cells.values()):
        note += " Each correlation's p-value is in the table's CSV and HTML."
    if table.missing:
        note += " Missing: " + "; ".join(table.missing) + "."
    agreement = table.kind == "agreement"
    return Table(
        caption=table.caption,
        label=t.label,
        rows=[r.label for r in table.rows],
        columns=[h for _, h, _, _ in table.columns],
        cells=cells,
        best=None if t.best == "none" else ("max" if agreement else "each"),
        corner="metric"
        if agreement
        else ("generator" if t.groups == "all" else "generator · group"),
        digits=t.digits,
        note=note,
        # the Human row (the raters' own agreement) is a reference, never the best
        blocks={r.label: r.block for r in table.rows}
        if t.best in ("block", "group")
        else {r.label: "human" for r in table.rows if r.key == "human"},
        spans=[] if agreement else [s for _, _, s, _ in table.columns],
        directions={h: b for _, h, _, b in table.columns},
        fit=True,
    )


def paper_latex(table: RecipeTable) -> Table | None:
    """The paper's own table as the recipe carries it (every row, those of models not run
    here included), to set beside the bench's; None where the recipe carries no figure."""
    t = table.recipe.table
    if not t.paper:
        return None
    headers = {key: header for key, header, _, _ in table.columns}
    headers.update({m.metric: m.shown() for m in t.metrics})
    keys = list(dict.fromkeys(k for p in t.paper for k in p.values))
    rows, cells = [], {}
    for p in t.paper:
        label = p.row if p.group is None else f"{p.row} · {t.group_label(p.group)}"
        if label in rows:
            continue
        rows.append(label)
        for k, v in p.values.items():
            cells[(label, headers.get(k, k))] = Cell(v)
    return Table(
        caption=f"As published: {table.recipe.paper}, {table.recipe.source}.",
        label=f"{t.label}-paper",
        rows=rows,
        columns=[headers.get(k, k) for k in keys],
        cells=cells,
        best=None,
        corner="paper's row",
        digits=t.digits,
        note="The paper's figures as the recipe carries them, its models not run here included.",
        directions={headers.get(k, k): "max" for k in keys},
        fit=True,
    )


def write_recipe_table(folder: str | Path, table: RecipeTable) -> list[Path]:
    """The table's CSV, LaTeX (document and fragment) and HTML; returns the files."""
    from refine.harness.results import write_csv

    folder = Path(folder)
    name = f"table-{table.recipe.name}"
    csv_path = folder / f"{name}.csv"
    write_csv(csv_path, CSV_FIELDS, csv_rows(table))
    published = paper_latex(table)
    tex = write_tables(
        [latex_table(table), *([published] if published is not None else [])], folder, name
    )
    html = write_page(folder / f"{name}.html", page(table))
    return [csv_path, *tex, html]


def _cell_html(table: RecipeTable, row: Any, key: str, digits: int) -> str:
    c = table.cells.get((row.label, key))
    if c is None:
        return "<td>–</td>"
    text = num(c.value, digits)
    if c.interval:
        text += (
            f' <span class="muted">[{c.interval[0]:.{digits}f}, {c.interval[1]:.{digits}f}]</span>'
        )
    if c.way:  # how it was computed, where the metric has several ways
        text += f' <span class="muted way">{escape(c.way)}</span>'
    if c.p is not None:
        text += f' <span class="muted">{p_text(c.p)}</span>'
    if c.paper is not None and c.paper_differs:  # another way: apart, what differs said
        text += (
            f' <em class="paper-apart" title="{escape(c.paper_differs)}">'
            f"(paper {c.paper:.{digits}f}†: {escape(c.paper_differs)})</em>"
        )
    elif c.paper is not None:
        text += f" <em>(paper {c.paper:.{digits}f})</em>"
    title = f' title="{escape(c.note)}"' if c.note else ""
    n = f' data-n="{c.n}"' if c.n else ""
    return f"<td{title}{n}>{text}</td>"


def page(table: RecipeTable) -> str:
    """The table as a page: the bench's cells in the paper's layout, the paper's own
    rows, and what is missing."""
    r, t = table.recipe, table.recipe.table
    head = "<tr><th></th>" + "".join(f"<th>{escape(h)}</th>" for _, h, _, _ in table.columns)
    spans = [s for _, _, s, _ in table.columns]
    span_row = ""
    if any(spans) and table.kind == "metrics":
        span_row = "<tr><th></th>" + "".join(f"<th>{escape(s)}</th>" for s in spans) + "</tr>"
    body = "".join(
        f"<tr><th>{escape(row.label)}</th>"
        + "".join(_cell_html(table, row, key, t.digits) for key, _, _, _ in table.columns)
        + "</tr>"
        for row in table.rows
    )
    parts = [
        f"<p>{escape(r.title)}: {escape(r.paper)}, {escape(r.source)}.</p>",
        f"<p>{escape(table.caption)}</p>",
        f'<table id="recipe-table">{span_row}{head}</tr>{body}</table>',
    ]
    if table.notes:
        items = "".join(f"<li>{escape(n)}</li>" for n in table.notes)
        parts.append(
            f'<h2>How these figures differ from the paper\'s</h2><ul id="recipe-notes">{items}</ul>'
        )
    if table.missing:
        items = "".join(f"<li>{escape(m)}</li>" for m in table.missing)
        parts.append(f'<h2>Missing</h2><ul id="recipe-missing">{items}</ul>')
    if t.paper:
        keys = list(dict.fromkeys(k for p in t.paper for k in p.values))
        rows = "".join(
            f"<tr><th>{escape(p.row)}</th><td>{escape(p.group or '')}</td>"
            + "".join(f"<td>{num(p.values.get(k), t.digits)}</td>" for k in keys)
            + "</tr>"
            for p in t.paper
        )
        heads = "".join(f"<th>{escape(k)}</th>" for k in keys)
        parts.append(
            "<h2>The paper's table</h2>"
            f'<table id="recipe-paper"><tr><th></th><th>group</th>{heads}</tr>{rows}</table>'
        )
    if r.about:
        parts.append(f"<h2>How this recipe runs</h2><p>{escape(r.about)}</p>")
    return document(f"{r.name}: {r.title}", "".join(parts))
