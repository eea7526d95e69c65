"""The terminal lines of scores: ``refine metrics``' AHEaD, Vendi, SoS and CAIRE spread,
``refine caire score`` and ``evaluate``, and ``refine calibrate-tau``'s distribution."""

from __future__ import annotations

from typing import Any

from metrics.catalog import CATALOG

BINS = 10


def table_lines(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns as wide as their widest cell; the first left-aligned, the others right."""
    widths = [max(len(str(r[k])) for r in [header, *rows]) for k in range(len(header))]

    def line(row: list[str]) -> str:
        cells = [str(c).ljust(w) if k == 0 else str(c).rjust(w) for k, (c, w) in
                 enumerate(zip(row, widths, strict=True))]  # fmt: skip
        return "  ".join(cells).rstrip()

    return [line(header), *(line(r) for r in rows)]


def ahead_lines(title: str, d: dict[str, Any]) -> list[str]:
    """One image's (or the pooled) AHEaD document of ``refine metrics ahead``: the
    figures, ALIGN and HAL per dimension, and what is missing, hallucinated and
    exaggerated."""
    head = ", ".join(f"{m.label} {d[k]:.3f}" for k, m in CATALOG.items() if d.get(k) is not None)
    rows = [
        [dim, f"{s['align']:.2f}", f"{s['hal']:.2f}", str(s["n_references"]),
         str(s["n_predictions"])]
        for dim, s in d["per_dimension"].items()
        if s["align"] is not None
    ]  # fmt: skip
    lines = [f"{title}  {head}", *table_lines(["dimension", "ALIGN", "HAL", "refs", "preds"], rows)]
    fb = d["feedback"]
    missing = [m["phrase"] for m in fb["references"] if m["status"] == "missing"]
    hallucinated = [m["phrase"] for m in fb["predictions"] if m["status"] == "hallucinated"]
    if missing:
        lines.append("missing: " + "; ".join(missing))
    if hallucinated:
        lines.append("hallucinated: " + "; ".join(hallucinated))
    if fb.get("exaggerated"):
        shown = "; ".join(f"{e['candidate']} (+{e['excess']:.2f})" for e in fb["exaggerated"])
        lines.append("exaggerated: " + shown)
    return lines


def ahead_document_lines(doc: dict[str, Any]) -> list[str]:
    """``refine metrics ahead``'s document: each image's, or the pooled."""
    if doc["mode"] == "single":
        return [x for i, d in enumerate(doc["images"]) for x in ahead_lines(f"image {i}", d)]
    return ahead_lines(f"{doc['n_images']} image(s) pooled", doc)


def vendi_lines(doc: dict[str, Any]) -> list[str]:
    line = f"Vendi (q={doc['q']}) over {doc['n']} items: {doc['vendi']:.4f}"
    if "qvendi" in doc:
        line += f"; quality-weighted {doc['qvendi']:.4f} ({doc['qvendi_per_item']:.4f}/item)"
    return [line]


def sos_lines(doc: dict[str, Any]) -> list[str]:
    """Mean SoS per (culture, language) of ``refine metrics sos``."""
    rows = [[p["culture"], p["language"], str(p["n"]), f"{p['sos']:+.4f}"] for p in doc["pairs"]]
    lines = table_lines(["culture", "language", "images", "mean SoS"], rows)
    return lines + ([f"bank written to {doc['saved_bank']}"] if doc["saved_bank"] else [])


def diversity_lines(d: dict[str, Any]) -> list[str]:
    """CAIRE's spread over images (:func:`metrics.caire.diversity`)."""
    covered = f" ({', '.join(d['covered_labels'])})" if d["covered_labels"] else ""
    lines = [
        "",
        f"over {d['images']} image(s):",
        *(f"  mean {label}: {mean:.2f}" for label, mean in d["mean_per_label"].items()),
        f"  coverage (labels some image rates 4+): {d['coverage']:.2f}{covered}",
    ]
    if d["pairs"]:
        lines.append(
            f"  Jensen-Shannon distance over {d['pairs']} pairs: mean {d['js_mean']:.4f}, "
            f"std {d['js_std']:.4f}, min {d['js_min']:.4f}, max {d['js_max']:.4f}"
        )
    else:
        lines.append("  Jensen-Shannon distance: needs two images or more")
    return lines


def caire_score_lines(results: list[Any], mode: str, top_k: int, doc: dict) -> list[str]:
    """Each image's 1-5 rating per label (a bar), its linked entity and, with the
    log-likelihood, the most relevant label; then the spread over the images."""
    lines = [f"CAIRE relevance 1-5, mode: {mode}, judge: {results[0].judge}"]
    width = max(len(s.label) for s in results[0].labels)
    for r in results:
        lines += ["", str(r.image)]
        if r.entity:
            lines.append(
                f"  linked to {r.entity['name']} ({r.ranking} {r.entity['score']:.3f}, "
                f"{r.entity['hits']} of the top {top_k} images)"
            )
        for s in r.labels:
            bar = "#" * s.score
            ll = "" if s.debiased is None else f"  debiased NLL {s.debiased:.3f}"
            said = f"  {s.label:<{width}}  {s.score}  {bar:<5}  expected {s.expected:.2f}"
            lines.append(said + ll)
        if r.loglik:
            lines.append(f"  most relevant by log-likelihood: {r.loglik['best']}")
    return lines + diversity_lines(doc["diversity"])


def caire_evaluate_lines(result: dict[str, Any]) -> list[str]:
    """F1, precision and recall per threshold of ``refine caire evaluate``."""

    def pct(v: float | None) -> str:
        return "  -  " if v is None else f"{v:.2f}"

    lines = [
        f"{result['images']} images x {len(result['labels'])} labels; relevant when the score "
        "reaches t",
        f"{'threshold':>9} {'F1':>5} {'P':>5} {'R':>5}",
    ]
    for t, r in result["thresholds"].items():
        lines.append(f"{t:>9} {pct(r['f1']):>5} {pct(r['precision']):>5} {pct(r['recall']):>5}")
    return lines


def histogram(values: list[float], bins: int = BINS, width: int = 40) -> list[str]:
    """A text histogram of similarities, one line per bin: ``0.60-0.70 ####### 12``."""
    import numpy as np

    counts, edges = np.histogram(np.asarray(values), bins=bins, range=(min(values), max(values)))
    top = max(int(counts.max()), 1)
    return [
        f"{edges[i]:.2f}-{edges[i + 1]:.2f} {'#' * round(width * c / top):<{width}} {c}"
        for i, c in enumerate(counts.tolist())
    ]


def tau_lines(doc: dict[str, Any]) -> list[str]:
    """``refine calibrate-tau``'s value, its distribution and what it wrote."""
    sims = doc["similarities"]
    lines = [
        f"tau = {doc['tau']:.4f} (q={doc['q']:g} of {len(sims)} similarities, observer "
        f"{doc['observer']})",
        *(f"  {line}" for line in histogram(sims)),
    ]
    if doc["profile"]:
        lines.append(f"profile written: {doc['profile']} (use --profile {doc['profile']})")
    if doc["html"]:
        lines.append(f"distribution: {doc['html']}")
    return lines
