"""``refine run`` and ``refine refs``: the refinement loop and its references."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from refine import settings, usage
from refine.cli.inputs import (
    UserInputError,
    parse_backends,
    reference_images_option,
    settings_error,
    with_settings,
)
from refine.cli.task_cmd import extra_option, plan_command
from refine.evaluate.reference_source import ReferenceSource
from refine.evaluate.references import ReferenceNotFound
from refine.evaluate.refs_build import (
    LLMCache,
    RefsBuild,
    build_references,
    models_for,
    save_built,
)
from refine.events import RunStarted, StepDone
from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from refine.present.terminal.records import catalog_lines, reference_lines
from refine.present.views import summary_lines
from refine.records import DEFAULT_PROFILE, RunSpec

refs_app = typer.Typer(
    help="Reference descriptors and stereotype candidates from the bundled pack.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def print_references(refs) -> None:
    for line in reference_lines(refs):
        typer.echo(line)


@refs_app.command("show")
def refs_show(
    activity: str = typer.Argument(..., help='An activity, e.g. "people eating food at home".'),
    country: str = typer.Option(..., "--country", help="A country, e.g. Iran."),
    as_json: bool = typer.Option(False, "--json", help="Print the reference pack as JSON."),
) -> None:
    """Print the reference descriptors by dimension and the stereotype candidates."""

    try:
        found = ReferenceSource.default().find(activity, country)
    except ReferenceNotFound as err:
        raise UserInputError(str(err)) from err
    if as_json:
        typer.echo(found.pack.model_dump_json(indent=2))
        return
    print_references(found.pack)
    typer.echo(found.describe())


def _build(plan: RefsBuild, as_json: bool) -> None:
    def progress(event: dict) -> None:
        if not as_json:
            n = f" {event['n']}/{event['of']}" if "n" in event else ""
            typer.echo(f"  {event['stage']}{n}: {event['model']}", err=True)

    try:
        from refine.evaluate.reference_source import prompt_set

        result, path = plan.build(prompt_set(plan.activity, plan.prompts), progress)
    except ValueError as err:
        raise UserInputError(str(err)) from err
    if as_json:
        typer.echo(result.pack.model_dump_json(indent=2))
        return
    print_references(result.pack)
    typer.echo(
        f"model answers: {result.asked} asked, {result.cached} from the cache "
        f"({LLMCache().dir}); saved to {path}" + (f" and {plan.out}" if plan.out else "")
    )


BUILD = """Build reference descriptors and stereotype candidates with language models.

    Several proposers list descriptors per dimension; one refiner keeps the accurate,
    typical ones and lists stereotype candidates. Every answer is cached on disk
    ($REFINE_CACHE_DIR, default ~/.cache/cultural-refine), so asking again costs nothing;
    `refine run` then finds the built references, and --out writes a file for --refs.
    """
AS_JSON = [extra_option("as_json", False, "--json", "Print the references as JSON.", bool)]
refs_app.command("build")(plan_command(RefsBuild, _build, BUILD, AS_JSON))


def resolve_references(activity: str, country: str, profile: str, build: bool):
    """The first references found in the one order
    (:mod:`refine.evaluate.reference_source`), with ``build`` built now when none are
    (a :class:`refine.evaluate.reference_source.Found`: they and where they came from)."""

    def build_now(activity: str, country: str):
        typer.echo(f"building references for {activity!r} in {country} ...", err=True)
        try:
            from refine.evaluate.reference_source import prompt_set

            proposers, refiner_model = models_for(profile)
            result = build_references(
                activity, country, proposers, refiner_model, prompts=prompt_set(activity)
            )
        except ValueError as err:
            raise UserInputError(f"building references: {err}") from err
        except usage.CallBudgetSpent as err:  # --budget-calls: the build takes from it too
            raise UserInputError(
                f"building references: {err}; --budget-calls counts the build's requests "
                "too (one a proposer, the refiner's and the stereotypes'): raise it"
            ) from err
        save_built(result)
        return result.pack

    source = ReferenceSource.default(build=build_now if build else None)
    try:
        found = source.find(activity, country)
    except ReferenceNotFound as err:
        raise UserInputError(f"{err}, or add --build-refs") from err
    return found


@refs_app.command("list")
def refs_list(
    country: str = typer.Option(None, "--country", help="Only this country."),
) -> None:
    """List the CULTIVate activities (marked * where reference descriptors exist), and
    where each country's descriptors come from: the bundled pack, or a pack of the data
    directory (`refine data fetch ahead` fetches the paper's for all 16 countries)."""
    from refine.evaluate.reference_source import catalog

    pack, origin = catalog()
    keys = list(pack.countries)
    if country:
        key = pack.country_key(country)
        if key is None:
            raise UserInputError(f"--country: unknown {country!r}; countries: {', '.join(keys)}")
        keys = [key]
    for line in catalog_lines(pack, origin, keys):
        typer.echo(line)


@contextlib.contextmanager
def resume_hint(where: dict[str, str]):
    """Ctrl-C during a run: the record says interrupted (see Refiner), and the command says
    where the rounds done are and how to go on, then exits 130 (as after SIGINT). A spent
    API quota (:class:`refine.usage.QuotaSpent`): one line, the same how to go on, exit 1."""
    from refine.usage import QuotaSpent

    try:
        yield
    except QuotaSpent as err:  # one line: which model, when its quota is back, how to go on
        run_dir = where.get("dir")
        then = (
            f"; the rounds done are kept: go on later with refine run --resume "
            f"{shlex.quote(run_dir)}"
            if run_dir
            else "; nothing was saved"
        )
        typer.echo(f"error: {err}{then}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        run_dir = where.get("dir")
        if not run_dir:
            typer.echo("interrupted before the run began: nothing was saved", err=True)
        else:
            typer.echo(
                f"interrupted: the rounds done are kept in {run_dir}; go on with\n"
                f"  refine run --resume {shlex.quote(run_dir)}",
                err=True,
            )
        raise typer.Exit(130) from None


def make_run_cmd(spec: type[RunSpec] = RunSpec) -> Callable[..., None]:
    """``refine run``: its own options, and one for every setting of ``spec`` that refine
    run shows (:func:`refine.cli.inputs.with_settings`)."""

    def run_cmd(
        activity: str = typer.Argument(
            None, help='The activity, e.g. "people eating food at home".'
        ),
        country: str = typer.Option(None, "--country", help="The country, e.g. Iran."),
        profile: str = typer.Option(
            DEFAULT_PROFILE, "--profile", help="Backend profile (name or .toml)."
        ),
        backend: list[str] = typer.Option([], "--backend", help="Override a role: ROLE=NAME."),
        refs_file: Path = typer.Option(None, "--refs", help="References JSON instead of the pack."),
        reference_images: Path = reference_images_option(),
        out: Path = typer.Option(Path("runs"), "--out", help="Folder for run directories."),
        resume: Path = typer.Option(None, "--resume", help="Finish the run in this directory."),
        as_json: bool = typer.Option(False, "--json", help="Print the final run record as JSON."),
        build_refs: bool = typer.Option(
            False, "--build-refs", help="Build references with the profile's llms if none exist."
        ),
        **given: Any,
    ) -> None:
        """Generate, score and refine an image of an activity in a country, round by round."""
        _run(
            activity,
            country,
            profile,
            backend,
            refs_file,
            reference_images,
            out,
            resume,
            as_json,
            build_refs,
            given,
            spec,
        )

    return with_settings(run_cmd, "run", spec, after="backend")


def _run(
    activity: str | None,
    country: str | None,
    profile: str,
    backend: list[str],
    refs_file: Path | None,
    reference_images: Path | None,
    out: Path,
    resume: Path | None,
    as_json: bool,
    build_refs: bool,
    given: dict[str, Any],
    spec_type: type[RunSpec],
) -> None:
    where: dict[str, str] = {}

    def progress(event) -> None:
        if isinstance(event, RunStarted):
            where["dir"] = event.dir
        # a line per denoising step would bury the stages
        if not as_json and not isinstance(event, StepDone):
            typer.echo(f"  {event.describe()}", err=True)
            if isinstance(event, RunStarted) and "refs" in where:  # where they came from
                typer.echo(f"  {where['refs']}", err=True)

    if resume is not None:
        try:
            run = RunStore(resume).load()
        except ValueError as err:
            raise UserInputError(f"--resume: {err}") from err
        from refine.io.store import RunLocked

        refiner = Refiner(
            run.spec.profile, run.spec.backends, run.spec.backend_options, on_event=progress
        )
        try:
            with resume_hint(where):
                run = refiner.resume(resume)
        except RunLocked as err:
            raise UserInputError(f"--resume: {err}") from err
    else:
        if not activity or not country:
            raise UserInputError("give an ACTIVITY and --country (or --resume DIR)")
        raw = {"activity": activity, "country": country, **given}
        try:
            spec = settings.run_spec(raw, spec=spec_type)
        except settings.SettingsError as err:
            raise settings_error(err) from err
        # --budget-calls is a hard limit on every request the command sends: a build of
        # references takes from it too, and the run has what is left
        hard = usage.CallBudget(spec.budget_calls) if spec.budget_calls is not None else None
        with usage.call_budget(hard if build_refs and not refs_file else None):
            try:
                settings.output_folder(out)
                if refs_file:
                    refs = settings.references(activity, country, refs_file)
                    where["refs"] = f"references: the file {refs_file}"
                else:
                    found = resolve_references(activity, country, profile, build_refs)
                    refs, where["refs"] = found.pack, found.describe()
                refs = settings.with_reference_images(refs, reference_images)
            except settings.SettingsError as err:
                raise settings_error(err) from err
            try:
                refiner = Refiner(profile, parse_backends(backend), on_event=progress)
            except ValueError as err:
                raise UserInputError(f"--profile/--backend: {err}") from err
            try:
                with resume_hint(where):
                    run = refiner.start(spec, refs, out=out)
            except ValueError as err:
                if "dir" in where:  # the run had begun: not a settings problem
                    raise
                raise UserInputError(str(err)) from err
    if as_json:
        typer.echo(run.model_dump_json(indent=2))
        return
    for line in summary_lines(run, where.get("dir", "")):
        typer.echo(line)


run_cmd = make_run_cmd()
