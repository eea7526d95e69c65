"""The report of a batch: its summary, a FAITH-gain chart per run, and every run."""

from __future__ import annotations

from pathlib import Path

from refine.harness.tasks.batch import BatchStore
from refine.io.store import RunStore
from refine.present.charts import bar_chart
from refine.present.html import document, escape, num
from refine.present.report.run import run_section


def render_batch(batch_dir: str | Path) -> str:

    batch_dir = Path(batch_dir).resolve()
    batch = BatchStore(batch_dir).load()
    s = batch.summary

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.0f}%"

    rows, sections, gains, labels = [], [], [], []
    for e in batch.entries:
        run = None
        if e.run_dir and (batch_dir / e.run_dir / "run.json").is_file():
            run = RunStore(batch_dir / e.run_dir).load()
            sections.append(run_section(run, batch_dir / e.run_dir, heading="h2"))
        gain = (
            e.best_faith - e.initial_faith
            if e.best_faith is not None and e.initial_faith is not None
            else None
        )
        gains.append(gain)
        labels.append(f"line {e.line}: {e.spec.country} \u00b7 {e.spec.activity}")
        link = f'<a href="#{escape(run.id)}">{escape(e.name)}</a>' if run else escape(e.name)
        rows.append(
            f'<tr class="entry" data-status="{e.status}"><td>{e.line}</td><td>{link}</td>'
            f'<td><span class="badge {e.status}">{e.status}</span></td>'
            f"<td>{num(e.initial_faith)}</td><td>{num(e.best_faith)}</td>"
            f"<td>{'n/a' if gain is None else f'{gain:+.3f}'}</td><td>{e.edit_rounds}</td>"
            f"<td>{escape(e.error or e.stop_reason or '')}</td></tr>"
        )
    gain = "n/a" if s.get("mean_faith_gain") is None else f"{s['mean_faith_gain']:+.3f}"
    mean_edits = s.get("mean_editing_rounds")
    per_run = "n/a" if mean_edits is None else f"{mean_edits:.1f}"
    summary = (
        f'<p class="summary">success rate {pct(s.get("success_rate"))} '
        f"({s.get('finished')}/{s.get('runs')}, {s.get('failed')} failed); mean FAITH gain "
        f"{gain}; regression rate {pct(s.get('regression_rate'))} of "
        f"{s.get('editing_rounds')} editing round(s); "
        f"{per_run} editing round(s) per finished run</p>"
        f'<p class="muted">specs: {escape(batch.source)}; profile {escape(batch.profile)}</p>'
    )
    table = (
        "<table><tr><th>line</th><th>run</th><th>status</th><th>FAITH round 0</th>"
        "<th>best FAITH</th><th>gain</th><th>edits</th><th>stop reason / error</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    chart = bar_chart(gains, labels, "FAITH gain per run (best round \u2212 round 0)")
    return document(f"Refinement batch {batch.id}", summary + chart + table + "".join(sections))
