"""``refine caire``: build and inspect knowledge bases, score images' cultural relevance."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from metrics.caire import diversity
from refine.backends.selection import Backends
from refine.cli.inputs import UserInputError, backends_for, show
from refine.evaluate.caire.kb import KBError, KnowledgeBase, read_source
from refine.evaluate.caire.scorer import CaireScorer, parse_labels, scores_document
from refine.io.inputs import load_images
from refine.present.terminal import records as lines
from refine.present.terminal import scores as scores_lines
from refine.profiles import load_profile

caire_app = typer.Typer(
    help=(
        "CAIRE cultural relevance: 'kb build' and 'kb info' make and describe knowledge "
        "bases of entities (names, texts, images); 'score' rates images 1-5 per culture label."
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)
kb_app = typer.Typer(help="Knowledge bases for CAIRE.", no_args_is_help=True, rich_markup_mode=None)
caire_app.add_typer(kb_app, name="kb")


def _embedder(name: str | None, profile: str, device: str | None):
    """The image embedder ``name`` (default: the profile's) on ``device``."""

    try:
        backends = Backends(
            load_profile(profile),
            options={"image_embedder": {"device": device}} if device else None,
        )
        return backends.embedder_for(name or backends.names["image_embedder"])
    except (ValueError, KeyError) as err:
        raise UserInputError(f"--embedder/--profile: {err}") from err


@kb_app.command("build")
def kb_build_cmd(
    source: Path = typer.Argument(..., help="A JSONL file of entities, or a folder of them."),
    out: Path = typer.Option(..., "--out", help="The KB folder (created, or added to)."),
    embedder: str = typer.Option(
        None, "--embedder", help="Image embedder, e.g. clip:ViT-L-14/openai or siglip:ID."
    ),
    profile: str = typer.Option(
        "gemini", "--profile", help="Profile whose image embedder is the default."
    ),
    device: str = typer.Option(None, "--device", help="cpu, cuda or cuda:N (default: auto)."),
    chunk: int = typer.Option(64, "--chunk", min=1, help="Entities embedded between saves."),
    as_json: bool = typer.Option(False, "--json", help="Print what was added as JSON."),
) -> None:
    """Build a knowledge base, or add new entities and images to one (incremental)."""

    try:
        entities = read_source(source)
    except KBError as err:
        raise UserInputError(str(err)) from err
    backend = _embedder(embedder, profile, device)
    try:
        kb = KnowledgeBase.open_or_create(out, backend.id)
    except KBError as err:
        raise UserInputError(str(err)) from err

    def progress(done: int, total: int) -> None:
        if not as_json:
            typer.echo(f"embedded {done}/{total} entities", err=True)

    try:
        counts = kb.add(entities, backend, chunk=chunk, on_progress=progress)
    except KBError as err:
        raise UserInputError(f"{err} (what was embedded before it is saved)") from err
    info = kb.info()
    show({"added": counts, "kb": info}, lambda d: lines.kb_added_lines(out, counts, info), as_json)


@kb_app.command("info")
def kb_info_cmd(
    kb_dir: Path = typer.Argument(..., help="A KB folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """What a knowledge base holds."""

    try:
        info = KnowledgeBase.load(kb_dir).info()
    except KBError as err:
        raise UserInputError(str(err)) from err
    show(info, lines.kb_info_lines, as_json)


@caire_app.command("score")
def score_cmd(
    images: list[Path] = typer.Argument(..., help="Image files to score."),
    labels: str = typer.Option(..., "--labels", help='Culture labels, e.g. "Iran,Turkey,India".'),
    kb_dir: Path = typer.Option(None, "--kb", help="A KB folder; without it, kb-free mode."),
    embedder: str = typer.Option(
        None, "--embedder", help="Image embedder (default: the one the KB was built with)."
    ),
    profile: str = typer.Option("gemini", "--profile", help="Backend profile for the judge."),
    backend: list[str] = typer.Option([], "--backend", help="Override a role: ROLE=NAME."),
    top_k: int = typer.Option(20, "--top-k", min=1, help="KB images retrieved per image."),
    ranking: str = typer.Option(
        "similarity", "--ranking", help="Rank entities by 'similarity' or 'frequency'."
    ),
    text_chars: int = typer.Option(
        1500, "--text-chars", min=0, help="Cut the entity text to this many characters."
    ),
    device: str = typer.Option(None, "--device", help="Device of the image embedder."),
    loglik: bool = typer.Option(
        False,
        "--loglik",
        help="Also score each label by CAIRE's debiased log-likelihood (App. B.1): a local "
        "judge (hf:) or vLLM (openai:), not the Gemini API.",
    ),
    caire_lambda: float = typer.Option(
        None,
        "--caire-lambda",
        help="With --loglik: lambda of the debiasing (the paper gives none).",
    ),
    caire_floor: float = typer.Option(
        None, "--caire-floor", help="With --loglik: the base rate's floor (the paper gives none)."
    ),
    out: Path = typer.Option(None, "--out", help="Write the scores (SCORES.json) here."),
    as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
) -> None:
    """Rate each image 1-5 for each culture label (argmax of the judge's probabilities);
    with --loglik, also each label's debiased negative log-likelihood of "This text is
    relevant to LABEL", L - lambda x max(L with the prompt alone, floor), lower is more
    relevant."""

    try:
        label_list = parse_labels(labels)
    except ValueError as err:
        raise UserInputError(f"--labels: {err}") from err
    if ranking not in ("similarity", "frequency"):
        raise UserInputError(f"--ranking: {ranking!r} is neither 'similarity' nor 'frequency'")
    settings = None
    if loglik:
        if caire_lambda is None or caire_floor is None:
            raise UserInputError(
                "--loglik: give --caire-lambda and --caire-floor (CAIRE App. B.1 gives no "
                "values; lambda 0 leaves the likelihoods undebiased)"
            )
        settings = (caire_lambda, caire_floor)
    elif caire_lambda is not None or caire_floor is not None:
        raise UserInputError("--caire-lambda and --caire-floor go with --loglik")
    loaded = load_images(images)
    kb = image_embedder = None
    try:
        if kb_dir is not None:
            kb = KnowledgeBase.load(kb_dir)
            image_embedder = _embedder(embedder or kb.embedder, profile, device)
        judge = backends_for(profile, backend).get("judge")
        scorer = CaireScorer(judge, kb, image_embedder, top_k, ranking, text_chars, loglik=settings)
    except KBError as err:
        raise UserInputError(f"--kb: {err}") from err
    except ValueError as err:
        where = "--loglik" if "log-likelihood" in str(err) else "--profile/--backend"
        raise UserInputError(f"{where}: {err}") from err
    if not as_json:
        mode = f"knowledge base {kb_dir}" if kb else "kb-free (no knowledge base)"
        typer.echo(f"scoring {len(loaded)} image(s), {mode}", err=True)
    results = scorer.score(loaded, label_list, names=[str(p) for p in images])
    doc = scores_document(results, label_list)
    doc["diversity"] = diversity(label_list, doc["scores"])
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    for line in scores_lines.caire_score_lines(results, scorer.mode, top_k, doc):
        typer.echo(line)
    if out is not None:
        typer.echo(f"\nscores written to {out}")


@caire_app.command("evaluate")
def evaluate_cmd(
    scores: Path = typer.Argument(..., help="The scores of `refine caire score --out`."),
    truth: Path = typer.Option(
        ..., "--truth", help="CSV or JSONL: image, labels (the relevant ones, ';' between)."
    ),
    out: Path = typer.Option(None, "--out", help="Write the evaluation as JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the evaluation as JSON."),
) -> None:
    """CAIRE's specific-set evaluation (Tab. 1 and 14): precision, recall and F1 of calling
    an image-label pair relevant when its 1-5 score reaches 2, 3, 4 or 5 (Tab. 1 is 4)."""
    from refine.evaluate.caire.truth import evaluate_scores

    result = evaluate_scores(scores, truth)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    show(result, scores_lines.caire_evaluate_lines, as_json)
