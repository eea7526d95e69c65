"""``refine caire``: build and inspect knowledge bases, score images' cultural relevance."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from metrics.caire import diversity
from refine.backends.selection import Backends
from refine.cli.inputs import UserInputError, load_images
from refine.cli.run_cmd import parse_backends
from refine.evaluate.caire.kb import KBError, KnowledgeBase, read_source
from refine.evaluate.caire.scorer import CaireScorer, parse_labels, scores_document
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
    if as_json:
        typer.echo(json.dumps({"added": counts, "kb": info}, indent=2))
        return
    typer.echo(
        f"{out}: {counts['entities_added']} entities added, {counts['entities_extended']} "
        f"given new images, {counts['images_added']} images embedded, "
        f"{counts['skipped']} already there"
    )
    typer.echo(f"now {info['entities']} entities, {info['images']} images ({info['embedder']})")


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
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    per = info["images_per_entity"]
    typer.echo(f"knowledge base {info['path']}")
    typer.echo(f"  embedder    {info['embedder']} ({info['dimension']} dimensions)")
    typer.echo(f"  entities    {info['entities']} ({info['with_text']} with text)")
    typer.echo(
        f"  images      {info['images']} ({per['min']}-{per['max']} per entity, "
        f"mean {per['mean']:.1f})"
    )
    typer.echo(f"  size        {info['bytes'] / 1e6:.2f} MB")
    typer.echo(f"  e.g.        {', '.join(info['examples'])}")


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
    out: Path = typer.Option(None, "--out", help="Write the scores (SCORES.json) here."),
    as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
) -> None:
    """Rate each image 1-5 for each culture label (argmax of the judge's probabilities)."""

    try:
        label_list = parse_labels(labels)
    except ValueError as err:
        raise UserInputError(f"--labels: {err}") from err
    if ranking not in ("similarity", "frequency"):
        raise UserInputError(f"--ranking: {ranking!r} is neither 'similarity' nor 'frequency'")
    loaded = load_images(images)
    kb = image_embedder = None
    try:
        if kb_dir is not None:
            kb = KnowledgeBase.load(kb_dir)
            image_embedder = _embedder(embedder or kb.embedder, profile, device)
        backends = Backends(load_profile(profile), parse_backends(backend))
        judge = backends.get("judge")
        scorer = CaireScorer(judge, kb, image_embedder, top_k, ranking, text_chars)
    except KBError as err:
        raise UserInputError(f"--kb: {err}") from err
    except ValueError as err:
        raise UserInputError(f"--profile/--backend: {err}") from err
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
    typer.echo(f"CAIRE relevance 1-5, mode: {scorer.mode}, judge: {results[0].judge}")
    width = max(len(x) for x in label_list)
    for r in results:
        typer.echo(f"\n{r.image}")
        if r.entity:
            typer.echo(
                f"  linked to {r.entity['name']} ({r.ranking} {r.entity['score']:.3f}, "
                f"{r.entity['hits']} of the top {top_k} images)"
            )
        for s in r.labels:
            bar = "#" * s.score
            typer.echo(f"  {s.label:<{width}}  {s.score}  {bar:<5}  expected {s.expected:.2f}")
    _print_diversity(doc["diversity"])
    if out is not None:
        typer.echo(f"\nscores written to {out}")


def _print_diversity(d: dict) -> None:
    typer.echo(f"\nover {d['images']} image(s):")
    for label, mean in d["mean_per_label"].items():
        typer.echo(f"  mean {label}: {mean:.2f}")
    typer.echo(
        f"  coverage (labels some image rates 4+): {d['coverage']:.2f}"
        + (f" ({', '.join(d['covered_labels'])})" if d["covered_labels"] else "")
    )
    if d["pairs"]:
        typer.echo(
            f"  Jensen-Shannon distance over {d['pairs']} pairs: mean {d['js_mean']:.4f}, "
            f"std {d['js_std']:.4f}, min {d['js_min']:.4f}, max {d['js_max']:.4f}"
        )
    else:
        typer.echo("  Jensen-Shannon distance: needs two images or more")
