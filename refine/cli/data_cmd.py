"""``refine data fetch ahead``: the AHEaD paper's data, downloaded from its authors'
repository into the data directory (:mod:`refine.evaluate.paper_data`)."""

from __future__ import annotations

from pathlib import Path

import typer

from refine.cli.inputs import UserInputError, json_option, show
from refine.evaluate.paper_data import SOURCE, FetchError, fetch_ahead
from refine.evaluate.reference_source import data_dir as default_data_dir
from refine.io.download import MAX_MB, TIMEOUT_S
from refine.present.terminal import records as lines
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
    as_json: bool = json_option("what was fetched"),
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
    show(done.document(), lines.fetch_ahead_lines, as_json)
    raise typer.Exit(done.exit_code())


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
    as_json: bool = json_option("what was fetched"),
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
    show(done.document(), lines.culturalframes_lines, as_json)
