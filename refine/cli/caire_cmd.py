"""``refine caire``: build and inspect knowledge bases, score images' cultural relevance."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from refine.cli.inputs import UserInputError, show
from refine.cli.task_cmd import extra_option, plan_command
from refine.evaluate.caire.kb import KBError, KnowledgeBase, read_source
from refine.evaluate.caire.score_plan import (
    CaireScoreError,
    CaireScorePlan,
    image_embedder,
    score_plan,
)
from refine.present.terminal import records as lines
from refine.present.terminal import scores as scores_lines
from refine.records import DEFAULT_PROFILE

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
    try:
        return image_embedder(name, profile, device)
    except CaireScoreError as err:
        raise UserInputError(str(err)) from err


@kb_app.command("build")
def kb_build_cmd(
    source: Path = typer.Argument(..., help="A JSONL file of entities, or a folder of them."),
    out: Path = typer.Option(..., "--out", help="The KB folder (created, or added to)."),
    embedder: str = typer.Option(
        None, "--embedder", help="Image embedder, e.g. clip:ViT-L-14/openai or siglip:ID."
    ),
    profile: str = typer.Option(
        DEFAULT_PROFILE, "--profile", help="Profile whose image embedder is the default."
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


def _score(plan: CaireScorePlan, as_json: bool) -> None:
    def say(line: str) -> None:
        if not as_json:
            typer.echo(line, err=True)

    try:
        results, doc, mode = score_plan(plan, say)
    except CaireScoreError as err:
        raise UserInputError(str(err)) from err
    show(doc, lambda d: scores_lines.caire_score_lines(results, mode, plan.top_k, d), as_json)
    if plan.out is not None and not as_json:
        typer.echo(f"\nscores written to {plan.out}")


caire_app.command("score")(
    plan_command(
        CaireScorePlan,
        _score,
        "Rate each image 1-5 for each culture label (argmax of the judge's probabilities); "
        "with --loglik, also each label's debiased negative log-likelihood of \"This text is "
        'relevant to LABEL", L - lambda x max(L with the prompt alone, floor), lower is more '
        "relevant.",
        [extra_option("as_json", False, "--json", "Print the scores as JSON.", bool)],
    )
)


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
        from refine.io.files import atomic_write_text

        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, json.dumps(result, indent=2))
    show(result, scores_lines.caire_evaluate_lines, as_json)
