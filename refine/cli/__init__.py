"""The ``refine`` command line.

Every subcommand reads plain files and prints either a readable summary or, with
``--json``, one JSON document on stdout. A bad input prints one line naming the file,
the field and the problem on stderr and exits with code 2.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path
from typing import Any

import typer

from refine import __version__
from refine.backends import available
from refine.backends.imports import steady_collector
from refine.cli.agree_cmd import agree_cmd
from refine.cli.batch_cmd import batch_cmd, report_cmd
from refine.cli.bench_cmd import bench_cmd
from refine.cli.caire_cmd import caire_app
from refine.cli.compare_cmd import compare_cmd
from refine.cli.data_cmd import data_app
from refine.cli.expectations_cmd import expectations_app
from refine.cli.export_cmd import export_cmd
from refine.cli.inputs import UserInputError, show
from refine.cli.legacy import forwarded
from refine.cli.memory_cmd import memory_app
from refine.cli.metrics_cmd import metrics_app
from refine.cli.photos_cmd import photos_app
from refine.cli.rate_cmd import rate_app
from refine.cli.rescore_cmd import rescore_cmd
from refine.cli.run_cmd import refs_app, run_cmd
from refine.cli.sos_cmd import sos_app
from refine.cli.task_cmd import add_task_commands, extra_option, plan_command
from refine.cli.tau_cmd import calibrate_tau_cmd
from refine.cli.tune_cmd import tune_cmd
from refine.evaluate.fetch_plans import ModelsFetch
from refine.harness import registry
from refine.io.inputs import InputError
from refine.present.terminal import records as lines
from refine.present.terminal.errors import click_errors, command_path, error_exit, usage_line
from refine.profiles import list_profiles, load_profile
from ui.serve_plan import ServePlan

app = typer.Typer(
    name="refine",
    help=(
        "Find, explain and fix cultural errors in generated images. Every command is listed "
        "below with what it does; `refine COMMAND --help` says more, and the docs have a "
        "page for each."
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(metrics_app, name="metrics")
app.add_typer(refs_app, name="refs")
app.add_typer(caire_app, name="caire")
app.add_typer(sos_app, name="sos")
app.add_typer(expectations_app, name="expectations")
app.add_typer(memory_app, name="memory")
app.add_typer(data_app, name="data")
app.add_typer(photos_app, name="photos")
app.add_typer(rate_app, name="rate")
app.command("run")(run_cmd)
app.command("batch")(batch_cmd)
app.command("report")(report_cmd)
app.command("calibrate-tau")(calibrate_tau_cmd)
app.command("bench")(bench_cmd)
app.command("rescore")(rescore_cmd)
app.command("compare")(compare_cmd)
app.command("agree")(agree_cmd)
app.command("export")(export_cmd)
app.command("tune")(tune_cmd)


@app.command("backends")
def backends_cmd(
    role: str | None = typer.Option(None, "--role", help="Only this role."),
    as_json: bool = typer.Option(False, "--json", help="Print the list as JSON."),
) -> None:
    """List the registered model backends per role and the bundled profiles."""
    try:
        infos = available(role)
    except ValueError as err:
        raise UserInputError(f"--role: {err}") from err
    profiles = [load_profile(name) for name in list_profiles()]
    rows = [
        {
            "role": i.role,
            "prefix": i.prefix,
            "example": i.example,
            "description": i.description,
            "options": None if i.options is None else sorted(i.options),
        }
        for i in infos
    ]
    profile_rows = [
        {"name": p.name, "description": p.description, "roles": p.roles, "options": p.options}
        for p in profiles
    ]
    show({"backends": rows, "profiles": profile_rows}, lines.backends_lines, as_json)


models_app = typer.Typer(
    help="Model weights: fetch a profile's ahead of time.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(models_app, name="models")


def _download(plan: ModelsFetch, as_json: bool) -> None:
    from dataclasses import asdict

    say = None if as_json else (lambda text: typer.echo(text, err=True))
    try:
        results = plan.fetch(say)
    except ValueError as err:
        if not str(err).startswith("--profile/--backend"):
            raise
        raise UserInputError(str(err)) from err
    show([asdict(r) for r in results], lines.download_lines, as_json)
    if any(r.status == "failed" for r in results):
        raise typer.Exit(1)


DOWNLOAD = (
    "Fetch the weights of a profile's local models into the Hugging Face cache, and the "
    "checkpoints of the baselines named."
)
JSON_FETCHED = [extra_option("as_json", False, "--json", "Print what was fetched as JSON.", bool)]
models_app.command("download")(plan_command(ModelsFetch, _download, DOWNLOAD, JSON_FETCHED))


def _serve(plan: ServePlan) -> None:
    from ui.deploy import DeployError
    from ui.serve_plan import serve_plan  # the app's modules load only for `refine app`

    try:
        serve_plan(plan)
    except DeployError as err:
        raise UserInputError(str(err)) from err


app.command("app")(
    plan_command(
        ServePlan, _serve, "Serve the Gradio app: start, watch and steer runs; open saved runs."
    )
)


@app.command("app-usage")
def app_usage_cmd(
    out: str = typer.Option("runs", "--out", help="The app's --out folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
) -> None:
    """What each visitor of the app (hashed) started and spent: runs in the last hour and
    day, model calls today (UTC)."""
    from ui.quotas import LEDGER, Quotas

    folder = Path(out)
    if not (folder / LEDGER).is_file():
        raise UserInputError(f"--out: {folder} holds no app usage yet ({LEDGER})")
    show(Quotas(folder).usage(), lines.usage_lines, as_json)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"refine {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress to stderr."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def interrupted_exit() -> None:
    """Exit 130 at once after Ctrl-C (a run's record and a batch's are saved by then). A
    normal exit would first wait for the model calls still in flight on worker threads
    (an edit can take a minute), which Python joins before it exits."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def command() -> Any:
    """The command tree of :data:`app` with a command for each registered task that has
    none of its own (:func:`refine.cli.task_cmd.add_task_commands`), built once a process
    and again when a task is registered. Calling the Typer app builds it anew every time
    (15 ms here), which a script or a test calling :func:`main` again and again pays at each
    call; a built click command is made to be invoked many times. With the app's pretty
    tracebacks off, calling it so is what calling the app does."""
    return _command(registry.version())


@functools.cache
def _command(version: int) -> Any:
    tree = typer.main.get_command(app)
    add_task_commands(tree)
    return tree


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user errors become one line on stderr and exit code 2."""
    args, said = forwarded(list(sys.argv[1:] if argv is None else argv))
    if said:
        typer.echo(said, err=True)
    if argv is None:  # this process is the command's own
        steady_collector()
    click_error, abort = click_errors()
    try:
        rc = command()(args=args, prog_name="refine", standalone_mode=False)
    except InputError as err:  # a bad option's UserInputError, or an input file's
        typer.echo(f"error: {err}", err=True)
        sys.exit(2)
    except abort:
        typer.echo("aborted", err=True)
        rc = 130
    except click_error as err:
        typer.echo(f"error: {usage_line(err, args, command_path(command(), args))}", err=True)
        sys.exit(getattr(err, "exit_code", 2) or 2)
    except Exception as err:
        said, code = error_exit(err)
        if not said:
            raise
        typer.echo(f"error: {said}", err=True)
        sys.exit(code)
    if rc == 130:  # Ctrl-C: what was done is saved; the calls still in flight are left
        interrupted_exit()
    sys.exit(rc if isinstance(rc, int) else 0)
