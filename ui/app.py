"""The Gradio app: start a run, watch it round by round, steer it, open saved runs.

The layout is built from a :class:`refine.service.RunService`; every widget value comes
from ``ui.adapters``. There is no model code here.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from refine import settings
from refine.present.views import progress_line
from refine.records import Run
from refine.service import NOT_YOURS, RunService, ServiceBusy, Update, phrase, visitor_hash
from refine.settings import default
from ui import adapters
from ui.limits import Limits
from ui.quotas import QuotaExceeded, Quotas, client_address
from ui.safe import error, html_text, md_text
from ui.visitors import browser_secret, new_token, visitor_id

log = logging.getLogger(__name__)

# how the form names a setting in a message
FIELD_LABELS = {
    "image": "the uploaded image",
    "caire_labels": "CAIRE cultures",
    "caire_kb": "CAIRE knowledge base",
    "prompt_languages": "prompt languages",
    "sos_bank": "SoS bank",
    "language_scores": "language scores",
    "expectations": "cultural expectations",
    "refs": "references",
    "max_drift": "max drift",
    "max_quality_drop": "max quality drop",
    "target": "target FAITH",
}
MAX_UPLOAD_MB = 20
UPLOAD_LIMITS = f"PNG, JPEG or WebP, at most {MAX_UPLOAD_MB} MB"
UPLOAD_TYPES = settings.IMAGE_TYPES
# starting and rolling back share one queue of one: a device runs one run at a time, and
# a visitor who asks meanwhile waits in line and sees their place; browsing is not held up
ONE_RUN = {"concurrency_id": "run", "concurrency_limit": 1}
# a run paused for review whose owner does not answer within this time is stopped
REVIEW_TIMEOUT_S = 15 * 60
# examples that the bundled pack holds references for, one per country
EXAMPLES = [
    ["people eating food at home", "Iran"],
    ["wedding celebration", "India"],
    ["people participating in New Yam Festival", "Nigeria"],
]
SAVED_SHOWN = 24  # saved runs listed (each record is read)


def _views(run: Run | None, run_dir: Path | None, k: int | None = None) -> list[Any]:
    """Gallery, metric chart, table, checklist, before/after, instruction of a run, and
    round ``k`` (default: the last) in the other prompt languages."""

    if run is None or run_dir is None or not run.rounds:
        return [[], "", [], [], None, "", []]
    k = len(run.rounds) - 1 if k is None else max(0, min(k, len(run.rounds) - 1))
    r = run.rounds[k]
    pair = adapters.before_after(run, run_dir, k)
    return [
        adapters.gallery(run, run_dir),
        adapters.metric_chart(run),
        adapters.rounds_table(run),
        adapters.checklist(r, run.spec.near_margin),
        pair,
        f"round {k} ({r.instruction_source}):\n{r.text}",
        adapters.language_gallery(run, run_dir, k),
    ]


def _pack(message: str, path: Any, run: Run | None = None, k: int | None = None) -> list[Any]:
    """Every output of the app's main views, in the order of ``outputs``."""
    run_dir = Path(path) if run is not None and path else None
    views = _views(run, run_dir, k)
    done = 0.0
    if run is not None and run.rounds:
        done = 1.0 if run.status != "running" else len(run.rounds) / (run.spec.rounds + 1)
    bar = adapters.progress_bar(done, f"run {run.id}: {run.status}" if run else "not started")
    return [message, *views[:6], str(path or ""), views[6], progress_line(run), bar]


