"""``refine expectations build``: a prompt's explicit and implicit cultural expectations."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from refine.backends.selection import Backends
from refine.cli.inputs import UserInputError, parse_backends
from refine.evaluate.expectations import build_expectations
from refine.evaluate.refs_build import LLMCache
from refine.io.files import atomic_write_text
from refine.profiles import load_profile
from refine.records import DEFAULT_PROFILE
from refine.service import phrase

expectations_app = typer.Typer(
    help="Cultural expectations of a prompt (explicit and implicit), to check images against.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@expectations_app.command("build")
def build_cmd(
    prompt: str = typer.Argument(..., help='The prompt, e.g. "a family celebrating Nowruz".'),
    country: str = typer.Option(..., "--country", help="The culture the image should show."),
    profile: str = typer.Option(DEFAULT_PROFILE, "--profile", help="Backend profile (its llm)."),
    backend: list[str] = typer.Option([], "--backend", help="Override a role: llm=NAME."),
    count: int = typer.Option(6, "--count", min=1, max=15, help="Statements of each kind."),
    out: Path = typer.Option(None, "--out", help="Write the expectations file here (JSON)."),
    as_json: bool = typer.Option(False, "--json", help="Print the expectations as JSON."),
) -> None:
    """Ask the profile's language model what a faithful image of PROMPT shows: what the
    prompt states (explicit) and what people of the country take for granted (implicit),
    each a checkable statement with a reason. The answer is cached ($REFINE_CACHE_DIR);
    edit the file written with --out and pass it to `refine run/score --expectations`."""

    try:
        prompt, country = phrase(prompt, "prompt", 300), phrase(country, "country")
    except ValueError as err:
        raise UserInputError(f"PROMPT/--country: {err}") from err
    if out is not None and out.suffix.lower() != ".json":
        raise UserInputError(f"--out: {out}: an expectations file ends in .json")
    try:
        backends = Backends(load_profile(profile), parse_backends(backend))
        model = backends.get("llm")
    except ValueError as err:
        raise UserInputError(f"--profile/--backend: {err}") from err
    built = build_expectations(prompt, country, model, LLMCache(), count)
    doc = built.model_dump(mode="json")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    if as_json:
        typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        return
    typer.echo(f"{built.prompt} ({built.country}), {built.source}")
    for kind in ("explicit", "implicit"):
        typer.echo(f"\n{kind}:")
        for e in built.expectations:
            if e.kind == kind:
                typer.echo(f"  - {e.statement}" + (f"  ({e.reason})" if e.reason else ""))
    if out is not None:
        typer.echo(f"\nwritten: {out} (edit it, then --expectations {out})")
