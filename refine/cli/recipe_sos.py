"""``refine bench --recipe sos-table2``: an SoS bank per generator (``OUT/banks/NAME``),
their analysis with the centroids pooled and the caption classifiers, the report, and the
recipe's table against people's labels (``--ratings``) or, without them, the metric side."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.cli.inputs import UserInputError
from refine.harness.recipes import Recipe


def run_sos_recipe(recipe: Recipe, given: dict[str, Any], echo: Callable[[str], None]) -> Any:
    from refine.backends.selection import Backends
    from refine.cli.recipe_run import terminal
    from refine.cli.run_cmd import parse_backends
    from refine.evaluate.sos import BankError
    from refine.harness.recipe_tables import labels_table
    from refine.harness.tasks.sos.bank import build_bank
    from refine.harness.tasks.sos.prompts import check_grid, person_prompts
    from refine.io.files import slug
    from refine.present.report.recipe import write_recipe_table
    from refine.present.report.sos import write_sos_report
    from refine.profiles import load_profile

    s = recipe.select
    grid = person_prompts() if s.concept == "person" else {}
    cultures = list(s.cultures) or sorted({c for c, _ in grid})
    languages = list(s.languages) or sorted({g for _, g in grid})
    try:
        check_grid(s.concept, cultures, languages)
    except (BankError, ValueError) as err:
        raise UserInputError(f"--recipe {recipe.name}: {err}") from err
    if given["limit"]:
        cultures = cultures[: given["limit"]]
    generators = list(given["generator"]) or list(s.generators)
    out = Path(given["out"])
    if given["dry_run"]:
        from refine.cli.recipe_run import profile_of
        from refine.harness.estimate import task_estimate

        cells = len(cultures) * len(languages)
        per = s.prompts_per_cell or 9
        n = len(generators) * cells * per * s.images_per_prompt
        est = task_estimate(
            profile_of(given["profile"]), n, cells * per, len(generators),
            local=["image_embedder", "the caption classifiers' CLIPs"], generator_names=generators,
        )  # fmt: skip
        echo(f"recipe {recipe.name} ({recipe.source}): nothing is made")
        for line in est.lines():
            echo(line)
        return None
    banks = []
    overrides = parse_backends(given["backend"])
    for g in generators:
        folder = out / "banks" / slug(g, 60)
        try:
            backends = Backends(load_profile(given["profile"]), {**overrides, "generator": g})
            needs_llm = s.concept != "person" and any(x != "en" for x in languages)
            build_bank(
                folder, s.concept, cultures, languages, backends.get("generator"),
                backends.get("image_embedder"), llm=backends.get("llm") if needs_llm else None,
                images_per_prompt=s.images_per_prompt, prompts_per_cell=s.prompts_per_cell,
                seed=s.seed, on_progress=lambda d, t, w, g=g: echo(f"{g}: cell {d}/{t}: {w}"),
            )  # fmt: skip
        except (BankError, ValueError) as err:
            raise UserInputError(f"--generator {g}: {err}") from err
        banks.append(folder)
    methods = tuple(m.metric for m in recipe.table.metrics if m.metric != "sos")
    captions = dict(x.split("=", 1) for x in given["baseline_model"] if x.split("=")[0] in methods)
    try:
        path, result = write_sos_report(banks, out / "sos.html", 5, methods, captions)
    except (BankError, ValueError) as err:
        raise UserInputError(str(err)) from err
    humans = None
    if given["ratings"] is not None:
        from refine.human.ratings import load_ratings
        from refine.human.sos_labels import human_labels

        try:
            humans = human_labels(load_ratings(given["ratings"]))
        except ValueError as err:
            raise UserInputError(f"--ratings: {err}") from err
    table = labels_table(recipe, result, humans)
    if humans is None:
        table.missing.append(
            "people's labels: rate the banks' images with the sos protocol (refine rate pack, "
            "or the app's Rate view) and give --ratings FILE. Written meanwhile: the caption "
            "classifiers against SoS's own labels"
        )
    for line in terminal(table):
        echo(line)
    for p in [path, *write_recipe_table(out, table)]:
        echo(f"written: {p}")
    return table
