"""Distil refinement runs into a LoRA for the generator (``refine tune``).

Two objectives on the denoiser: the UNet of a Stable Diffusion family pipeline (SD 1.5,
SD 2.1, SD-Turbo, or SDXL with its second text encoder, pooled text and size
conditioning), or the transformer of FLUX.2 [klein], trained as a rectified flow (the
noisy latent ``(1 - s) x + s n`` at a logit-normal noise level ``s``, the target the
velocity ``n - x``; the error below is that of the velocity). Other pipelines are refused
with a message naming what they are:

* ``dpo``, Diffusion-DPO (Wallace et al. 2023) on preference pairs (``refine export
  --format pairs``): for one prompt, the same noise and timestep on the preferred latent
  ``w`` and the rejected one ``l``; ``d = (e_w - e_l) - (e_w^ref - e_l^ref)`` where ``e``
  is the per-sample denoising error of the tuned model and ``e^ref`` of the frozen base,
  read from the same weights with the adapter switched off (no second copy);
  ``loss = -log sigmoid(-beta / 2 * d)``. The implicit reward accuracy is the share of
  pairs with ``-beta / 2 * d > 0`` (0 at the start: the adapter begins as the base).
* ``sft``: the plain denoising loss on accepted images (``--format imagefolder``).

Each step draws its batch and noise from ``seed + step``, so a resumed tune continues
exactly as an uninterrupted one. Checkpoints (``checkpoint.pt``: adapter, optimiser, step,
losses) are written atomically every ``checkpoint_every`` steps; validation images every
``validate_every`` steps. The adapter is saved as ``pytorch_lora_weights.safetensors``
(what ``pipe.load_lora_weights(DIR)`` reads) with a model card (``README.md``), the loss
curve (``loss.csv``, ``loss.html``) and ``tune.json``.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from refine.backends.device import pick_device
from refine.backends.imports import require
from refine.io.files import atomic_write, atomic_write_text

TARGET_MODULES = ["to_q", "to_k", "to_v", "to_out.0"]
# FLUX.2: the double-stream blocks' image and text attention, the single-stream blocks'
# fused input projection
FLUX2_TARGET_MODULES = [
    *TARGET_MODULES,
    "add_q_proj",
    "add_k_proj",
    "add_v_proj",
    "to_add_out",
    "to_qkv_mlp_proj",
]


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
    batch_size: int = 1
    grad_accum: int = 1
    checkpoint_every: int = 100
    validate_every: int = 0
    seed: int = 0
    device: str | None = None
    mixed_precision: str = "auto"  # auto: bf16 on a GPU that has it, else none
    gradient_checkpointing: bool = False

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


def load_rows(data: str | Path, method: str, split: str = "train") -> list[dict[str, Any]]:
    """The rows a method trains on: pairs (image_w, image_l, prompt) for dpo, images
    (file_name, prompt) for sft, with image paths made absolute; ValueError naming the
    problem (wrong export format, missing images)."""
    folder = Path(data) / split
    meta = folder / "metadata.jsonl"
    if not meta.is_file():
        if split == "train":
            raise ValueError(f"{data}: no {split}/metadata.jsonl (make it with refine export)")
        return []
    rows = [json.loads(x) for x in meta.read_text(encoding="utf-8").splitlines() if x.strip()]
    keys = ("image_w", "image_l") if method == "dpo" else ("file_name",)
    fmt = "pairs" if method == "dpo" else "imagefolder"
    out = []
    for k, row in enumerate(rows, start=1):
        if not all(key in row for key in keys) or "prompt" not in row:
            raise ValueError(
                f"{meta}:{k}: not a {method} row (export with --format {fmt}: "
                f"{', '.join(keys)}, prompt)"
            )
        for key in keys:
            path = (folder / row[key]).resolve()
            if not path.is_file():
                raise ValueError(f"{meta}:{k}: {row[key]} is missing")
            row[key] = str(path)
        out.append(row)
    if not out and split == "train":
        raise ValueError(f"{meta}: no rows")
    return out


TUNABLE = {
    "StableDiffusionPipeline": "SD 1.5, SD 2.1, SD-Turbo",
    "StableDiffusionXLPipeline": "SDXL, SDXL-Turbo",
    "Flux2KleinPipeline": "FLUX.2 [klein]",
}


def pipeline_class(model: str) -> Any:
    """The diffusers pipeline class of ``model`` (an id or a folder), when it is one this
    module tunes; ValueError naming what it is and what can be tuned otherwise."""
    import diffusers

    try:
        name = diffusers.DiffusionPipeline.load_config(model).get("_class_name", "?")
    except (OSError, ValueError) as err:
        raise ValueError(
            f"{model}: not a diffusers pipeline ({str(err).splitlines()[0]})"
        ) from None
    if name not in TUNABLE:
        families = "; ".join(TUNABLE.values())
        raise ValueError(
            f"{model}: a {name}, not a pipeline that can be tuned here ({families}); "
            "other FLUX and transformer pipelines are not supported yet"
        )
    return getattr(diffusers, name)


def _image_tensor(path: str, resolution: int) -> Any:
    import numpy as np
    import torch
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = im.size
        scale = resolution / min(w, h)
        im = im.resize((max(resolution, round(w * scale)), max(resolution, round(h * scale))))
        w, h = im.size
        left, top = (w - resolution) // 2, (h - resolution) // 2
        im = im.crop((left, top, left + resolution, top + resolution))
        x = torch.from_numpy(np.asarray(im, dtype=np.float32) / 127.5 - 1.0)
    return x.permute(2, 0, 1)


TRAINING = (("torch", "torch"), ("diffusers", "diffusers"), ("peft", "peft"))


def need_training() -> None:
    """The packages training needs, or one ImportError naming the extra that brings them
    (a package that is installed but fails to import raises its own error)."""
    for module, package in TRAINING:
        require(module, package, "refine tune", "local")


class Tuner:
    """A LoRA tune of one pipeline's UNet (see the module docstring)."""

    def __init__(self, config: TuneConfig, on_progress: Callable[[dict], None] | None = None):
        config.check()
        self.c = config
        self.emit = on_progress or (lambda info: None)
        self.rows = load_rows(config.data, config.method)
        self.held = load_rows(config.data, config.method, "test")
        self.out = Path(config.out)
        self.losses: list[tuple[int, float, float | None]] = []
        self.step = 0
        self.rank, self.world = 0, 1  # one process, unless launched as several

    # -- models ---------------------------------------------------------------------------

    def load(self) -> None:
        need_training()
        import torch
        from diffusers import DDPMScheduler
        from peft import LoraConfig

        model = self.c.base.removeprefix("diffusers:")
        self.device = torch.device(self.c.device or pick_device())
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            # launched as several processes (accelerate launch, torchrun): accelerate joins
            # the process group (NCCL on GPUs, gloo on CPUs) and gives each its device
            from accelerate import PartialState

            state = PartialState(cpu=self.device.type == "cpu")
            self.rank, self.world = state.process_index, state.num_processes
            self.device = state.device
        cls = pipeline_class(model)
        self.xl = cls.__name__ == "StableDiffusionXLPipeline"
        self.flux = cls.__name__ == "Flux2KleinPipeline"
        if self.flux and self.c.resolution % 16:
            raise ValueError("FLUX.2 needs a resolution that is a multiple of 16")
        sd = not (self.xl or self.flux)
        try:
            pipe = cls.from_pretrained(model, **({"safety_checker": None} if sd else {}))
        except (OSError, ValueError) as err:
            raise ValueError(f"{model}: cannot load it ({str(err).splitlines()[0]})") from None
        pipe.set_progress_bar_config(disable=True)
        pipe.to(self.device)
        self.pipe = pipe
        # the denoiser: a UNet (SD, SDXL) or a transformer (FLUX.2); called unet throughout
        self.unet = pipe.transformer if self.flux else pipe.unet
        for part in (pipe.vae, pipe.text_encoder, getattr(pipe, "text_encoder_2", None)):
            if part is not None:
                part.requires_grad_(False)
        self.unet.requires_grad_(False)
        torch.manual_seed(self.c.seed)
        self.unet.add_adapter(
            LoraConfig(
                r=self.c.rank,
                lora_alpha=self.c.rank,
                init_lora_weights="gaussian",
                target_modules=FLUX2_TARGET_MODULES if self.flux else TARGET_MODULES,
            )
        )
        # the reference pass switches the LoRA layers off and on again every step: flipping
        # each layer's switch is 20x faster than the model-wide disable_adapters() (which
        # walks every module and resets requires_grad: 33 ms a step on an SDXL UNet)
        from peft.tuners.tuners_utils import BaseTunerLayer

        self._lora_layers = [m for m in self.unet.modules() if isinstance(m, BaseTunerLayer)]
        if not all(hasattr(m, "_disable_adapters") for m in self._lora_layers):
            self._lora_layers = None  # another peft: the public switch
        if self.c.gradient_checkpointing:
            self.unet.enable_gradient_checkpointing()
        self.params = [p for p in self.unet.parameters() if p.requires_grad]
        if self.world > 1:  # every process starts from the same adapter
            import torch.distributed as dist

            for p in self.params:
                dist.broadcast(p.data, src=0)
        # SD and SDXL learn the noise (or v) of their DDPM schedule; FLUX.2 learns the flow
        # from noise to image (rectified flow), with no noise schedule to keep
        self.noise_scheduler = (
            None if self.flux else DDPMScheduler.from_config(pipe.scheduler.config)
        )
        self.optimizer = torch.optim.AdamW(self.params, lr=self.c.lr)
        mp = self.c.mixed_precision
        if mp == "auto":  # bf16 where the GPU has it; fp16 needs loss scaling, asked for
            cuda = self.device.type == "cuda"
            mp = "bf16" if cuda and torch.cuda.is_bf16_supported() else "no"
        self.autocast_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(mp)
        # fp16 gradients underflow without scaling; for bf16 and fp32 the scaler passes through
        self.scaler = torch.amp.GradScaler(
            self.device.type, enabled=self.autocast_dtype == torch.float16
        )
        self._embeds: dict[str, Any] = {}
        self._latent_cache: dict[str, Any] = {}

    def _prompt_embeds(self, prompts: list[str]) -> dict[str, Any]:
        """The UNet's text conditioning for ``prompts``: ``emb`` (the encoder hidden
        states) and, for SDXL, ``pooled`` (its pooled text embedding); computed once per
        prompt (the text encoders are frozen)."""
        import torch

        missing = [p for p in dict.fromkeys(prompts) if p not in self._embeds]
        if missing and self.flux:
            with torch.no_grad():
                emb, ids = self.pipe.encode_prompt(missing, device=self.device)
            for p, e, i in zip(missing, emb, ids, strict=True):
                self._embeds[p] = {"emb": e, "txt_ids": i}
        elif missing and self.xl:
            with torch.no_grad():
                emb, _, pooled, _ = self.pipe.encode_prompt(
                    missing,
                    device=self.device,
                    num_images_per_prompt=1,
                    do_classifier_free_guidance=False,
                )
            for p, e, q in zip(missing, emb, pooled, strict=True):
                self._embeds[p] = {"emb": e, "pooled": q}
        elif missing:
            # a tokenizer saved without model_max_length reports a huge one: the text
            # encoder's positions are the real limit
            limit = min(
                self.pipe.tokenizer.model_max_length,
                self.pipe.text_encoder.config.max_position_embeddings,
            )
            tok = self.pipe.tokenizer(
                missing,
                padding="max_length",
                max_length=limit,
                truncation=True,
                return_tensors="pt",
            )
            with torch.no_grad():
                emb = self.pipe.text_encoder(tok.input_ids.to(self.device))[0]
            for p, e in zip(missing, emb, strict=True):
                self._embeds[p] = {"emb": e}
        return {
            key: torch.stack([self._embeds[p][key] for p in prompts])
            for key in self._embeds[prompts[0]]
        }

    def _latents(self, paths: list[str]) -> Any:
        import torch

        # the VAE is frozen and the latent is its mean: each image is encoded once, and kept
        # on the CPU (64 KiB a 512 px image) so that large sets do not fill the GPU
        missing = [p for p in dict.fromkeys(paths) if p not in self._latent_cache]
        if missing:
            x = torch.stack([_image_tensor(p, self.c.resolution) for p in missing])
            with torch.no_grad():
                x = x.to(self.device, self.pipe.vae.dtype)
                if self.flux:  # patchified and normalised as the pipeline does
                    z = self.pipe._encode_vae_image(x, generator=None).cpu()
                else:
                    dist = self.pipe.vae.encode(x).latent_dist
                    z = (dist.mean * self.pipe.vae.config.scaling_factor).cpu()
            self._latent_cache.update(zip(missing, z, strict=True))
        return torch.stack([self._latent_cache[p] for p in paths]).to(self.device)

    def _switch_adapters(self, on: bool) -> None:
        """The LoRA layers on or off (off: the UNet is the frozen base)."""
        if self._lora_layers is None:
            (self.unet.enable_adapters if on else self.unet.disable_adapters)()
            return
        for layer in self._lora_layers:
            layer._disable_adapters = not on

    def _errors(self, latents, noise, t, emb, adapter: bool = True):
        """Per-sample denoising error (mean squared error over the latent). ``t`` is the
        DDPM timestep (SD, SDXL) or the flow's noise level sigma in (0, 1) (FLUX.2)."""
        import torch

        if self.flux:
            s = t.view(-1, 1, 1, 1).to(latents.dtype)
            noisy = (1 - s) * latents + s * noise
            target = noise - latents
        else:
            noisy = self.noise_scheduler.add_noise(latents, noise, t)
            if self.noise_scheduler.config.prediction_type == "v_prediction":
                target = self.noise_scheduler.get_velocity(latents, noise, t)
            else:
                target = noise
        if not adapter:
            self._switch_adapters(False)
        try:
            with torch.autocast(
                self.device.type,
                dtype=self.autocast_dtype or torch.float32,
                enabled=self.autocast_dtype is not None,
            ):
                pred, target = self._predict(noisy, t, emb, target)
        finally:
            if not adapter:
                self._switch_adapters(True)
        dims = tuple(range(1, pred.dim()))
        return ((pred.float() - target.float()) ** 2).mean(dim=dims)

    def _predict(self, noisy, t, emb, target):
        """The denoiser's prediction for ``noisy`` and the target in the same layout
        (FLUX.2's transformer reads and answers packed latent tokens)."""
        import torch

        if self.flux:
            pred = self.unet(
                hidden_states=self.pipe._pack_latents(noisy),
                timestep=t,
                guidance=None,
                encoder_hidden_states=emb["emb"],
                txt_ids=emb["txt_ids"],
                img_ids=self.pipe._prepare_latent_ids(noisy).to(self.device),
                return_dict=False,
            )[0]
            return pred, self.pipe._pack_latents(target)
        extra = {}
        if self.xl:  # SDXL: the pooled text and the size/crop conditioning
            r = self.c.resolution
            sizes = torch.tensor([r, r, 0, 0, r, r], device=self.device)
            extra["added_cond_kwargs"] = {
                "text_embeds": emb["pooled"],
                "time_ids": sizes.repeat(noisy.shape[0], 1).to(emb["pooled"].dtype),
            }
        return self.unet(noisy, t, emb["emb"], **extra).sample, target

    def _batch(self, rows: list[dict], step: int) -> tuple[list[dict], Any]:
        import numpy as np
        import torch

        rng = np.random.default_rng(self.c.seed * 1_000_003 + step)
        picked = [rows[i] for i in rng.integers(0, len(rows), size=self.c.batch_size)]
        gen = torch.Generator().manual_seed(int(rng.integers(0, 2**31 - 1)))
        return picked, gen

    def loss_on(self, rows: list[dict], step: int):
        """(loss, implicit reward accuracy or None) of the batch drawn for ``step``."""
        import torch
        import torch.nn.functional as F

        picked, gen = self._batch(rows, step)
        n = len(picked)
        prompts = [r["prompt"] for r in picked]
        if self.flux:  # noise levels from a logit-normal, as rectified-flow training does
            t = torch.sigmoid(torch.randn((n,), generator=gen)).to(self.device)
        else:
            t = torch.randint(
                0, self.noise_scheduler.config.num_train_timesteps, (n,), generator=gen
            ).to(self.device)
        if self.c.method == "sft":
            latents = self._latents([r["file_name"] for r in picked])
            noise = torch.randn(latents.shape, generator=gen).to(self.device)
            err = self._errors(latents, noise, t, self._prompt_embeds(prompts))
            return err.mean(), None
        latents = self._latents([r["image_w"] for r in picked] + [r["image_l"] for r in picked])
        noise = torch.randn((n, *latents.shape[1:]), generator=gen).to(self.device)
        noise, t2 = noise.repeat(2, 1, 1, 1), t.repeat(2)
        emb = self._prompt_embeds(prompts + prompts)
        err = self._errors(latents, noise, t2, emb)
        with torch.no_grad():
            ref = self._errors(latents, noise, t2, emb, adapter=False)
        diff = (err[:n] - err[n:]) - (ref[:n] - ref[n:])
        inside = -0.5 * self.c.beta * diff
        loss = -F.logsigmoid(inside).mean()
        return loss, float((inside > 0).float().mean())

    def accuracy(self, rows: list[dict], draws: int = 8) -> float | None:
        """The DPO implicit reward accuracy on ``rows`` (fixed draws: comparable before
        and after tuning); None for sft or without rows."""
        import torch

        if self.c.method != "dpo" or not rows:
            return None
        accs = []
        with torch.no_grad():
            for k in range(draws):
                _, acc = self.loss_on(rows, 10_000_000 + k)
                accs.append(acc)
        return sum(accs) / len(accs)

    # -- the loop ---------------------------------------------------------------------------

    def run(self, resume: bool = False) -> dict[str, Any]:
        import torch

        self.load()
        if self.main:
            self.out.mkdir(parents=True, exist_ok=True)
        self._barrier()
        if resume and (self.out / "checkpoint.pt").is_file():
            self._restore()
        elif (self.out / "checkpoint.pt").is_file():
            raise ValueError(f"{self.out} holds a tune already: --resume it or give a new --out")
        start = time.perf_counter()
        self.unet.train()
        while self.step < self.c.steps:
            self.optimizer.zero_grad(set_to_none=True)
            total, accs = 0.0, []
            for micro in range(self.c.grad_accum):
                # each process draws its own batches (one process: the draws of before)
                draw = (self.step * self.c.grad_accum + micro) * self.world + self.rank
                loss, acc = self.loss_on(self.rows, draw)
                self.scaler.scale(loss / self.c.grad_accum).backward()
                total += loss.item() / self.c.grad_accum
                if acc is not None:
                    accs.append(acc)
            if self.world > 1:
                total, accs = self._average(total, accs)
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.params, 1.0)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.step += 1
            acc = sum(accs) / len(accs) if accs else None
            self.losses.append((self.step, total, acc))
            if not math.isfinite(total):
                raise ValueError(f"the loss is {total} at step {self.step}: lower --lr")
            elapsed = time.perf_counter() - start
            if self.main:
                self.emit(
                    {
                        "step": self.step,
                        "steps": self.c.steps,
                        "loss": total,
                        "accuracy": acc,
                        "elapsed_s": elapsed,
                    }
                )
            if self.c.checkpoint_every and self.step % self.c.checkpoint_every == 0:
                if self.main:
                    self._checkpoint()
                self._barrier()
            if self.c.validate_every and self.step % self.c.validate_every == 0:
                if self.main:
                    self.validate(f"step-{self.step}")
                self._barrier()
        self.unet.eval()
        return self._finish()

    @property
    def main(self) -> bool:
        """This process writes the outputs (the only one, unless launched as several)."""
        return self.rank == 0

    def _barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()

    def _average(self, total: float, accs: list[float]) -> tuple[float, list[float]]:
        """Average the adapter's gradients over the processes (one all-reduce of them all
        flattened), and the step's loss and reward accuracy."""
        import torch
        import torch.distributed as dist

        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world
        at = 0
        for p, g in zip(self.params, grads, strict=True):
            p.grad = flat[at : at + g.numel()].view_as(g).clone()
            at += g.numel()
        acc = sum(accs) / len(accs) if accs else -1.0
        stats = torch.tensor([total, acc], dtype=torch.float64, device=flat.device)
        dist.all_reduce(stats)
        stats /= self.world
        return float(stats[0]), ([float(stats[1])] if accs else [])

    def _checkpoint(self) -> None:
        import torch
        from peft import get_peft_model_state_dict

        state = {
            "step": self.step,
            "lora": get_peft_model_state_dict(self.unet),
            "optimizer": self.optimizer.state_dict(),
            "losses": self.losses,
            "config": asdict(self.c),
        }
        atomic_write(self.out / "checkpoint.pt", lambda tmp: torch.save(state, tmp))

    def _restore(self) -> None:
        import torch
        from peft import set_peft_model_state_dict

        state = torch.load(self.out / "checkpoint.pt", map_location=self.device, weights_only=False)
        same = {
            k: v
            for k, v in state["config"].items()
            if k not in ("steps", "validate_every", "checkpoint_every")
        }
        mine = {k: v for k, v in asdict(self.c).items() if k in same}
        if same != mine:
            changed = sorted(k for k in same if same[k] != mine[k])
            raise ValueError(f"the checkpoint was made with other settings ({', '.join(changed)})")
        set_peft_model_state_dict(self.unet, state["lora"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step = state["step"]
        self.losses = [tuple(x) for x in state["losses"]]

    def validate(self, name: str, prompts: list[str] | None = None, seed: int = 0) -> list[Path]:
        """Images for the first prompts of the data (fixed seed), saved under validation/."""
        import torch

        prompts = prompts or list(dict.fromkeys(r["prompt"] for r in self.rows))[:2]
        folder = self.out / "validation"
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        was_training = self.unet.training
        self.unet.eval()
        for k, prompt in enumerate(prompts):
            gen = torch.Generator(device="cpu").manual_seed(seed)
            with torch.no_grad():
                image = self.pipe(
                    prompt=prompt,
                    num_inference_steps=20,
                    height=self.c.resolution,
                    width=self.c.resolution,
                    generator=gen,
                ).images[0]
            path = folder / f"{name}-{k}.png"
            image.save(path)
            paths.append(path)
        if was_training:
            self.unet.train()
        return paths

    def _finish(self) -> dict[str, Any]:
        from peft import get_peft_model_state_dict

        held = self.accuracy(self.held)
        if not self.main:  # the main process writes; the others wait for it
            self._barrier()
            return {"method": self.c.method, "steps": self.step, "rank": self.rank}
        type(self.pipe).save_lora_weights(
            self.out,
            **{
                ("transformer_lora_layers" if self.flux else "unet_lora_layers"): (
                    get_peft_model_state_dict(self.unet)
                )
            },
        )
        summary = {
            "method": self.c.method,
            "base": self.c.base,
            "steps": self.step,
            "rows": len(self.rows),
            "held_out_rows": len(self.held),
            "final_loss": self.losses[-1][1] if self.losses else None,
            "held_out_accuracy": held,
            "processes": self.world,
            "config": asdict(self.c),
        }
        atomic_write_text(self.out / "tune.json", json.dumps(summary, indent=1))
        atomic_write_text(
            self.out / "loss.csv",
            "step,loss,accuracy\n"
            + "".join(
                f"{s},{loss:.6f},{'' if a is None else f'{a:.4f}'}\n" for s, loss, a in self.losses
            ),
        )
        atomic_write_text(self.out / "loss.html", _loss_page(self.losses, summary))
        atomic_write_text(self.out / "README.md", _model_card(summary))
        self._barrier()
        return summary


def _loss_page(losses: list[tuple[int, float, float | None]], summary: dict[str, Any]) -> str:
    from html import escape

    width, height, pad = 680, 260, 40
    if losses:
        top = max(x[1] for x in losses) or 1.0
        n = max(1, losses[-1][0])
        xs = [pad + (width - 2 * pad) * s / n for s, _, _ in losses]
        ys = [height - pad - (height - 2 * pad) * v / top for _, v, _ in losses]
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=True))
    else:
        top, pts = 1.0, ""
    svg = (
        f'<svg width="100%" viewBox="0 0 {width} {height}" role="img" aria-label="loss">'
        f'<polyline fill="none" stroke="#0969da" points="{pts}"/>'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="#888"/>'
        f'<text x="{width / 2}" y="{height - 8}" font-size="12" text-anchor="middle">step</text>'
        f'<text x="4" y="16" font-size="11">{top:.4f}</text></svg>'
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Tune loss</title>'
        "</head><body><h1>Tune loss</h1>"
        f"<p>{escape(summary['method'])} on {escape(summary['base'])}, {summary['steps']} steps, "
        f"{summary['rows']} training rows</p>{svg}</body></html>\n"
    )


