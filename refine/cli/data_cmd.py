"""``refine data fetch ahead``: the AHEaD paper's data, downloaded from its authors'
repository into the data directory (:mod:`refine.evaluate.paper_data`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from refine.cli.inputs import UserInputError
from refine.evaluate.paper_data import SOURCE, FetchError, fetch_ahead
from refine.evaluate.reference_source import data_dir as default_data_dir
from refine.io.download import MAX_MB, TIMEOUT_S
from refine.settings import split_list

data_app = typer.Typer(
    help="Data the papers published, fetched from their authors' repositories.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
fetch_app = typer.Typer(
    help="Download a paper's data into the data directory.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
data_app.add_typer(fetch_app, name="fetch")


@fetch_app.command("ahead")
def fetch_ahead_cmd(
    countries: str = typer.Option(
        "", "--countries", help="Comma-separated CULTIVate countries (default: all 16)."
    ),
    source: str = typer.Option(
        SOURCE, "--from", help="The repository's data folder (a mirror's address)."
    ),
    data_dir: Path = typer.Option(
        None,
        "--data-dir",
        help="Where the files go (default: $REFINE_DATA_DIR, else data in the cache folder).",
    ),
    photos: bool = typer.Option(
        False,
        "--photos",
        help="Also download the real photos the manifest lists (third-party addresses; "
        "many are gone, and the report lists them).",
    ),
    proposers: bool = typer.Option(
        False,
        "--proposers",
        help="Also download each proposer's own descriptors (GPT-4o, Gemini 2.5 Flash) before "
        "the refiner, as packs of their own: AHEaD Tab. 4's proposer-only rows "
        "(the ahead-table4 recipe).",
    ),
    max_file_mb: float = typer.Option(
        MAX_MB, "--max-file-mb", min=0.001, help="The size cap of one downloaded file, in MB."
    ),
    file_timeout: float = typer.Option(
        TIMEOUT_S,
        "--file-timeout",
        min=0.1,
        help="Seconds one file's whole download may take (a slower server is given up).",
    ),
    deadline: float = typer.Option(
        3600.0,
        "--deadline",
        min=1.0,
        help="Seconds the whole fetch may take; what is left then is reported, not fetched.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what was fetched as JSON."),
) -> None:
    """Download the AHEaD paper's reference descriptors for the countries asked, its
    stereotype candidates and its photo manifest from the authors' repository (GitHub
    sinamalakouti/AHEaD, data commit 38b80ef), and write the pack every command then finds
    the countries' references in. That repository has no licence file: the data is
    downloaded at your request, kept in the data directory, and never shipped with the
    toolkit. A second fetch downloads only what is missing. --photos also downloads the
    photos, 8 at a time, keeping only those that decode as images, with their sha256 in
    photos.json and the dead links with their reasons in report.json. Every download is
    http(s) only, capped in size and time (--max-file-mb, --file-timeout), and the whole
    fetch ends by --deadline. Exit code: 0 when everything was fetched, 1 when a data file
    was not, 3 when only photos were not (report.json says which and why)."""
    import time

    from refine.io.download import DownloadLimits

    folder = data_dir or default_data_dir()
    limits = DownloadLimits(max_file_mb, file_timeout, time.monotonic() + deadline)

    def say(line: str) -> None:
        if not as_json:
            typer.echo(line, err=True)

    try:
        done = fetch_ahead(
            folder, split_list(countries), source, emit=say, photos=photos, limits=limits,
            proposers=proposers,
        )  # fmt: skip
    except FetchError as err:
        raise UserInputError(str(err)) from err
    if as_json:
        doc = {
            "folder": str(done.folder),
            "pack": str(done.pack),
            "countries": done.countries,
            "activities_with_descriptors": done.activities,
            "downloaded": done.downloaded,
            "already_there": done.kept,
            "failed": done.failed,
            "proposer_packs": {k: str(v) for k, v in done.proposer_packs.items()},
        }
        if done.photos is not None:
            doc["photos"] = {
                "folder": str(done.photos.folder),
                "downloaded": done.photos.downloaded,
                "already_there": done.photos.kept,
                "dead": len(done.photos.dead),
                "rows_joining_no_activity": len(done.photos.unjoined),
            }
        typer.echo(json.dumps(doc, indent=2))
        raise typer.Exit(_exit_code(done))
    typer.echo(
        f"{len(done.countries)} countries, {done.activities} activities with reference "
        f"descriptors: {done.pack}"
    )
    typer.echo(f"{len(done.downloaded)} file(s) downloaded, {len(done.kept)} already there")
    for url, why in done.failed.items():
        typer.echo(f"not fetched: {url} ({why})")
    for proposer, path in done.proposer_packs.items():
        typer.echo(f"proposer-only pack ({proposer}): {path}")
    if done.photos is not None:
        p = done.photos
        typer.echo(
            f"photos: {p.downloaded} downloaded, {p.kept} already there, {len(p.dead)} dead "
            f"link(s), {len(p.unjoined)} manifest row(s) joining no activity: "
            f"{p.folder / 'report.json'}"
        )
    raise typer.Exit(_exit_code(done))


def _exit_code(done: Any) -> int:
    """0: everything fetched; 1: a data file was not; 3: only photos were not."""
    if done.failed:
        return 1
    return 3 if done.photos is not None and done.photos.dead else 0


@fetch_app.command("culturalframes")
def fetch_culturalframes_cmd(
    countries: str = typer.Option(
        "", "--countries", help="Comma-separated CulturalFrames countries (default: all 10)."
    ),
    source: str = typer.Option(
        None,
        "--from",
        help="A Hugging Face Hub endpoint to download from (a mirror; default: HF_ENDPOINT, "
        "else huggingface.co).",
    ),
    data_dir: Path = typer.Option(
        None,
        "--data-dir",
        help="Where the files go (default: $REFINE_DATA_DIR, else data in the cache folder).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what was fetched as JSON."),
) -> None:
    """Download CulturalFrames' prompts, images and human annotations from the Hugging Face
    Hub (dataset mair-lab/CulturalFrames at revision 7a44117: about 6 GB, 12 GB with the
    images written out) into the data directory's culturalframes folder, and write from
    them: the images under images/<model>/, prompts.jsonl, and ratings.jsonl, the
    annotations under the culturalframes protocol for `refine agree` and the
    culturalframes-fig6 recipe. Its card declares no licence: the data is downloaded at your
    request, kept in the data directory, and never shipped with the toolkit. A cut download
    is resumed and what is there is kept; no token is sent; the annotations are checked
    against their published sha256, each shard against the LFS sha256 the endpoint lists."""
    from refine.evaluate.culturalframes_data import FetchError as CFError
    from refine.evaluate.culturalframes_data import fetch_culturalframes

    folder = data_dir or default_data_dir()

    def say(line: str) -> None:
        if not as_json:
            typer.echo(line, err=True)

    try:
        done = fetch_culturalframes(
            folder, split_list(countries), source, emit=say, progress=not as_json
        )
    except CFError as err:
        raise UserInputError(str(err)) from err
    doc = {
        "folder": str(done.folder),
        "countries": done.countries,
        "images": done.images,
        "images_written": done.written,
        "ratings": done.ratings,
        "images_without_ratings": done.images_without_ratings,
        "annotations_without_image": done.annotations_without_image,
        "skipped": done.skipped,
    }
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    typer.echo(
        f"{done.images} images of {len(done.countries)} countries ({done.written} written now), "
        f"{done.ratings} ratings: {done.folder / 'ratings.jsonl'}"
    )
    if done.images_without_ratings or done.annotations_without_image:
        typer.echo(
            f"{done.images_without_ratings} image(s) have no annotation and "
            f"{done.annotations_without_image} annotated image(s) are not in the shards"
        )
    for line in done.skipped[:5]:
        typer.echo(f"left out: {line}")
    if len(done.skipped) > 5:
        typer.echo(f"... and {len(done.skipped) - 5} more (source.json lists them)")
    typer.echo(
        f"the raters' agreement: refine agree --ratings {done.folder / 'ratings.jsonl'} "
        "--metrics none"
    )
