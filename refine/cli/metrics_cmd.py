"""``refine metrics ...``: score descriptor sets and embeddings from files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer

from metrics import ahead, vendi
from metrics.ahead import faithfulness
from metrics.caire import diversity
from metrics.catalog import CATALOG
from metrics.sos import SosBank, mean_by_pair
from refine.backends import create
from refine.cli.caire_cmd import _print_diversity
from refine.cli.inputs import (
    UserInputError,
    load_exag,
    load_json,
    load_labels,
    load_matrix,
    load_preds,
    load_refs,
    load_vector,
    parse_order,
)

metrics_app = typer.Typer(
    help=(
        "Score from files, no image models needed: 'ahead' (ALIGN, HAL, EXAG, FAITH, DDIV, "
        "SDIV of descriptor sets), 'vendi' (diversity of embeddings or a kernel), "
        "'sos' (surface-over-semantics of labelled image embeddings), 'caire-diversity' "
        "(the spread of CAIRE 1-5 scores over images)."
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _emit_json(payload: Any) -> None:
    typer.echo(json.dumps(payload, ensure_ascii=False, indent=2, allow_nan=False))


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(float(x), digits)


def _match_dict(m) -> dict[str, Any]:
    return {
        "dimension": m.dimension,
        "phrase": m.phrase,
        "status": m.status,
        "best_match": m.best_match,
        "similarity": _round(m.similarity),
    }


def _score_dict(score, exag=None, image: int | None = None) -> dict[str, Any]:

    out: dict[str, Any] = {"align": score.align, "hal": score.hal}
    feedback: dict[str, Any] = {
        "references": [_match_dict(m) for m in score.references],
        "predictions": [_match_dict(m) for m in score.predictions],
    }
    if exag is not None:
        value = exag.value if image is None else exag.per_image[image]
        ranked = exag.exaggerated_overall() if image is None else exag.exaggerated(image)
        out["exag"] = value
        out["faith"] = faithfulness(score.align, score.hal, value)
        feedback["exaggerated"] = [{"candidate": c, "excess": _round(e)} for c, e in ranked]
    out["per_dimension"] = {
        dim: {
            "align": s.align,
            "hal": s.hal,
            "n_references": s.n_references,
            "n_predictions": s.n_predictions,
        }
        for dim, s in score.per_dimension.items()
    }
    out["feedback"] = feedback
    return out


def _print_score(title: str, d: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()

    head = ", ".join(f"{m.label} {d[k]:.3f}" for k, m in CATALOG.items() if d.get(k) is not None)
    console.print(f"[bold]{title}[/bold]  {head}")
    table = Table("dimension", "ALIGN", "HAL", "refs", "preds")
    for dim, s in d["per_dimension"].items():
        if s["align"] is None:
            continue
        table.add_row(
            dim,
            f"{s['align']:.2f}",
            f"{s['hal']:.2f}",
            str(s["n_references"]),
            str(s["n_predictions"]),
        )
    console.print(table)
    fb = d["feedback"]
    missing = [m["phrase"] for m in fb["references"] if m["status"] == "missing"]
    hallucinated = [m["phrase"] for m in fb["predictions"] if m["status"] == "hallucinated"]
    if missing:
        console.print("[yellow]missing:[/yellow] " + "; ".join(missing))
    if hallucinated:
        console.print("[red]hallucinated:[/red] " + "; ".join(hallucinated))
    if fb.get("exaggerated"):
        console.print(
            "[magenta]exaggerated:[/magenta] "
            + "; ".join(f"{e['candidate']} (+{e['excess']:.2f})" for e in fb["exaggerated"])
        )


@metrics_app.command("ahead")
def ahead_cmd(
    refs: Path = typer.Option(..., "--refs", help="REFS.json: {dimension: [phrase, ...]}."),
    preds: Path = typer.Option(
        ..., "--preds", help="PREDS.json: a list with one {dimension: [phrase, ...]} per image."
    ),
    tau: float = typer.Option(0.52, "--tau", help="Match threshold on cosine similarity."),
    mode: str = typer.Option(
        "multi", "--mode", help="'single' scores each image; 'multi' pools predictions."
    ),
    exag: Path | None = typer.Option(
        None,
        "--exag",
        help='EXAG.json: {"candidates": [...], "scores": [[...] per image], "baseline": [...]}.',
    ),
    embedder: str = typer.Option(
        "st:all-MiniLM-L6-v2", "--embedder", help="Text embedder backend name."
    ),
    device: str | None = typer.Option(None, "--device", help="cuda, cpu, ... (default: auto)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """AHEaD scores of observed descriptors against reference descriptors.

    Dimensions: setting, objects, attire, interaction, spatial. A reference is aligned
    when its best match is above tau; a prediction is hallucinated when its best match
    is at or below tau. With --exag, EXAG and FAITH = mean(ALIGN, 1-HAL, 1-EXAG).
    """

    if mode not in ("single", "multi"):
        raise UserInputError(f"--mode: expected 'single' or 'multi', got {mode!r}")
    try:
        ahead.check_tau(tau)
    except ValueError as err:
        raise UserInputError(f"--tau: {err}") from None
    ref_map = load_refs(refs)
    pred_maps = load_preds(preds)
    exag_score = None
    if exag is not None:
        candidates, scores, baseline = load_exag(exag, len(pred_maps))
        exag_score = ahead.exaggeration(scores, baseline, candidates)
    try:
        text_embedder = create("text_embedder", embedder, device=device)
    except ValueError as err:
        raise UserInputError(f"--embedder: {err}") from err
    try:
        _ = text_embedder.device  # an unusable --device is reported here, before any work
    except ValueError as err:
        raise UserInputError(f"--device: {err}") from err

    common = {"tau": tau, "mode": mode, "embedder": text_embedder.id, "n_images": len(pred_maps)}
    if mode == "single":
        scores_ = ahead.score_images(ref_map, pred_maps, text_embedder, tau)
        payload = {
            **common,
            "images": [_score_dict(s, exag_score, i) for i, s in enumerate(scores_)],
        }
        if as_json:
            _emit_json(payload)
        else:
            for i, d in enumerate(payload["images"]):
                _print_score(f"image {i}", d)
        return

    multi = ahead.score_pooled(ref_map, pred_maps, text_embedder, tau)
    d = _score_dict(multi.pooled, exag_score)
    if multi.ddiv is not None:
        d["ddiv"] = multi.ddiv
        d["sdiv"] = multi.sdiv
        for dim, s in d["per_dimension"].items():
            if dim in multi.ddiv_per_dimension:
                s["ddiv"] = multi.ddiv_per_dimension[dim]
                s["sdiv"] = multi.sdiv_per_dimension[dim]
    # keep feedback last for readability
    d["feedback"] = d.pop("feedback")
    payload = {**common, **d}
    if as_json:
        _emit_json(payload)
    else:
        _print_score(f"{len(pred_maps)} image(s) pooled", payload)


@metrics_app.command("vendi")
def vendi_cmd(
    embeddings: Path | None = typer.Option(
        None, "--embeddings", help="X.npy: [items x dims]; the cosine kernel is used."
    ),
    kernel: Path | None = typer.Option(
        None, "--kernel", help="K.npy: [items x items] symmetric similarity, ones on the diagonal."
    ),
    q: str = typer.Option("1", "--q", help="Order: 1 (Shannon), any q >= 0, or 'inf'."),
    quality: Path | None = typer.Option(
        None, "--quality", help="S.npy: one quality score per item (quality-weighted Vendi)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Vendi score: the effective number of distinct items (1 = all identical, n = all distinct).

    With --quality: qvendi = mean quality x vendi, and qvendi_per_item = qvendi / n.
    """

    if (embeddings is None) == (kernel is None):
        raise UserInputError("give exactly one of --embeddings X.npy or --kernel K.npy")
    order = parse_order(q)
    path, what, score = (
        (embeddings, "embeddings", vendi.vendi_from_embeddings)
        if embeddings is not None
        else (kernel, "kernel", vendi.vendi_from_kernel)
    )
    matrix = load_matrix(path, what)
    try:
        value = score(matrix, order)
    except ValueError as err:
        raise UserInputError(f"{path}: {err}") from err
    n = matrix.shape[0]
    payload: dict[str, Any] = {"vendi": value, "q": "inf" if math.isinf(order) else order, "n": n}
    if quality is not None:
        s = load_vector(quality, "quality")
        if s.shape[0] != n:
            raise UserInputError(f"{quality}: quality has {s.shape[0]} values for {n} items")
        payload["qvendi"] = vendi.quality_weighted(value, s)
        payload["qvendi_per_item"] = payload["qvendi"] / n
    if as_json:
        _emit_json(payload)
    else:
        line = f"Vendi (q={payload['q']}) over {n} items: {value:.4f}"
        if "qvendi" in payload:
            per_item = payload["qvendi_per_item"]
            line += f"; quality-weighted {payload['qvendi']:.4f} ({per_item:.4f}/item)"
        typer.echo(line)


