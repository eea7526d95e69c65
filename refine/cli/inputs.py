"""What the command line's options are made of, and the error a user's input raises.

A file given on the command line is read and checked by :mod:`refine.io.inputs`; its
InputError (one line naming the file, the field and what is wrong), like a bad option's
:class:`UserInputError`, is printed by the command line, which exits with code 2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from refine.harness.plan import refusal
from refine.io.inputs import InputError
from refine.records import RunSpec
from refine.settings import Setting, shown_on, split_list


class UserInputError(InputError):
    """A bad argument or option; the message is shown to the user as is (as an input
    file's :class:`refine.io.inputs.InputError` is)."""


def given_value(setting: Setting, value: Any) -> Any:
    """An option's value as the plan's field takes it; None: not given (the default)."""
    if value is None or (setting.given in ("repeat", "arguments") and not value):
        return None
    if setting.given == "list":
        return split_list(value)
    if setting.given in ("path", "argument"):  # a field typed Path takes its text as well
        return str(value)
    return list(map(str, value)) if setting.given in ("repeat", "arguments") else value


def setting_option(setting: Setting, strict: bool = False) -> Any:
    """A field's option (its default, the Plan's), or the command's arguments; ``strict``:
    a required field's option is required by the command line (a task command's plan may
    take it from elsewhere: a bench from its recipe)."""
    bounds = {}
    if setting.lower is not None:
        bounds["min"] = setting.lower
    if setting.upper is not None:
        bounds["max"] = setting.upper
    if setting.given in ("arguments", "argument", "text"):  # its flag: its name in usage
        needed = ... if setting.required else None
        return typer.Argument(needed, help=setting.help, show_default=False, metavar=setting.flag)
    default = ... if setting.required and strict else setting.default
    return typer.Option(default, setting.flag, help=setting.help, **bounds)


def setting_parameters(settings: Sequence[Setting], strict: bool = False) -> list[Any]:
    """The keyword-only parameters (typer options, or the positional arguments) of a
    plan's fields that the command line shows (``strict``: see :func:`setting_option`)."""
    import inspect

    kinds = {
        "path": Path, "list": str, "repeat": list[str], "arguments": list[Path], "argument": Path,
        "text": str,
    }  # fmt: skip
    return [
        inspect.Parameter(
            s.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=setting_option(s, strict),
            annotation=kinds.get(s.given, s.kind) | None,
        )
        for s in settings
    ]


def with_settings(
    command: Callable[..., Any], surface: str, spec: type[RunSpec] = RunSpec, after: str = ""
) -> Callable[..., Any]:
    """``command`` (whose ``**settings`` take them) with an option for every setting of
    ``spec`` that ``surface`` shows, placed after its parameter ``after``: a field added to
    RunSpec with its ``surfaces`` is an option of the command with no other change."""
    import inspect

    own = [
        p
        for p in inspect.signature(command).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    at = next((i + 1 for i, p in enumerate(own) if p.name == after), len(own))
    settings = shown_on(surface, spec)
    taken = {p.name for p in own} & {s.name for s in settings}
    if taken:
        raise ValueError(f"{command.__name__} already has a parameter {taken.pop()!r}")
    more = setting_parameters(settings)
    kinds = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    command.__signature__ = inspect.Signature([*kinds[:at], *more, *kinds[at:]])  # type: ignore[attr-defined]
    return command


def parsed_baseline_models(values: list[str]) -> dict[str, Any]:
    """``--baseline-model`` items as checkpoints; a wrong one is a usage error."""
    from refine.evaluate.baseline_models import parse_baseline_models

    try:
        return parse_baseline_models(values)
    except ValueError as err:
        raise UserInputError(f"--baseline-model: {err}") from err


def reference_images_option() -> Any:
    """``--reference-images`` as ``run`` and ``score`` take it."""
    import typer

    return typer.Option(
        None,
        "--reference-images",
        help="A folder of real photos: EXAG as the paper defines it (exag:ita).",
    )


def with_engine(
    command: Callable[..., Any],
    workers: int = 1,
    workers_help: str = "Jobs at a time.",
    batch: bool = False,
) -> Callable[..., Any]:
    """``command`` (which takes ``engine``, a :class:`refine.harness.engine.EngineOptions`)
    with the options that make it: ``--engine local|ray``, ``--workers`` (``workers`` by
    default), Ray's ``--address`` and ``--gpus-per-worker``, and ``--batch`` where
    ``batch`` (Gemini batch jobs); a bad combination is a usage error naming the option,
    and Ray itself is looked for when asked for."""
    import inspect

    import typer

    from refine.harness.engine import EngineOptions

    def wrapped(
        *args: Any,
        engine: str = "local",
        workers: int = workers,
        address: str | None = None,
        gpus_per_worker: float = 0.0,
        batch: bool = False,
        **kwargs: Any,
    ) -> Any:
        options = EngineOptions(engine, workers, address, gpus_per_worker, batch)
        try:
            options.check()
        except ValueError as err:
            raise UserInputError(str(err)) from err
        if options.kind == "ray":
            from refine.harness.ray import RayEngineError, import_ray

            try:
                import_ray()
            except RayEngineError as err:
                raise UserInputError(f"--engine: {err}") from err
        return command(*args, engine=options, **kwargs)

    # the command's own options, their annotations resolved (they are text in its module)
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "engine"]
    added = {
        "engine": typer.Option(
            "local",
            "--engine",
            help="local (this process, one set of models) or ray (Ray actors).",
        ),
        "workers": typer.Option(workers, "--workers", min=1, help=workers_help),
        "address": typer.Option(
            None, "--address", help="ray: the cluster (auto, host:port or ray://host:port)."
        ),
        "gpus_per_worker": typer.Option(
            0.0, "--gpus-per-worker", min=0.0, help="ray: GPUs each worker holds (0: API models)."
        ),
    }
    if batch:
        added["batch"] = typer.Option(
            False,
            "--batch",
            help="Gemini requests as batch jobs: half the price, answered within a day "
            "(the same command again goes on after a kill).",
        )
    kinds = {
        "engine": str, "workers": int, "address": str, "gpus_per_worker": float, "batch": bool
    }  # fmt: skip
    more = [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=o, annotation=kinds[n])
        for n, o in added.items()
    ]
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    wrapped.__signature__ = inspect.Signature([*params, *more])  # type: ignore[attr-defined]
    wrapped.__name__, wrapped.__doc__ = command.__name__, command.__doc__
    return wrapped


