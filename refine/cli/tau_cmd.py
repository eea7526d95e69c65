"""``refine calibrate-tau``: the match threshold for an observer, from real photos.

The AHEaD paper sets tau per observer as the 75th percentile of the best-match cosine
similarities between reference descriptors and what the observer lists on real images
(0.52 for InternVL3, 0.67 for Qwen2.5-VL). This command does the same for any profile's
observer and can write a profile that carries the value.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from refine import settings
from refine.cli.inputs import UserInputError, backends_for, show
from refine.evaluate.photo_sets import find_photo_set
from refine.io.files import image_files
from refine.io.inputs import load_images
from refine.present.terminal.scores import tau_lines
from refine.profiles import load_profile, write_profile


def calibrate_tau_cmd(
    images: list[Path] = typer.Argument(
        None,
        help="Real photos of the activity in the country (files or folders; default: the "
        "activity's and country's photo set, from refine photos search or refine data fetch "
        "ahead --photos).",
    ),
    activity: str = typer.Option(..., "--activity", help="What the photos show."),
    country: str = typer.Option(..., "--country", help="Where they were taken."),
    refs_file: Path = typer.Option(None, "--refs", help="References JSON instead of the pack."),
    profile: str = typer.Option("gemini", "--profile", help="Backend profile (name or .toml)."),
    backend: list[str] = typer.Option([], "--backend", help="Override a role: ROLE=NAME."),
    q: float = typer.Option(0.75, "--q", min=0.0, max=1.0, help="The quantile (paper: 0.75)."),
    write: Path = typer.Option(
        None, "--write", help="Write a profile file (a copy of --profile) that carries tau."
    ),
    html: Path = typer.Option(
        None, "--html", help="Also write the distribution as a self-contained HTML page."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Calibrate tau for the profile's observer on real photos (AHEaD: the 75th percentile
    of best-match similarities); prints the value and the distribution, and with --write
    saves a profile that runs with it."""
    try:
        refs = settings.references(activity, country, refs_file)
    except settings.SettingsError as err:
        where = "--refs" if refs_file else "--activity/--country"
        raise UserInputError(f"{where}: {err.message}") from err
    photos = ""
    if images:
        # a folder stands for the photos in it
        images = [q for p in images for q in (image_files(p) if p.is_dir() else [p])]
        if not images:
            raise UserInputError("IMAGES: no .png, .jpg, .jpeg or .webp photos given")
    else:
        # the references' photos: a references file's, else the activity's photo set
        if not refs.reference_images:
            raise UserInputError(
                f"IMAGES: none given, and no photo set of {refs.activity!r} in {refs.country}: "
                f'`refine photos search "{refs.activity}" --country {refs.country}`, `refine '
                "data fetch ahead --photos`, `refine photos add`, or give the photos"
            )
        images = [Path(f) for f in refs.reference_images]
        found = find_photo_set(refs.activity, refs.country)
        photos = (
            found.describe()
            if found is not None and list(found.files) == refs.reference_images
            else f"photos: {len(images)} listed in the references file"
        )
        if not as_json:
            typer.echo(f"{refs.activity} in {refs.country}: {photos}", err=True)
    loaded = load_images(images)
    backends = backends_for(profile, backend)
    base = load_profile(profile)
    if write is not None and write.suffix != ".toml":
        raise UserInputError(f"--write: {write}: a profile file ends in .toml")
    from refine.evaluate.tau_calibration import calibrate

    def said(k: int) -> None:
        if not as_json:
            typer.echo(f"observing {images[k]}", err=True)

    try:
        tau, sims = calibrate(refs.descriptors, loaded, backends, q, on_image=said)
    except ValueError as err:
        raise UserInputError(str(err)) from err
    observer_name = backends.names.get("observer", "?")
    source = (
        f"refine calibrate-tau: q={q:g} of {len(sims)} best-match similarities on "
        f"{len(images)} real photos of {refs.activity} in {refs.country}"
        f"{f' ({photos})' if photos else ''}, observer "
        f"{observer_name}, text embedder {backends.names.get('text_embedder', '?')}, "
        f"{time.strftime('%Y-%m-%d')}"
    )
    if write is not None:
        write_profile(base.path, write, tau, source, dict(backends.names), backends.options)
    if html is not None:
        from refine.io.files import atomic_write_text
        from refine.present.report.tau import render_tau

        html.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(html, render_tau(sims, tau, q, source))
    doc = {
        "tau": tau,
        "q": q,
        "similarities": sims,
        "observer": observer_name,
        "images": [str(p) for p in images],
        "photo_set": photos or None,
        "profile": str(write) if write else None,
        "html": str(html) if html else None,
    }
    show(doc, tau_lines, as_json)
