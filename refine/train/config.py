"""A tune's settings, below every part that reads them (see :mod:`refine.train.tune`)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class TuneConfig:
    data: str
    base: str  # a diffusers model id or path (or "diffusers:ID")
    out: str
    method: str = "dpo"
    rank: int = 8
    steps: int = 500
    lr: float = 1e-4
    beta: float = 5000.0
    resolution: int = 512
    batch_size: int = 1  # per process: a step's batch is batch_size x grad_accum x processes
    grad_accum: int = 1
    checkpoint_every: int = 100
    validate_every: int = 0
    seed: int = 0
    device: str | None = None
    mixed_precision: str = "auto"  # auto: bf16 on a GPU that has it, else none
    gradient_checkpointing: bool = False
    report_to: str = "none"  # accelerate trackers: tensorboard, wandb, ..., all, none

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