def build_app(
    service: RunService,
    status: str = "",
    limits: Limits | None = None,
    login: bool = False,
    quotas: Quotas | None = None,
    trust_proxy: bool = False,
) -> Any:
    """The app on ``service``; ``limits``: the operator's limits on each visitor's run
    (default :class:`ui.limits.Limits`); ``login``: a Hugging Face login button (a Space
    with ``hf_oauth: true``), whose user name then names the visitor; ``quotas``: runs per
    visitor and address per hour, calls per day (:mod:`ui.quotas`), the address read from
    ``X-Forwarded-For`` only with ``trust_proxy``."""
    from refine.backends.imports import require

    limits = (limits or Limits()).check()

    gr = require("gradio", "gradio", "the app", "app")

    from refine.evaluate.references import load_pack

    countries = list(load_pack().countries)
    activities = ready_activities("Iran")

    with gr.Blocks(title="Culturally faithful image refinement") as demo:
        # who the visitor is: a token kept in the browser (encrypted with a key kept in
        # --out), read into this session's state on load; see ui.visitors
        token_store = gr.BrowserState(
            None, storage_key="refine-visitor", secret=browser_secret(service.out)
        )
        token = gr.State(None)
        gr.Markdown("# Culturally faithful image refinement")
        gr.Markdown(status or f"profile: {service.profile}", elem_id="status")
        if login:
            gr.LoginButton()
        with gr.Row():
            with gr.Column(scale=1):
                activity = gr.Dropdown(
                    activities,
                    value="people eating food at home",
                    allow_custom_value=True,
                    label="activity",
                    elem_id="activity",
                )
                country = gr.Dropdown(
                    countries,
                    value="Iran",
                    allow_custom_value=True,
                    label="country",
                    elem_id="country",
                )
                # examples the bundled pack holds references for; they fill plain text
                # boxes (a dropdown shows only the values among its current choices),
                # which set the country, its activities and the activity
                example_act = gr.Textbox(label="activity", visible=False)
                example_ctry = gr.Textbox(label="country", visible=False)
                examples = gr.Examples(
                    EXAMPLES,
                    [example_act, example_ctry],
                    label="examples",
                    elem_id="examples",
                )
                # Start, Stop and the progress come first: the settings below are optional
                with gr.Row():
                    start = gr.Button("Start", variant="primary", elem_id="start")
                    stop = gr.Button("Stop", elem_id="stop")
                bar = gr.HTML(adapters.progress_bar(0, "not started"), elem_id="progress-bar")
                stage = gr.Textbox(label="stage", interactive=False, elem_id="stage")
                progress = gr.Textbox(
                    label="so far", interactive=False, elem_id="progress", max_lines=5
                )
                # references: where they come from, or a way to build them here
                refs_note = gr.Markdown(
                    references_note(service, activity.value, "Iran")[0], elem_id="refs-note"
                )
                build_btn = gr.Button(
                    "Build references with the language models",
                    visible=False,
                    elem_id="build-refs",
                )
                refs_review = gr.Code(
                    language="json",
                    label="references to review: edit, then save (descriptors per dimension, "
                    "stereotype candidates)",
                    interactive=True,
                    visible=False,
                    elem_id="refs-review",
                )
                save_refs_btn = gr.Button(
                    "Save the reviewed references", visible=False, elem_id="save-refs"
                )
                with gr.Accordion("Options", open=False, elem_id="options"):
                    with gr.Row():
                        rounds = gr.Number(
                            limits.default_of("rounds"),
                            precision=0,
                            minimum=0,
                            maximum=limits.rounds,
                            label=f"rounds (at most {limits.rounds})",
                            elem_id="rounds",
                        )
                        target = gr.Number(
                            default("target"),
                            minimum=0,
                            maximum=1,
                            label="target FAITH",
                            elem_id="target",
                        )
                        seed = gr.Number(default("seed"), precision=0, label="seed")
                    with gr.Row():
                        candidates = gr.Number(
                            limits.default_of("candidates"),
                            precision=0,
                            minimum=1,
                            maximum=limits.candidates,
                            label=f"candidates (at most {limits.candidates})",
                            elem_id="candidates",
                        )
                        max_drift = gr.Number(
                            default("max_drift"),
                            minimum=0,
                            maximum=2,
                            label="max drift",
                            elem_id="max-drift",
                        )
                        max_quality_drop = gr.Number(
                            default("max_quality_drop"),
                            minimum=0,
                            maximum=1,
                            label="max quality drop (1: off)",
                            info="an edit that looks worse than the best round by more "
                            "than this is rejected",
                            elem_id="max-quality-drop",
                        )
                    pause = gr.Checkbox(
                        False,
                        label="pause before each edit to review the instruction",
                        elem_id="pause",
                    )
                    with gr.Row():
                        caire_labels = gr.Textbox(
                            label="CAIRE: other cultures to rate 1-5 (optional)",
                            placeholder="Turkey, India",
                            elem_id="caire-labels",
                        )
                        caire_kb = gr.Textbox(
                            label="CAIRE knowledge base folder (optional)",
                            placeholder="kb/",
                            elem_id="caire-kb",
                        )
                    with gr.Row():
                        prompt_languages = gr.Textbox(
                            label="other prompt languages (optional)",
                            placeholder="fr, ja",
                            elem_id="prompt-languages",
                        )
                        sos_bank = gr.Textbox(
                            label="SoS bank folder (optional)",
                            placeholder="banks/people-eating",
                            elem_id="sos-bank",
                        )
                    language_scores = gr.Checkbox(
                        False,
                        label="also observe and score each language's image (FAITH per language)",
                        elem_id="language-scores",
                    )
                    expectations = gr.Checkbox(
                        False,
                        label="check cultural expectations (explicit and implicit, listed by "
                        "the language model) every round, and ask for the missed ones",
                        elem_id="expectations",
                    )
                    # a file box, not an image box: a file that is not an image gets a
                    # message naming it and the limits (an image box fails without one)
                    upload = gr.File(
                        type="filepath",
                        file_types=list(UPLOAD_TYPES),
                        label=f"refine this image instead (optional; {UPLOAD_LIMITS})",
                        height=120,
                        elem_id="upload",
                    )
                    upload_preview = gr.Image(
                        label="the image to refine",
                        interactive=False,
                        visible=False,
                        height=160,
                        elem_id="upload-preview",
                    )
                run_dir_box = gr.Textbox(
                    label="run directory", interactive=False, elem_id="run-dir"
                )
                instruction = gr.Textbox(
                    label="instruction (edit it in pause mode, then apply)",
                    lines=6,
                    elem_id="instruction",
                )
                apply = gr.Button("Apply instruction", elem_id="apply")
                notice = gr.Textbox(label="message", interactive=False, elem_id="notice")
            with gr.Column(scale=2):
                gallery = gr.Gallery(label="rounds", columns=4, height=260, elem_id="gallery")
                slider = gr.ImageSlider(label="before / after", elem_id="slider")
                languages_gallery = gr.Gallery(
                    label="this round in the other prompt languages (SoS with a bank)",
                    columns=4,
                    height=180,
                    elem_id="languages",
                )
                # an inline SVG chart: it redraws whole on every update, whatever metrics
                # (SoS per language, CAIRE) a run adds
                plot = gr.HTML(label="metrics per round", elem_id="plot")
                checklist = gr.HighlightedText(
                    label="descriptor checklist",
                    color_map=adapters.CHECK_COLOURS,
                    combine_adjacent=False,
                    elem_id="checklist",
                )
                table = gr.Dataframe(
                    headers=adapters.TABLE_HEADERS,
                    label="rounds",
                    interactive=False,
                    elem_id="table",
                )
        with gr.Accordion("Steer: look at a round, roll back to it, decide by hand", open=True):
            with gr.Row():
                round_pick = gr.Number(0, precision=0, minimum=0, label="round", elem_id="round")
                cand_pick = gr.Number(
                    0, precision=0, minimum=0, label="candidate", elem_id="candidate"
                )
                show_btn = gr.Button("Show round", elem_id="show")
                branch_btn = gr.Button("Roll back and continue from it", elem_id="branch")
                accept_btn = gr.Button("Accept candidate by hand", elem_id="accept")
                reject_btn = gr.Button("Reject round by hand", elem_id="reject")
        with gr.Accordion("Open a saved run", open=False, elem_id="saved-runs") as saved_box:
            # thumbnails of the newest runs: a click opens one
            saved_gallery = gr.Gallery(
                label="saved runs, newest first (click one to open it)",
                columns=6,
                height=230,
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
                refresh_btn = gr.Button("Refresh", elem_id="refresh", scale=1)
            open_btn = gr.Button("Open", elem_id="open")
        with gr.Row():
            download_btn = gr.Button(
                "Download the run (zip) and its HTML report", elem_id="download"
            )
            files = gr.File(label="downloads", file_count="multiple", elem_id="files")
        from ui.rate_view import add_rate_view
        from ui.tune_view import add_tune_view

        keys_js = add_rate_view(service, token)
        add_tune_view(service, token)

        outputs = [
            stage,
            gallery,
            plot,
            table,
            checklist,
            slider,
            instruction,
            run_dir_box,
            languages_gallery,
            progress,
            bar,
        ]

        def show(update: Update) -> list[Any]:
            bar_html = adapters.progress_bar(update.fraction, update.progress or update.stage)
            text = update.stage if update.done else (update.progress or update.stage)
            if update.light:  # a denoising step: only the progress moved
                return [text, *[gr.skip()] * 9, bar_html]
            views = _views(update.run, update.run_dir)
            if update.error:
                text = f"error: {update.error}"
            done = len(update.run.rounds) if update.run is not None else 0
            if update.applied is not None and update.applied[0] >= done:
                # the instruction applied for the round in progress, not the last one's
                views[5] = f"round {update.applied[0]} (applied, editing):\n{update.applied[1]}"
            if update.review is not None:
                views[5] = update.review[1]
                minutes = REVIEW_TIMEOUT_S // 60
                by = f" (written by the {update.review_source})" if update.review_source else ""
                changes = "; ".join(update.review_changes)
                text = (
                    f"round {update.review[0]}: review the instruction{by}, then apply "
                    f"(within {minutes} minutes, or the run stops); an edit of yours is "
                    f"recorded as a person's" + (f"\nplanned changes: {changes}" if changes else "")
                )
            return [
                text,
                *views[:6],
                str(update.run_dir or ""),
                views[6],
                progress_line(update.run),
                bar_html,
            ]

        def follow(job: Any):
            """The job's updates as widget values; if the visitor cancels or leaves before
            the end, the run stops within moments (what is done is kept)."""
            done = False
            try:
                for update in job.updates():
                    yield show(update)
                done = True
            finally:
                if not done:
                    job.stop()
                    # the queue's slot goes to the next visitor only once this run has
                    # fully stopped, so a queued start never finds the service busy
                    job.join()

        def admitted(visitor: str | None, request: Any) -> str | None:
            """The client's address, once the visitor's quota allows a start."""
            if quotas is None or visitor is None:
                return None
            address = client_address(request, trust_proxy)
            try:
                quotas.check_start(visitor, address)
            except QuotaExceeded as err:
                raise error(err) from err
            return address

        def counted(job: Any, visitor: str, address: str | None, base: int = 0):
            """Follow a started run, counting it and its model calls against the quotas."""
            if quotas is not None:
                n = quotas.record_start(visitor, address)
                log.info("run started by visitor %s (%d this hour)", visitor_hash(visitor)[:12], n)
            try:
                yield from follow(job)
            finally:
                if quotas is not None and job.run is not None:
                    quotas.spent(visitor, job.run.model_calls - base)

        def on_start(
            tok,
            act,
            ctry,
            n_rounds,
            tgt,
            sd,
            n_cand,
            drift,
            paused,
            image,
            labels="",
            kb="",
            langs="",
            bank="",
            lang_scores=False,
            check_expectations=False,
            quality_drop=None,
            request=None,
        ):
            visitor = _visitor(tok, request)
            # knowledge bases and SoS banks are read from inside --out only
            try:
                kb = str(service.inside(kb, "CAIRE knowledge base")) if (kb or "").strip() else ""
                bank = str(service.inside(bank, "SoS bank")) if (bank or "").strip() else ""
            except ValueError as err:
                raise error(err) from err
            try:  # the operator's limits, and each run's budget of time and calls
                numbers = limits.apply(_numbers(n_rounds, tgt, sd, n_cand, drift, quality_drop))
            except ValueError as err:
                raise error(err) from err
            raw = {
                "activity": act,
                "country": ctry,
                **numbers,
                "caire_labels": labels or None,
                "caire_kb": (kb or "").strip() or None,
                "prompt_languages": langs or None,
                "sos_bank": (bank or "").strip() or None,
                "language_scores": bool(lang_scores) or None,
                "image": image or None,
            }
            if check_expectations:
                try:  # built from the run's own prompt (cached inside --out); never a path
                    raw["expectations"] = [
                        e.model_dump() for e in service.expectations_for(act, ctry).expectations
                    ]
                except ValueError as err:
                    raise error(f"cultural expectations: {err}") from err

            def find(a: str, c: str) -> Any:
                return service.find_references(a, c, visitor)

            try:
                spec, refs = settings.load(raw, find=find)
            except settings.SettingsError as err:
                raise error(_settings_message(err)) from err
            if visitor is None:  # a run nobody owns could be stopped by anyone
                raise error(NO_VISITOR)
            address = admitted(visitor, request)
            try:
                job = service.start(
                    spec=spec,
                    references=refs,
                    pause=bool(paused),
                    owner=visitor,
                    review_timeout_s=REVIEW_TIMEOUT_S,
                )
            except (ServiceBusy, ValueError) as err:
                raise error(err) from err
            yield from counted(job, visitor, address)

        def on_stop(tok, request=None):
            job = service.job
            if job is not None and service.busy:
                if not job.owned_by(_visitor(tok, request)):
                    return NOT_YOURS
                job.stop()
                return "stopping now: the round in progress is cut short, the rounds done are kept"
            return "no run in progress"

        def on_apply(tok, text, request=None):
            job = service.job
            if job is None or job.waiting is None:
                return "no instruction is waiting for review"
            if not job.owned_by(_visitor(tok, request)):
                return NOT_YOURS
            try:
                job.submit_instruction(text)
            except ValueError as err:
                return f"error: {err}"
            return "instruction applied; editing ..."

        def on_open(path):
            try:
                run, path = service.opened(path)
            except (ValueError, OSError) as err:
                raise error(err) from err
            return _pack(f"run {run.id}: {run.status}, {run.stop_reason}", path, run)

        def on_show(path, k):
            try:
                run, path = service.opened(path)
                k = _index(k, "round")
            except (ValueError, OSError) as err:
                raise error(err) from err
            if not 0 <= k < len(run.rounds):
                raise error(f"round {k} does not exist (0..{len(run.rounds) - 1})")
            return _pack(f"round {k}: {run.rounds[k].decision}", path, run, k)

        def on_pick(path, evt):
            """A click on a gallery image shows that round and picks it for steering."""
            k = int(evt.index)
            return [*on_show(path, k), k]

        # set here, not as an annotation: this module's annotations are strings, and gradio
        # finds the event and request arguments by their types
        on_pick.__annotations__["evt"] = gr.SelectData

        def on_branch(
            tok, path, k, n_rounds, tgt, sd, n_cand, drift, paused, quality_drop=None, request=None
        ):
            visitor = _visitor(tok, request)
            try:
                old, run_dir = service.opened(path)
                service.check_owner(run_dir, visitor)  # a roll-back continues one's own run
                numbers = limits.apply(
                    _numbers(n_rounds, tgt, sd, n_cand, drift, quality_drop), old.spec
                )
                changes = {k: v for k, v in numbers.items() if v is not None}
                address = admitted(visitor, request)
                job = service.start(
                    old.spec.activity,
                    old.spec.country,
                    pause=bool(paused),
                    branch=(run_dir, _index(k, "round")),
                    owner=visitor,
                    review_timeout_s=REVIEW_TIMEOUT_S,
                    **changes,
                )
            except (ServiceBusy, ValueError, OSError) as err:
                raise error(err) from err
            yield from counted(job, visitor, address, old.model_calls)

        def on_choose(tok, path, k, j, accept, request=None):
            from refine.loop.refiner import Refiner

            try:
                k, j = _index(k, "round"), _index(j, "candidate")
                _, path = service.opened(path)  # a run of this app, with no linked images
                service.check_owner(path, _visitor(tok, request))  # for as long as it exists
                run = Refiner.choose(path, k, j, accept=accept)
            except (ValueError, OSError) as err:
                raise error(err) from err
            r = run.rounds[k]
            return _pack(f"round {k}: {r.reason}", path, run, k)

        def on_download(path):
            import shutil
            import tempfile

            from refine.present.report.run import render_run

            try:
                _, run_dir = service.opened(path)
            except (ValueError, OSError) as err:
                raise error(f"no run to download yet: {err}") from err
            # one zip and report per run and version of its record, made once: asking
            # again (any visitor, any number of times) does not fill the disk
            import hashlib

            record = run_dir / "run.json"
            where = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:12]
            version = f"{where}-{record.stat().st_mtime_ns}-{record.stat().st_size}"
            folder = Path(tempfile.gettempdir()) / "refine-downloads" / f"{run_dir.name}-{version}"
            report = folder / f"{run_dir.name}-report.html"
            archive = folder / f"{run_dir.name}.zip"
            if not (report.is_file() and archive.is_file()):
                made = Path(tempfile.mkdtemp(prefix="refine-download-"))
                (made / report.name).write_text(render_run(run_dir), encoding="utf-8")
                _zip_run(run_dir, made / archive.name)
                folder.parent.mkdir(parents=True, exist_ok=True)
                try:
                    made.rename(folder)
                except OSError:  # made at the same time by another request: theirs is kept
                    shutil.rmtree(made, ignore_errors=True)
            return [str(archive), str(report)]

        def on_country(tok, ctry, act, request=None):
            """The activities the pack has references for in this country."""
            choices = ready_activities(ctry)
            keep = act if act in choices else (choices[0] if choices else act)
            return [gr.update(choices=choices, value=keep), *on_activity(tok, keep, ctry, request)]

        def on_activity(tok, act, ctry, request=None):
            """Where this activity's references come from, or the offer to build them."""
            note, missing = references_note(service, act, ctry, _visitor(tok, request))
            hide = gr.update(visible=False)
            return [note, gr.update(visible=missing), hide, hide]

        def on_build(tok, act, ctry, request=None, progress=gr.Progress()):  # noqa: B008
            asked = {"of": 1}

            def seen(event: dict) -> None:
                """propose 1..n, refine, stereotypes: n + 2 model answers in all."""
                stage = event.get("stage")
                if stage == "propose":
                    asked["of"] = int(event.get("of", 1))
                    done = int(event.get("n", 1)) - 1
                else:
                    done = asked["of"] + (0 if stage == "refine" else 1)
                progress((done, asked["of"] + 2), desc=f"{stage}: {event.get('model', '')}")

            try:
                result = service.build_references(
                    act, ctry, on_event=seen, visitor=_visitor(tok, request)
                )
            except (ServiceBusy, ValueError) as err:
                raise error(err) from err
            except Exception as err:  # a model or API failure: said, the app goes on
                from refine.backends.loading import describe_error

                raise error(f"could not build references: {describe_error(err)}") from err
            pack = result.pack
            text = references_json(pack)
            shown = gr.update(visible=True)
            note = (
                f"**references built** for *{md_text(pack.activity)}* in {md_text(pack.country)} "
                f"({result.asked} model calls, {result.cached} answers from the cache): "
                "review them below, save any change, then Start."
            )
            return [note, gr.update(visible=False), gr.update(value=text, visible=True), shown]

        def on_save_refs(tok, act, ctry, text, request=None):
            try:
                pack = service.save_references(act, ctry, text or "", _visitor(tok, request))
            except ValueError as err:
                raise error(err) from err
            count = sum(len(v) for v in pack.descriptors.values())
            return (
                f"**references saved** for *{md_text(pack.activity)}* in {md_text(pack.country)} "
                f"({count} descriptors): Start when ready."
            )

        def on_upload(path):
            """A file the visitor uploaded: previewed when it is an image that can be
            refined, else a message naming it and the limits, and the box is emptied."""
            if not path:
                return None, gr.update(value=None, visible=False)
            try:
                settings.check_image(path)
            except settings.SettingsError as err:
                gr.Warning(html_text(f"{err.message} (use {UPLOAD_LIMITS})"))
                return None, gr.update(value=None, visible=False)
            return gr.skip(), gr.update(value=path, visible=True)

        upload.upload(on_upload, upload, [upload, upload_preview], api_name=False)
        upload.clear(
            lambda: gr.update(value=None, visible=False), None, upload_preview, api_name=False
        )

        def on_example(tok, act, ctry, request=None):
            choices = ready_activities(ctry)
            return [
                gr.update(choices=choices, value=act),
                gr.update(value=ctry),
                *on_activity(tok, act, ctry, request),
            ]

        for handler in (
            on_start,
            on_stop,
            on_apply,
            on_branch,
            on_country,
            on_activity,
            on_build,
            on_save_refs,
            on_example,
        ):
            handler.__annotations__["request"] = gr.Request

        def on_visit(kept):
            """The browser's token (made on the first visit), into this session's state."""
            made = new_token(kept)
            return made, made

        demo.load(on_visit, token_store, [token_store, token], api_name=False, queue=False)

        refs_outputs = [refs_note, build_btn, refs_review, save_refs_btn]
        examples.load_input_event.then(
            on_example,
            [token, example_act, example_ctry],
            [activity, country, *refs_outputs],
            api_name=False,
            queue=False,
        )
        # a visitor's own pick only (.input): an example sets the country too, and its
        # activity must stay (a .change would reset it to the country's first activity)
        country.input(
            on_country, [token, country, activity], [activity, *refs_outputs], api_name=False
        )
        activity.change(on_activity, [token, activity, country], refs_outputs, api_name=False)
        build_btn.click(
            on_build,
            [token, activity, country],
            refs_outputs,
            api_name="build_references",
            **ONE_RUN,
        )
        save_refs_btn.click(
            on_save_refs,
            [token, activity, country, refs_review],
            refs_note,
            api_name="save_references",
        )
        start.click(
            on_start,
            [
                token,
                activity,
                country,
                rounds,
                target,
                seed,
                candidates,
                max_drift,
                pause,
                upload,
                caire_labels,
                caire_kb,
                prompt_languages,
                sos_bank,
                language_scores,
                expectations,
                max_quality_drop,
            ],
            outputs,
            api_name="start",
            **ONE_RUN,
        )
        # their messages go to their own box, so they never hide the run's own stage
        stop.click(on_stop, token, notice, api_name="stop", queue=False)
        apply.click(on_apply, [token, instruction], notice, api_name="apply", queue=False)
        # steering and browsing: a refused click is a toast, and the view stays as it was
        # (no status marks on the outputs)
        quiet = {"show_progress": "hidden"}
        open_btn.click(on_open, saved, outputs, api_name="open", **quiet)
        saved.select(on_open, saved, outputs, api_name=False, **quiet)

        def on_refresh():
            cards = service.cards(SAVED_SHOWN)
            thumbs = [(str(c.image), c.caption) for c in cards if c.image is not None]
            ids = [c.id for c in cards if c.image is not None]
            return gr.update(choices=[(c.label, c.id) for c in cards]), thumbs, ids

        def on_saved_pick(ids, evt):
            k = int(evt.index)
            if not 0 <= k < len(ids):
                raise error("that run is no longer in the list: refresh it")
            return on_open(ids[k])

        on_saved_pick.__annotations__["evt"] = gr.SelectData
        listing = [saved, saved_gallery, saved_ids]
        refresh_btn.click(on_refresh, None, listing, api_name="runs", queue=False)
        demo.load(on_refresh, None, listing, api_name=False)
        demo.load(None, None, None, js=keys_js, api_name=False)  # the Rate view's keys
        saved_box.expand(on_refresh, None, listing, api_name=False)
        saved_gallery.select(on_saved_pick, saved_ids, outputs, api_name=False, **quiet)
        download_btn.click(on_download, run_dir_box, files, api_name="download")
        gallery.select(on_pick, run_dir_box, [*outputs, round_pick], api_name=False, **quiet)
        show_btn.click(on_show, [run_dir_box, round_pick], outputs, api_name="show", **quiet)
        branch_btn.click(
            on_branch,
            [
                token,
                run_dir_box,
                round_pick,
                rounds,
                target,
                seed,
                candidates,
                max_drift,
                pause,
                max_quality_drop,
            ],
            outputs,
            api_name="branch",
            **ONE_RUN,
        )

        def on_accept(tok, p, k, j, request=None):
            return on_choose(tok, p, k, j, True, request)

        def on_reject(tok, p, k, j, request=None):
            return on_choose(tok, p, k, j, False, request)

        for handler in (on_accept, on_reject):
            handler.__annotations__["request"] = gr.Request
        accept_btn.click(
            on_accept,
            [token, run_dir_box, round_pick, cand_pick],
            outputs,
            api_name="accept",
            **quiet,
        )
        reject_btn.click(
            on_reject,
            [token, run_dir_box, round_pick, cand_pick],
            outputs,
            api_name="reject",
            **quiet,
        )
    demo.queue(default_concurrency_limit=1, **queue_options(limits))
    return demo


