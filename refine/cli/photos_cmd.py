"""``refine photos``: the real photos of an activity in a country that EXAG is measured
against (:mod:`refine.evaluate.photo_sets`), searched on Wikimedia Commons
(:mod:`refine.evaluate.commons`) or shown."""

from __future__ import annotations

from pathlib import Path

import typer

from refine.cli.inputs import (
    UserInputError,
    json_option,
    show,
)
from refine.cli.task_cmd import extra_option, plan_command
from refine.evaluate import commons
from refine.evaluate.fetch_plans import PhotoSearch
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


SEARCH = """Collect real photos of ACTIVITY in the country from Wikimedia Commons, as the
    AHEaD paper did with Google: one query in English and one in the country's language (the
    profile's language model translates), every result scored by CLIPScore against "A
    photorealistic photo of ACTIVITY in COUNTRY." on the profile's image embedder, the top
    --keep kept with each one's licence, author and page. run, score, bench, batch, the app
    and calibrate-tau then use them for that activity and country with no file list."""


def _search(plan: PhotoSearch, as_json: bool) -> None:
    def say(line: str) -> None:
        if not as_json:
            typer.echo(line, err=True)

    try:
        found = plan.search(say)
    except commons.SearchError as err:
        raise UserInputError(str(err)) from err
    except ValueError as err:
        if not str(err).startswith("--profile/--backend"):
            raise
        raise UserInputError(str(err)) from err
    _print(found, as_json)


photos_app.command("search")(
    plan_command(
        PhotoSearch,
        _search,
        SEARCH,
        [extra_option("as_json", False, "--json", "Print the set as JSON.", bool)],
    )
)


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
