"""The saved-runs view: thumbnails of the newest runs and a list (a click opens one), and
the download of the open run as a zip with its HTML report."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from ui.safe import error
from ui.views.common import QUIET, RunDisplay, Session, in_sight, saved_stage

SAVED_SHOWN = 24  # saved runs listed (each record is read)


def zip_run(run_dir: Path, archive: Path) -> Path:
    """The run folder's own regular files (never a link, never anything outside it)."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for entry in sorted(run_dir.iterdir()):
            if entry.is_symlink() or not entry.is_file() or entry.name.startswith("."):
                continue
            zf.write(entry, entry.name)
    return archive


def add_saved_view(gr: Any, demo: Any, session: Session, display: RunDisplay) -> Any:
    """The view; returns the events that open a run, and what makes an event refresh the
    list once it has ended."""
    service = session.service
    with gr.Accordion("Open a saved run", open=False, elem_id="saved-runs") as saved_box:
        # thumbnails of the newest runs: a click opens one
        # whole pictures (never cropped), each with its country, activity, best FAITH
        # and date under it
        saved_gallery = gr.Gallery(
            label="saved runs, newest first (click one to open it)",
            columns=4,
            height="auto",
            object_fit="contain",
            allow_preview=False,
            elem_id="saved-gallery",
        )
        saved_ids = gr.State([])  # the run id of each thumbnail, this visitor's own
        with gr.Row():
            saved = gr.Dropdown(
                service.saved(),
                label="or pick one from the list",
                allow_custom_value=True,
                elem_id="saved",
                scale=4,
            )
            refresh_btn = session.gate.plain(gr, "Refresh", elem_id="refresh", scale=1)
        open_btn = session.gate.plain(gr, "Open", shows_run=True, elem_id="open")
    with gr.Row():
        download_btn = session.gate.plain(
            gr, "Download the run (zip) and its HTML report", elem_id="download"
        )
        files = gr.File(label="downloads", file_count="multiple", elem_id="files")
    outputs = display.outputs()

    def on_open(path):
        try:
            run, path = service.opened(path)
        except (ValueError, OSError) as err:
            raise error(err) from err
        job = service.job
        if job is not None and job.live and job.run_dir is not None:
            if job.run_dir.resolve() == path.resolve():
                # the run in progress: its stage and any instruction under review, which
                # Apply (the run's owner's) continues
                return RunDisplay.show(job.snapshot(), gr.skip())
        return RunDisplay.pack(saved_stage(run), path, run)

    def on_refresh(tok=None, request=None):
        # the visitor's own runs are marked "yours" (the token is read on the page's load)
        cards = service.cards(SAVED_SHOWN, visitor=session.visitor(tok, request))
        thumbs = [(str(c.image), c.caption) for c in cards if c.image is not None]
        ids = [c.id for c in cards if c.image is not None]
        return gr.update(choices=[(c.label, c.id) for c in cards]), thumbs, ids

    def on_saved_pick(ids, evt):
        k = int(evt.index)
        if not 0 <= k < len(ids):
            raise error("that run is no longer in the list: refresh it")
        return on_open(ids[k])

    # set here, not as an annotation: this module's annotations are strings, and gradio
    # finds the event argument by its type
    on_saved_pick.__annotations__["evt"] = gr.SelectData
    opened = open_btn.click(on_open, saved, outputs, api_name="open", **QUIET)
    in_sight(saved.select)  # before the handler: see in_sight
    selected = saved.select(on_open, saved, outputs, api_name=False, **QUIET)
    on_refresh.__annotations__["request"] = gr.Request  # found by its type
    listing = [saved, saved_gallery, saved_ids]
    token = session.token
    refresh_btn.click(on_refresh, token, listing, api_name="runs", queue=False)
    demo.load(on_refresh, token, listing, api_name=False)
    saved_box.expand(on_refresh, token, listing, api_name=False)
    in_sight(saved_gallery.select)
    picked = saved_gallery.select(on_saved_pick, saved_ids, outputs, api_name=False, **QUIET)
    downloaded = download_btn.click(
        lambda path: download(service, path), display.run_dir, files, api_name="download"
    )
    session.gate.message.tells_refusals(opened, selected, picked, downloaded)

    def refreshed(event: Any) -> None:
        """After ``event`` (a run or a roll-back ended), the list holds its run."""
        event.then(on_refresh, token, listing, api_name=False, queue=False)

    return [opened, selected, picked], refreshed


def download(service: Any, path: Any) -> list[str]:
    """The run's zip and HTML report, made once per run and version of its record: asking
    again (any visitor, any number of times) does not fill the disk."""
    from refine.present.report.run import render_run

    try:
        _, run_dir = service.opened(path)
    except (ValueError, OSError) as err:
        raise error(f"no run to download yet: {err}") from err
    record = run_dir / "run.json"
    where = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:12]
    version = f"{where}-{record.stat().st_mtime_ns}-{record.stat().st_size}"
    folder = Path(tempfile.gettempdir()) / "refine-downloads" / f"{run_dir.name}-{version}"
    report = folder / f"{run_dir.name}-report.html"
    archive = folder / f"{run_dir.name}.zip"
    if not (report.is_file() and archive.is_file()):
        made = Path(tempfile.mkdtemp(prefix="refine-download-"))
        (made / report.name).write_text(render_run(run_dir), encoding="utf-8")
        zip_run(run_dir, made / archive.name)
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            made.rename(folder)
        except OSError:  # made at the same time by another request: theirs is kept
            shutil.rmtree(made, ignore_errors=True)
    return [str(archive), str(report)]