def ready_activities(country: str | None) -> list[str]:
    """The activities of ``country`` that the bundled pack holds references for; for a
    country with none, all its activities (their references are built first, with
    `refine refs build`); empty for a country the pack lacks."""
    from refine.evaluate.references import load_pack

    pack = load_pack()
    key = pack.country_key(country or "")
    if key is None:
        return []
    acts = pack.countries[key]["activities"]
    ready = sorted(a for a, entry in acts.items() if entry.get("descriptors"))
    return ready or sorted(acts)


def references_note(
    service: RunService, activity: Any, country: Any, visitor: str | None = None
) -> tuple[str, bool]:
    """(a line on where the references of ``activity`` in ``country`` come from for
    ``visitor``, whether they are missing and can be built here)."""
    if not str(activity or "").strip() or not str(country or "").strip():
        return "pick an activity and a country", False
    try:  # what a client sends: one line of printable text, not too long
        activity, country = phrase(activity, "activity"), phrase(country, "country")
    except ValueError as err:
        return md_text(err), False
    act, ctry = md_text(activity), md_text(country)
    try:
        pack = service.find_references(activity, country, visitor)
    except ValueError:
        return (
            f"**no references yet** for *{act}* in {ctry}: build them with the profile's "
            "language models (a few calls, cached), review them, then Start.",
            True,
        )
    n = sum(len(v) for v in pack.descriptors.values())
    if "pack (" in pack.source:
        where = "the bundled CULTIVate pack"
    elif pack.source.startswith("reviewed in the app"):
        where = "reviewed in this app"
    else:
        where = "built with language models"
    return (
        f"references: {n} descriptors and {len(pack.stereotypes)} stereotype candidates "
        f"for *{act}* in {ctry} ({where})",
        False,
    )


