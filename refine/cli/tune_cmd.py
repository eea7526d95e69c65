"""``refine tune``: a LoRA for the generator from exported refinement runs."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import typer

from refine.cli.inputs import PUBLIC_HELP, UserInputError, checked_push, push_to_hub_option
from refine.cli.task_cmd import extra_option, plan_command
from refine.present.report.tune import write_tune_page
from refine.present.terminal.records import tune_lines
from refine.train.tune import TuneConfig, Tuner, need_training


def _tune(
    config: TuneConfig, resume: bool, push_to_hub: str | None, public: bool, as_json: bool
) -> None:
    need_training()  # one line naming the extra, before any data is read
    checked_push(push_to_hub, public)  # before any work: a bad token said now
    base, out = config.base, Path(config.out)
    shown = {"last": 0}

    def progress(info: dict) -> None:
        if as_json:
            return
        step, total = info["step"], info["steps"]
        if step - shown["last"] >= max(1, total // 20) or step == total:
            shown["last"] = step
            acc = "" if info["accuracy"] is None else f", reward accuracy {info['accuracy']:.2f}"
            left = info["elapsed_s"] / step * (total - step)
            typer.echo(
                f"  step {step}/{total}: loss {info['loss']:.4f}{acc}, about {left:.0f} s left",
                err=True,
            )

    try:
        tuner = Tuner(config, progress)
        summary = tuner.run(resume=resume)
        if not tuner.main:  # launched as several processes: the main one reports
            return
        if not config.validate_every:
            tuner.validate("final")
    except ValueError as err:
        raise UserInputError(f"refine tune: {err}") from err
    page = write_tune_page(out)
    from refine.train.outputs import write_card

    write_card(out, summary, push_to_hub)  # with the last validation images
    if push_to_hub:
        from refine.train.hub import TUNE_IGNORE, push

        message = f"refine tune --method {summary['method']}: {summary['steps']} steps"
        summary = {**summary, "pushed": push(out, push_to_hub, "model", message, public,
                                             TUNE_IGNORE)}  # fmt: skip
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    for line in tune_lines({**summary, "out": str(out), "base": base, "page": page}):
        typer.echo(line)


TUNE = """Train a LoRA (peft) on the generator's UNet: Diffusion-DPO on preference pairs, or
the denoising loss on accepted images. Saves the adapter where pipe.load_lora_weights reads
it, a model card, the loss curve and validation images. On several GPUs: accelerate launch
--multi_gpu --num_processes N $(which refine) tune ... (each process trains on its share of
one batch of batch-size x N rows; the gradients are averaged)."""
tune_cmd = plan_command(
    TuneConfig,
    _tune,
    TUNE,
    [
        extra_option("resume", False, "--resume", "Go on from the checkpoint in --out.", bool),
        inspect.Parameter(
            "push_to_hub",
            inspect.Parameter.KEYWORD_ONLY,
            default=push_to_hub_option("the adapter, its card and validation images"),
            annotation=str | None,
        ),
        extra_option("public", False, "--public", PUBLIC_HELP, bool),
        extra_option("as_json", False, "--json", "Print tune.json.", bool),
    ],
)