def made_plan(plan: type, where: str = "", **fields: Any) -> Any:
    """A task's plan of these fields, or the one line saying what cannot be, naming its
    flag (after ``where``: ``--recipe NAME: ``)."""
    try:
        return plan(**fields)
    except ValidationError as err:
        raise UserInputError(where + refusal(err, plan)) from err


def show(doc: Any, lines: Callable[[Any], list[str]], as_json: bool) -> None:
    """``doc`` as JSON (``--json``), else the terminal lines :mod:`refine.present.terminal`
    makes of it."""
    import json

    import typer

    if as_json:
        typer.echo(json.dumps(doc, ensure_ascii=False, indent=2, allow_nan=False))
        return
    for line in lines(doc):
        typer.echo(line)


def json_option(what: str = "the result") -> Any:
    """``--json``: print ``what`` as JSON."""
    import typer

    return typer.Option(False, "--json", help=f"Print {what} as JSON.")


def settings_error(err: Any) -> UserInputError:
    """A settings problem as ``--option: message (add --other)``, each option named by its
    flag (:func:`refine.settings.flag_of`)."""
    from refine import settings

    hint = f" (add {settings.flag_of(err.related)})" if err.related else ""
    return UserInputError(f"{settings.flag_of(err.field)}: {err.message}{hint}")


def parse_backends(values: list[str]) -> dict[str, str]:
    """``--backend ROLE=NAME`` items as a role -> name table; a wrong one names itself."""
    from refine.settings import SettingsError, parse_backends

    try:
        return parse_backends(values)
    except SettingsError as err:
        raise settings_error(err) from err


def push_to_hub_option(what: str) -> Any:
    """``--push-to-hub OWNER/NAME``, the same on every command that pushes ``what``."""
    return typer.Option(
        None,
        "--push-to-hub",
        metavar="OWNER/NAME",
        help=f"Push {what} to this Hub repository (private unless --public; the token from "
        "HF_TOKEN or `hf auth login`).",
    )


PUBLIC_HELP = "--push-to-hub: a public repository."


def checked_push(push_to_hub: str | None, public: bool) -> None:
    """The push options checked before any work: --public needs --push-to-hub; the
    repository id and the token (:func:`refine.train.hub.check_push`)."""
    if public and not push_to_hub:
        raise UserInputError("--public: it says how to push; give --push-to-hub OWNER/NAME too")
    if push_to_hub:
        from refine.train.hub import check_push

        check_push(push_to_hub)
