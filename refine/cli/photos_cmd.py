"""``refine photos``: the real photos of an activity in a country that EXAG is measured
against (:mod:`refine.evaluate.photo_sets`), searched on Wikimedia Commons
(:mod:`refine.evaluate.commons`) or shown."""

from __future__ import annotations

from pathlib import Path

import typer

from refine.cli.inputs import (
    UserInputError,
    backend_option,
    backends_for,
    json_option,
    profile_option,
    show,
)
from refine.evaluate import commons
from refine.io.download import MAX_MB, TIMEOUT_S
from refine.present.terminal import records as lines

photos_app = typer.Typer(
    help="Real photos of an activity in a country, the set EXAG measures stereotypes against.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _data_dir_option() -> typer.models.OptionInfo:
    return typer.Option(
        None,
        "--data-dir",
        help="The data directory (default: $REFINE_DATA_DIR, else data in the cache folder).",
    )


@photos_app.command("search")
def photos_search(
    activity: str = typer.Argument(..., help='An activity, e.g. "people eating food".'),
    country: str = typer.Option(..., "--country", help="A country, e.g. Brazil."),
    source: str = typer.Option(
        commons.API, "--from", help="Wikimedia Commons' API address (a mirror's, or a stand-in)."
    ),
    language: str = typer.Option(
        None,
        "--language",
        help="The language of the second query (default: the country's most widely spoken, "
        "and the paper's own translated query where the fetched AHEaD manifest has one; "
        "English: one query only).",
    ),
    query: str = typer.Option(
        None, "--query", help='The English query (default: "ACTIVITY COUNTRY").'
    ),
    keep: int = typer.Option(commons.KEEP, "--keep", min=1, max=50, help="Photos kept."),
    per_query: int = typer.Option(
        commons.PER_QUERY, "--per-query", min=1, max=50, help="Results taken per query."
    ),
    profile: str = profile_option(),
    backend: list[str] = backend_option(),
    data_dir: Path = _data_dir_option(),
    max_file_mb: float = typer.Option(
        MAX_MB, "--max-file-mb", min=0.001, help="The size cap of one downloaded photo, in MB."
    ),
    file_timeout: float = typer.Option(
        TIMEOUT_S, "--file-timeout", min=0.1, help="Seconds one photo's whole download may take."
    ),
    as_json: bool = json_option("the set"),
) -> None:
    """Collect real photos of ACTIVITY in the country from Wikimedia Commons, as the AHEaD
    paper did with Google: one query in English and one in the country's language (the
    profile's language model translates), every result scored by CLIPScore against "A
    photorealistic photo of ACTIVITY in COUNTRY." on the profile's image embedder, the top
    --keep kept with each one's licence, author and page. run, score, bench, batch, the app
    and calibrate-tau then use them for that activity and country with no file list."""
    from refine.io.download import DownloadLimits

    if not activity.strip() or not country.strip():
        raise UserInputError("give an ACTIVITY and a --country")
    backends = backends_for(profile, backend)

    class LazyLanguageModel:  # loaded only when a translation is asked for
        def complete_json(self, prompt, schema):
            return backends.get("llm").complete_json(prompt, schema)

    def say(line: str) -> None:
        if not as_json:
            typer.echo(line, err=True)

    try:
        found = commons.search_photos(
            activity.strip(),
            country.strip(),
            LazyLanguageModel(),
            backends.get("image_embedder"),
            api=source,
            data=data_dir,
            language=language,
            english_query=query,
            keep=keep,
            per_query=per_query,
            emit=say,
            limits=DownloadLimits(max_file_mb, file_timeout),
        )
    except commons.SearchError as err:
        raise UserInputError(str(err)) from err
    _print(found, as_json)


@photos_app.command("add")
def photos_add(
    activity: str = typer.Argument(..., help="The activity the photos show."),
    folder: Path = typer.Argument(..., help="A folder of real photos (.png, .jpg, .webp)."),
    country: str = typer.Option(..., "--country", help="Where they were taken."),
    data_dir: Path = _data_dir_option(),
    as_json: bool = json_option("the set"),
) -> None:
    """Make your own real photos the set of ACTIVITY in the country (copied into the data
    directory, each checked as an image), replacing a searched set: run, score, bench,
    batch, the app and calibrate-tau then take them with no file list."""
    from refine import settings
    from refine.evaluate.photo_sets import add_given
    from refine.records import ReferencePack

    if not activity.strip() or not country.strip():
        raise UserInputError("give an ACTIVITY and a --country")
    empty = ReferencePack(activity=activity, country=country, descriptors={})
    try:
        checked = settings.with_reference_images(empty, folder)
    except settings.SettingsError as err:
        raise UserInputError(f"FOLDER: {err.message}") from err
    photos = [Path(p) for p in checked.reference_images]
    _print(add_given(activity.strip(), country.strip(), photos, data_dir), as_json)


@photos_app.command("show")
def photos_show(
    activity: str = typer.Argument(..., help="The activity."),
    country: str = typer.Option(..., "--country", help="The country."),
    data_dir: Path = _data_dir_option(),
    as_json: bool = json_option("the set"),
) -> None:
    """Show the photo set the commands use for ACTIVITY in the country, where it comes
    from (added, searched, or the paper's), and each photo's licence and author."""
    from refine.evaluate.photo_sets import find_photo_set

    found = find_photo_set(activity.strip(), country.strip(), data_dir)
    if found is None:
        raise UserInputError(
            f"no photos of {activity!r} in {country}: `refine photos search "
            f'"{activity}" --country {country}`, or `refine data fetch ahead --photos` for '
            "the paper's countries"
        )
    _print(found, as_json)


def _print(found, as_json: bool) -> None:
    show(found.document(), lambda doc: lines.photo_set_lines(doc, found.describe()), as_json)
