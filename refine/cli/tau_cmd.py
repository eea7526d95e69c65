"""``refine calibrate-tau``: the match threshold for an observer, from real photos.

The AHEaD paper sets tau per observer as the 75th percentile of the best-match cosine
similarities between reference descriptors and what the observer lists on real images
(0.52 for InternVL3, 0.67 for Qwen2.5-VL). This command does the same for any profile's
observer and can write a profile that carries the value
(:mod:`refine.evaluate.tau_calibration`: its options are TauPlan's fields).
"""

from __future__ import annotations

import typer

from refine import settings
from refine.cli.inputs import UserInputError, show
from refine.cli.task_cmd import extra_option, plan_command
from refine.evaluate.tau_calibration import TauError, TauPlan, calibrate_plan
from refine.present.terminal.scores import tau_lines


def _calibrate(plan: TauPlan, as_json: bool) -> None:
    def say(line: str) -> None:
        if not as_json:
            typer.echo(line, err=True)

    try:
        refs = settings.references(plan.activity, plan.country, plan.refs)
    except settings.SettingsError as err:
        where = "--refs" if plan.refs else "--activity/--country"
        raise UserInputError(f"{where}: {err.message}") from err
    try:
        doc = calibrate_plan(plan, refs, say)
    except TauError as err:
        raise UserInputError(str(err)) from err
    if plan.html is not None:
        from refine.io.files import atomic_write_text
        from refine.present.report.tau import render_tau

        plan.html.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(
            plan.html, render_tau(doc["similarities"], doc["tau"], plan.q, doc["source"])
        )
    show(doc, tau_lines, as_json)


calibrate_tau_cmd = plan_command(
    TauPlan,
    _calibrate,
    "Calibrate tau for the profile's observer on real photos (AHEaD: the 75th percentile "
    "of best-match similarities); prints the value and the distribution, and with --write "
    "saves a profile that runs with it.",
    [extra_option("as_json", False, "--json", "Print the result as JSON.", bool)],
)
