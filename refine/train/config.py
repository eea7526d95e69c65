"""A tune's settings, below every part that reads them (see :mod:`refine.train.tune`).

Its fields carry their flag, help and bounds, so ``refine tune``'s options are made from
them (:func:`refine.cli.task_cmd.plan_command`)."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from refine.records import option


class TuneConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: str = option(help="A folder made by refine export.", given="path")
    base: str = option(
        help="The generator: diffusers:ID-or-path (SD 1.5/2.1/SD-Turbo, SDXL, FLUX.2 klein)."
    )
    out: str = option(help="The adapter folder.", given="path")
    method: str = option("dpo", "dpo (pairs) or sft (imagefolder).")
    rank: int = option(8, "LoRA rank.", ge=1)
    steps: int = option(500, "Optimiser steps.", ge=1)
    lr: float = option(1e-4, "Learning rate.")
    beta: float = option(5000.0, "dpo: the KL weight (Diffusion-DPO).")
    resolution: int = option(512, "Training image side.", ge=8)
    # per process: a step's batch is batch_size x grad_accum x processes
    batch_size: int = option(1, "Rows per micro-batch and process.", ge=1)
    grad_accum: int = option(1, "Micro-batches per step.", ge=1)
    checkpoint_every: int = option(100, "0: never.", ge=0)
    validate_every: int = option(0, "0: at the end only.", ge=0)
    seed: int = option(0, "Seed of the adapter, batches and noise.")
    device: str | None = option(None, "cuda, cpu, ... (default: the best).")
    # auto: bf16 on a GPU that has it, else none
    mixed_precision: str = option("auto", "auto, no, fp16, bf16.")
    gradient_checkpointing: bool = option(False, "Less memory, slower steps.")
    report_to: str = option(
        "none",
        "Trackers for the loss (accelerate's: tensorboard, trackio, wandb, mlflow, ..., all "
        "installed, none), comma-separated; logs under --out (trackio: its own store).",
    )

    def check(self) -> None:
        if self.method not in ("dpo", "sft"):
            raise ValueError(f"method must be dpo or sft, got {self.method!r}")
        for name in ("rank", "steps", "batch_size", "grad_accum", "resolution"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.resolution % 8:
            raise ValueError("resolution must be a multiple of 8")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError("lr must be a positive number")
        if not (self.beta > 0 and math.isfinite(self.beta)):
            raise ValueError("beta must be a positive number")
        if self.mixed_precision not in ("auto", "no", "fp16", "bf16"):
            raise ValueError("mixed precision is auto, no, fp16 or bf16")
