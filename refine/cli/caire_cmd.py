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
        backends = Backends(load_profile(profile), parse_backends(backend))
        judge = backends.get("judge")
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
            ll = "" if s.debiased is None else f"  debiased NLL {s.debiased:.3f}"
            typer.echo(f"  {s.label:<{width}}  {s.score}  {bar:<5}  expected {s.expected:.2f}{ll}")
        if r.loglik:
            typer.echo(f"  most relevant by log-likelihood: {r.loglik['best']}")
    _print_diversity(doc["diversity"])
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
    from metrics.caire import threshold_scores
    from refine.evaluate.caire.truth import read_truth

    try:
        doc = json.loads(scores.read_text(encoding="utf-8"))
        labels, rows = doc["labels"], doc["scores"]
        names = [im.get("image") for im in doc["images"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise UserInputError(
            f"SCORES: {scores}: not the scores of refine caire score ({err})"
        ) from None
    try:
        relevant = read_truth(truth)
        keys = [Path(n).name if n else None for n in names]
        missing = [n for n in keys if n not in relevant]
        if missing:
            raise ValueError(f"no truth for {', '.join(str(m) for m in missing[:3])}")
        known = {x.casefold() for x in labels}
        stray = sorted({x for v in relevant.values() for x in v if x.casefold() not in known})
        if stray:
            raise ValueError(f"labels not scored: {', '.join(stray[:3])} (scored: {labels})")
        wanted = [
            [lab.casefold() in {x.casefold() for x in relevant[k]} for lab in labels] for k in keys
        ]
        got = threshold_scores(rows, wanted)
    except ValueError as err:
        raise UserInputError(f"--truth: {err}") from err
    except (TypeError, AttributeError, KeyError) as err:
        raise UserInputError(
            f"SCORES: {scores}: not the scores of refine caire score ({err})"
        ) from None
    result = {"labels": labels, "images": len(rows), "thresholds": got}
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return

    def pct(v):
        return "  -  " if v is None else f"{v:.2f}"

    typer.echo(f"{len(rows)} images x {len(labels)} labels; relevant when the score reaches t")
    typer.echo(f"{'threshold':>9} {'F1':>5} {'P':>5} {'R':>5}")
    for t, r in got.items():
        typer.echo(f"{t:>9} {pct(r['f1']):>5} {pct(r['precision']):>5} {pct(r['recall']):>5}")


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
