"""A run's descriptor-by-round timeline: the reference descriptors (then the stereotypes
and hallucinated phrases seen) in rows, the rounds in columns, each cell the state of that
round's chosen image (refine.loop.tracking) as a colour and a mark, and the run's
forgetting figures under it. One HTML table for the report and the app alike: colours are
inline, so it needs no style sheet, and its cells are narrow enough for a phone's 390 px.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from metrics.descriptors import DIMENSIONS
from refine.loop import tracking
from refine.present.html import escape
from refine.present.views import figures_text
from refine.records import Run

# state -> (background, text colour, mark, what it means)
STATES = {
    "became aligned": ("#1a9850", "#fff", "+", "became aligned this round"),
    "stayed aligned": ("#a6d96a", "#000", "\u2713", "stayed aligned"),
    "aligned": ("#a6d96a", "#000", "\u2713", "aligned (round 0)"),
    "lost": ("#d73027", "#fff", "\u2717", "lost: aligned in the last kept round, missing now"),
    "still missing": ("#f0f0f0", "#555", "\u00b7", "still missing"),
    "missing": ("#f0f0f0", "#555", "\u00b7", "missing (round 0)"),
    "new": ("#fdae61", "#000", "!", "new: in no earlier round"),
    "kept": ("#fee08b", "#000", "=", "still there"),  # its own mark: not by colour alone
    "came back": ("#d73027", "#fff", "\u21ba", "came back after a round removed it"),
    "removed": ("#4575b4", "#fff", "\u2212", "removed this round"),
}
KIND_HEADS = {"exaggerated": "stereotypes seen", "hallucinated": "not in the references"}


@dataclass
class Row:
    kind: str  # descriptor, exaggerated, hallucinated
    dimension: str
    item: str
    cells: list[str | None] = field(default_factory=list)  # a state per round, None: absent


@dataclass
class Timeline:
    rounds: list[tuple[int, str]]  # (index, decision)
    rows: list[Row]
    never: int  # reference descriptors missing in every round (left out of the rows)
    figures: dict[str, tracking.Forgetting]


def timeline(run: Run) -> Timeline:
    """The rows and columns of ``run``'s timeline (reference descriptors aligned in no
    round are counted, not drawn)."""
    states = tracking.tracked_rounds(run)
    rows: dict[tuple[str, str, str], Row] = {}
    for k, tracked in enumerate(states):
        for t in tracked:
            row = rows.setdefault(
                (t.kind, t.dimension, tracking.folded(t.item)),
                Row(t.kind, t.dimension, t.item, [None] * len(states)),
            )
            row.cells[k] = t.state
    order = {d: i for i, d in enumerate(DIMENSIONS)}
    kinds = {"descriptor": 0, "exaggerated": 1, "hallucinated": 2}
    shown, never = [], 0
    for key in sorted(rows, key=lambda x: (kinds[x[0]], order.get(x[1], len(order)), x[2])):
        row = rows[key]
        aligned = any(c in ("aligned", "became aligned", "stayed aligned", "lost")
                      for c in row.cells)  # fmt: skip
        if row.kind == "descriptor" and not aligned:
            never += 1
            continue
        shown.append(row)
    return Timeline(
        [(r.index, r.decision) for r in run.rounds], shown, never, tracking.forgetting(run)
    )


def _faded(decision: str) -> str:
    """A round the run did not keep (rejected, or cut short by a stop) is drawn faded."""
    return "opacity:.45;" if decision in ("rejected", "stopped") else ""


def _cell(state: str | None, index: int, decision: str) -> str:
    faded = _faded(decision)
    if state is None:
        return f'<td data-state="" title="round {index}: not seen" style="{faded}"></td>'
    bg, fg, mark, words = STATES[state]
    return (
        f'<td data-state="{escape(state)}" title="round {index} ({decision}): {escape(words)}" '
        f'style="background:{bg};color:{fg};text-align:center;{faded}">{mark}</td>'
    )


def timeline_html(run: Run) -> str:
    """The timeline as a table (a line saying there is none for a run without rounds)."""
    if not run.rounds:
        return '<p class="timeline muted">no rounds yet</p>'
    tl = timeline(run)
    n = len(tl.rounds)
    heads = "".join(
        f'<th scope="col" data-round="{i}" data-decision="{d}" title="round {i}: {d}" '
        f'style="width:1.7em;text-align:center;{_faded(d)}">'
        f"{i}</th>"
        for i, d in tl.rounds
    )
    body, dim = [], None
    for row in tl.rows:
        group = row.dimension if row.kind == "descriptor" else KIND_HEADS[row.kind]
        if group != dim:
            dim = group
            body.append(
                f'<tr class="tl-group"><th colspan="{n + 1}" scope="rowgroup" '
                f'style="text-align:left;padding-top:.4em">{escape(group)}</th></tr>'
            )
        cells = "".join(_cell(s, i, d) for s, (i, d) in zip(row.cells, tl.rounds, strict=True))
        label = escape(row.item) + (f" ({escape(row.dimension)})" if row.kind == "hallucinated"
                                    else "")  # fmt: skip
        body.append(
            f'<tr data-kind="{row.kind}" data-dimension="{escape(row.dimension)}" '
            f'data-item="{escape(row.item)}"><th scope="row" style="text-align:left;'
            f'font-weight:normal;overflow-wrap:anywhere">{label}</th>{cells}</tr>'
        )
    body += _change_rows(run, tl.rounds, n)
    legend = " ".join(
        f'<span style="white-space:nowrap"><span style="background:{bg};color:{fg};'
        f'padding:0 .3em">{mark}</span> {escape(state)}</span>'
        for state, (bg, fg, mark, _) in STATES.items()
        if state not in ("aligned", "missing")
    )
    never = (
        f"; {tl.never} reference descriptor(s) missing in every round are not drawn"
        if tl.never
        else ""
    )
    return (
        f'<figure class="timeline" data-rounds="{n}" style="margin:0">'
        '<div style="overflow-x:auto"><table class="timeline-grid" style="border-collapse:'
        'collapse;font-size:12px;line-height:1.3;width:100%">'
        f'<thead><tr><th scope="col" style="text-align:left">round</th>{heads}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
        f'<figcaption style="font-size:12px"><p class="forgetting" data-forgotten='
        f'"{tracking.totals(tl.figures).forgotten}">{escape(figures_text(tl.figures))} '
        f"(over the kept rounds; faded columns: rounds rejected or cut short){never}</p>"
        f'<p class="legend">{legend}</p></figcaption></figure>'
    )


def _change_rows(run: Run, rounds: list[tuple[int, str]], n: int) -> list[str]:
    """A row per change of the references a person made, starting at its round (the
    rounds from there on are scored against it; those before are re-matched to it)."""
    if not run.reference_changes:
        return []
    rows = [
        f'<tr class="tl-group"><th colspan="{n + 1}" scope="rowgroup" '
        'style="text-align:left;padding-top:.4em">your references</th></tr>'
    ]
    for c in run.reference_changes:
        said = escape(c.describe())
        cells = "".join(_change_cell(c.round, i, d) for i, d in rounds)
        rows.append(
            f'<tr data-kind="references" data-round="{c.round}"><th scope="row" '
            'style="text-align:left;font-weight:normal;overflow-wrap:anywhere">'
            f"from round {c.round}: {said}</th>{cells}</tr>"
        )
    return rows


def _change_cell(start: int, index: int, decision: str) -> str:
    """A change's cell: marked from its round on (a triangle where it starts)."""
    if index < start:
        faded = _faded(decision)
        return f'<td data-state="" title="round {index}: before the change" style="{faded}"></td>'
    mark = "\u25b8" if index == start else ""
    return (
        f'<td data-state="changed" title="round {index}: your references, from round {start}" '
        f'style="background:#762a83;color:#fff;text-align:center;{_faded(decision)}">{mark}</td>'
    )
