"""``refine agree``'s lines: the correlations per metric and question, the raters'
agreement and the groups."""

from __future__ import annotations

from typing import Any

from refine.numbers import shown

SHOWN_RATERS = 12  # raters named on the terminal (CulturalFrames has about 10,400)


def agreement_lines(
    result: Any, doc: dict[str, Any], shown_raters: int = SHOWN_RATERS
) -> list[str]:
    """``refine agree`` on the terminal: the raters, the alphas, the correlation table and
    the rankings, then the human-human ceiling, the paired differences, Fleiss' kappa and
    the groups."""
    lines: list[str] = []
    named = ", ".join(result.raters[:shown_raters])
    more = len(result.raters) - shown_raters
    lines.append(
        f"{result.images} images, {len(result.raters)} raters: {named}"
        + (f" and {more} more (agree.json names them)" if more > 0 else "")
    )
    for note in result.notes():
        lines.append(f"  note: {note}")
    for q, a in result.alpha.items():
        alphas = " ".join(
            f"{level} {shown(v)}"
            for level, v in (("interval", a), ("ordinal", result.alpha_ordinal.get(q)))
        )
        lines.append(f"  Krippendorff's alpha ({q}): {alphas}")
    if result.table:
        lines.append(
            f"{'metric':13} {'question':17} {'n':>4} {'Spearman':>9} {'Kendall':>8} {'Pearson':>8}"
        )
    for m, by_q in result.table.items():
        for q, row in by_q.items():
            figs = " ".join(shown(row[s], "+.3f", 8) for s in ("spearman", "kendall", "pearson"))
            lines.append(f"{m:13} {q:17} {row['n']:>4} {figs}")
    for q, ranked in doc["ranking"].items():
        lines.append(f"ranked by agreement with people ({q}, Spearman in the agreeing direction):")
        for e in ranked:
            iv = e["interval"]
            span = f" [{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else ""
            lines.append(
                f"  {e['rank']:>2}. {e['metric']:24} {shown(e['agreement'], '+.3f', 7)}{span}"
            )
    return lines + _extras(result)


def _interval(iv: Any) -> str:
    return f" [{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else ""


def _extras(result: Any) -> list[str]:
    """The human-human ceiling, the paired differences, Fleiss' kappa and the groups."""
    lines: list[str] = []
    for q, c in result.ceiling.items():
        over = (
            f"over {len(c['raters'])} raters"
            if c["raters"]
            else f"pooled over {c['pooled']['n']} ratings (no rater rated two images)"
        )
        lines.append(
            f"human-human ceiling ({q}, each rater against the others' mean): Spearman "
            f"{shown(c['spearman'], '+.3f')} {over}"
        )
    for q, k in result.kappa.items():
        lines.append(
            f"Cohen's weighted kappa ({q}), mean over rater pairs: {shown(k['mean'], '.3f')}"
        )
        if "between_groups" in k:
            g = k["between_groups"]
            n = sum(c["kappa"] is not None for c in g["countries"].values())
            lines.append(
                f"  between the two annotator groups (AHEaD A.4: per country, each image's "
                f"first rater against its second; {g['weights']} weights, the paper states "
                f"none), the mean over {n} countries: {shown(g['mean'], '.3f')}"
            )
    for d in result.differences:
        if d["difference"] is not None:
            lines.append(
                f"{d['metric']} - {d['versus']} ({d['question']}, Spearman, {d['n']} images): "
                f"{d['difference']:+.3f}{_interval(d['interval'])}"
            )
    asked = getattr(result, "matrix", {}).get("answers")
    if asked:  # people's answers against each other (CulturalFrames Sec. 3.3, AHEaD Fig. 5a)
        names = asked["questions"]
        for k, a in enumerate(names):
            for j in range(k + 1, len(names)):
                r, i = asked["over_ratings"][k][j], asked["over_images"][k][j]
                lines.append(
                    f"{a} against {names[j]} (people's answers, Spearman): "
                    f"{shown(r['spearman'], '+.3f')} over {r['n']} ratings, "
                    f"{shown(i['spearman'], '+.3f')} over {i['n']} images' mean answers"
                )
    for q, f in result.fleiss.items():
        tendency = ", ".join(f"{k} {v}" for k, v in sorted(f.get("tendency", {}).items()))
        lines.append(
            f"Fleiss' kappa ({q}, {f['images']} images): {shown(f['kappa'], '.3f')}"
            + (f"; the majority's tendency: {tendency}" if tendency else "")
        )
    for by, groups in result.by.items():
        lines.append(f"by {by}:")
        for key, g in groups.items():
            alpha = _alphas(g.get("alpha_ordinal", {}), g["alpha"])
            if "alpha_pooled" in g:  # a region: its countries' mean, then pooled
                pooled = _alphas(g.get("alpha_ordinal_pooled", {}), g["alpha_pooled"])
                alpha = f"{alpha} (mean of its countries'; pooled {pooled})"
            human = " ".join(
                f"{q} {shown(c['spearman'], '+.3f')}" for q, c in g.get("ceiling", {}).items()
            )
            lines.append(
                f"  {key}: {g['images']} images, ordinal alpha {alpha or '-'}"
                + (f", human-human {human}" if human else "")
            )
            scores = " ".join(
                f"{q} {s['mean']:.2f} ({shown(s['sd'], '.2f')})"
                for q, s in g.get("scores", {}).items()
            )
            if scores:
                lines.append(f"    answers, mean (SD): {scores}")
            for m, by_q in g["metrics"].items():
                for q, row in by_q.items():
                    lines.append(
                        f"    {m:13} {q:17} n {row['n']:>3} Spearman "
                        f"{shown(row['spearman'], '+.3f')}{_interval(row['spearman_interval'])}"
                    )
            for note in g["notes"]:
                lines.append(f"    note: {note}")
    return lines


def _alphas(ordinal: dict[str, Any], interval: dict[str, Any]) -> str:
    """A group's alphas: the ordinal (AHEaD's, for its 1-5 answers), the interval beside."""
    return " ".join(
        f"{q} {shown(ordinal.get(q), '.3f')} (interval {shown(a, '.3f')})"
        for q, a in interval.items()
    )
