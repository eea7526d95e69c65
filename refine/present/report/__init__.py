"""One report module per kind of result (run, batch, bench, concepts, SoS, tau,
agreement), each turning what a task returned or wrote into one self-contained page."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

from refine.io.files import atomic_write_text
from refine.present.report.batch import render_batch
from refine.present.report.run import render_run
from refine.present.report.tune import render_tune


def write_report(directory: str | Path, out: str | Path | None = None) -> Path:
    """``report.html`` for a run directory or a batch directory, ``loss.html`` for a tune's
    output folder, ``agree.html`` for a folder holding ``refine agree``'s agree.json;
    returns its path."""
    directory = Path(directory)
    name = "report.html"
    if (directory / "tune.json").is_file():
        html, name = render_tune(directory), "loss.html"
    elif (directory / "batch.json").is_file():
        html = render_batch(directory)
    elif (directory / "run.json").is_file():
        html = render_run(directory)
    elif (directory / "agree.json").is_file():
        from refine.human.agree import read_agreement
        from refine.present.report.agreement import render_agreement

        html, name = render_agreement(read_agreement(directory / "agree.json")), "agree.html"
    else:
        raise ValueError(
            f"{directory} is neither a run directory (run.json), a batch (batch.json), a "
            "tune's output folder (tune.json) nor an agreement's (agree.json)"
        )
    target = Path(out) if out else directory / name
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, html)
    return target


# each task's page by the kind its TaskSpec names (refine.harness.registry): tasks name a
# page, and only here is the name turned into the code that writes it
PAGES = {
    "bench": "refine.present.report.bench:write_bench_page",
    "concepts": "refine.present.report.concepts:write_concepts_page",
    "strategies": "refine.present.report.strategies:write_strategies_page",
    "editor_loops": "refine.present.report.editor_loops:write_editor_loops_page",
    "sos": "refine.present.report.sos:write_sos_page",
}


def write_task_page(kind: str, folder: str | Path, results: Any = None) -> Path:
    """The page of a task's results in ``folder``, by the page kind its spec names."""
    if kind not in PAGES:
        raise ValueError(f"no page of kind {kind!r} (pages: {', '.join(PAGES)})")
    module, _, name = PAGES[kind].partition(":")
    return getattr(import_module(module), name)(folder, results)
