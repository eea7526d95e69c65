"""``refine tune``: a LoRA for the generator from exported refinement runs."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from refine.cli.inputs import PUBLIC_HELP, UserInputError, checked_push, push_to_hub_option
from refine.present.report.tune import write_tune_page
from refine.train.tune import TuneConfig, Tuner, need_training


def tune_cmd(
    data: Path = typer.Option(..., "--data", help="A folder made by refine export."),
    base: str = typer.Option(
        ...,
        "--base",
        help="The generator: diffusers:ID-or-path (SD 1.5/2.1/SD-Turbo, SDXL, FLUX.2 klein).",
    ),
    method: str = typer.Option("dpo", "--method", help="dpo (pairs) or sft (imagefolder)."),
    rank: int = typer.Option(8, "--rank", min=1, help="LoRA rank."),
    steps: int = typer.Option(500, "--steps", min=1, help="Optimiser steps."),
    lr: float = typer.Option(1e-4, "--lr", help="Learning rate."),
    beta: float = typer.Option(5000.0, "--beta", help="dpo: the KL weight (Diffusion-DPO)."),
    resolution: int = typer.Option(512, "--resolution", min=8, help="Training image side."),
    batch_size: int = typer.Option(
        1, "--batch-size", min=1, help="Rows per micro-batch and process."
    ),
    grad_accum: int = typer.Option(1, "--grad-accum", min=1, help="Micro-batches per step."),
    checkpoint_every: int = typer.Option(100, "--checkpoint-every", min=0, help="0: never."),
    validate_every: int = typer.Option(0, "--validate-every", min=0, help="0: at the end only."),
    seed: int = typer.Option(0, "--seed", help="Seed of the adapter, batches and noise."),
    device: str = typer.Option(None, "--device", help="cuda, cpu, ... (default: the best)."),
    precision: str = typer.Option("auto", "--mixed-precision", help="auto, no, fp16, bf16."),
    checkpointing: bool = typer.Option(
        False, "--gradient-checkpointing", help="Less memory, slower steps."
    ),
    report_to: str = typer.Option(
        "none",
        "--report-to",
        help="Trackers for the loss (accelerate's: tensorboard, trackio, wandb, mlflow, ..., all "
        "installed, none), comma-separated; logs under --out (trackio: its own store).",
    ),
    out: Path = typer.Option(..., "--out", help="The adapter folder."),
    resume: bool = typer.Option(False, "--resume", help="Go on from the checkpoint in --out."),
    push_to_hub: str = push_to_hub_option("the adapter, its card and validation images"),
    public: bool = typer.Option(False, "--public", help=PUBLIC_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print tune.json."),
) -> None:
    """Train a LoRA (peft) on the generator's UNet: Diffusion-DPO on preference pairs, or
    the denoising loss on accepted images. Saves the adapter where pipe.load_lora_weights
    reads it, a model card, the loss curve and validation images. On several GPUs:
    accelerate launch --multi_gpu --num_processes N $(which refine) tune ... (each process
    trains on its share of one batch of batch-size x N rows; the gradients are averaged)."""

    need_training()  # one line naming the extra, before any data is read
    checked_push(push_to_hub, public)  # before any work: a bad token said now
    config = TuneConfig(
        data=str(data),
        base=base,
        out=str(out),
        method=method,
        rank=rank,
        steps=steps,
        lr=lr,
        beta=beta,
        resolution=resolution,
        batch_size=batch_size,
        grad_accum=grad_accum,
        checkpoint_every=checkpoint_every,
        validate_every=validate_every,
        seed=seed,
        device=device,
        mixed_precision=precision,
        gradient_checkpointing=checkpointing,
        report_to=report_to,
    )
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
        if not validate_every:
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
    typer.echo(f"adapter: {out} ({summary['steps']} steps, final loss {summary['final_loss']:.4f})")
    if summary["held_out_accuracy"] is not None:
        typer.echo(f"held-out implicit reward accuracy: {summary['held_out_accuracy']:.3f}")
    typer.echo(f"loss curve: {page}")
    typer.echo(f'use it: --generator "diffusers:{base.removeprefix("diffusers:")}+lora={out}"')
    if push_to_hub:
        typer.echo(f"pushed to the Hub: {summary['pushed']}")
