"""``refine data fetch ahead`` and ``culturalframes``: the papers' data, downloaded from
their authors' repositories into the data directory (the options are the fields of
:mod:`refine.evaluate.fetch_plans`' plans)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from refine.cli.inputs import UserInputError, show
from refine.cli.task_cmd import extra_option, plan_command
from refine.evaluate.culturalframes_data import FetchError as CulturalFramesError
from refine.evaluate.fetch_plans import AheadFetch, CulturalFramesFetch
from refine.evaluate.paper_data import FetchError
from refine.present.terminal import records as lines

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
AS_JSON = [extra_option("as_json", False, "--json", "Print what was fetched as JSON.", bool)]


def _fetch(fetch: Callable[..., Any], as_json: bool, **more: Any) -> Any:
    def say(line: str) -> None:
        if not as_json:
            typer.echo(line, err=True)

    try:
        return fetch(say, **more)
    except (FetchError, CulturalFramesError) as err:
        raise UserInputError(str(err)) from err


def _ahead(plan: AheadFetch, as_json: bool) -> None:
    done = _fetch(plan.fetch, as_json)
    show(done.document(), lines.fetch_ahead_lines, as_json)
    raise typer.Exit(done.exit_code())


def _culturalframes(plan: CulturalFramesFetch, as_json: bool) -> None:
    done = _fetch(plan.fetch, as_json, progress=not as_json)
    show(done.document(), lines.culturalframes_lines, as_json)


AHEAD = """Download the AHEaD paper's reference descriptors for the countries asked, its
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
CULTURALFRAMES = """Download CulturalFrames' prompts, images and human annotations from the
    Hugging Face Hub (dataset mair-lab/CulturalFrames at revision 7a44117: about 6 GB, 12 GB
    with the images written out) into the data directory's culturalframes folder, and write
    from them: the images under images/<model>/, prompts.jsonl, and ratings.jsonl, the
    annotations under the culturalframes protocol for `refine agree` and the culturalframes-
    fig6 recipe. Its card declares no licence: the data is downloaded at your request, kept
    in the data directory, and never shipped with the toolkit. A cut download is resumed and
    what is there is kept; no token is sent; the annotations are checked against their
    published sha256, each shard against the LFS sha256 the endpoint lists."""
fetch_app.command("ahead")(plan_command(AheadFetch, _ahead, AHEAD, AS_JSON))
fetch_app.command("culturalframes")(
    plan_command(CulturalFramesFetch, _culturalframes, CULTURALFRAMES, AS_JSON)
)
