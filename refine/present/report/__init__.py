"""One report module per kind of result (run, batch, bench, concepts, SoS, tau,
agreement), each turning what a task returned or wrote into one self-contained page."""

from __future__ import annotations

from pathlib import Path

from refine.io.files import atomic_write_text
from refine.present.report.batch import render_batch
from refine.present.report.run import render_run


def write_report(directory: str | Path, out: str | Path | None = None) -> Path:
    """``report.html`` for a run directory or a batch directory; returns its path."""
    directory = Path(directory)
    if (directory / "batch.json").is_file():
        html = render_batch(directory)
    elif (directory / "run.json").is_file():
        html = render_run(directory)
    else:
        raise ValueError(
            f"{directory} is neither a run directory (run.json) nor a batch (batch.json)"
        )
    target = Path(out) if out else directory / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, html)
    return target
