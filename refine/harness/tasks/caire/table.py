"""The table of a CAIRE recipe (CAIRE Tab. 2, as C.9 computes it) from its task's results:
per image, the Pearson correlation of its scores for the countries with the mean ratings
of each country's raters (the ``caire`` protocol, each rater's country from the rating
set's profiles); per country, the mean of that correlation over the images of its prompts,
and their average (Avg). A second row keeps another figure under its own name: per rater
country, the correlation over images of the score for that country with its raters' mean
rating. Without ratings: the scores' means per country (the metric side). The statistics:
:mod:`refine.evaluate.caire.human`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refine.harness.recipes import Recipe
from refine.harness.results import Results
from refine.harness.tasks.caire.task import scores_document
from refine.human.countries import country_of, place


def caire_table(recipe: Recipe, results: Results, out: Path, rated: Any = None) -> Any:
    """With ratings (:func:`refine.human.ratings.load_ratings`' rows), CAIRE Tab. 2 (the
    ``CAIRE`` row) and the per-rater-country figure (its own row); without, the scores'
    mean per country."""
    from refine.evaluate.caire.human import image_level, per_rater_country
    from refine.harness.recipe_tables import RecipeTable, Row, TableCell, beside

    doc = scores_document(results, Path(out))
    t = recipe.table
    labels = doc["labels"]
    if rated is None:
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
    index = {str(Path(im["image"]).resolve()): i for i, im in enumerate(doc["images"])}
    latest: dict[tuple[int, str], dict[str, float]] = {}  # each rater's latest answer
    # raters left out, by what they wrote: a country the table of names does not hold, or
    # one it holds that is not among the labels
    unplaced: dict[str, set[str]] = {}
    elsewhere: dict[str, set[str]] = {}
    for r in rated:
        i = index.get(str(r.image))
        value = r.answers.get(t.question or "relevance")
        if i is None or value is None or not r.rater_country:
            continue
        country = place(r.rater_country, labels)  # "American", "United States": USA
        named = country_of(r.rater_country)
        if country is not None:
            latest.setdefault((i, country), {})[r.rater] = value
        elif named is None:
            unplaced.setdefault(r.rater_country.strip(), set()).add(r.rater)
        else:
            elsewhere.setdefault(named, set()).add(r.rater)
    human = {k: sum(v.values()) / len(v) for k, v in latest.items()}
    seed = recipe.select.seed
    paper, _ = image_level(doc["scores"], labels, doc["prompt_countries"], human, seed)
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
    table.notes += _left_out(unplaced, elsewhere)
    # with a knowledge base, the paper's CAIRE row; without, its VLM baseline (the judge
    # rating the image alone); only beside the row computed as the paper computes it
    which = "caire" if doc.get("mode") == "kb" else "vlm"
    # and beside a value made the paper's way alone: its judge (refine.harness.ways)
    judges = sorted({str(j) for c in results.cells if (j := (c.get("scorer") or {}).get("judge"))})
    made = {"judge": judges[0] if len(judges) == 1 else (judges or None), "read": None}
    for p in t.paper:
        if p.metric != which:
            continue
        for k, v in p.values.items():
            if (rows[0].label, k) in table.cells and v is not None:
                cell = table.cells[(rows[0].label, k)]
                cell.made = made
                beside(table, cell, "caire", v, p)
    return table


def _left_out(unplaced: dict[str, set[str]], elsewhere: dict[str, set[str]]) -> list[str]:
    """The table's notes on the raters its rows leave out, each count with its words."""

    def said(groups: dict[str, set[str]]) -> str:
        return ", ".join(f"{name!r} ({len(who)})" for name, who in sorted(groups.items()))

    notes = []
    if unplaced:
        n = len(set().union(*unplaced.values()))
        notes.append(
            f"{n} rater(s) left out whose country could not be placed (what they wrote, and "
            f"how many): {said(unplaced)}"
        )
    if elsewhere:
        n = len(set().union(*elsewhere.values()))
        notes.append(f"{n} rater(s) left out from countries outside the table: {said(elsewhere)}")
    return notes


def caire_estimate(plan: Any, profile: Any) -> Any:
    """What the plan draws and calls: every image, and a judge answer per image and
    country."""
    from refine.harness.estimate import task_estimate

    n = len(plan.generators) * len(plan.concepts) * len(plan.countries) * plan.images_per_prompt
    return task_estimate(
        profile, n, len(plan.concepts) * len(plan.countries), len(plan.generators),
        judge_answers=n * len(plan.countries), generator_names=plan.generators,
    )  # fmt: skip


def caire_lines(results: Results) -> list[str]:
    """Each country's mean 1-5 score over the images, with its interval."""
    from refine.numbers import shown

    lines = [f"{results.summary['images']} images scored for every country"]
    for country, stat in results.summary["countries"].items():
        ci = stat["interval"]
        around = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
        lines.append(f"  {country}: mean score {shown(stat['mean'], '.2f')}{around}")
    return lines
