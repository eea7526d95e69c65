"""``refine compare A B``: two benches of the same images, metric by metric, with the
paired bootstrap interval of each difference, and with ratings the difference of their
agreements with people."""

from __future__ import annotations

import json

from refine.cli.inputs import UserInputError, show
from refine.cli.task_cmd import extra_option, plan_command
from refine.harness.compare import ComparePlan
from refine.present.terminal.records import compare_lines
from refine.settings import split_list

COMPARE = """Pair two benches' cells on the same images (a bench and its rescore, say) and print
each metric's means, difference B - A and its paired bootstrap interval over prompts; with
--ratings, each bench's Spearman agreement with people and the paired difference."""


def _compare(plan: ComparePlan, as_json: bool) -> None:
    from refine.harness.compare import agreement_difference, compare
    from refine.harness.results import ResultsError

    a, b, out = plan.a, plan.b, plan.out
    for side, folder in (("A", a), ("B", b)):
        if not (folder / "results.json").is_file():
            raise UserInputError(f"{side}: {folder} holds no bench (no results.json)")
    try:
        doc = compare(a, b, plan.seed)
    except (ResultsError, ValueError) as err:
        raise UserInputError(str(err)) from err
    if not doc["cells"]:
        raise UserInputError(
            f"A and B share no cell of the same images ({len(doc['not_the_same_images'])} "
            "cells differ in their images): compare a bench with its rescore, or two "
            "benches of the same plan and images"
        )
    if plan.ratings is not None:
        from refine.human.ratings import load_ratings

        try:
            rated = load_ratings(plan.ratings)
            doc["agreement"] = agreement_difference(
                a, b, rated, split_list(plan.metrics), plan.question, plan.seed
            )
        except ValueError as err:
            raise UserInputError(f"--ratings: {err}") from err
    if out is not None:
        from refine.io.files import atomic_write_text

        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "compare.json", json.dumps(doc, indent=1))
    show(doc, compare_lines, as_json)


AS_JSON = [extra_option("as_json", False, "--json", "Print compare.json.", bool)]
compare_cmd = plan_command(ComparePlan, _compare, COMPARE, AS_JSON)
