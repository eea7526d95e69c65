"""The model a tune trains: a diffusers pipeline's denoiser with a LoRA (peft) on it.

The denoiser is the UNet of a Stable Diffusion family pipeline (SD 1.5, SD 2.1, SD-Turbo,
or SDXL with its second text encoder, pooled text and size conditioning) or the transformer
of FLUX.2 [klein], trained as a rectified flow (the noisy latent ``(1 - s) x + s n`` at a
logit-normal noise level ``s``, the target the velocity ``n - x``). Other pipelines are
refused with a message naming what they are.

The frozen base is the same weights with the adapter switched off (:meth:`Denoiser.errors`
with ``adapter=False``), so a reference costs no second copy of the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refine.train.data import image_tensor

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


class Denoiser:
    """A pipeline loaded on ``device`` with a fresh LoRA of ``rank`` on its denoiser (its
    initial weights drawn from ``seed``); the text encoders and the VAE frozen, their
    outputs computed once per prompt and image."""

    def __init__(
        self,
        base: str,
        device: Any,
        resolution: int,
        rank: int,
        seed: int,
        gradient_checkpointing: bool = False,
    ):
        import torch
        from diffusers import DDPMScheduler
        from peft import LoraConfig

        model = base.removeprefix("diffusers:")
        self.device, self.resolution = device, resolution
        cls = pipeline_class(model)
        self.xl = cls.__name__ == "StableDiffusionXLPipeline"
        self.flux = cls.__name__ == "Flux2KleinPipeline"
        if self.flux and resolution % 16:
            raise ValueError("FLUX.2 needs a resolution that is a multiple of 16")
        sd = not (self.xl or self.flux)
        try:
            pipe = cls.from_pretrained(model, **({"safety_checker": None} if sd else {}))
        except (OSError, ValueError) as err:
            raise ValueError(f"{model}: cannot load it ({str(err).splitlines()[0]})") from None
        pipe.set_progress_bar_config(disable=True)
        pipe.to(device)
        self.pipe = pipe
        # the denoiser: a UNet (SD, SDXL) or a transformer (FLUX.2); called unet throughout
        self.unet = pipe.transformer if self.flux else pipe.unet
        for part in (pipe.vae, pipe.text_encoder, getattr(pipe, "text_encoder_2", None)):
            if part is not None:
                part.requires_grad_(False)
        self.unet.requires_grad_(False)
        torch.manual_seed(seed)
        self.unet.add_adapter(
            LoraConfig(
                r=rank,
                lora_alpha=rank,
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
        if gradient_checkpointing:
            self.unet.enable_gradient_checkpointing()
        self.params = [p for p in self.unet.parameters() if p.requires_grad]
        # what the passes that train call: the denoiser, or its wrapper for several
        # processes (which averages the gradients); the passes without gradients call the
        # denoiser itself
        self.forward = self.unet
        # SD and SDXL learn the noise (or v) of their DDPM schedule; FLUX.2 learns the flow
        # from noise to image (rectified flow), with no noise schedule to keep
        self.noise_scheduler = (
            None if self.flux else DDPMScheduler.from_config(pipe.scheduler.config)
        )
        self._embeds: dict[str, Any] = {}
        self._latent_cache: dict[str, Any] = {}

    # -- conditioning and latents ---------------------------------------------------------

    def prompt_embeds(self, prompts: list[str]) -> dict[str, Any]:
        """The denoiser's text conditioning for ``prompts``: ``emb`` (the encoder hidden
        states), for SDXL ``pooled`` (its pooled text embedding), for FLUX.2 ``txt_ids``;
        computed once per prompt (the text encoders are frozen)."""
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

    def latents(self, paths: list[str]) -> Any:
        """The VAE latents of the images at ``paths`` (their mean, scaled as the pipeline
        does; patchified and normalised for FLUX.2)."""
        import torch

        # the VAE is frozen and the latent is its mean: each image is encoded once, and kept
        # on the CPU (64 KiB a 512 px image) so that large sets do not fill the GPU
        missing = [p for p in dict.fromkeys(paths) if p not in self._latent_cache]
        if missing:
            x = torch.stack([image_tensor(p, self.resolution) for p in missing])
            with torch.no_grad():
                x = x.to(self.device, self.pipe.vae.dtype)
                if self.flux:  # patchified and normalised as the pipeline does
                    z = self.pipe._encode_vae_image(x, generator=None).cpu()
                else:
                    dist = self.pipe.vae.encode(x).latent_dist
                    z = (dist.mean * self.pipe.vae.config.scaling_factor).cpu()
            self._latent_cache.update(zip(missing, z, strict=True))
        return torch.stack([self._latent_cache[p] for p in paths]).to(self.device)

    # -- the denoising error --------------------------------------------------------------

    def noise_levels(self, n: int, gen: Any) -> Any:
        """``n`` noise levels from ``gen`` (on the CPU): DDPM timesteps (SD, SDXL), or for
        FLUX.2 levels in (0, 1) from a logit-normal, as rectified-flow training draws them."""
        import torch

        if self.flux:
            return torch.sigmoid(torch.randn((n,), generator=gen))
        return torch.randint(
            0, self.noise_scheduler.config.num_train_timesteps, (n,), generator=gen
        )

    def switch_adapters(self, on: bool) -> None:
        """The LoRA layers on or off (off: the denoiser is the frozen base)."""
        if self._lora_layers is None:
            (self.unet.enable_adapters if on else self.unet.disable_adapters)()
            return
        for layer in self._lora_layers:
            layer._disable_adapters = not on

    def errors(self, latents: Any, noise: Any, t: Any, emb: dict[str, Any], adapter: bool = True):
        """Per-sample denoising error (mean squared error over the latent) of the tuned
        denoiser, or with ``adapter=False`` of the frozen base. ``t`` is the DDPM timestep
        (SD, SDXL) or the flow's noise level in (0, 1) (FLUX.2)."""

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
            self.switch_adapters(False)
        try:
            pred, target = self.predict(noisy, t, emb, target)
        finally:
            if not adapter:
                self.switch_adapters(True)
        dims = tuple(range(1, pred.dim()))
        return ((pred.float() - target.float()) ** 2).mean(dim=dims)

    def predict(self, noisy: Any, t: Any, emb: dict[str, Any], target: Any) -> tuple[Any, Any]:
        """The denoiser's prediction for ``noisy`` and the target in the same layout
        (FLUX.2's transformer reads and answers packed latent tokens)."""
        import torch

        model = self.forward if torch.is_grad_enabled() else self.unet
        if self.flux:
            pred = model(
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
            r = self.resolution
            sizes = torch.tensor([r, r, 0, 0, r, r], device=self.device)
            extra["added_cond_kwargs"] = {
                "text_embeds": emb["pooled"],
                "time_ids": sizes.repeat(noisy.shape[0], 1).to(emb["pooled"].dtype),
            }
        return model(noisy, t, emb["emb"], **extra).sample, target

    # -- the adapter ----------------------------------------------------------------------

    def lora_state(self) -> dict[str, Any]:
        """The adapter's weights, as peft names them."""
        from peft import get_peft_model_state_dict

        return get_peft_model_state_dict(self.unet)

    def load_lora_state(self, state: dict[str, Any]) -> None:
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(self.unet, state)

    def save(self, folder: Path) -> None:
        """The adapter as ``pytorch_lora_weights.safetensors`` in ``folder``: what
        ``pipe.load_lora_weights(folder)`` reads."""
        layers = "transformer_lora_layers" if self.flux else "unet_lora_layers"
        type(self.pipe).save_lora_weights(folder, **{layers: self.lora_state()})

    def draw(self, prompt: str, seed: int, steps: int = 20) -> Any:
        """One image for ``prompt`` (fixed seed) from the pipeline as it is now."""
        import torch

        gen = torch.Generator(device="cpu").manual_seed(seed)
        with torch.no_grad():
            return self.pipe(
                prompt=prompt,
                num_inference_steps=steps,
                height=self.resolution,
                width=self.resolution,
                generator=gen,
            ).images[0]