def references_json(pack: Any) -> str:
    """A reference pack as the JSON the review box shows and ``save_references`` reads."""
    import json

    doc = {
        "descriptors": dict(pack.descriptors),
        "stereotypes": list(pack.stereotypes),
        "source": pack.source,
    }
    return json.dumps(doc, indent=1, ensure_ascii=False)


def _index(value: Any, what: str) -> int:
    """A round or candidate number from a client: a whole number, or a ValueError."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"the {what} must be a whole number, got {value!r}") from None
    if not number.is_integer():
        raise ValueError(f"the {what} must be a whole number, got {value!r}")
    return int(number)


NO_VISITOR = "this request names no visitor: open the app in a browser or with gradio_client"


def _visitor(token: Any, request: Any) -> str | None:
    """The visitor a request comes from (see :mod:`ui.visitors`)."""
    return visitor_id(request, token)


def _zip_run(run_dir: Path, archive: Path) -> Path:
    """The run folder's own regular files (never a link, never anything outside it)."""
    import zipfile

    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for entry in sorted(run_dir.iterdir()):
            if entry.is_symlink() or not entry.is_file() or entry.name.startswith("."):
                continue
            zf.write(entry, entry.name)
    return archive


def _settings_message(err: settings.SettingsError) -> str:
    """A settings problem in the form's words: ``CAIRE knowledge base: ... (fill in CAIRE
    cultures)``."""
    hint = f" (fill in {FIELD_LABELS.get(err.related, err.related)})" if err.related else ""
    return f"{FIELD_LABELS.get(err.field, err.field)}: {err.message}{hint}"


