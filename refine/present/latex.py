"""The toolkit's one LaTeX table writer: booktabs tables, rows by columns, each cell a
value with an optional interval, the best of each column in bold (``refine agree
--latex``, and any table that follows). A table is a fragment to ``\\input`` (it needs
``\\usepackage{booktabs}``); :func:`document` wraps fragments into a file that compiles
on its own."""

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
}


def tex(text: Any) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join(_SPECIAL.get(c, c) for c in str(text))


@dataclass
class Cell:
    value: float | None
    interval: tuple[float, float] | None = None
    score: float | None = None  # what "best" compares (the value where None)


@dataclass
class Table:
    """Rows by columns of cells; ``best``: "max" or "min" per column (bold), or None."""

    caption: str
    label: str
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    best: str | None = "max"
    corner: str = ""
    digits: int = 3
    note: str = ""  # a line under the table

    def fragment(self) -> str:
        """The table as a ``table`` environment with a booktabs ``tabular``."""
        bold = self._best()
        spec = "l" + "r" * len(self.columns)
        head = " & ".join([tex(self.corner), *(tex(c) for c in self.columns)]) + r" \\"
        lines = [
            r"\begin{table}[t]",
            r"\centering",
            r"\small",
            rf"\begin{{tabular}}{{{spec}}}",
            r"\toprule",
            head,
            r"\midrule",
        ]
        for r in self.rows:
            cells = [self._cell(self.cells.get((r, c)), (r, c) in bold) for c in self.columns]
            lines.append(" & ".join([tex(r), *cells]) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}"]
        if self.note:
            lines.append(rf"\par\smallskip{{\footnotesize {tex(self.note)}}}")
        lines += [rf"\caption{{{tex(self.caption)}}}", rf"\label{{{tex(self.label)}}}"]
        lines.append(r"\end{table}")
        return "\n".join(lines) + "\n"

    def _best(self) -> set[tuple[str, str]]:
        if self.best is None:
            return set()
        pick: Callable[..., Any] = max if self.best == "max" else min
        out = set()
        for c in self.columns:
            scored = [
                (cell.score if cell.score is not None else cell.value, r)
                for r in self.rows
                if (cell := self.cells.get((r, c))) is not None and cell.value is not None
            ]
            scored = [(s, r) for s, r in scored if s is not None]
            if len(scored) > 1:
                top = pick(s for s, _ in scored)
                out |= {(r, c) for s, r in scored if s == top}
        return out

    def _cell(self, cell: Cell | None, bold: bool) -> str:
        if cell is None or cell.value is None:
            return "--"
        text = f"{cell.value:.{self.digits}f}"
        if bold:
            text = rf"\textbf{{{text}}}"
        if cell.interval:
            lo, hi = cell.interval
            text += rf" {{\scriptsize [{lo:.2f}, {hi:.2f}]}}"
        return text


def document(fragments: Sequence[str]) -> str:
    """A LaTeX file that compiles on its own: the fragments in an ``article``."""
    body = "\n".join(fragments)
    return (
        "\\documentclass{article}\n\\usepackage[margin=2cm]{geometry}\n"
        "\\usepackage{booktabs}\n\\begin{document}\n" + body + "\\end{document}\n"
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
