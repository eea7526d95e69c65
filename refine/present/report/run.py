"""The report of one run: the metric curves (the series of
:func:`refine.present.views.metric_series`, as in the app) and the timeline of what each
round fixed and lost (:mod:`refine.present.timeline`), then every round: its images
(the chosen candidate first), scores, drift, the descriptor checklist per dimension
(aligned, missing, hallucinated, stereotypes seen), the instruction or prompt, the
decision and its reason, and timings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metrics.catalog import CATALOG, label
from refine.io.store import RunStore
from refine.numbers import MISSING, with_error
from refine.present import views
from refine.present.charts import line_chart
from refine.present.html import document, escape, image_tag, num, raw
from refine.present.timeline import timeline_html
from refine.records import LanguageImage, Round, Run
from refine.usage import tokens_text

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
    line = f"<br>FAITH {num(s.faith)}, ALIGN {num(s.align)}, HAL {num(s.hal)}, EXAG {num(s.exag)}"
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
        f'data-sos="{num(e.sos, 6) if e.sos is not None else ""}">'
        f"{image_tag(run_dir / e.image, lang)}<figcaption>{escape(lang)} "
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
        faith = with_error(c.scores.faith, c.scores.stderr("faith"))
        caption = f"candidate {j}, seed {c.seed}, FAITH {faith}"
        if c.drift is not None:
            # drift as everywhere else: 1 - cosine to the parent (0: the same picture)
            caption += f", drift {c.drift.value:.3f}, SSIM {c.drift.ssim:.3f}"
            if c.drift.inside is not None:  # a localized edit: inside and outside its boxes
                caption += f", drift inside {c.drift.inside:.3f}"
            if c.drift.outside is not None:
                caption += f", outside {c.drift.outside:.3f}"
        if j == r.chosen:
            caption = "chosen: " + caption
        figs.append(
            f'<figure class="{cls}">{image_tag(run_dir / c.image, caption)}'
            f"<figcaption>{escape(caption)}</figcaption></figure>"
        )
    drift = r.best.drift
    drift_cells = (
        f"<td>{drift.value:.3f}</td><td>{drift.ssim:.3f}</td>"
        if drift
        else f"<td>{MISSING}</td><td>{MISSING}</td>"
    )
    parent = "" if r.parent is None else f" from round {r.parent}"
    by = r.instruction_source + (f", {r.instruction_model}" if r.instruction_model else "")
    label = {"generate": "prompt", "regenerate": f"new prompt ({by})"}.get(
        r.kind, f"instruction ({by})"
    )
    # the image metrics the catalog adds (a registered one), as the app's table shows them
    extras = views.table_extras()
    extra_heads = "".join(f"<th>{escape(CATALOG[m].label)}</th>" for m in extras)
    extra_cells = "".join(f'<td data-metric="{m}">{num(s.value(m))}</td>' for m in extras)
    timings = ", ".join(f"{k} {v:.2f} s" for k, v in r.timings.items())
    best = " (best round)" if r.index == run.best_round else ""
    return (
        f'<section class="round {r.decision}" id="{escape(run.id)}-round-{r.index}" '
        f'data-round="{r.index}" data-decision="{r.decision}">'
        f'<h3>round {r.index}: {r.kind}{parent} <span class="badge {r.decision}">'
        f"{r.decision}{' by hand' if r.by_hand else ''}</span>{best}{_yours(r)}</h3>"
        f'<p class="reason">{escape(views.reason_text(r))}</p>'
        f'<div class="imgs">{"".join(figs)}</div>'
        "<table><tr><th>FAITH</th><th>quality</th><th>ALIGN</th><th>HAL</th><th>EXAG</th>"
        '<th title="1 - cosine to the parent image: 0 the same picture, 2 the opposite">'
        f"drift</th><th>SSIM</th>{extra_heads}</tr>"
        f'<tr class="scores" data-faith="{raw(s.faith)}" '
        f'data-quality="{raw(s.quality)}"{_errors_data(s)}><td>{_num(s, "faith")}</td>'
        f'<td title="{escape(_quality_title(s))}">{_num(s, "quality")}</td>'
        f"<td>{num(s.align)}</td><td>{num(s.hal)}</td><td>{_num(s, 'exag')}</td>"
        f"{drift_cells}{extra_cells}</tr></table>"
        f"{_caire_html(r)}"
        f"{_languages_html(r, run_dir)}"
        f"{_checklist(run, r)}"
        f'<p><b>{escape(label)}</b></p><pre class="instruction">{escape(r.text)}</pre>'
        f"{_changes_html(r)}{_photos_html(r)}{_regions_html(r)}"
        f'<p class="muted">timings: {escape(timings) or "-"}</p>'
        "</section>"
    )


def _yours(r: Round) -> str:
    """A badge on a round scored against references a person changed (its FAITH against
    the pack beside)."""
    if not r.references:
        return ""
    pack = (r.best.against_pack or {}).get("faith")
    return (
        f' <span class="badge changed" data-references="{r.references}" '
        f'title="FAITH against the pack: {num(pack)}">{views.YOURS}</span>'
    )


def _references_html(run: Run) -> str:
    """The changes a person made to the references, and FAITH both ways per round: against
    their references (the scores) and against the pack (the same observations matched to
    the pack's descriptors)."""
    if not run.reference_changes:
        return ""
    changes = "".join(
        f'<li data-round="{c.round}">from round {c.round} ({escape(c.source)}, '
        f"{escape(c.at)}): {escape(c.describe())}</li>"
        for c in run.reference_changes
    )
    rows = "".join(
        f'<tr data-round="{r.index}" data-faith="{raw(r.best.scores.faith)}" '
        f'data-faith-pack="{raw((r.best.against_pack or {}).get("faith"))}"><td>{r.index}</td>'
        f"<td>{escape(r.decision)}</td><td>{num(r.best.scores.faith)}</td>"
        f"<td>{num((r.best.against_pack or {}).get('faith'))}</td></tr>"
        for r in run.rounds
    )
    return (
        '<section class="references-changed"><h3>your references</h3>'
        f"<ul>{changes}</ul><table><tr><th>round</th><th>decision</th>"
        "<th>FAITH, your references</th><th>FAITH, the pack</th></tr>"
        f"{rows}</table></section>"
    )


def _num(s: Any, name: str) -> str:
    """A value of the round's table, ± its standard error where read from sampled answers."""
    value, stderr = s.value(name), s.stderr(name)
    return num(value) if stderr is None else escape(with_error(value, stderr))


def _errors_data(s: Any) -> str:
    """The standard errors of the sampled values, as ``data-faith-stderr`` attributes."""
    return "".join(
        f' data-{name}-stderr="{raw(e)}"'
        for name in views.WITH_ERRORS.values()
        if (e := s.stderr(name)) is not None
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
    if (se := s.stderr("quality")) is not None:  # sampled
        text += f", s.e. {se:.3f}"
    for m in views.quality_names():  # the readings beside the judge's (CLIP-IQA)
        if m != "quality" and s.value(m) is not None:
            text += f"; {label(m)} {s.value(m):.3f}"
    return text


def _regions_html(r: Round) -> str:
    """A localized edit's boxes (and the drift inside and outside them), or why it has
    none."""
    note = f'<p class="muted">{escape(r.regions_note)}</p>' if r.regions_note else ""
    if not r.regions:
        return note
    items = "".join(
        f'<li data-kind="{escape(g.kind or g.source)}" data-source="{escape(g.source)}">'
        f"{escape(g.kind or g.source)}{': ' + escape(g.item) if g.item else ''} "
        f"[{', '.join(f'{v:.2f}' for v in g.box)}]</li>"
        for g in r.regions
    )
    d = r.best.drift
    said = ""
    if d is not None and (d.inside is not None or d.outside is not None):
        said = (
            f"<p>drift inside the boxes {num(d.inside)}, outside them {num(d.outside)} "
            "(1 - SSIM)</p>"
        )
    return (
        f'<details class="regions" open><summary>the edit was restricted to '
        f"{len(r.regions)} box(es)</summary><ul>{items}</ul>{said}{note}</details>"
    )


def _photos_html(r: Round) -> str:
    """The real photos a reference-guided round's request carried, each with its cosine
    to what the round adds and its attribution."""
    if not r.reference_photos:
        return ""
    figs = []
    for p in r.reference_photos:
        said = ", ".join(
            f"{k} {v}"
            for k, v in p.attribution.items()
            if k in ("license", "licence", "author", "url", "page", "title")
        )
        caption = f"cosine {p.similarity:.3f} to what it adds" + (f"; {said}" if said else "")
        picture = image_tag(Path(p.file), caption) if Path(p.file).is_file() else ""
        figs.append(
            f'<figure class="photo">{picture}<figcaption>{escape(Path(p.file).name)}: '
            f"{escape(caption)} ({escape(p.origin)})</figcaption></figure>"
        )
    return (
        f'<details class="photos" open><summary>{len(figs)} real photo(s) sent with the '
        f'request</summary><div class="imgs">{"".join(figs)}</div></details>'
    )


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
        f"change(s)</summary><ul>{items}</ul></details>{_hints_html(r)}"
    )


def _hints_html(r: Round) -> str:
    """The past fixes the writer was given (--memory)."""
    if not r.hints:
        return ""
    items = "".join(
        f'<li data-run="{escape(h.run)}" data-round="{h.round}">{escape(h.kind)} '
        f"{escape(h.dimension)}: {escape(h.descriptor)} ({escape(h.activity)}, FAITH "
        f"{num(h.faith_gain)}, run {escape(h.run)} round {h.round}): "
        f"<q>{escape(' '.join(h.instruction.split()))}</q></li>"
        for h in r.hints
    )
    return (
        f'<details class="hints"><summary>{len(r.hints)} past fix(es) given to the writer '
        f"(--memory)</summary><ul>{items}</ul></details>"
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
    exag = views.scores_made_by(run.rounds[0].best.scores) if run.rounds else "-"
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
            errors=views.metric_errors(run),
        )
        if run.rounds
        else "<p>no round finished</p>"
    )
    error = f'<p class="hallucinated">error: {escape(run.error)}</p>' if run.error else ""
    if run.rounds:  # what each round fixed and lost, descriptor by descriptor
        chart += f"<h3>what each round fixed and lost</h3>{timeline_html(run)}"
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
        f"{chart}{_references_html(run)}"
        + "".join(_round_html(run, r, run_dir) for r in run.rounds)
        # rounds the model refused: asked for, nothing made
        + "".join(f'<p class="refused">{escape(x.describe())}</p>' for x in run.refused)
        + "</section>"
    )


def render_run(run_dir: str | Path) -> str:

    run_dir = Path(run_dir).resolve()
    run = RunStore(run_dir).load()
    title = f"Refinement run: {run.spec.activity} - {run.references.country}"
    return document(title, run_section(run, run_dir))
