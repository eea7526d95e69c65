"""The two objectives a tune minimises, each on one micro-batch (:class:`~refine.train.data.Batch`):

* ``dpo``, Diffusion-DPO (Wallace et al. 2023) on preference pairs: for one prompt, the same
  noise and noise level on the preferred latent ``w`` and the rejected one ``l``;
  ``d = (e_w - e_l) - (e_w^ref - e_l^ref)`` where ``e`` is the per-sample denoising error of
  the tuned denoiser and ``e^ref`` of the frozen base (the adapter switched off);
  ``loss = -log sigmoid(-beta / 2 * d)``. The implicit reward accuracy is the share of pairs
  with ``-beta / 2 * d > 0`` (0 at the start: the adapter begins as the base).
* ``sft``: the plain denoising loss on accepted images.

Each returns the loss and the reward accuracy (None for sft).
"""

from __future__ import annotations

from typing import Any, Protocol

from refine.train.data import Batch
from refine.train.denoiser import Denoiser

WHAT = {"dpo": "Diffusion-DPO on preference pairs", "sft": "denoising loss on accepted images"}


class Objective(Protocol):
    name: str

    def loss(self, model: Denoiser, batch: Batch) -> tuple[Any, float | None]: ...


class SFT:
    """The denoising loss on accepted images (rows with ``file_name``)."""

    name = "sft"

    def loss(self, model: Denoiser, batch: Batch) -> tuple[Any, None]:
        import torch

        t = batch.share(model.noise_levels(batch.size, batch.gen)).to(model.device)
        latents = model.latents([r["file_name"] for r in batch.rows])
        noise = torch.randn((batch.size, *latents.shape[1:]), generator=batch.gen)
        noise = batch.share(noise).to(model.device)
        emb = model.prompt_embeds([r["prompt"] for r in batch.rows])
        return model.errors(latents, noise, t, emb).mean(), None


class DPO:
    """Diffusion-DPO on preference pairs (rows with ``image_w``, ``image_l``), its KL weight
    ``beta``; the reference is the same denoiser with the adapter off."""

    name = "dpo"

    def __init__(self, beta: float):
        self.beta = beta
        # the last micro-batch's -beta / 2 * d per pair (a detached tensor, read only when
        # asked), whose signs the accuracy counts: a pair near 0 is one rounding can flip
        self.margins: Any = None

    def loss(self, model: Denoiser, batch: Batch) -> tuple[Any, float]:
        import torch
        import torch.nn.functional as F

        n = len(batch.rows)
        prompts = [r["prompt"] for r in batch.rows]
        t = batch.share(model.noise_levels(batch.size, batch.gen)).to(model.device)
        paths = [r["image_w"] for r in batch.rows] + [r["image_l"] for r in batch.rows]
        latents = model.latents(paths)
        noise = torch.randn((batch.size, *latents.shape[1:]), generator=batch.gen)
        noise = batch.share(noise).to(model.device)
        # the preferred and the rejected image of a pair share their noise and its level
        noise, t2 = noise.repeat(2, 1, 1, 1), t.repeat(2)
        emb = model.prompt_embeds(prompts + prompts)
        err = model.errors(latents, noise, t2, emb)
        with torch.no_grad():
            ref = model.errors(latents, noise, t2, emb, adapter=False)
        diff = (err[:n] - err[n:]) - (ref[:n] - ref[n:])
        inside = -0.5 * self.beta * diff
        loss = -F.logsigmoid(inside).mean()
        self.margins = inside.detach()
        return loss, float((inside > 0).float().mean())


def objective(method: str, beta: float) -> Objective:
    """The objective named ``method`` (dpo or sft)."""
    if method == "dpo":
        return DPO(beta)
    if method == "sft":
        return SFT()
    raise ValueError(f"method must be dpo or sft, got {method!r}")
