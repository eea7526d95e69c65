"""What one refinement round costs on a GPU with the architectures the small-gpu profile had
until late 2026 (SD-Turbo, InstructPix2Pix, Qwen2.5-VL-3B), and the arithmetic that turns it
into runs per GPU-hour (README, "Scaling"). ``bench_cpu_round.py`` reuses its pipelines.

Every model is built from its real configuration with random weights (no download): an
SD-Turbo-size generator (SD 2.1 UNet, 4 steps, 512 px), an InstructPix2Pix-size editor
(SD 1.5 UNet with 8 input channels, 20 steps), and a Qwen2.5-VL-3B-size observer and
judge (36 layers, 2048 wide, vision depth 32) behind the test suite's small tokenizer.
They run through the toolkit's own backends (``diffusers:`` and ``hf:``) on the device;
the observer's answer is timed as ``--answer-tokens`` decoded tokens (random weights never
stop on their own), the judge as its yes-probability forward passes.

Figures are printed, not asserted. ``--tiny`` runs the same code on tiny shapes (a check
that the script works; its figures mean nothing).

Usage: python benchmarks/bench_gpu_round.py [--device cuda] [--candidates 4] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CULTIVATE_PROMPTS = 576 * 16  # activities x countries


def _on(device: str):
    """Build modules directly on the device, in half precision there (fast random init)."""
    import contextlib

    import torch

    @contextlib.contextmanager
    def scope():
        old = torch.get_default_dtype()
        if device != "cpu":
            torch.set_default_dtype(torch.float16)
        try:
            with torch.device(device):
                yield
        finally:
            torch.set_default_dtype(old)

    return scope()


def build_sd(root: Path, kind: str, tiny: bool, device: str) -> Path:
    """An SD-Turbo-size (``kind="turbo"``) or InstructPix2Pix-size (``"ip2p"``) pipeline."""
    import torch
    from diffusers import (
        AutoencoderKL,
        EulerAncestralDiscreteScheduler,
        StableDiffusionInstructPix2PixPipeline,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel

    from tests.fakes.tiny_models import clip_tokenizer

    tok = clip_tokenizer(root / "tok")
    turbo = kind == "turbo"
    torch.manual_seed(0)
    with _on(device):
        if tiny:
            unet = UNet2DConditionModel(
                block_out_channels=(32, 64),
                layers_per_block=1,
                in_channels=4 if turbo else 8,
                down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
                cross_attention_dim=32,
                norm_num_groups=8,
                attention_head_dim=8,
            )
            vae = AutoencoderKL(
                block_out_channels=(32, 64),
                down_block_types=("DownEncoderBlock2D",) * 2,
                up_block_types=("UpDecoderBlock2D",) * 2,
                norm_num_groups=8,
            )
            text_cfg = {"hidden_size": 32, "num_hidden_layers": 2, "intermediate_size": 37}
            heads = 4
        elif turbo:  # stabilityai/sd-turbo: the SD 2.1 UNet and OpenCLIP ViT-H text tower
            unet = UNet2DConditionModel(
                cross_attention_dim=1024,
                attention_head_dim=(5, 10, 20, 20),
                use_linear_projection=True,
                sample_size=64,
            )
            text_cfg = {"hidden_size": 1024, "num_hidden_layers": 23, "intermediate_size": 4096}
            heads = 16
        else:  # timbrooks/instruct-pix2pix: the SD 1.5 UNet with the image as 4 more inputs
            unet = UNet2DConditionModel(
                cross_attention_dim=768, attention_head_dim=8, in_channels=8
            )
            text_cfg = {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072}
            heads = 12
        if not tiny:
            vae = AutoencoderKL(
                block_out_channels=(128, 256, 512, 512),
                down_block_types=("DownEncoderBlock2D",) * 4,
                up_block_types=("UpDecoderBlock2D",) * 4,
                layers_per_block=2,
            )
        text = CLIPTextModel(
            CLIPTextConfig(
                vocab_size=len(tok),
                num_attention_heads=heads,
                max_position_embeddings=77,
                bos_token_id=len(tok) - 2,
                eos_token_id=len(tok) - 1,
                pad_token_id=len(tok) - 1,
                **text_cfg,
            )
        )
    scheduler = EulerAncestralDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear"
    )
    cls = StableDiffusionPipeline if turbo else StableDiffusionInstructPix2PixPipeline
    pipe = cls(
        unet=unet,
        vae=vae,
        text_encoder=text,
        tokenizer=tok,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    out = root / kind
    pipe.save_pretrained(out)
    return out


def build_qwen_vl(root: Path, tiny: bool, device: str) -> Path:
    """A Qwen2.5-VL-3B-size model (random weights) with the test suite's tokenizer; its
    image processor takes the real model's patch sizes and up to 448 x 448 pixels."""
    from tests.fakes import tiny_models

    if tiny:
        shape = {
            "text": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2},
            "heads": (4, 2),
            "mrope": [2, 1, 1],
            "vision": {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4},
            "vision_out": 32,
            "full_attention": [1],
        }
    else:  # Qwen/Qwen2.5-VL-3B-Instruct's config.json
        shape = {
            "text": {
                "hidden_size": 2048,
                "intermediate_size": 11008,
                "num_hidden_layers": 36,
                "tie_word_embeddings": True,
            },
            "heads": (16, 2),
            "mrope": [16, 24, 24],
            "vision": {
                "depth": 32,
                "hidden_size": 1280,
                "intermediate_size": 3420,
                "num_heads": 16,
            },
            "vision_out": 2048,
            "full_attention": [7, 15, 23, 31],
            "vocab_size": 151936,
        }
    with _on(device):
        return tiny_models.build_qwen_vl(
            root,
            window=112,
            max_pixels=448 * 448,
            name="qwen2.5-vl",
            max_positions=32768,
            rope_theta=1e6,
            **shape,
        )


