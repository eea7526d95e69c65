"""The toolkit's one LaTeX table writer: booktabs tables, rows by columns, each cell a
value with an optional interval, the best of each column in bold (``refine agree
--latex``, ``refine bench --recipe``). A table is a fragment to ``\\input`` (it needs
``\\usepackage{booktabs}``, and ``graphicx`` for a table fitted to the line's width);
:func:`document` wraps fragments into a file that compiles on its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # the headers' arrows and the rows' separator, which pdflatex's default fonts lack
    "↑": r"$\uparrow$",
    "↓": r"$\downarrow$",
    "·": r"$\cdot$",
}


def tex(text: Any) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join(_SPECIAL.get(c, c) for c in str(text))


@dataclass
class Cell:
    value: float | None
    interval: tuple[float, float] | None = None
    score: float | None = None  # what "best" compares (the value where None)
    paper: float | None = None  # a published figure, shown in parentheses after the value
    # the published figure was made another way (other models, reading or tau): marked
    # with a dagger, the table's note says what differs
    apart: bool = False
    sd: float | None = None  # a standard deviation, shown in parentheses (mean (SD) cells)


@dataclass
class Table:
    """Rows by columns of cells; ``best``: "max" or "min" per column (bold), "each" (the
    column's own ``directions``), or None; with ``blocks``, the best within each block."""

    caption: str
    label: str
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    best: str | None = "max"
    corner: str = ""
    digits: int = 3
    note: str = ""  # a line under the table
    # the row -> its block: "best" is then compared within each block (a model's rows)
    blocks: dict[str, str] = field(default_factory=dict)
    spans: list[str] = field(default_factory=list)  # a header over columns, one per column
    # best = "each": the column -> "max" or "min" (lower is better for HAL and EXAG)
    directions: dict[str, str] = field(default_factory=dict)
    # shrink the tabular to the line's width (a wide table; needs \usepackage{graphicx})
    fit: bool = False

    def fragment(self) -> str:
        """The table as a ``table`` environment with a booktabs ``tabular``."""
        bold = self._best()
        spec = "l" + "r" * len(self.columns)
        head = " & ".join([tex(self.corner), *(tex(c) for c in self.columns)]) + r" \\"
        lines = [
            r"\begin{table}[t]",
            r"\centering",
            r"\small",
            *([r"\resizebox{\linewidth}{!}{%"] if self.fit else []),
            rf"\begin{{tabular}}{{{spec}}}",
            r"\toprule",
            *self._spans(),
            head,
            r"\midrule",
        ]
        last = None
        for r in self.rows:
            block = self.blocks.get(r)
            if last is not None and block != last:
                lines.append(r"\midrule")  # between blocks (a model's rows)
            last = block
            cells = [self._cell(self.cells.get((r, c)), (r, c) in bold) for c in self.columns]
            lines.append(" & ".join([tex(r), *cells]) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}" + ("}" if self.fit else "")]
        if self.note:
            lines.append(rf"\par\smallskip{{\footnotesize {tex(self.note)}}}")
        lines += [rf"\caption{{{tex(self.caption)}}}", rf"\label{{{tex(self.label)}}}"]
        lines.append(r"\end{table}")
        return "\n".join(lines) + "\n"

    def _spans(self) -> list[str]:
        """The spanning headers' line and its rules (none without spans)."""
        if not any(self.spans):
            return []
        cells, rules, k = [""], [], 0
        while k < len(self.columns):
            span = self.spans[k] if k < len(self.spans) else ""
            n = 1
            while (
                k + n < len(self.columns) and k + n < len(self.spans) and self.spans[k + n] == span
            ):
                n += 1
            cells.append(rf"\multicolumn{{{n}}}{{c}}{{{tex(span)}}}" if span else "")
            if span:
                rules.append(rf"\cmidrule(lr){{{k + 2}-{k + n + 1}}}")
            k += n
        return [" & ".join(cells) + r" \\", " ".join(rules)]

    def _best(self) -> set[tuple[str, str]]:
        if self.best is None:
            return set()
        out = set()
        blocks: dict[str | None, list[str]] = {}
        for r in self.rows:
            blocks.setdefault(self.blocks.get(r), []).append(r)
        for c in self.columns:
            pick: Callable[..., Any] = max if self._direction(c) == "max" else min
            for rows in blocks.values():
                scored = [
                    (cell.score if cell.score is not None else cell.value, r)
                    for r in rows
                    if (cell := self.cells.get((r, c))) is not None and cell.value is not None
                ]
                scored = [(s, r) for s, r in scored if s is not None]
                if len(scored) > 1:
                    top = pick(s for s, _ in scored)
                    out |= {(r, c) for s, r in scored if s == top}
        return out

    def _direction(self, column: str) -> str:
        """ "max" or "min": the table's, or the column's own where ``best`` names each."""
        if self.best in ("max", "min"):
            return self.best
        return self.directions.get(column, "max")

    def _cell(self, cell: Cell | None, bold: bool) -> str:
        if cell is None:
            return "--"
        if cell.value is None:
            return "--" + self._paper(cell)
        text = f"{cell.value:.{self.digits}f}"
        if bold:
            text = rf"\textbf{{{text}}}"
        if cell.interval:
            lo, hi = cell.interval
            text += rf" {{\scriptsize [{lo:.2f}, {hi:.2f}]}}"
        if cell.sd is not None:
            text += f" ({cell.sd:.{self.digits}f})"
        return text + self._paper(cell)

    def _paper(self, cell: Cell) -> str:
        if cell.paper is None:
            return ""
        mark = r"\textsuperscript{\dag}" if cell.apart else ""
        return rf" {{\scriptsize\itshape ({cell.paper:.{self.digits}f}{mark})}}"


def document(fragments: Sequence[str]) -> str:
    """A LaTeX file that compiles on its own: the fragments in an ``article``."""
    body = "\n".join(fragments)
    return (
        "\\documentclass{article}\n\\usepackage[margin=2cm]{geometry}\n"
        "\\usepackage{booktabs}\n\\usepackage{graphicx}\n\\begin{document}\n"
        + body
        + "\\end{document}\n"
    )


def write_tables(tables: Sequence[Table], folder: str | Path, name: str) -> list[Path]:
    """Each table as ``{name}-{label}.tex`` (a fragment) and all of them in ``{name}.tex``
    (a document); returns the files written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for t in tables:
        path = folder / f"{name}-{t.label.split(':')[-1]}.tex"
        path.write_text(t.fragment(), encoding="utf-8")
        written.append(path)
    whole = folder / f"{name}.tex"
    whole.write_text(document([t.fragment() for t in tables]), encoding="utf-8")
    return [*written, whole]
