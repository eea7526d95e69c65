"""The report of a batch: its summary, a FAITH-gain chart per run, and every run, from the
batch's results record (``results.json``) and its runs' folders."""

from __future__ import annotations

from pathlib import Path

from refine.harness.results import Results, ResultsError
from refine.io.store import RunStore
from refine.numbers import MISSING, shown
from refine.present.charts import bar_chart
from refine.present.html import document, escape, num
from refine.present.report.run import run_section


def batch_record(batch_dir: Path) -> Results:
    """The batch's results record; a folder written before batches had one is named with
    the command that writes it (running nothing again)."""
    try:
        return Results.read(batch_dir, "batch")
    except ResultsError as err:
        if (batch_dir / "results.json").is_file():
            raise
        raise ResultsError(
            f"{batch_dir}: no results record yet (a folder of an earlier version, or no run "
            "of the batch has ended); once a run ends there is one, and for an earlier "
            f"folder `refine batch SPEC --out {batch_dir.parent} --resume` writes it "
            "without making a finished run again"
        ) from err


def render_batch(batch_dir: str | Path) -> str:

    batch_dir = Path(batch_dir).resolve()
    results = batch_record(batch_dir)
    s, config = results.summary, results.config

    def pct(x: float | None) -> str:
        return MISSING if x is None else f"{100 * x:.0f}%"

    rows, sections, gains, labels = [], [], [], []
    for e in results.cells:
        run = None
        if e["run_dir"] and (batch_dir / e["run_dir"] / "run.json").is_file():
            run = RunStore(batch_dir / e["run_dir"]).load()
            sections.append(run_section(run, batch_dir / e["run_dir"], heading="h2"))
        gains.append(e["faith_gain"])
        labels.append(f"line {e['line']}: {e['country']} \u00b7 {e['activity']}")
        name = escape(e["name"])
        link = f'<a href="#{escape(run.id)}">{name}</a>' if run else name
        status = e["status"]
        rows.append(
            f'<tr class="entry" data-status="{status}"><td>{e["line"]}</td><td>{link}</td>'
            f'<td><span class="badge {status}">{status}</span></td>'
            f"<td>{num(e['initial_faith'])}</td><td>{num(e['best_faith'])}</td>"
            f"<td>{shown(e['faith_gain'], '+.3f')}</td><td>{e['edit_rounds']}</td>"
            f"<td>{escape(e['error'] or e['stop_reason'] or '')}</td></tr>"
        )
    gain = shown(s.get("mean_faith_gain"), "+.3f")
    iv = (s.get("faith_gain") or {}).get("interval")
    gain += f" [{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else ""
    per_run = shown(s.get("mean_editing_rounds"), ".1f")
    summary = (
        f'<p class="summary">success rate {pct(s.get("success_rate"))} '
        f"({s.get('finished')}/{s.get('runs')}, {s.get('failed')} failed); mean FAITH gain "
        f"{gain}; regression rate {pct(s.get('regression_rate'))} of "
        f"{s.get('editing_rounds')} editing round(s); "
        f"{per_run} editing round(s) per finished run</p>"
        f'<p class="muted">specs: {escape(config.get("source", ""))}; profile '
        f"{escape(config.get('profile', ''))}; gain interval: 95% bootstrap over finished "
        "runs</p>"
    )
    table = (
        "<table><tr><th>line</th><th>run</th><th>status</th><th>FAITH round 0</th>"
        "<th>best FAITH</th><th>gain</th><th>edits</th><th>stop reason / error</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    chart = bar_chart(gains, labels, "FAITH gain per run (best round \u2212 round 0)")
    title = f"Refinement batch {config.get('id', batch_dir.name)}"
    return document(title, summary + chart + table + "".join(sections))