def timed(fn, repeat: int = 3) -> float:
    """The median wall time of ``repeat`` calls after one warm-up call."""
    import torch

    fn()
    walls = []
    for _ in range(repeat):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        walls.append(time.perf_counter() - t)
    return statistics.median(walls)


def main(argv: list[str] | None = None) -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--candidates", type=int, default=4, help="images per round")
    parser.add_argument("--rounds", type=int, default=5, help="editing rounds after round 0")
    parser.add_argument("--questions", type=int, default=12, help="judge questions per image")
    parser.add_argument("--answer-tokens", type=int, default=200, help="tokens per description")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes: a check of the script")
    args = parser.parse_args(argv)

    from PIL import Image

    from refine.backends import create

    n, side = args.candidates, (64 if args.tiny else 512)
    seeds = list(range(1, n + 1))
    with tempfile.TemporaryDirectory(prefix="bench-gpu-round-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        turbo = build_sd(root, "turbo", args.tiny, args.device)
        ip2p = build_sd(root, "ip2p", args.tiny, args.device)
        qwen = build_qwen_vl(root, args.tiny, args.device)
        print(f"built the random-weight models in {time.perf_counter() - t:.0f} s")
        common = {"device": args.device, "shared": False}
        gen = create(
            "generator", f"diffusers:{turbo}", steps=4, guidance=0.0, width=side, height=side,
            **common,
        )  # fmt: skip
        editor = create("editor", f"diffusers:{ip2p}", steps=20, **common)
        vlm = create("observer", f"hf:{qwen}", batch_size=n, **common)
        image = Image.new("RGB", (side, side), (150, 90, 40))
        images = [image] * n
        prompt = "List what this image shows: setting, objects, attire, interaction, spatial."
        questions = [f"Is there a teapot {k} in the image?" for k in range(args.questions)]

        def describe():
            import torch

            vlm.load()
            batch = vlm._encode([prompt] * n, images)
            with torch.inference_mode():
                vlm.model.generate(
                    **batch,
                    max_new_tokens=args.answer_tokens,
                    min_new_tokens=args.answer_tokens,
                    do_sample=False,
                )

        stages = {
            f"generate {n} ({side} px, 4 steps)": timed(lambda: gen.generate("a feast", seeds)),
            f"edit {n} (20 steps)": timed(lambda: editor.edit(image, "add a teapot", seeds)),
            f"observe {n} ({args.answer_tokens} tokens each, one batch)": timed(describe),
            f"judge {n} x {args.questions} questions": timed(
                lambda: vlm.yes_probability(images * args.questions, questions * n)
            ),
        }  # fmt: skip
        mem = ""
        if args.device.startswith("cuda"):
            import torch

            mem = f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB"
        print(f"\none round on {args.device} with the small-gpu architectures{mem}")
        for name, wall in stages.items():
            print(f"  {name:48} {wall:7.2f} s")
        gen_s, edit_s, obs_s, judge_s = stages.values()
        round0 = gen_s + obs_s + judge_s
        editing = edit_s + obs_s + judge_s
        run = round0 + args.rounds * editing
        per_hour = 3600 / run
        print(f"  round 0 (generate, observe, judge)               {round0:7.2f} s")
        print(f"  an editing round (edit, observe, judge)          {editing:7.2f} s")
        print(f"  a run of round 0 + {args.rounds} editing rounds            {run:7.1f} s")
        print(f"  runs per GPU-hour                                {per_hour:7.1f}")
        gpu_hours = CULTIVATE_PROMPTS / per_hour
        print(
            f"  all of CULTIVate ({CULTIVATE_PROMPTS} prompts, one seed): {gpu_hours:.0f} "
            f"GPU-hours, {gpu_hours / 24:.0f} GPUs for a day"
        )
        if args.tiny:
            print("  (--tiny: tiny shapes, the figures mean nothing)")


if __name__ == "__main__":
    main()
