"""The Tune view: what the saved runs hold for tuning, a small LoRA tune of the profile's
generator on them (with progress), and base against tuned images for a prompt, side by
side. Everything stays inside the app's folder (``out/tunes``); the generator is always
the profile's, never a name a client sends."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from refine.present.report.tune import loss_charts, read_history, write_tune_page
from refine.service import RunService, ServiceBusy
from ui.safe import error, md_text, no_server_paths, number_box
from ui.views.common import VisitorGate
from ui.visitors import visitor_id


def _data_text(service: RunService, max_drift: float = 0.5, visitor: str | None = None) -> str:
    counts = service.tuning.training_data(max_drift, visitor)
    try:
        base = f"the generator to tune: `{no_server_paths(service.tuning.tunable_base())}`"
    except ValueError as err:
        base = f"**{md_text(no_server_paths(err), 400)}**"
    mine = "" if visitor is None or service.is_admin(visitor) else " of yours"
    return (
        f"{counts['runs']} saved runs{mine}: {counts['pairs']} preference pairs (for dpo), "
        f"{counts['images']} accepted images (for sft); {base}."
    )


def add_tune_view(service: RunService, token: gr.State, gate: VisitorGate) -> None:
    """The Tune accordion and its events (``token``: the session's visitor state; ``gate``:
    the buttons that wait for the visitor): a visitor tunes from their own runs (an admin
    from all)."""
    try:  # tuning needs the profile's generator to be a local diffusers pipeline
        service.tuning.tunable_base()
        off = None
    except ValueError as err:
        off = str(err)
    title = "Tune the generator (a LoRA from your runs)"
    if off is not None:
        title += ": not on this profile"
    on = off is None
    with gr.Accordion(title, open=False, elem_id="tune"):
        if off is not None:  # said first, and every control below is disabled
            gr.Markdown(f"**Tuning is off here:** {md_text(off, 400)}.", elem_id="tune-off")
        gr.Markdown(
            "Distil the saved runs into a LoRA for the profile's generator: **dpo** learns "
            "from the preference pairs (a refined image over its first draft, a better "
            "candidate over a worse one), **sft** from the accepted images. Then draw the "
            "same prompt and seed with the base and the tuned generator. For long tunes "
            "use `refine export` and `refine tune`."
        )
        data = gr.Markdown("", elem_id="tune-data")
        count = gate.button(gr, "Count the training data", enabled=on, elem_id="tune-count")
        with gr.Row():
            method = gr.Radio(
                ["dpo", "sft"], value="dpo", label="method", elem_id="tune-method", interactive=on
            )
            steps = number_box(
                200,
                precision=0,
                minimum=1,
                maximum=5000,
                label="steps",
                elem_id="tune-steps",
                interactive=on,
            )
            lr = number_box(
                1e-4,
                minimum=0,
                maximum=0.1,
                label="learning rate",
                elem_id="tune-lr",
                interactive=on,
            )
            resolution = number_box(
                512,
                precision=0,
                minimum=32,
                maximum=1024,
                label="resolution (px)",
                elem_id="tune-resolution",
                interactive=on,
            )
            drift = number_box(
                0.5,
                minimum=0,
                maximum=2,
                label="largest drift between a pair's images",
                elem_id="tune-drift",
                interactive=on,
            )
        start = gate.button(gr, "Tune", enabled=on, variant="primary", elem_id="tune-start")
        result = gr.Markdown("", elem_id="tune-result")
        losses = gr.HTML("", elem_id="tune-loss")
        with gr.Row():
            tune = gr.Dropdown(
                service.tuning.tunes(),
                label="tuned adapter",
                elem_id="tune-adapter",
                interactive=on,
            )
            prompt = gr.Textbox(
                label="prompt",
                elem_id="tune-prompt",
                placeholder="A photorealistic photo of people eating food at home in Iran.",
                interactive=on,
            )
            seed = number_box(0, precision=0, label="seed", elem_id="tune-seed", interactive=on)
        compare = gate.button(
            gr, "Draw with the base and the tuned generator", enabled=on, elem_id="tune-compare"
        )
        with gr.Row():
            base_image = gr.Image(label="base", interactive=False, elem_id="tune-base")
            tuned_image = gr.Image(label="tuned", interactive=False, elem_id="tune-tuned")

    def on_count(tok, max_drift, request=None) -> str:
        try:
            value = float(max_drift if max_drift is not None else 0.5)
        except (TypeError, ValueError):
            raise error("the drift is a number from 0 to 2") from None
        if not 0 <= value <= 2:
            raise error("the drift is a number from 0 to 2")
        return _data_text(service, value, visitor_id(request, tok))

    def on_tune(tok, m, n, rate, px, max_drift, request=None, progress=gr.Progress()):  # noqa: B008
        def report(info: dict) -> None:
            acc = "" if info["accuracy"] is None else f", reward accuracy {info['accuracy']:.2f}"
            progress(
                info["step"] / info["steps"],
                desc=f"step {info['step']} of {info['steps']}: loss {info['loss']:.4f}{acc}",
            )

        try:
            summary = service.tuning.tune(
                m, n, rate, px, report, max_drift=max_drift, visitor=visitor_id(request, tok)
            )
        except (ServiceBusy, ValueError) as err:
            raise error(err) from err
        held = summary["held_out_accuracy"]
        name = summary["adapter"].split("/")[-2]
        text = (
            f"**tuned** `{name}`: {summary['steps']} steps of {summary['method']} on "
            f"{summary['rows']} rows, final loss {summary['final_loss']:.4f}"
            + (f", held-out reward accuracy {held:.2f}" if held is not None else "")
        )
        # the loss page beside the adapter, and its charts here
        folder = Path(summary["adapter"])
        write_tune_page(folder)
        chart = loss_charts(read_history(folder), summary["method"])
        return text, chart, gr.update(choices=service.tuning.tunes(), value=name)

    def on_compare(name, text, number):
        try:
            return service.tuning.compare(name, text, int(number or 0))
        except (ServiceBusy, ValueError) as err:
            raise error(err) from err

    for handler in (on_count, on_tune):
        handler.__annotations__["request"] = gr.Request
    count.click(on_count, [token, drift], data, api_name="tune_count", queue=False)
    start.click(
        on_tune,
        [token, method, steps, lr, resolution, drift],
        [result, losses, tune],
        api_name="tune",
    )
    compare.click(
        on_compare, [tune, prompt, seed], [base_image, tuned_image], api_name="tune_compare"
    )
