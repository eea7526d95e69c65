"""Self-contained HTML reports of a run or a batch: images inline, no network, no scripts.

A run report shows the metric curves (the series of :func:`refine.views.metric_series`, the
same as the app's chart, as an inline SVG chart), then every round: its images (the chosen
candidate first), scores, drift, the descriptor checklist per dimension (aligned, missing,
hallucinated, stereotypes seen), the instruction or prompt, the decision and its reason, and
timings. A batch report adds the batch summary, a FAITH-gain chart per run and every run.
"""

from __future__ import annotations

import base64
import io
import json
from html import escape
from pathlib import Path
from typing import Any

from refine import views
from refine.records import LanguageImage, Round, Run
from refine.usage import tokens_text

MAX_SIDE = 768  # images larger than this are shown downscaled (the PNGs stay untouched)
COLOURS = dict(
    zip(
        views.METRICS,
        ("#1f6feb", "#2da44e", "#cf222e", "#bf8700", "#57606a", "#6e40c9", "#fb8f44", "#bf3989"),
        strict=True,
    )
)
# for the other series (SoS per language, CAIRE), in order of appearance
PALETTE = ("#0a7ea4", "#e16f24", "#8250df", "#1b7c83", "#bc4c00", "#6639ba", "#116329")

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#1f2328}
h1{font-size:22px}h2{font-size:18px;margin-top:32px}h3{font-size:15px;margin:0 0 6px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f6f8fa}
.round{border:1px solid #d0d7de;border-radius:8px;padding:12px;margin:14px 0}
.round.accepted{border-left:6px solid #2da44e}.round.rejected{border-left:6px solid #cf222e}
.round.initial{border-left:6px solid #1f6feb}
.badge{display:inline-block;border-radius:10px;padding:0 8px;color:#fff;font-size:12px}
.badge.accepted{background:#2da44e}.badge.rejected{background:#cf222e}
.badge.initial{background:#1f6feb}.badge.failed{background:#cf222e}
.badge.finished{background:#2da44e}.badge.running,.badge.pending{background:#bf8700}
.imgs{display:flex;gap:10px;flex-wrap:wrap}figure{margin:0}
figure img{max-width:360px;border:1px solid #d0d7de}
figure.chosen img{border:3px solid #1f6feb}figcaption{font-size:12px;color:#57606a}
pre{white-space:pre-wrap;background:#f6f8fa;padding:8px;border-radius:6px}
.aligned{color:#1a7f37}.missing{color:#9a6700}.hallucinated{color:#cf222e}.near{color:#0969da}
.exaggerated{color:#8250df}ul.check{margin:2px 0 6px 0;padding-left:18px}
.cols{display:flex;gap:24px;flex-wrap:wrap}.muted{color:#57606a}
"""


def _num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _image_tag(path: Path, alt: str) -> str:
    from PIL import Image

    if not path.is_file():
        return f'<p class="missing">image {escape(path.name)} is missing</p>'
    with Image.open(path) as im:
        im = im.convert("RGB")
        size = im.size
        if max(size) > MAX_SIDE:
            im.thumbnail((MAX_SIDE, MAX_SIDE))
        buf = io.BytesIO()
        im.save(buf, format="PNG")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (
        f'<img src="data:image/png;base64,{data}" alt="{escape(alt)}" '
        f'data-file="{escape(path.name)}" data-size="{size[0]}x{size[1]}">'
    )


# -- charts ----------------------------------------------------------------------------


def line_chart(
    series: dict[str, list[float | None]],
    labels: list[str],
    marks: list[str] | None = None,
    title: str = "",
    width: int = 680,
    height: int = 260,
    y_range: tuple[float, float] = (0.0, 1.0),
    target: float | None = None,
    x_title: str = "",
    y_title: str = "",
) -> str:
    """An SVG line chart of values in ``y_range`` (default [0, 1]); ``marks`` (accepted /
    rejected / initial) are drawn under the x axis, ``target`` as a dashed line. Each line
    carries its values in ``data-values``. It scales down to the width it is given (a
    phone) and keeps its proportions."""
    left, right, top, bottom = 52, 170, 24, 58
    w, h = width - left - right, height - top - bottom
    n = max(len(labels), 1)
    lo, hi = y_range
    span = (hi - lo) or 1.0

    def x(i: int) -> float:
        return left + (w * i / (n - 1) if n > 1 else w / 2)

    def y(v: float) -> float:
        return top + h * (1.0 - max(0.0, min(1.0, (v - lo) / span)))

    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="100%" style="max-width:{width}px;height:auto" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{left}" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
    ]
    if x_title:
        out.append(
            f'<text x="{left + w / 2:.1f}" y="{height - 4}" font-size="11" '
            f'text-anchor="middle" class="axis-title">{escape(x_title)}</text>'
        )
    if y_title:
        out.append(
            f'<text x="12" y="{top + h / 2:.1f}" font-size="11" text-anchor="middle" '
            f'class="axis-title" transform="rotate(-90 12 {top + h / 2:.1f})">'
            f"{escape(y_title)}</text>"
        )
    if target is not None:
        out.append(
            f'<line class="target" data-target="{target:g}" x1="{left}" x2="{left + w}" '
            f'y1="{y(target):.1f}" y2="{y(target):.1f}" stroke="#1f6feb" stroke-width="1" '
            f'stroke-dasharray="2 3"/><text x="{left + w + 4}" y="{y(target) + 4:.1f}" '
            f'font-size="11" fill="#1f6feb">target {target:g}</text>'
        )
    for k in range(5):
        v = lo + span * k / 4
        out.append(
            f'<line x1="{left}" x2="{left + w}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
            f'stroke="#d0d7de" stroke-width="1"/>'
            f'<text x="{left - 6}" y="{y(v) + 4:.1f}" font-size="11" '
            f'text-anchor="end">{v:.2f}</text>'
        )
    for i, label in enumerate(labels):
        out.append(
            f'<text x="{x(i):.1f}" y="{top + h + 16}" font-size="11" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
        if marks:
            colour = {"accepted": "#2da44e", "rejected": "#cf222e"}.get(marks[i], "#1f6feb")
            symbol = {"accepted": "\u2713", "rejected": "\u2717"}.get(marks[i], "\u25cf")
            out.append(
                f'<text x="{x(i):.1f}" y="{top + h + 32}" font-size="12" fill="{colour}" '
                f'text-anchor="middle" class="mark">{symbol}<title>{escape(marks[i])}</title>'
                f"</text>"
            )
    others = iter(PALETTE * (1 + len(series) // len(PALETTE)))
    for k, (name, values) in enumerate(series.items()):
        colour = COLOURS.get(name) or next(others)
        points = [(x(i), y(v)) for i, v in enumerate(values) if v is not None]
        data = json.dumps([None if v is None else round(v, 6) for v in values])
        if points:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
            dash = ' stroke-dasharray="5 3"' if name == views.BEST_FAITH else ""
            out.append(
                f'<polyline class="series" data-name="{escape(name)}" '
                f'data-values=\'{escape(data)}\' points="{path}" fill="none" '
                f'stroke="{colour}" stroke-width="2"{dash}/>'
            )
            for i, v in enumerate(values):
                if v is not None:
                    out.append(
                        f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}">'
                        f"<title>{escape(name)} {escape(labels[i])}: {v:.3f}</title></circle>"
                    )
        ly = top + 14 + 18 * k
        out.append(
            f'<line x1="{left + w + 14}" x2="{left + w + 34}" y1="{ly}" y2="{ly}" '
            f'stroke="{colour}" stroke-width="3"/>'
            f'<text x="{left + w + 40}" y="{ly + 4}" font-size="12">{escape(name)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def bar_chart(values: list[float | None], labels: list[str], title: str) -> str:
    """An SVG bar chart of signed values (FAITH gain per run) around a zero line."""
    width, height, left, top, bottom = 680, 220, 44, 24, 40
    w, h = width - left - 20, height - top - bottom
    known = [abs(v) for v in values if v is not None]
    scale = max(known + [0.05])
    n = max(len(values), 1)
    slot = w / n
    zero = top + h / 2
    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img" aria-label="{escape(title)}">',
        f'<text x="{left}" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
        f'<line x1="{left}" x2="{left + w}" y1="{zero}" y2="{zero}" stroke="#57606a"/>',
        f'<text x="{left - 6}" y="{top + 4}" font-size="11" text-anchor="end">+{scale:.2f}</text>',
        f'<text x="{left - 6}" y="{top + h + 4}" font-size="11" '
        f'text-anchor="end">-{scale:.2f}</text>',
    ]
    for i, (v, label) in enumerate(zip(values, labels, strict=True)):
        cx = left + slot * i + slot * 0.15
        bw = slot * 0.7
        if v is not None:
            bh = (h / 2) * abs(v) / scale
            by = zero - bh if v >= 0 else zero
            colour = "#2da44e" if v > 0 else "#cf222e" if v < 0 else "#57606a"
            out.append(
                f'<rect class="bar" data-value="{v:.6f}" x="{cx:.1f}" y="{by:.1f}" '
                f'width="{bw:.1f}" height="{max(bh, 1):.1f}" fill="{colour}">'
                f"<title>{escape(label)}: {v:+.3f}</title></rect>"
            )
        out.append(
            f'<text x="{cx + bw / 2:.1f}" y="{top + h + 16}" font-size="11" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


# -- a run -----------------------------------------------------------------------------


MET_MARK = {True: "\u2713", False: "\u2717"}


def _checklist(run: Run, r: Round) -> str:
    by_dim, exaggerated = views.checklist(r, run.spec.near_margin)
    marks = {"aligned": "\u2713", "missing": "\u2717", "hallucinated": "!", "near": "\u2248"}
    words = {"near": "near match"}
    cols = []
    for d, checks in by_dim.items():
        items = []
        for c in checks:
            note = ""
            if c.kind == "near":
                note = (
                    f' <span class="muted">(of {escape(c.match.best_match or "")}, '
                    f"{c.match.similarity:.2f}: left as it is)</span>"
                )
            elif c.match.best_match and c.kind != "aligned":
                note = f' <span class="muted">(closest: {escape(c.match.best_match)})</span>'
            elif c.match.best_match:
                note = f' <span class="muted">(seen as {escape(c.match.best_match)})</span>'
            items.append(
                f'<li class="{c.kind}" data-kind="{c.kind}">{marks[c.kind]} '
                f"{words.get(c.kind, c.kind)}: "
                f"{escape(c.match.phrase)}{note}</li>"
            )
        cols.append(f'<div><h3>{escape(d)}</h3><ul class="check">{"".join(items)}</ul></div>')
    if exaggerated:
        items = [
            f'<li class="exaggerated" data-kind="exaggerated">\u26a0 stereotype: '
            f"{escape(e.candidate)} <span class='muted'>({escape(views.exaggerated_detail(e))})"
            "</span></li>"
            for e in exaggerated
        ]
        cols.append(f'<div><h3>stereotypes</h3><ul class="check">{"".join(items)}</ul></div>')
    for kind in ("explicit", "implicit"):
        lines = [x for x in views.expectation_lines(r) if x[0] == kind]
        if lines:
            items = [
                f'<li class="{"aligned" if ok else "missing"}" data-kind="{kind}" '
                f'data-met="{str(ok).lower()}" data-p="{p:.6f}">{MET_MARK[ok]} '
                f"{escape(text)} <span class='muted'>(yes {p:.2f})</span></li>"
                for _, text, p, ok in lines
            ]
            met = sum(x[3] for x in lines)
            cols.append(
                f"<div><h3>{kind} expectations ({met}/{len(lines)} met)</h3>"
                f'<ul class="check">{"".join(items)}</ul></div>'
            )
    return f'<div class="cols checklist">{"".join(cols)}</div>'


def _language_scores(e: LanguageImage) -> str:
    """FAITH, ALIGN, HAL, EXAG and what is missing or hallucinated in one language."""
    s = e.scores
    if s is None:
        return ""
    line = (
        f"<br>FAITH {_num(s.faith)}, ALIGN {_num(s.align)}, HAL {_num(s.hal)}, EXAG {_num(s.exag)}"
    )
    for kind in ("missing", "hallucinated"):
        phrases = getattr(e, kind)
        if phrases:
            line += f'<br><span class="{kind}">{kind}: {escape(", ".join(phrases))}</span>'
    return line


def _languages_html(r: Round, run_dir: Path) -> str:
    """The round in the other prompt languages, with SoS when the run has a bank."""
    if not r.languages and r.sos is None:
        return ""

    def sos(v: float | None) -> str:
        return "" if v is None else f"SoS {v:+.3f}"

    figs = "".join(
        f'<figure class="language" data-language="{escape(lang)}" '
        f'data-sos="{_num(e.sos, 6) if e.sos is not None else ""}">'
        f"{_image_tag(run_dir / e.image, lang)}<figcaption>{escape(lang)} "
        f"{sos(e.sos)}{_language_scores(e)}"
        + (f"<br>{escape(e.prompt)}" if e.prompt else "")
        + "</figcaption></figure>"
        for lang, e in r.languages.items()
    )
    head = f"prompt languages; English {sos(r.sos)}" if r.sos is not None else "prompt languages"
    return (
        f'<div class="languages"><p><b>{escape(head)}</b></p><div class="imgs">{figs}</div></div>'
    )


def _caire_html(r: Round) -> str:
    """CAIRE 1-5 per culture label with bars, the linked entity, the misreading note."""
    if not r.caire:
        return ""
    c = r.caire
    where = "knowledge base" if c.mode == "kb" else "kb-free: image only"
    if c.entity:
        where += f", linked to {c.entity['name']}"
    rows = "".join(
        f'<tr class="caire-label" data-label="{escape(s.label)}" data-score="{s.score}">'
        f"<td>{escape(s.label)}</td><td>{s.score}</td><td>{s.expected:.2f}</td>"
        f'<td><svg width="100" height="10"><rect width="{20 * s.score}" height="10" '
        f'fill="#0969da"/></svg></td></tr>'
        for s in c.labels
    )
    note = f'<p class="caire-note">{escape(r.caire_note)}</p>' if r.caire_note else ""
    return (
        f'<div class="caire" data-mode="{escape(c.mode)}"><p><b>CAIRE cultural relevance '
        f"(1-5; {escape(where)})</b></p><table><tr><th>culture</th><th>score</th>"
        f"<th>expected</th><th></th></tr>{rows}</table>{note}</div>"
    )


def _round_html(run: Run, r: Round, run_dir: Path) -> str:
    s = r.best.scores
    order = [r.chosen] + [j for j in range(len(r.candidates)) if j != r.chosen]
    figs = []
    for j in order:
        c = r.candidates[j]
        cls = "chosen" if j == r.chosen else ""
        caption = f"candidate {j}, seed {c.seed}, FAITH {_num(c.scores.faith)}"
        if c.drift is not None:
            caption += f", cosine {c.drift.embedding_cosine:.3f}, SSIM {c.drift.ssim:.3f}"
        if j == r.chosen:
            caption = "chosen: " + caption
        figs.append(
            f'<figure class="{cls}">{_image_tag(run_dir / c.image, caption)}'
            f"<figcaption>{escape(caption)}</figcaption></figure>"
        )
    drift = r.best.drift
    drift_cells = (
        f"<td>{drift.embedding_cosine:.3f}</td><td>{drift.ssim:.3f}</td>"
        if drift
        else "<td>-</td><td>-</td>"
    )
    parent = "" if r.parent is None else f" from round {r.parent}"
    by = r.instruction_source + (f", {r.instruction_model}" if r.instruction_model else "")
    label = "prompt" if r.kind == "generate" else f"instruction ({by})"
    timings = ", ".join(f"{k} {v:.2f} s" for k, v in r.timings.items())
    best = " (best round)" if r.index == run.best_round else ""
    return (
        f'<section class="round {r.decision}" id="{escape(run.id)}-round-{r.index}" '
        f'data-round="{r.index}" data-decision="{r.decision}">'
        f'<h3>round {r.index}: {r.kind}{parent} <span class="badge {r.decision}">'
        f"{r.decision}{' by hand' if r.by_hand else ''}</span>{best}</h3>"
        f'<p class="reason">{escape(r.reason)}</p>'
        f'<div class="imgs">{"".join(figs)}</div>'
        "<table><tr><th>FAITH</th><th>quality</th><th>ALIGN</th><th>HAL</th><th>EXAG</th>"
        "<th>drift cosine</th><th>SSIM</th></tr>"
        f'<tr class="scores" data-faith="{_num(s.faith, 6)}" '
        f'data-quality="{_num(s.quality, 6)}"><td>{_num(s.faith)}</td>'
        f'<td title="{escape(_quality_title(s))}">{_num(s.quality)}</td>'
        f"<td>{_num(s.align)}</td><td>{_num(s.hal)}</td><td>{_num(s.exag)}</td>"
        f"{drift_cells}</tr></table>"
        f"{_caire_html(r)}"
        f"{_languages_html(r, run_dir)}"
        f"{_checklist(run, r)}"
        f'<p><b>{escape(label)}</b></p><pre class="instruction">{escape(r.text)}</pre>'
        f"{_changes_html(r)}"
        f'<p class="muted">timings: {escape(timings) or "-"}</p>'
        "</section>"
    )


def _quality_title(s: Any) -> str:
    """How quality was read: ``naturalness 7.0, artifacts 7.0 of 10 (judge, logprobs)``."""
    q = s.quality_reading
    if q is None:
        return "not read: the judge cannot rate on a 0-10 scale"
    text = (
        f"naturalness {q.naturalness:.1f}, artifacts {q.artifacts:.1f} of 10 "
        f"({q.judge}, {q.method})"
    )
    if q.stderr is not None:
        text += f", s.e. {q.stderr:.3f}"
    if s.clip_iqa is not None:
        text += f"; CLIP-IQA {s.clip_iqa:.3f}"
    return text


def _changes_html(r: Round) -> str:
    """Why the template wrote an instruction, and the planned changes it was built from."""
    note = f'<p class="muted">{escape(r.instruction_note)}</p>' if r.instruction_note else ""
    if not r.changes:
        return note
    items = "".join(
        f'<li data-kind="{escape(c.kind)}">{escape(c.kind)}: {escape(c.item)}'
        + (f" \u2192 {escape(c.reference)}" if c.reference else "")
        + "</li>"
        for c in r.changes
    )
    return (
        f'{note}<details class="changes"><summary>built from {len(r.changes)} planned '
        f"change(s)</summary><ul>{items}</ul></details>"
    )


def run_section(run: Run, run_dir: Path, heading: str = "h2") -> str:
    labels = [f"r{r.index}" for r in run.rounds]
    marks = [r.decision for r in run.rounds]
    backends = "".join(
        f"<tr><td>{escape(role)}</td><td>{escape(name)}</td></tr>"
        for role, name in sorted(run.backend_ids.items())
    )
    spec = run.spec
    settings = ", ".join(
        f"{k}={v}"
        for k, v in spec.model_dump().items()
        if k not in ("activity", "country", "backends", "backend_options", "instructions")
        and v is not None
    )
    exag = run.rounds[0].best.scores.exag_variant if run.rounds else "-"
    api = f"; API usage: {escape(tokens_text(run.usage))}" if run.usage else ""
    series = views.metric_series(run)
    chart = (
        line_chart(
            series,
            labels,
            marks,
            title="metrics per round (chosen candidate)",
            y_range=views.chart_range(series),
            target=spec.target,
            x_title=views.CHART_X,
            y_title=views.CHART_Y,
        )
        if run.rounds
        else "<p>no round finished</p>"
    )
    error = f'<p class="hallucinated">error: {escape(run.error)}</p>' if run.error else ""
    if run.branched_from:
        origin = Path(str(run.branched_from.get("run", ""))).name
        error += (
            f"<p>continued from round {run.branched_from.get('round')} of run "
            f"<code>{escape(origin)}</code></p>"
        )
    return (
        f'<section class="run" id="{escape(run.id)}" data-run="{escape(run.id)}">'
        f"<{heading}>{escape(spec.activity)} - {escape(run.references.country)} "
        f'<span class="badge {run.status}">{run.status}</span></{heading}>'
        f"<p>run <code>{escape(run.id)}</code>; stopped by: {escape(run.stop_reason or '-')}; "
        f"best round: {run.best_round}; {len(run.rounds)} round(s), {run.model_calls} model "
        f"call(s), {run.elapsed_s:.1f} s{api}</p>{error}"
        f'<p class="muted">EXAG: {escape(exag)}<br>settings: {escape(settings)}<br>'
        f"references: {escape(run.references.source)}</p>"
        f"<details><summary>backends</summary><table>{backends}</table></details>"
        f"{chart}" + "".join(_round_html(run, r, run_dir) for r in run.rounds) + "</section>"
    )


def _document(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>\n"
    )


def render_run(run_dir: str | Path) -> str:
    from refine.io.store import RunStore

    run_dir = Path(run_dir).resolve()
    run = RunStore(run_dir).load()
    title = f"Refinement run: {run.spec.activity} - {run.references.country}"
    return _document(title, run_section(run, run_dir))


def render_batch(batch_dir: str | Path) -> str:
    from refine.batch import BatchStore
    from refine.io.store import RunStore

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
        labels.append(f"line {e.line}")
        link = f'<a href="#{escape(run.id)}">{escape(e.name)}</a>' if run else escape(e.name)
        rows.append(
            f'<tr class="entry" data-status="{e.status}"><td>{e.line}</td><td>{link}</td>'
            f'<td><span class="badge {e.status}">{e.status}</span></td>'
            f"<td>{_num(e.initial_faith)}</td><td>{_num(e.best_faith)}</td>"
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
    chart = bar_chart(gains, labels, "FAITH gain per run (best round - round 0)")
    return _document(f"Refinement batch {batch.id}", summary + chart + table + "".join(sections))


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
    from refine.io.files import atomic_write_text

    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, html)
    return target


# -- benchmark leaderboard -------------------------------------------------------------


def _interval_text(stat: dict[str, Any]) -> str:
    mean, iv = stat.get("mean"), stat.get("interval")
    if mean is None:
        return "n/a"
    return f"{mean:.3f}" + (f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else "")


def _bars(rows: list[tuple[str, float | None, Any]], width: int = 680) -> str:
    """Horizontal bars with 95% intervals: (label, mean, (lo, hi) or None), values 0..1."""
    left, bar_h, gap = 260, 16, 6
    height = len(rows) * (bar_h + gap) + 24
    scale = width - left - 20
    parts = [
        f'<svg class="bars" width="100%" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="FAITH per country and generator">'
    ]
    for i, (label, mean, iv) in enumerate(rows):
        y = 8 + i * (bar_h + gap)
        parts.append(
            f'<text x="{left - 6}" y="{y + bar_h - 4}" font-size="11" text-anchor="end">'
            f"{escape(label)}</text>"
        )
        if mean is None:
            continue
        colour = PALETTE[i % len(PALETTE)]
        parts.append(
            f'<rect x="{left}" y="{y}" width="{scale * mean:.1f}" height="{bar_h}" '
            f'fill="{colour}" data-label="{escape(label)}" data-mean="{mean:.6f}"/>'
        )
        if iv:
            x0, x1, cy = left + scale * iv[0], left + scale * iv[1], y + bar_h / 2
            parts.append(
                f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{cy}" y2="{cy}" stroke="#1f2328" '
                f'stroke-width="2"/>'
            )
        end = max(mean, iv[1]) if iv else mean
        parts.append(
            f'<text x="{left + scale * end + 4:.1f}" y="{y + bar_h - 4}" font-size="11">'
            f"{mean:.3f}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _scatter(points: dict[str, list[tuple[float, float]]], width: int = 680) -> str:
    """FAITH (x, 0..1) against Vendi (y) per prompt, one colour per generator."""
    height, pad = 300, 40
    ys = [y for pts in points.values() for _, y in pts] or [1.0]
    top = max(ys) * 1.1 or 1.0
    parts = [
        f'<svg class="scatter" width="100%" viewBox="0 0 {width} {height}" role="img" '
        'aria-label="FAITH against Vendi per prompt">',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - 10}" y2="{height - pad}" '
        'stroke="#8c959f"/>',
        f'<line x1="{pad}" y1="10" x2="{pad}" y2="{height - pad}" stroke="#8c959f"/>',
        f'<text x="{width / 2}" y="{height - 8}" font-size="12" text-anchor="middle">'
        "FAITH (prompt mean)</text>",
        f'<text x="12" y="{height / 2}" font-size="12" transform="rotate(-90 12 {height / 2})" '
        'text-anchor="middle">Vendi of the prompt\'s images</text>',
        f'<text x="{pad - 4}" y="{height - pad}" font-size="10" text-anchor="end">0</text>',
        f'<text x="{pad - 4}" y="16" font-size="10" text-anchor="end">{top:.2f}</text>',
        f'<text x="{pad}" y="{height - pad + 14}" font-size="10">0</text>',
        f'<text x="{width - 10}" y="{height - pad + 14}" font-size="10" text-anchor="end">1</text>',
    ]
    for i, (gen, pts) in enumerate(points.items()):
        colour = PALETTE[i % len(PALETTE)]
        for x, y in pts:
            cx = pad + (width - pad - 10) * x
            cy = height - pad - (height - pad - 10) * (y / top)
            parts.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{colour}" '
                f'data-generator="{escape(gen)}" data-faith="{x:.6f}" data-vendi="{y:.6f}"/>'
            )
        parts.append(
            f'<text x="{width - 200}" y="{20 + 14 * i}" font-size="12" fill="{colour}">'
            f"\u25cf {escape(gen)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _raw(x: float | None) -> str:
    return "" if x is None else f"{x:.6f}"


def _paired_row(p: dict[str, Any]) -> str:
    iv = p["interval"]
    interval = "n/a" if not iv else f"[{iv[0]:.4f}, {iv[1]:.4f}]"
    share = "n/a" if p["share_improved"] is None else f"{100 * p['share_improved']:.0f}%"
    return (
        f"<tr><td>{escape(p['other'])} vs {escape(p['base'])}</td><td>{p['prompts']}</td>"
        f'<td data-metric="mean_difference" data-mean="{_raw(p["mean_difference"])}">'
        f"{_num(p['mean_difference'], 4)}</td><td>{interval}</td><td>{share}</td></tr>"
    )


def render_bench_leaderboard(
    folder: str | Path, summary: dict[str, Any], cells: list[dict[str, Any]]
) -> str:
    """One self-contained HTML page: the leaderboard with intervals, FAITH per country,
    FAITH against Vendi per prompt, the paired comparison, the best and worst images."""
    from metrics.catalog import BENCH_EXPECTATIONS, BENCH_IMAGE, BENCH_PROMPT, BENCH_QUALITY, label
    from refine.bench import cell_mean

    folder = Path(folder)
    names = list(summary["generators"])
    ranked = sorted(names, key=lambda g: -(summary["generators"][g]["faith"]["mean"] or -1.0))

    def present(metrics: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(m for m in metrics if any(m in summary["generators"][g] for g in names))

    shown = (*BENCH_IMAGE, *present(BENCH_QUALITY), *BENCH_PROMPT) + present(BENCH_EXPECTATIONS)
    scores = (*BENCH_IMAGE, *BENCH_QUALITY)  # by label; the rest by name
    head = "".join(f"<th>{label(m) if m in scores else m}</th>" for m in shown)
    rows = []
    for g in ranked:
        s = summary["generators"][g]
        cells_html = "".join(
            f'<td data-generator="{escape(g)}" data-metric="{m}" '
            f'data-mean="{_raw(s[m]["mean"])}">{escape(_interval_text(s[m]))}</td>'
            if m in s
            else "<td>n/a</td>"
            for m in shown
        )
        rows.append(
            f"<tr><td>{escape(g)}</td><td>{s['prompts']}</td><td>{s['images']}</td>"
            f"{cells_html}</tr>"
        )
    table = (
        '<table class="leaderboard"><tr><th>generator</th><th>prompts</th><th>images</th>'
        f"{head}</tr>{''.join(rows)}</table>"
    )
    bars = []
    for country in sorted({c for g in names for c in summary["countries"][g]}):
        for g in names:
            stat = summary["countries"][g].get(country)
            if stat:
                bars.append(
                    (f"{country} \u00b7 {g}", stat["faith"]["mean"], stat["faith"]["interval"])
                )
    cat_bars = []
    for cat in sorted({c for g in names for c in summary.get("categories", {}).get(g, {})}):
        for g in names:
            stat = summary["categories"][g].get(cat)
            if stat:
                cat_bars.append(
                    (f"{cat} \u00b7 {g}", stat["faith"]["mean"], stat["faith"]["interval"])
                )
    cat_html = f"<h2>FAITH per activity category</h2>{_bars(cat_bars)}" if cat_bars else ""
    points = {
        g: [
            (cell_mean(c, "faith"), c["vendi"])
            for c in cells
            if c["generator"] == g and cell_mean(c, "faith") is not None
        ]
        for g in names
    }
    paired = "".join(_paired_row(p) for p in summary["paired"])
    paired_html = (
        "<h2>Paired comparison (FAITH, same prompts and seeds)</h2><table><tr><th>pair</th>"
        "<th>prompts</th><th>mean difference</th><th>95% interval</th><th>prompts improved</th>"
        f"</tr>{paired}</table>"
        if paired
        else ""
    )
    extremes = []
    for country in sorted({c["country"] for c in cells}):
        images = [
            (im["faith"], c["generator"], c["activity"], im)
            for c in cells
            if c["country"] == country
            for im in c["images"]
            if im["faith"] is not None
        ]
        if not images:
            continue
        images.sort(key=lambda t: t[0])
        figs = []
        for end, (faith, gen, act, im) in (("worst", images[0]), ("best", images[-1])):
            caption = f"{end}: {gen}, {act}, seed {im['seed']}, FAITH {faith:.3f}"
            figs.append(
                f"<figure>{_image_tag(folder / im['file'], caption)}"
                f"<figcaption>{escape(caption)}</figcaption></figure>"
            )
        extremes.append(f'<h3>{escape(country)}</h3><div class="imgs">{"".join(figs)}</div>')
    scorer = ", ".join(f"{r} {n}" for r, n in summary.get("scorer", {}).items())
    tau = f"tau {summary.get('tau')} ({summary.get('tau_source', '')})"
    body = (
        f'<p class="muted">{len(cells)} prompt cells; every image scored by one scorer: '
        f"{escape(scorer)}; {escape(tau)}; intervals: 95% bootstrap over prompts.</p>"
        f"<h2>Leaderboard</h2>{table}<h2>FAITH per country</h2>{_bars(bars)}{cat_html}"
        f"<h2>FAITH against diversity (Vendi) per prompt</h2>{_scatter(points)}"
        f"{paired_html}<h2>Best and worst images per country</h2>{''.join(extremes)}"
    )
    return _document("Benchmark: cultural faithfulness of generators", body)


def render_concepts(
    folder: str | Path, summary: dict[str, Any], cells: list[dict[str, Any]]
) -> str:
    """One self-contained HTML page of a CUBE-style diversity comparison: the means per
    generator, per concept each generator's figures with a bar of its CUBE diversity
    (0..1), and every image with its geo-tag."""
    from refine.concepts import FIGURES

    folder = Path(folder)
    names = list(summary["generators"])
    head = "".join(f"<th>{f}</th>" for f in FIGURES)
    rows = []
    for g in names:
        s = summary["generators"][g]
        tds = "".join(
            f'<td data-generator="{escape(g)}" data-figure="{f}" data-value="{_raw(s[f])}">'
            f"{_num(s[f])}</td>"
            for f in FIGURES
        )
        rows.append(f"<tr><td>{escape(g)}</td><td>{s['concepts']}</td>{tds}</tr>")
    table = (
        f'<table class="leaderboard"><tr><th>generator</th><th>concepts</th>{head}</tr>'
        f"{''.join(rows)}</table>"
    )
    sections = []
    for concept in summary["concepts"]:
        bars = [
            (g, concept["generators"][g]["cube_diversity"], None)
            for g in names
            if g in concept["generators"]
        ]
        lines = []
        for g, figs in concept["generators"].items():
            spread = ", ".join(f"{escape(k)} {v}" for k, v in figs["countries"].items())
            lines.append(
                f"<tr><td>{escape(g)}</td>"
                + "".join(
                    f'<td data-concept="{escape(concept["prompt"])}" data-generator="{escape(g)}" '
                    f'data-figure="{f}" data-value="{_raw(figs[f])}">{_num(figs[f])}</td>'
                    for f in FIGURES
                )
                + f"<td>{spread}</td></tr>"
            )
        grids = []
        for c in cells:
            if c["prompt"] != concept["prompt"] or c["country"] != concept["country"]:
                continue
            figs = []
            for im in c["images"]:
                caption = (
                    f"seed {im['seed']}: {' / '.join(im['tag'])} (quality {im['quality']:.2f})"
                )
                figs.append(
                    f"<figure>{_image_tag(folder / im['file'], caption)}"
                    f"<figcaption>{escape(caption)}</figcaption></figure>"
                )
            grids.append(
                f'<h4>{escape(c["generator"])}</h4><div class="imgs">{"".join(figs)}</div>'
            )
        where = concept["country"] or "global"
        sections.append(
            f'<h2>{escape(concept["prompt"])} <span class="muted">({escape(concept["concept"])}, '
            f"{escape(where)})</span></h2>{_bars(bars)}<table><tr><th>generator</th>{head}"
            f"<th>tagged countries</th></tr>{''.join(lines)}</table>{''.join(grids)}"
        )
    weights = summary.get("weights")
    body = (
        '<p class="muted">CUBE diversity: the Vendi score of the images\' geo-tags '
        f"(continent, country, artifact; similarity weights {escape(str(weights))} for "
        "global concepts, all three parts for a country's own) per chunk of 8 images over the "
        "chunk's size, mean over chunks; the authors' form divides the last chunk by 8 too. "
        "qVendi: mean quality x Vendi (CUBE Eq. 3), quality the judge's yes-probability that "
        "the image shows the prompt.</p>"
        f"<h2>Generators</h2>{table}{''.join(sections)}"
    )
    return _document("Cultural diversity of generators (CUBE)", body)


def render_tau(similarities: list[float], tau: float, q: float, source: str) -> str:
    """The best-match similarities of a tau calibration as a histogram (20 bins over 0..1)
    with the calibrated tau and the AHEaD paper's values (0.52, 0.67) marked."""
    bins = 20
    counts = [0] * bins
    for s in similarities:
        counts[min(bins - 1, max(0, int(s * bins)))] += 1
    width, height, pad = 680, 260, 36
    top = max(counts) or 1
    bar_w = (width - 2 * pad) / bins
    parts = [
        f'<svg class="histogram" width="100%" viewBox="0 0 {width} {height}" role="img" '
        'aria-label="best-match similarities">'
    ]
    for k, n in enumerate(counts):
        h = (height - 2 * pad) * n / top
        x = pad + k * bar_w
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{height - pad - h:.1f}" width="{bar_w - 2:.1f}" '
            f'height="{h:.1f}" fill="#0969da" data-bin="{k / bins:.2f}" data-count="{n}"/>'
        )
    for value, label, colour in (
        (tau, f"tau {tau:.3f}", "#cf222e"),
        (0.52, "0.52 (InternVL3)", "#8c959f"),
        (0.67, "0.67 (Qwen2.5-VL)", "#8c959f"),
    ):
        x = pad + value * (width - 2 * pad)
        parts.append(
            f'<line x1="{x:.1f}" y1="12" x2="{x:.1f}" y2="{height - pad}" stroke="{colour}" '
            f'stroke-dasharray="{"none" if colour == "#cf222e" else "4 3"}"/>'
            f'<text x="{x + 3:.1f}" y="{22 if colour == "#cf222e" else 36}" font-size="11" '
            f'fill="{colour}">{escape(label)}</text>'
        )
    parts.append(
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="#8c959f"/>'
        f'<text x="{pad}" y="{height - pad + 16}" font-size="10">0</text>'
        f'<text x="{width - pad}" y="{height - pad + 16}" font-size="10" text-anchor="end">1</text>'
        f'<text x="{width / 2}" y="{height - 6}" font-size="12" text-anchor="middle">'
        "best-match cosine similarity of a reference descriptor</text></svg>"
    )
    body = (
        f'<p>tau = <strong data-tau="{tau:.6f}">{tau:.4f}</strong>, the {q:g} quantile of '
        f'{len(similarities)} similarities.</p><p class="muted">{escape(source)}</p>'
        + "".join(parts)
    )
    return _document("Calibrating tau", body)


def _xy_plot(pairs: list[tuple[float, float]], x_label: str, y_label: str) -> str:
    """A small scatter of (metric, mean human rating) per image, axes from the data."""
    width, height, pad = 320, 240, 40
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(1.0, min(ys)), max(5.0, max(ys))
    xr = (x1 - x0) or 1.0
    parts = [
        f'<svg class="agree-scatter" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(x_label)} against {escape(y_label)}">',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - 10}" y2="{height - pad}" '
        'stroke="#8c959f"/>',
        f'<line x1="{pad}" y1="10" x2="{pad}" y2="{height - pad}" stroke="#8c959f"/>',
        f'<text x="{width / 2}" y="{height - 8}" font-size="11" text-anchor="middle">'
        f"{escape(x_label)} ({x0:.2f} to {x1:.2f})</text>",
        f'<text x="12" y="{height / 2}" font-size="11" transform="rotate(-90 12 {height / 2})" '
        f'text-anchor="middle">{escape(y_label)} (mean)</text>',
    ]
    for x, y in pairs:
        cx = pad + (width - pad - 20) * (x - x0) / xr
        cy = height - pad - (height - pad - 20) * (y - y0) / (y1 - y0)
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="#0969da" fill-opacity="0.7" '
            f'data-x="{x:.6f}" data-y="{y:.6f}"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def render_agreement(result: Any) -> str:
    """One self-contained HTML page: the raters' alpha per question, per metric and
    question the three correlations with their intervals, and a scatter per metric."""

    def fig(v: float | None, iv: Any) -> str:
        if v is None:
            return "n/a"
        return f"{v:+.3f}" + (f" [{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else "")

    ordinal = getattr(result, "alpha_ordinal", {})
    alpha = "".join(
        f'<tr><td>{escape(q)}</td><td data-question="{escape(q)}" data-alpha="{_raw(a)}">'
        f'{_num(a)}</td><td data-question="{escape(q)}" '
        f'data-alpha-ordinal="{_raw(ordinal.get(q))}">{_num(ordinal.get(q))}</td></tr>'
        for q, a in result.alpha.items()
    )
    notes = "".join(f"<li>{escape(n)}</li>" for n in result.notes())
    rows = []
    for m, by_q in result.table.items():
        for q, row in by_q.items():
            cells = "".join(
                f'<td data-metric="{m}" data-question="{q}" data-stat="{s}" '
                f'data-value="{_raw(row[s])}">{fig(row[s], row[s + "_interval"])}</td>'
                for s in ("spearman", "kendall", "pearson")
            )
            rows.append(
                f"<tr><td>{escape(m)}</td><td>{escape(q)}</td><td>{row['n']}</td>{cells}</tr>"
            )
    plots = []
    for m, by_q in result.points.items():
        q = "faithfulness" if "faithfulness" in by_q else next(iter(by_q))
        plots.append(
            f"<figure>{_xy_plot(by_q[q], m, q)}<figcaption>{escape(m)}</figcaption></figure>"
        )
    missing = ", ".join(f"{m}: {n}" for m, n in result.missing.items() if n)
    body = (
        f'<p class="muted">{result.images} images, {len(result.raters)} raters '
        f"({escape(', '.join(result.raters))}). Correlations of each metric with the raters' "
        "mean answer per image, 95% bootstrap intervals; HAL and EXAG count faults, so "
        "agreeing with people shows as a negative correlation. Each rater counts once per "
        "image (their latest answer). Krippendorff's alpha between raters is the ceiling a "
        "metric can hope to reach: interval treats the 1-5 answers as distances (a 2 and a "
        "4 disagree four times as much as a 2 and a 3); ordinal uses only their order.</p>"
        + (f'<ul class="muted">{notes}</ul>' if notes else "")
        + "<h2>Raters' agreement</h2><table><tr><th>question</th><th>alpha (interval)</th>"
        f"<th>alpha (ordinal)</th></tr>{alpha}</table>"
        "<h2>Metrics against people</h2><table><tr><th>metric</th><th>question</th><th>n</th>"
        f"<th>Spearman</th><th>Kendall tau-b</th><th>Pearson</th></tr>{''.join(rows)}</table>"
        + (f'<p class="muted">images without the metric: {escape(missing)}</p>' if missing else "")
        + f'<h2>Scatter per metric</h2><div class="imgs">{"".join(plots)}</div>'
    )
    return _document("Agreement of metrics with human ratings", body)