def _numbers(n_rounds, target, seed, candidates, max_drift, quality_drop=None) -> dict[str, Any]:
    """The form's numeric run settings (None where a field is empty: the default)."""

    def num(value, kind, name):
        if value is None or value == "":
            return None
        try:
            return kind(value)
        except (TypeError, ValueError):
            label = FIELD_LABELS.get(name, name)
            raise ValueError(f"{label}: {str(value)[:40]!r} is not a number") from None

    return {
        "rounds": num(n_rounds, int, "rounds"),
        "target": num(target, float, "target"),
        "seed": num(seed, int, "seed"),
        "candidates": num(candidates, int, "candidates"),
        "max_drift": num(max_drift, float, "max_drift"),
        "max_quality_drop": num(quality_drop, float, "max_quality_drop"),
    }


def serve(
    profile: str | None = None,
    out: str | Path = "runs",
    host: str = "127.0.0.1",
    port: int = 7860,
    share: bool = False,
    auth: tuple[str, str] | None = None,
    backends: dict[str, str] | None = None,
    admins: list[str] | tuple[str, ...] = (),
    limits: Limits | None = None,
    quotas: Quotas | None = None,
    trust_proxy: bool = False,
) -> None:
    """Serve the app (``refine app``); the profile is chosen from what can run unless given.
    ``admins``: user names that change the shared references and tune from every run;
    ``quotas``: runs per visitor per hour and calls per day (:mod:`ui.quotas`)."""
    from refine.profiles import choose_profile

    profile, status = (profile, f"profile: {profile}") if profile else choose_profile()
    if quotas is not None and quotas.describe():
        status += f" · quotas: {quotas.describe()}"
    Path(out).mkdir(parents=True, exist_ok=True)
    service = RunService(profile, out=out, backends=backends, admins=[f"user:{a}" for a in admins])
    demo = build_app(service, status, limits, quotas=quotas, trust_proxy=trust_proxy)
    demo.launch(server_name=host, server_port=port, share=share, auth=auth, **launch_options(out))


def queue_options(limits: Limits | None) -> dict[str, Any]:
    """The waiting line's length from the limits: runs are made one at a time (the start
    and roll-back events share one slot), and the line holds the runs the device can finish
    in two hours at the longest run allowed (at least 8). A crowd waits in line and sees its
    place; past that, Gradio says the demo is full instead of leaving a visitor waiting
    for hours."""
    minutes = (limits or Limits()).run_minutes
    return {"max_size": max(8, math.ceil(120 / minutes))}


def launch_options(out: str | Path) -> dict[str, Any]:
    """What ``demo.launch`` needs besides the address: the upload limit, and ``--out`` as
    the only folder files are served from (run images, thumbnails)."""
    return {
        "max_file_size": f"{MAX_UPLOAD_MB}mb",
        "allowed_paths": [str(Path(out).resolve())],
    }