WHAT = {"dpo": "Diffusion-DPO on preference pairs", "sft": "denoising loss on accepted images"}


def _model_card(summary: dict[str, Any]) -> str:
    c = summary["config"]
    acc = summary["held_out_accuracy"]
    return (
        "---\nlibrary_name: diffusers\ntags: [lora, cultural-refine]\n"
        f"base_model: {summary['base']}\n---\n\n"
        f"# Culture LoRA for {summary['base']}\n\n"
        f"Trained by `refine tune` with **{summary['method']}** "
        f"({WHAT[summary['method']]}) "
        f"from refinement runs exported with `refine export`.\n\n"
        f"- data: `{c['data']}`, {summary['rows']} training rows, "
        f"{summary['held_out_rows']} held out\n"
        f"- steps: {summary['steps']}, rank {c['rank']}, lr {c['lr']}, batch {c['batch_size']} x "
        f"{c['grad_accum']}, resolution {c['resolution']}"
        + (f", beta {c['beta']}" if summary["method"] == "dpo" else "")
        + f"\n- final loss: {summary['final_loss']}\n"
        + (f"- held-out implicit reward accuracy: {acc}\n" if acc is not None else "")
        + "\nLoad with `pipe.load_lora_weights(THIS_FOLDER)`, or in this toolkit "
        '`--generator "diffusers:BASE+lora=THIS_FOLDER"` (bench) / '
        '`--backend "generator=diffusers:BASE+lora=THIS_FOLDER"`.\n'
    )
