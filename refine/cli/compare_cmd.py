"""``refine compare A B``: two benches of the same images, metric by metric, with the
paired bootstrap interval of each difference, and with ratings the difference of their
agreements with people."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from refine.cli.inputs import UserInputError
from refine.numbers import shown
from refine.settings import split_list


def _iv(iv) -> str:
    return f"[{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else "-"


def compare_cmd(
    a: Path = typer.Argument(..., help="The first bench (the base)."),
    b: Path = typer.Argument(..., help="The second bench, of the same images."),
    ratings: Path = typer.Option(
        None,
        "--ratings",
        help="Also each bench's agreement with these ratings, and the difference.",
    ),
    metrics: str = typer.Option(
        "faith,align,hal", "--metrics", help="With --ratings: the metrics set against them."
    ),
    question: str = typer.Option(
        None, "--question", help="With --ratings: the question (default: the first answered)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap intervals."),
    out: Path = typer.Option(None, "--out", help="Write compare.json into this folder."),
    as_json: bool = typer.Option(False, "--json", help="Print compare.json."),
) -> None:
    """Pair two benches' cells on the same images (a bench and its rescore, say) and print
    each metric's means, difference B - A and its paired bootstrap interval over prompts;
    with --ratings, each bench's Spearman agreement with people and the paired difference."""
    from metrics.catalog import CATALOG
    from refine.harness.compare import agreement_difference, compare
    from refine.harness.results import ResultsError

    wanted = split_list(metrics)
    unknown = [m for m in wanted if m not in CATALOG]
    if unknown:
        raise UserInputError(f"--metrics: no metric {unknown[0]!r} (metrics: {', '.join(CATALOG)})")
    for side, folder in (("A", a), ("B", b)):
        if not (folder / "results.json").is_file():
            raise UserInputError(f"{side}: {folder} holds no bench (no results.json)")
    try:
        doc = compare(a, b, seed)
    except (ResultsError, ValueError) as err:
        raise UserInputError(str(err)) from err
    if not doc["cells"]:
        raise UserInputError(
            f"A and B share no cell of the same images ({len(doc['not_the_same_images'])} "
            "cells differ in their images): compare a bench with its rescore, or two "
            "benches of the same plan and images"
        )
    if ratings is not None:
        from refine.human.ratings import load_ratings

        try:
            rated = load_ratings(ratings)
            doc["agreement"] = agreement_difference(a, b, rated, wanted, question, seed)
        except ValueError as err:
            raise UserInputError(f"--ratings: {err}") from err
    if out is not None:
        from refine.io.files import atomic_write_text

        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "compare.json", json.dumps(doc, indent=1))
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    for side in ("a", "b"):
        s = doc["settings"][side]
        observer = (s["scorer"] or {}).get("observer")
        typer.echo(f"{side.upper()}: {doc[side]} (tau {s['tau']}, observer {observer})")
    typer.echo(f"{doc['cells']} cells paired on the same images ({doc['images']} images)")
    if doc["not_the_same_images"]:
        typer.echo(f"  left out, their images differ: {len(doc['not_the_same_images'])} cells")
    typer.echo(f"{'metric':14} {'A':>8} {'B':>8} {'B - A':>8} {'95% interval':>20} {'changed':>8}")
    for m, r in doc["metrics"].items():
        typer.echo(
            f"{m:14} {shown(r['a'], '.3f', 8)} {shown(r['b'], '.3f', 8)} "
            f"{shown(r['difference'], '+.3f', 8)} {_iv(r['interval']):>20} {r['changed']:>8}"
        )
    agreed = doc.get("agreement")
    if agreed:
        q, n = agreed["question"], agreed["images"]
        typer.echo(f"agreement with people ({q}, Spearman, {n} rated images):")
        for m, r in agreed["metrics"].items():
            typer.echo(
                f"  {m:12} A {shown(r['a'], '+.3f', 7)}  B {shown(r['b'], '+.3f', 7)}  "
                f"B - A {shown(r['difference'], '+.3f', 7)} {_iv(r.get('interval'))}"
            )
