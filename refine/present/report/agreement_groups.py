"""The agreement page's sections beyond the pooled table (:mod:`refine.human.groups`):
agreement per group, the human-human ceiling, the raters' kappas, the paired differences
between metrics, Fleiss' kappa of nominal answers, and the metric-metric matrix."""

from __future__ import annotations

from typing import Any

from refine.numbers import MISSING
from refine.present.html import escape, num, raw


def fig(v: float | None, iv: Any = None) -> str:
    if v is None:
        return MISSING
    return f"{v:+.3f}" + (f" [{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else "")


def groups_html(result: Any) -> str:
    """One table per grouping: each group's images, alphas and correlations."""
    out = []
    for by, groups in getattr(result, "by", {}).items():
        rows = []
        for key, g in groups.items():
            note = " (rough: under 30 images)" if g["notes"] else ""
            alpha = _alphas(g.get("alpha_ordinal", {}), g["alpha"])
            if "alpha_pooled" in g:  # a region: its countries' mean, then pooled
                pooled = _alphas(g.get("alpha_ordinal_pooled", {}), g["alpha_pooled"])
                alpha = f"{alpha} (mean of its countries'; pooled: {pooled})"
            human = "; ".join(
                f"{escape(q)} {fig(c.get('spearman'))}" for q, c in g.get("ceiling", {}).items()
            )
            if human:
                alpha += f" (human-human: {human})"
            lead = (
                f"<td>{escape(key)}{escape(note)}</td><td>{g['images']}</td>"
                f"<td>{alpha or MISSING}</td>"
            )
            for m, by_q in g["metrics"].items():
                for q, row in by_q.items():
                    rows.append(
                        f'<tr data-by="{escape(by)}" data-group="{escape(key)}">{lead}'
                        f"<td>{escape(m)}</td><td>{escape(q)}</td><td>{row['n']}</td>"
                        f'<td data-value="{raw(row["spearman"])}">'
                        f"{fig(row['spearman'], row['spearman_interval'])}</td></tr>"
                    )
                    lead = "<td></td><td></td><td></td>"
            if lead.startswith("<td>"):  # a group with no metric
                rows.append(f"<tr>{lead}<td colspan=4>{MISSING}</td></tr>")
        out.append(
            f"<h2>By {escape(by)}</h2><table><tr><th>{escape(by)}</th><th>images</th>"
            "<th>alpha: ordinal (interval)</th><th>metric</th><th>question</th><th>n</th>"
            f"<th>Spearman</th></tr>{''.join(rows)}</table>"
        )
    return "".join(out)


def _alphas(ordinal: dict[str, Any], interval: dict[str, Any]) -> str:
    """A group's alphas: the ordinal (AHEaD's, for its 1-5 answers), the interval beside."""
    return "; ".join(f"{escape(q)} {num(ordinal.get(q))} ({num(a)})" for q, a in interval.items())


def _pooled(c: dict[str, Any]) -> str:
    """The raters' cell of a ceiling pooled over ratings (no rater rated two images)."""
    return f"none named; pooled over {c['pooled']['n']} ratings"


def extras_html(result: Any) -> str:
    """The ceiling, the kappas, the paired differences, Fleiss' kappa and the matrix."""
    parts = []
    ceiling = getattr(result, "ceiling", {})
    if ceiling:
        rows = "".join(
            f"<tr><td>{escape(q)}</td><td>{len(c['raters']) or escape(_pooled(c))}</td>"
            f"<td>{fig(c['spearman'])}</td>"
            f"<td>{fig(c['kendall'])}</td><td>{fig(c['pearson'])}</td></tr>"
            for q, c in ceiling.items()
        )
        parts.append(
            '<h2>Human-human ceiling</h2><p class="muted">Each rater against the mean of '
            "the other raters on the images they share, averaged over raters.</p><table><tr>"
            "<th>question</th><th>raters</th><th>Spearman</th><th>Kendall tau-b</th>"
            f"<th>Pearson</th></tr>{rows}</table>"
        )
    kappa = getattr(result, "kappa", {})
    if kappa:
        rows = "".join(
            f"<tr><td>{escape(q)}</td><td>{escape(pair)}</td><td>{p['n']}</td>"
            f"<td>{num(p['kappa'])}</td></tr>"
            for q, k in kappa.items()
            for pair, p in k["pairs"].items()
        )
        parts.append(
            "<h2>Cohen's weighted kappa between raters</h2><table><tr><th>question</th>"
            f"<th>raters</th><th>images</th><th>kappa (quadratic)</th></tr>{rows}</table>"
        )
    diffs = [d for d in getattr(result, "differences", []) if d["difference"] is not None]
    if diffs:
        rows = "".join(
            f"<tr><td>{escape(d['metric'])} - {escape(d['versus'])}</td>"
            f"<td>{escape(d['question'])}</td><td>{d['n']}</td>"
            f"<td>{fig(d['difference'], d['interval'])}</td></tr>"
            for d in diffs
        )
        parts.append(
            '<h2>Paired differences</h2><p class="muted">How much better one metric\'s '
            "Spearman correlation with people is than another's on the same images, with the "
            "paired bootstrap's 95% interval.</p><table><tr><th>metrics</th><th>question</th>"
            f"<th>images</th><th>difference</th></tr>{rows}</table>"
        )
    fleiss = getattr(result, "fleiss", {})
    if fleiss:
        rows = "".join(
            f"<tr><td>{escape(q)}</td><td>{f['images']}</td><td>{num(f['kappa'])}</td><td>"
            + escape(", ".join(f"{k} {v}" for k, v in sorted(f.get("tendency", {}).items())))
            + "</td></tr>"
            for q, f in fleiss.items()
        )
        parts.append(
            "<h2>Nominal answers</h2><table><tr><th>question</th><th>images</th>"
            f"<th>Fleiss' kappa</th><th>the majority's tendency</th></tr>{rows}</table>"
        )
    matrix = getattr(result, "matrix", {})
    if matrix.get("metrics"):
        names = matrix["metrics"]
        head = "".join(f"<th>{escape(n)}</th>" for n in names)
        rows = "".join(
            f"<tr><th>{escape(a)}</th>"
            + "".join(f"<td>{num(v)}</td>" for v in matrix["spearman"][k])
            + "</tr>"
            for k, a in enumerate(names)
        )
        parts.append(
            "<h2>Metric against metric (Spearman)</h2>"
            f"<table><tr><th></th>{head}</tr>{rows}</table>"
        )
    asked = matrix.get("answers")
    if asked:
        names = asked["questions"]
        head = "".join(f"<th>{escape(n)}</th>" for n in names)
        rows = "".join(
            f"<tr><th>{escape(a)}</th>"
            + "".join(
                f"<td>{num(r['spearman'])} / {num(i['spearman'])}</td>"
                for r, i in zip(asked["over_ratings"][k], asked["over_images"][k], strict=True)
            )
            + "</tr>"
            for k, a in enumerate(names)
        )
        parts.append(
            "<h2>Question against question: people's answers (Spearman)</h2>"
            '<p class="muted">Over the ratings that answer both / over the images\' mean '
            "answers (CulturalFrames Sec. 3.3 and AHEaD Fig. 5a do not say which).</p>"
            f"<table><tr><th></th>{head}</tr>{rows}</table>"
        )
    return "".join(parts)
