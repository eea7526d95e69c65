"""refine tune's speed and memory: Diffusion-DPO steps per second, and the memory the
reference pass takes, with the adapter switched off for the reference (this toolkit)
against a second frozen copy of the denoiser (the straightforward way), both measured in
the same run.

On CPU (no GPU here) it uses the test suite's tiny random pipeline at 32 px; with
``--device cuda`` an SD 1.5-size (``--arch sd15``) or SDXL-size (``--arch sdxl``) pipeline
(random weights, no download) at 512 px, batch 4, rank 8, and the peak GPU memory of each
variant.

Usage: python benchmarks/bench_tune.py [--device cpu|cuda] [--arch sd15|sdxl] [--steps 20]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def sd15_size_pipeline(root: Path) -> Path:
    """An SD 1.5-size pipeline (UNet, VAE and text encoder shapes) with random weights."""
    import torch
    from diffusers import (
        AutoencoderKL,
        DDPMScheduler,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel

    from tests.fakes.tiny_models import clip_tokenizer

    torch.manual_seed(0)
    unet = UNet2DConditionModel(cross_attention_dim=768, attention_head_dim=8)  # SD 1.5 shape
    vae = AutoencoderKL(
        block_out_channels=(128, 256, 512, 512),
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        latent_channels=4,
        layers_per_block=2,
    )
    tok = clip_tokenizer(root / "tok")
    text = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(tok),
            hidden_size=768,
            num_hidden_layers=2,
            intermediate_size=1024,
            num_attention_heads=12,
        )
    )
    pipe = StableDiffusionPipeline(
        unet=unet,
        vae=vae,
        text_encoder=text,
        tokenizer=tok,
        scheduler=DDPMScheduler(),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    out = root / "sd15-size"
    pipe.save_pretrained(out)
    return out


def sdxl_size_pipeline(root: Path) -> Path:
    """An SDXL-size pipeline (UNet, VAE, CLIP-L and bigG text encoders) with random weights,
    built on the GPU (fast random init)."""
    import torch
    from diffusers import (
        AutoencoderKL,
        DDPMScheduler,
        StableDiffusionXLPipeline,
        UNet2DConditionModel,
    )
    from transformers import (
        CLIPTextConfig,
        CLIPTextModel,
        CLIPTextModelWithProjection,
    )

    from tests.fakes.tiny_models import clip_tokenizer

    tok = clip_tokenizer(root / "tok")
    n = len(tok)
    ids = {"bos_token_id": n - 2, "eos_token_id": n - 1, "pad_token_id": n - 1}
    torch.manual_seed(0)
    with torch.device("cuda"):
        unet = UNet2DConditionModel(  # stabilityai/stable-diffusion-xl-base-1.0's UNet
            block_out_channels=(320, 640, 1280),
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
            transformer_layers_per_block=(1, 2, 10),
            attention_head_dim=(5, 10, 20),
            cross_attention_dim=2048,
            use_linear_projection=True,
            addition_embed_type="text_time",
            addition_time_embed_dim=256,
            projection_class_embeddings_input_dim=2816,
            sample_size=128,
        )
        vae = AutoencoderKL(
            block_out_channels=(128, 256, 512, 512),
            down_block_types=("DownEncoderBlock2D",) * 4,
            up_block_types=("UpDecoderBlock2D",) * 4,
            layers_per_block=2,
            scaling_factor=0.13025,
        )
        text = CLIPTextModel(
            CLIPTextConfig(
                vocab_size=n,
                hidden_size=768,
                num_hidden_layers=12,
                intermediate_size=3072,
                num_attention_heads=12,
                **ids,
            )
        )
        text_2 = CLIPTextModelWithProjection(
            CLIPTextConfig(
                vocab_size=n,
                hidden_size=1280,
                num_hidden_layers=32,
                intermediate_size=5120,
                num_attention_heads=20,
                projection_dim=1280,
                **ids,
            )
        )
    pipe = StableDiffusionXLPipeline(
        unet=unet,
        vae=vae,
        text_encoder=text,
        text_encoder_2=text_2,
        tokenizer=tok,
        tokenizer_2=tok,
        scheduler=DDPMScheduler(),
    )
    out = root / "sdxl-size"
    pipe.save_pretrained(out)
    del pipe, unet, vae, text, text_2
    torch.cuda.empty_cache()
    return out


def data_folder(root: Path, size: int, n: int = 8) -> Path:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    folder = root / "pairs"
    (folder / "images").mkdir(parents=True)
    (folder / "train").mkdir()
    rows = []
    for k in range(n):
        for tag, colour in (("w", (210, 40, 40)), ("l", (40, 40, 210))):
            a = np.clip(
                np.asarray(colour)[None, None, :] + rng.normal(0, 20, (size, size, 3)), 0, 255
            )
            Image.fromarray(a.astype("uint8")).save(folder / "images" / f"{tag}{k}.png")
        rows.append(
            {
                "image_w": f"../images/w{k}.png",
                "image_l": f"../images/l{k}.png",
                "prompt": "a photo of food",
            }
        )
    (folder / "train" / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def second_copy_reference(tuner, frozen) -> None:
    """Make ``tuner`` read the reference from ``frozen`` (a second copy of the denoiser)
    instead of switching its own adapter off."""
    model = tuner.denoiser
    own = model.errors
    frozen.disable_adapters = lambda: None  # the copy's adapters stay off
    frozen.enable_adapters = lambda: None

    def errors(latents, noise, t, emb, adapter=True):
        if adapter:
            return own(latents, noise, t, emb)
        unet, model.unet = model.unet, frozen
        try:
            return own(latents, noise, t, emb, adapter=False)
        finally:
            model.unet = unet

    model.errors = errors


def main(argv: list[str] | None = None) -> None:
    import torch

    from refine.train.tune import TuneConfig, Tuner

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--arch", default="sd15", choices=["sd15", "sdxl"], help="with cuda: the UNet's size"
    )
    parser.add_argument(
        "--reverse", action="store_true", help="measure the second copy first (order check)"
    )
    args = parser.parse_args(argv)
    cuda = args.device.startswith("cuda")
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmp:
        root = Path(tmp)
        if cuda:
            build = sdxl_size_pipeline if args.arch == "sdxl" else sd15_size_pipeline
            base, size, batch = build(root), 512, 4
        else:
            from tests.fakes.tiny_models import build_tiny_sd

            base, size, batch = build_tiny_sd(root), 32, 4
        data = data_folder(root, size)
        results = {}
        variants = ["adapter-off reference", "second copy"]
        for variant in reversed(variants) if args.reverse else variants:
            cfg = TuneConfig(
                data=str(data),
                base=str(base),
                out=str(root / variant.split()[0]),
                steps=args.steps,
                resolution=size,
                batch_size=batch,
                rank=8,
                lr=1e-4,
                checkpoint_every=0,
                device=args.device,
            )
            marks: dict[int, float] = {}
            if cuda:  # what the previous variant left does not count against this one
                gc.collect()
                torch.cuda.empty_cache()
                before = torch.cuda.memory_allocated()
            tuner = Tuner(
                cfg, on_progress=lambda info, m=marks: m.update({info["step"]: time.perf_counter()})
            )
            tuner.load()
            copy_bytes = 0
            if variant == "second copy":
                frozen = copy.deepcopy(tuner.denoiser.unet)
                frozen.disable_adapters()
                frozen.requires_grad_(False)
                copy_bytes = sum(p.numel() * p.element_size() for p in frozen.parameters())
                second_copy_reference(tuner, frozen)
            tuner.load = lambda: None
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            tuner.run()
            if cuda:
                torch.cuda.synchronize()
            # steps per second after the warm-up steps (kernel selection, allocator growth):
            # the first variant measured would otherwise pay them alone
            warm = max(1, args.steps // 4)
            rate = (args.steps - warm) / (marks[args.steps] - marks[warm])
            peak = torch.cuda.max_memory_allocated() - before if cuda else None
            weights = sum(p.numel() * p.element_size() for p in tuner.denoiser.unet.parameters())
            results[variant] = (rate, peak, weights + copy_bytes)
            del tuner
            if variant == "second copy":
                del frozen
        print(
            f"refine tune (dpo), {args.device}, {args.arch if cuda else 'tiny'}, {size} px, "
            f"batch {batch}, rank 8, "
            f"{args.steps} steps (rates over the steps after the first {max(1, args.steps // 4)})"
        )
        ours, theirs = results["adapter-off reference"], results["second copy"]
        for name, (rate, peak, weights) in results.items():
            shown = f"peak GPU memory {peak / 2**20:.0f} MiB, " if peak is not None else ""
            print(
                f"  {name:22} {rate:6.2f} steps/s, {shown}denoiser weights "
                f"{weights / 2**20:.1f} MiB"
            )
        print(f"  speed ratio (ours / second copy): {ours[0] / theirs[0]:.2f}")
        if ours[1] is not None:
            print(f"  peak memory ratio (ours / second copy): {ours[1] / theirs[1]:.2f}")
        print(f"  denoiser weight memory ratio (ours / second copy): {ours[2] / theirs[2]:.2f}")


if __name__ == "__main__":
    main()
