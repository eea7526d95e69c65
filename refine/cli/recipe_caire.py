"""``refine bench --recipe caire-table2``: the universal set's generated images (each
concept in each country, "A realistic photo of {concept} in {country}"), CAIRE's 1-5
score of every image for every country (kb-free, or with the recipe's knowledge base),
and the table of CAIRE Tab. 2 (C.9): per image, the Pearson correlation of its scores for
the countries with the mean ratings of each country's raters (the ``caire`` protocol,
each rater's country from the rating set's profiles); per country, the mean of that
correlation over the images of its prompts, and their average (Avg). A second row keeps
another figure under its own name: per rater country, the correlation over images of the
score for that country with its raters' mean rating. Without ratings: the scores' means
per country (the metric side). The statistics: :mod:`refine.evaluate.caire.human`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.cli.inputs import UserInputError
from refine.harness.recipes import Recipe

PROMPT = "A realistic photo of {concept} in {country}"  # CAIRE Sec. 4.2


def run_caire_recipe(recipe: Recipe, given: dict[str, Any], echo: Callable[[str], None]) -> Any:
    from refine.backends.selection import Backends
    from refine.cli.recipe_run import terminal
    from refine.cli.run_cmd import parse_backends
    from refine.evaluate.caire.scorer import CaireScorer, scores_document
    from refine.harness.generators import checked_generators, generate
    from refine.io.files import atomic_write_text, slug
    from refine.present.report.recipe import write_recipe_table
    from refine.profiles import load_profile

    s = recipe.select
    path = given["concepts"] or (Path(s.concepts) if s.concepts else None)
    if path is None:
        raise UserInputError(
            f"--recipe {recipe.name} runs on the universal set's concepts: give them with "
            "--concepts FILE (one concept a line, JSONL or CSV with a concept field)"
        )
    try:
        concepts = read_concepts(path)
    except ValueError as err:
        raise UserInputError(f"--concepts: {err}") from err
    if given["limit"]:
        concepts = concepts[: given["limit"]]
    countries = list(s.countries)
    generators = list(given["generator"]) or list(s.generators)
    seeds = [s.seed + i for i in range(s.images_per_prompt)]
    n = len(generators) * len(concepts) * len(countries) * len(seeds)
    if given["dry_run"]:
        from refine.cli.recipe_run import profile_of
        from refine.harness.estimate import task_estimate

        est = task_estimate(
            profile_of(given["profile"]), n, len(concepts) * len(countries), len(generators),
            judge_answers=n * len(countries), generator_names=generators,
        )  # fmt: skip
        echo(f"recipe {recipe.name} ({recipe.source}): nothing is made")
        for line in est.lines():
            echo(line)
        return None
    out = Path(given["out"])
    try:
        backends = Backends(load_profile(given["profile"]), parse_backends(given["backend"]))
        made = checked_generators(backends, generators)
    except ValueError as err:
        raise UserInputError(f"--generator/--profile: {err}") from err
    files: list[Path] = []
    origins: list[str] = []  # the country each image's prompt names
    for g in generators:
        for concept in concepts:
            for country in countries:
                targets = [
                    out
                    / "images"
                    / slug(g, 60)
                    / slug(country, 30)
                    / f"{slug(concept, 40)}-{k}.png"
                    for k in seeds
                ]
                if not all(t.is_file() for t in targets):  # made ones are kept
                    prompt = PROMPT.format(concept=concept, country=country)
                    for t, image in zip(
                        targets, generate(backends, made[g], prompt, seeds), strict=True
                    ):
                        t.parent.mkdir(parents=True, exist_ok=True)
                        image.save(t)
                files += targets
                origins += [country] * len(targets)
                echo(f"{g}: {concept} in {country} ({len(files)} of {n})")
    from PIL import Image

    kb = embedder = None
    if s.kb:
        from refine.cli.caire_cmd import _embedder
        from refine.evaluate.caire.kb import KnowledgeBase

        kb = KnowledgeBase.load(s.kb)
        embedder = _embedder(kb.embedder, given["profile"], None)
    scorer = CaireScorer(backends.get("judge"), kb, embedder)
    pictures = []
    for f in files:
        with Image.open(f) as im:
            pictures.append(im.convert("RGB"))
    results = scorer.score(pictures, countries, names=[str(f.resolve()) for f in files])
    doc = scores_document(results, countries)
    doc["prompt_countries"] = origins
    atomic_write_text(out / "caire-scores.json", json.dumps(doc, indent=1))
    table = caire_table(recipe, doc, given["ratings"], seed=s.seed)
    for line in terminal(table):
        echo(line)
    for p in [out / "caire-scores.json", *write_recipe_table(out, table)]:
        echo(f"written: {p}")
    return table


def read_concepts(path: str | Path) -> list[str]:
    """The concepts of a file: a text file of one concept a line, JSON lines with a
    ``concept`` each, or a CSV with a ``concept`` column; each once, in order."""
    import csv

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
        if rows and "concept" not in rows[0]:
            raise ValueError(f"{path}: needs a concept column")
        found = [str(r.get("concept") or "") for r in rows]
    elif path.suffix.lower() in (".jsonl", ".json"):
        found = []
        for k, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{k}: not JSON ({err.msg})") from None
                if not isinstance(row, dict) or not str(row.get("concept") or "").strip():
                    raise ValueError(f"{path}:{k}: give a concept")
                found.append(str(row["concept"]))
    else:
        found = text.splitlines()
    out = list(dict.fromkeys(" ".join(c.split()) for c in found if c.strip()))
    if not out:
        raise ValueError(f"{path}: no concepts")
    if any(len(c) > 120 for c in out):
        raise ValueError(f"{path}: a concept is longer than 120 characters")
    return out


def caire_table(recipe: Recipe, doc: dict[str, Any], ratings: Path | None, seed: int = 0) -> Any:
    """With ratings, CAIRE Tab. 2 as C.9 computes it (the ``CAIRE`` row), and the
    per-rater-country figure (its own row); without, the scores' mean per country.
    ``doc``: the scores document, with the country each image's prompt names."""
    from refine.evaluate.caire.human import image_level, per_rater_country
    from refine.harness.recipe_tables import RecipeTable, Row, TableCell, attach_paper

    t = recipe.table
    labels = doc["labels"]
    names = [im["image"] for im in doc["images"]]
    if ratings is None:
        cells = {}
        for k, c in enumerate(labels):
            got = [row[k] for row in doc["scores"]]
            cells[("mean 1-5 score", c)] = TableCell(sum(got) / len(got), None, len(got))
        table = RecipeTable(
            recipe, "metrics", [Row("mean 1-5 score", "", "mean")],
            [(c, t.group_label(c), "", "max") for c in labels], cells,
        )  # fmt: skip
        table.missing.append(
            "people's ratings: rate the images with the caire protocol, raters from each "
            "country (refine rate pack, the app's Rate view), and give --ratings FILE. "
            "Written meanwhile: each country's mean score"
        )
        return table
    from refine.human.ratings import load_ratings

    try:
        rated = load_ratings(ratings)
    except ValueError as err:
        raise UserInputError(f"--ratings: {err}") from err
    index = {str(Path(n).resolve()): i for i, n in enumerate(names)}
    latest: dict[tuple[int, str], dict[str, float]] = {}  # each rater's latest answer
    for r in rated:
        i = index.get(str(r.image))
        value = r.answers.get(t.question or "relevance")
        if i is None or value is None or not r.rater_country:
            continue
        country = next((c for c in labels if c.casefold() == r.rater_country.casefold()), None)
        if country is not None:
            latest.setdefault((i, country), {})[r.rater] = value
    human = {k: sum(v.values()) / len(v) for k, v in latest.items()}
    origins = doc.get("prompt_countries")
    if not origins or len(origins) != len(names):
        raise UserInputError(
            "caire-scores.json names no country per image (written before the image-level "
            "table): run the recipe again into the same --out (the images are kept)"
        )
    paper, _ = image_level(doc["scores"], labels, origins, human, seed)
    other = per_rater_country(doc["scores"], labels, human, seed)
    rows = [
        Row("CAIRE (C.9: per image, mean per country)", "", "caire"),
        Row("per rater country (over images)", "", "caire-rater-country"),
    ]
    cells = {}
    for row, got in zip(rows, (paper, other), strict=True):
        for c, col in got.items():
            cells[(row.label, c)] = TableCell(
                col.value, col.interval, col.n, note=col.note, p=col.p
            )
    columns = [(c, t.group_label(c), "", "max") for c in [*labels, "Avg"]]
    table = RecipeTable(recipe, "agreement", rows, columns, cells)
    # with a knowledge base, the paper's CAIRE row; without, its VLM baseline (the judge
    # rating the image alone); only beside the row computed as the paper computes it
    which = "caire" if doc.get("mode") == "kb" else "vlm"
    attach_paper(table, lambda p: "caire" if p.metric == which else None)
    return table
