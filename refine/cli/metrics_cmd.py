"""``refine metrics ...``: score descriptor sets and embeddings from files."""

from __future__ import annotations

from pathlib import Path

import typer

from metrics import ahead
from refine.backends import create
from refine.cli.inputs import UserInputError, json_option, show
from refine.evaluate import file_scores
from refine.io.inputs import (
    load_exag,
    load_labels,
    load_matrix,
    load_preds,
    load_refs,
    load_vector,
    parse_order,
)
from refine.present.terminal import scores as lines

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
    as_json: bool = json_option(),
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

    doc = file_scores.ahead_document(ref_map, pred_maps, text_embedder, tau, mode, exag_score)
    show(doc, lines.ahead_document_lines, as_json)


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
    as_json: bool = json_option(),
) -> None:
    """Vendi score: the effective number of distinct items (1 = all identical, n = all distinct).

    With --quality: qvendi = mean quality x vendi, and qvendi_per_item = qvendi / n.
    """

    if (embeddings is None) == (kernel is None):
        raise UserInputError("give exactly one of --embeddings X.npy or --kernel K.npy")
    order = parse_order(q)
    path, what = (embeddings, "embeddings") if embeddings is not None else (kernel, "kernel")
    matrix = load_matrix(path, what)
    s = None
    if quality is not None:
        s = load_vector(quality, "quality")
        if s.shape[0] != matrix.shape[0]:
            raise UserInputError(
                f"{quality}: quality has {s.shape[0]} values for {matrix.shape[0]} items"
            )
    payload = file_scores.vendi_document(matrix, kernel is not None, order, s, path)
    show(payload, lines.vendi_lines, as_json)


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
    as_json: bool = json_option(),
) -> None:
    """Surface-over-Semantics: cos(culture centroid, e) - cos(language centroid, e) per image.

    Positive: the image follows its culture; negative: the prompt's language dominates.
    Without --bank the centroids are built from the given embeddings.
    """

    e = load_matrix(embeddings, "embeddings")
    cultures, languages = load_labels(labels, e.shape[0])
    doc = file_scores.sos_document(e, cultures, languages, bank, save_bank, embeddings)
    show(doc, lines.sos_lines, as_json)


@metrics_app.command("caire-diversity")
def caire_diversity_cmd(
    scores: Path = typer.Option(
        ...,
        "--scores",
        help='SCORES.json: {"labels": [...], "scores": [[1-5 per label] per image]}.',
    ),
    as_json: bool = json_option("the summary"),
) -> None:
    """CAIRE over a set of images: mean score per label, coverage (share of labels some
    image rates 4 or more) and the pairwise Jensen-Shannon distance between the images'
    score rows normalised to sum 1 (natural log): mean, population std, min, max."""

    show(file_scores.caire_diversity_document(scores), lines.diversity_lines, as_json)
