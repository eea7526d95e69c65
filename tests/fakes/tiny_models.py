"""Tiny random-weight models built from configs, saved like hub checkpoints.

They exercise the real loading and inference code of the backends in seconds on CPU.
"""

from __future__ import annotations

import json
from pathlib import Path


def byte_alphabet() -> list[str]:
    """The 256 printable characters byte-level BPE uses for the 256 byte values."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    extra = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(extra)) for b in range(256)]


def write_clip_tokenizer(path: Path) -> None:
    """A CLIP BPE tokenizer: start/end tokens plus the byte-level alphabet, no merges."""
    chars = byte_alphabet()
    vocab = {tok: i for i, tok in enumerate(chars + [c + "</w>" for c in chars])}
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n")


def tiny_clip_text(vocab_size: int):
    from transformers import CLIPTextConfig, CLIPTextModel

    cfg = CLIPTextConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=37,
        num_attention_heads=4,
        num_hidden_layers=2,
        max_position_embeddings=77,
        bos_token_id=vocab_size - 2,
        eos_token_id=vocab_size - 1,
        pad_token_id=vocab_size - 1,
    )
    return CLIPTextModel(cfg)


def build_tiny_sd(path: Path, in_channels: int = 4) -> Path:
    """A Stable Diffusion (in_channels=4) or InstructPix2Pix (in_channels=8) pipeline."""
    import torch
    from diffusers import (
        AutoencoderKL,
        EulerAncestralDiscreteScheduler,
        StableDiffusionInstructPix2PixPipeline,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTokenizer

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64),
        layers_per_block=1,
        sample_size=16,
        in_channels=in_channels,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
        norm_num_groups=8,
        attention_head_dim=8,
    )
    vae = AutoencoderKL(
        block_out_channels=(32, 64),
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        norm_num_groups=8,
        sample_size=32,
    )
    scheduler = EulerAncestralDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear"
    )
    tok_dir = path / "_tokenizer_src"
    write_clip_tokenizer(tok_dir)
    tokenizer = CLIPTokenizer(
        str(tok_dir / "vocab.json"), str(tok_dir / "merges.txt"), model_max_length=77
    )
    text_encoder = tiny_clip_text(len(tokenizer))
    cls = StableDiffusionPipeline if in_channels == 4 else StableDiffusionInstructPix2PixPipeline
    pipe = cls(
        unet=unet,
        vae=vae,
        scheduler=scheduler,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    out = path / ("tiny-sd" if in_channels == 4 else "tiny-ip2p")
    pipe.save_pretrained(out)
    return out
