"""Distil refinement runs into a LoRA for the generator (``refine tune``).

A tune is five parts, each its own module:

* :mod:`refine.train.config`: the tune's settings (:class:`TuneConfig`);
* :mod:`refine.train.data`: the rows ``refine export`` wrote (pairs for ``dpo``, captioned
  images for ``sft``) and each step's batch, drawn from ``seed`` and the step;
* :mod:`refine.train.denoiser`: the pipeline's denoiser (SD, SDXL, FLUX.2 [klein]) with a
  LoRA, its conditioning, latents and denoising error, the frozen base being the same
  weights with the adapter switched off;
* :mod:`refine.train.objectives`: Diffusion-DPO and the plain denoising loss;
* :mod:`refine.train.loop`: the loop on accelerate (processes, mixed precision, gradient
  accumulation, trackers, checkpoints).

:class:`Tuner` puts them together. Each step's batch and noise come from ``seed + step``,
so a resumed tune continues exactly as an uninterrupted one. The adapter is saved as
``pytorch_lora_weights.safetensors`` (what ``pipe.load_lora_weights(DIR)`` reads) with a
model card, the loss curve and ``tune.json`` (:mod:`refine.train.outputs`); validation
images every ``validate_every`` steps.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.backends.imports import require
from refine.train.config import TuneConfig
from refine.train.data import draw_batch, load_rows
from refine.train.loop import trackers_of
from refine.train.objectives import objective

TRAINING = (("torch", "torch"), ("diffusers", "diffusers"), ("peft", "peft"))


def need_training() -> None:
    """The packages training needs, or one ImportError naming the extra that brings them
    (a package that is installed but fails to import raises its own error). A missing
    one is looked for before any is imported: on an install without the extra the error
    comes at once, not after torch's import (1.9 s against 0.4 s for the whole command)."""
    import importlib.util

    needed = (*TRAINING, ("accelerate", "accelerate"))
    for module, package in needed:
        if importlib.util.find_spec(module) is None:
            require(module, package, "refine tune", "local")  # raises, naming the extra
    for module, package in needed:
        require(module, package, "refine tune", "local")


class Tuner:
    """A LoRA tune of one pipeline's denoiser (see the module docstring). ``trackers``:
    accelerate ``GeneralTracker`` objects to report to, beside ``report_to``."""

    def __init__(
        self,
        config: TuneConfig,
        on_progress: Callable[[dict], None] | None = None,
        trackers: list[Any] | tuple[Any, ...] = (),
    ):
        config.check()
        self.c = config
        self.emit = on_progress or (lambda info: None)
        self.objective = objective(config.method, config.beta)
        trackers_of(config.report_to)  # a tracker that is not installed, before any work
        self.rows = load_rows(config.data, config.method)
        self.held = load_rows(config.data, config.method, "test")
        self.out = Path(config.out)
        self.trackers = list(trackers)
        self.loop: Any = None  # a TrainLoop, once loaded
        self.denoiser: Any = None  # a Denoiser, once loaded

    def load(self) -> None:
        """The loop (processes, precision, trackers), then the denoiser on its device."""
        need_training()
        from refine.train.denoiser import Denoiser
        from refine.train.loop import TrainLoop

        self.loop = TrainLoop(self.c, self.emit, self.trackers)
        self.denoiser = Denoiser(
            self.c.base,
            self.loop.device,
            self.c.resolution,
            self.c.rank,
            self.c.seed,
            self.c.gradient_checkpointing,
        )
        self.loop.attach(self.denoiser)

    # -- what the loop reports ------------------------------------------------------------

    @property
    def rank(self) -> int:
        return self.loop.rank if self.loop else 0

    @property
    def world(self) -> int:
        return self.loop.world if self.loop else 1

    @property
    def main(self) -> bool:
        """This process writes the outputs (the only one, unless launched as several)."""
        return self.rank == 0

    @property
    def step(self) -> int:
        return self.loop.step if self.loop else 0

    @property
    def losses(self) -> list[tuple]:
        """(step, loss, reward accuracy, gradient norm) of every step so far."""
        return self.loop.history if self.loop else []

    # -- losses ---------------------------------------------------------------------------

    def loss_on(self, rows: list[dict], index: int, whole: bool = False):
        """(loss, implicit reward accuracy or None) of micro-batch ``index``: this process's
        share of it, or with ``whole`` all of it."""
        rank, world = (0, 1) if whole else (self.rank, self.world)
        batch = draw_batch(rows, self.c.batch_size, self.c.seed, index, rank, world)
        return self.objective.loss(self.denoiser, batch)

    def accuracy(self, rows: list[dict], draws: int = 8) -> float | None:
        """The DPO implicit reward accuracy on ``rows`` (fixed draws: comparable before
        and after tuning); None for sft or without rows."""
        import torch

        if self.c.method != "dpo" or not rows:
            return None
        accs = []
        with torch.no_grad():
            for k in range(draws):
                _, acc = self.loss_on(rows, 10_000_000 + k, whole=True)
                accs.append(acc)
        return sum(accs) / len(accs)

    # -- the tune -------------------------------------------------------------------------

    def run(self, resume: bool = False) -> dict[str, Any]:
        self.load()
        if self.main:
            self.out.mkdir(parents=True, exist_ok=True)
        self.loop.wait()
        if resume and (self.out / "checkpoint.pt").is_file():
            self.loop.restore()
        elif (self.out / "checkpoint.pt").is_file():
            raise ValueError(f"{self.out} holds a tune already: --resume it or give a new --out")
        try:
            self.loop.train(lambda index: self.loss_on(self.rows, index), self._after_step)
        except BaseException:
            self.loop.close(failed=True)
            raise
        return self._finish()

    def _after_step(self, step: int) -> None:
        if self.c.validate_every and step % self.c.validate_every == 0:
            if self.main:
                self.validate(f"step-{step}")
            self.loop.wait()

    def validate(self, name: str, prompts: list[str] | None = None, seed: int = 0) -> list[Path]:
        """Images for the first prompts of the data (fixed seed), saved under validation/."""
        prompts = prompts or list(dict.fromkeys(r["prompt"] for r in self.rows))[:2]
        folder = self.out / "validation"
        folder.mkdir(parents=True, exist_ok=True)
        unet = self.denoiser.unet
        was_training = unet.training
        unet.eval()
        paths = []
        for k, prompt in enumerate(prompts):
            path = folder / f"{name}-{k}.png"
            self.denoiser.draw(prompt, seed).save(path)
            paths.append(path)
        if was_training:
            unet.train()
        return paths

    def _finish(self) -> dict[str, Any]:
        from refine.train.outputs import base_facts, write_outputs

        held = self.accuracy(self.held)
        self.loop.release()
        if not self.main:  # the main process writes; the others wait for it
            self.loop.close()
            return {"method": self.c.method, "steps": self.step, "rank": self.rank}
        self.denoiser.save(self.out)
        summary = {
            "method": self.c.method,
            "base": self.c.base,
            "steps": self.step,
            "rows": len(self.rows),
            "held_out_rows": len(self.held),
            "final_loss": self.losses[-1][1] if self.losses else None,
            "held_out_accuracy": held,
            "processes": self.world,
            "config": self.c.model_dump(),
            "base_model": base_facts(self.c.base),  # the hub id, its commit, its licence
            "validation_prompts": list(dict.fromkeys(r["prompt"] for r in self.rows))[:2],
        }
        write_outputs(self.out, summary, self.losses)
        self.loop.close()
        return summary