@metrics_app.command("sos")
def sos_cmd(
    embeddings: Path = typer.Option(..., "--embeddings", help="E.npy: [images x dims]."),
    labels: Path = typer.Option(
        ..., "--labels", help="L.csv with columns culture,language; one row per embedding."
    ),
    bank: Path | None = typer.Option(
        None, "--bank", help="Score against the centroids of this saved bank (.npz)."
    ),
    save_bank: Path | None = typer.Option(
        None, "--save-bank", help="Write the centroids built from these embeddings here (.npz)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Surface-over-Semantics: cos(culture centroid, e) - cos(language centroid, e) per image.

    Positive: the image follows its culture; negative: the prompt's language dominates.
    Without --bank the centroids are built from the given embeddings.
    """

    e = load_matrix(embeddings, "embeddings")
    cultures, languages = load_labels(labels, e.shape[0])
    built = None
    if bank is None or save_bank is not None:
        try:
            built = SosBank.build(e, cultures, languages)
        except ValueError as err:
            raise UserInputError(f"{embeddings}: {err}") from err
    if bank is not None:
        if not bank.exists():
            raise UserInputError(f"{bank}: file not found")
        try:
            used = SosBank.load(bank)
        except (ValueError, OSError) as err:
            raise UserInputError(f"{bank}: not a readable SoS bank ({err})") from err
    else:
        used = built
    try:
        per_image = used.score(e, cultures, languages)
    except ValueError as err:
        raise UserInputError(f"{bank or embeddings}: {err}") from err
    pairs = mean_by_pair(per_image, cultures, languages)
    counts: dict[tuple[str, str], int] = {}
    for key in zip(cultures, languages, strict=True):
        counts[key] = counts.get(key, 0) + 1
    if save_bank is not None:
        try:
            built.save(save_bank)
        except OSError as err:
            raise UserInputError(f"{save_bank}: cannot write the bank ({err.strerror})") from err
    payload = {
        "images": [
            {"culture": c, "language": lang, "sos": float(v)}
            for c, lang, v in zip(cultures, languages, per_image.tolist(), strict=True)
        ],
        "pairs": [
            {"culture": c, "language": lang, "sos": v, "n": counts[(c, lang)]}
            for (c, lang), v in pairs.items()
        ],
        "bank": str(bank) if bank else None,
        "saved_bank": str(save_bank) if save_bank else None,
    }
    if as_json:
        _emit_json(payload)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("culture", "language", "images", "mean SoS")
    for p in payload["pairs"]:
        table.add_row(p["culture"], p["language"], str(p["n"]), f"{p['sos']:+.4f}")
    Console().print(table)
    if save_bank:
        typer.echo(f"bank written to {save_bank}")


@metrics_app.command("caire-diversity")
def caire_diversity_cmd(
    scores: Path = typer.Option(
        ...,
        "--scores",
        help='SCORES.json: {"labels": [...], "scores": [[1-5 per label] per image]}.',
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """CAIRE over a set of images: mean score per label, coverage (share of labels some
    image rates 4 or more) and the pairwise Jensen-Shannon distance between the images'
    score rows normalised to sum 1 (natural log): mean, population std, min, max."""

    doc = load_json(scores)
    if not isinstance(doc, dict) or "labels" not in doc or "scores" not in doc:
        raise UserInputError(f'{scores}: expected {{"labels": [...], "scores": [[...], ...]}}')
    labels, rows = doc["labels"], doc["scores"]
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise UserInputError(f"{scores}: 'labels' must be a list of strings")
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise UserInputError(f"{scores}: 'scores' must be a list of rows, one per image")
    for n, row in enumerate(rows):
        if len(row) != len(labels):
            raise UserInputError(
                f"{scores}: scores[{n}] has {len(row)} values for {len(labels)} labels"
            )
        bad = [
            v
            for v in row
            if isinstance(v, bool) or not isinstance(v, int | float) or not 1 <= v <= 5
        ]
        if bad:
            raise UserInputError(f"{scores}: scores[{n}] holds {bad[0]!r}; scores lie in 1..5")
    try:
        summary = diversity(labels, rows)
    except ValueError as err:
        raise UserInputError(f"{scores}: {err}") from err
    if as_json:
        _emit_json(summary)
        return
    _print_diversity(summary)
