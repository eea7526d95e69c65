"""What one refinement round costs on a GPU, and the arithmetic that turns it into runs per
GPU-hour (docs/benchmarks.md). ``bench_cpu_round.py`` reuses its pipelines.

``--arch`` picks the architectures:

* ``legacy`` (the default, so earlier figures keep their meaning): those the small-gpu profile
  had until late 2026: an SD-Turbo-size generator (SD 2.1 UNet, 4 steps, 512 px), an
  InstructPix2Pix-size editor (SD 1.5 UNet with 8 input channels, 20 steps), and a
  Qwen2.5-VL-3B-size observer and judge (36 layers, 2048 wide, vision depth 32).
* ``small-gpu``: the bundled small-gpu profile today: FLUX.2 [klein] 4B generates (768 px) and
  edits (the input image as its reference, same size) with the profile's options (4 steps,
  ``cpu_offload``, ``vae_tiling``), one pipeline for both; a Qwen3.5-0.8B-size observer and
  judge (``benchmarks/qwen35.build_qwen35``, sizes set there from the model card).
* ``local-gpu``: the bundled local-gpu profile today: the same FLUX.2 [klein] 4B at 1024 px
  without offload; a Qwen3-VL-8B-size observer and judge.

Every model is built from its real configuration with random weights (no download), directly
on the device in its half precision, behind the test suite's small tokenizer (the embedding
tables keep the real vocabulary size), and saved as a checkpoint that the toolkit's own
backends (``diffusers:`` and ``hf:``) load. ``--in-memory`` hands the FLUX.2 pipeline and
Qwen3-VL-8B to those backends as built instead of saving and loading about 16 and 17 GB
(the backends' ``load()`` then has nothing to do; the timed calls are the same). The observer's
answer is timed as ``--answer-tokens`` decoded tokens (random weights never stop on their
own), the judge as its yes-probability forward passes.

Where the real sizes come from (the Hub's files could not be fetched where this was written;
each figure below is quoted alike by several public repositories, found with a code search):

* FLUX.2 [klein] 4B transformer (black-forest-labs/FLUX.2-klein-4B, transformer/config.json):
  5 double-stream and 20 single-stream blocks, 24 heads of 128, joint_attention_dim 7680,
  in_channels 128, timestep_guidance_channels 256, RoPE axes 4 x 32 with theta 2000, no
  guidance embedding (DiffSynth-Studio's model registry, a GGUF loader's config for
  klein-base-4B, an NPU conversion script). diffusers' Flux2Transformer2DModel defaults are
  FLUX.2 [dev]'s (8 + 48 blocks, 48 heads, 15360), not klein's.
* Its text encoder (text_encoder/config.json): Qwen3-4B, 36 layers, 2560 wide (the pipeline
  stacks hidden states 9, 18 and 27: 3 x 2560 = 7680), intermediate 9728, 32 query and 8
  key-value heads of 128, vocabulary 151936, tied embeddings (Qwen/Qwen3-4B's config.json).
* Its VAE: diffusers' AutoencoderKLFlux2 defaults (128-256-512-512 channels, 32 latent
  channels, 2 x 2 patches: the transformer's 128 input channels), FLUX.2's VAE.
* Qwen3-VL-8B-Instruct (Qwen/Qwen3-VL-8B-Instruct, config.json and preprocessor_config.json):
  text 36 layers, 4096 wide, intermediate 12288, 32 and 8 heads of 128, m-RoPE sections
  24/20/20, theta 5e6, vocabulary 151936, untied; vision 27 blocks, 1152 wide, intermediate
  4304, 16 heads, DeepStack at 8/16/24, 16-pixel patches merged 2 x 2; images between 256^2
  and 4096^2 pixels (a 1024 px image is 1024 tokens).

Figures are printed, not asserted. ``--tiny`` runs the same code on tiny shapes on any device
(a check that the script works; its figures mean nothing).

Usage: python benchmarks/bench_gpu_round.py [--arch legacy|small-gpu|local-gpu]
    [--device cuda] [--candidates 4] [--rounds 5] [--repeat 3] [--in-memory] [--workdir DIR]
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


ARCHS = {
    "legacy": "the legacy architectures (SD-Turbo, InstructPix2Pix, Qwen2.5-VL-3B)",
    "small-gpu": "the small-gpu architectures (FLUX.2 [klein] 4B offloaded, Qwen3.5-0.8B)",
    "local-gpu": "the local-gpu architectures (FLUX.2 [klein] 4B, Qwen3-VL-8B)",
}

# FLUX.2 [klein] 4B (sources in the module docstring); the tiny shapes are those of
# tests.fakes.tiny_models.build_tiny_flux2_klein (a text encoder of 28 layers: the pipeline
# reads hidden states 9, 18 and 27)
KLEIN = {
    "real": {
        "transformer": {
            "patch_size": 1,
            "in_channels": 128,
            "num_layers": 5,
            "num_single_layers": 20,
            "attention_head_dim": 128,
            "num_attention_heads": 24,
            "joint_attention_dim": 7680,
            "timestep_guidance_channels": 256,
            "mlp_ratio": 3.0,
            "axes_dims_rope": (32, 32, 32, 32),
            "rope_theta": 2000,
            "guidance_embeds": False,
        },
        "text_encoder": {  # Qwen3-4B
            "hidden_size": 2560,
            "intermediate_size": 9728,
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "max_position_embeddings": 40960,
            "rope_theta": 1e6,
            "vocab_size": 151936,
            "tie_word_embeddings": True,
        },
        "vae": {},  # AutoencoderKLFlux2's defaults: FLUX.2's VAE
    },
    "tiny": {
        "transformer": {
            "patch_size": 1,
            "in_channels": 16,
            "num_layers": 1,
            "num_single_layers": 1,
            "attention_head_dim": 16,
            "num_attention_heads": 2,
            "joint_attention_dim": 48,
            "timestep_guidance_channels": 32,
            "axes_dims_rope": (4, 4, 4, 4),
            "guidance_embeds": False,
        },
        "text_encoder": {
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 28,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 8,
            "max_position_embeddings": 1024,
        },
        "vae": {
            "block_out_channels": (8, 16),
            "down_block_types": ("DownEncoderBlock2D",) * 2,
            "up_block_types": ("UpDecoderBlock2D",) * 2,
            "layers_per_block": 1,
            "latent_channels": 4,
            "norm_num_groups": 4,
            "sample_size": 32,
        },
    },
}

# Qwen3-VL-8B-Instruct (sources in the module docstring); the tiny shapes are those of
# tests.fakes.tiny_models.build_tiny_qwen3(..., "qwen3-vl")
QWEN3_VL = {
    "real": {
        "text": {
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "max_position_embeddings": 262144,
            "vocab_size": 151936,
            "tie_word_embeddings": False,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 5e6,
                "mrope_section": [24, 20, 20],
                "mrope_interleaved": True,
            },
        },
        "vision": {
            "depth": 27,
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_heads": 16,
            "out_hidden_size": 4096,
            "num_position_embeddings": 2304,
            "deepstack_visual_indexes": [8, 16, 24],
        },
    },
    "tiny": {
        "text": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 8,
            "max_position_embeddings": 2048,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e4,
                "mrope_section": [2, 1, 1],
            },
        },
        "vision": {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 4,
            "out_hidden_size": 32,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0],
        },
    },
}


def _on(device: str):
    """Build modules directly on the device, in the half precision the backends load there
    (bfloat16 where the GPU has it, else float16): a fast random init and no cast at load."""
    import contextlib

    import torch

    from refine.backends.loading import pick_dtype

    @contextlib.contextmanager
    def scope():
        old = torch.get_default_dtype()
        if device != "cpu":
            half = pick_dtype(device) if device.startswith("cuda") else torch.float16
            torch.set_default_dtype(half)
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


def build_flux2_klein(root: Path, tiny: bool, device: str, save: bool = True):
    """A FLUX.2-klein-4B-size pipeline (Qwen3-4B text encoder, Flux2 transformer, FLUX.2 VAE;
    random weights) with the test suite's tokenizer: ``(folder, None)`` once saved there, or
    ``(folder it would have, pipeline)`` when not ``save``."""
    import torch
    from diffusers import (
        AutoencoderKLFlux2,
        FlowMatchEulerDiscreteScheduler,
        Flux2KleinPipeline,
        Flux2Transformer2DModel,
    )
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from tests.fakes.tiny_models import tiny_qwen_tokenizer

    shape = KLEIN["tiny" if tiny else "real"]
    tok = tiny_qwen_tokenizer(root / "tok-klein")
    torch.manual_seed(0)
    with _on(device):
        text_encoder = Qwen3ForCausalLM(
            Qwen3Config(**{"vocab_size": len(tok), **shape["text_encoder"]})
        )
        transformer = Flux2Transformer2DModel(**shape["transformer"])
        vae = AutoencoderKLFlux2(**shape["vae"])
    pipe = Flux2KleinPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=text_encoder.eval(),
        tokenizer=tok,
        transformer=transformer,
        is_distilled=True,
    )
    _say_size("FLUX.2 [klein]", text_encoder, transformer, vae)
    out = root / "flux2-klein"
    if not save:
        return out, pipe
    pipe.save_pretrained(out)
    return out, None


def build_qwen3_vl(root: Path, tiny: bool, device: str, save: bool = True):
    """A Qwen3-VL-8B-Instruct-size model (random weights) with the test suite's tokenizer and
    the real image processor's sizes: ``(folder, None)`` once saved there, or ``(folder it
    would have, (model, processor))`` when not ``save``."""
    import torch
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    from tests.fakes.tiny_models import CHAT_TEMPLATE, tiny_qwen_tokenizer

    shape = QWEN3_VL["tiny" if tiny else "real"]
    tok = tiny_qwen_tokenizer(root / "tok-qwen3-vl")  # the Instruct model does not think
    ids = tok.convert_tokens_to_ids
    sizes = {"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2}
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(
            **sizes, size={"shortest_edge": 256 * 256, "longest_edge": 4096 * 4096}
        ),
        video_processor=Qwen3VLVideoProcessor(**sizes),
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
    )
    text = {
        "vocab_size": len(tok),
        **shape["text"],
        "bos_token_id": ids("<|endoftext|>"),
        "eos_token_id": ids("<|im_end|>"),
        "pad_token_id": ids("<|endoftext|>"),
    }
    cfg = Qwen3VLConfig(
        text_config=text,
        vision_config={
            **shape["vision"],
            "patch_size": 16,
            "temporal_patch_size": 2,
            "spatial_merge_size": 2,
        },
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
        tie_word_embeddings=bool(shape["text"].get("tie_word_embeddings")),
    )
    torch.manual_seed(0)
    with _on(device):
        model = Qwen3VLForConditionalGeneration(cfg).eval()
    _say_size("Qwen3-VL", model)
    out = root / "qwen3-vl"
    if not save:
        return out, (model, processor)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out, None


def _say_size(name: str, *modules) -> None:
    n = sum(p.numel() for m in modules for p in m.parameters()) / 1e9
    print(f"  {name} of {n:.2f} B parameters")


def build_models(arch: str, root: Path, tiny: bool, device: str, in_memory: bool) -> dict:
    """The models of ``arch``: ``{role: (backend name, options, model built in memory or
    None)}`` for the generator, editor and observer (which also judges)."""
    if arch == "legacy":
        turbo = build_sd(root, "turbo", tiny, device)
        ip2p = build_sd(root, "ip2p", tiny, device)
        qwen = build_qwen_vl(root, tiny, device)
        return {
            "generator": (
                f"diffusers:{turbo}",
                {"steps": 4, "guidance": 0.0, "width": 512, "height": 512},
                None,
            ),
            "editor": (f"diffusers:{ip2p}", {"steps": 20}, None),
            "observer": (f"hf:{qwen}", {}, None),
        }
    from benchmarks.qwen35 import build_qwen35
    from refine.profiles import load_profile

    options = load_profile(arch).options
    klein, pipe = build_flux2_klein(root, tiny, device, save=not in_memory)
    if arch == "small-gpu":
        with _on(device):  # about 1.7 GB: always saved and loaded
            vlm, model = build_qwen35(root, tiny), None
    else:
        vlm, model = build_qwen3_vl(root, tiny, device, save=not in_memory)
    return {
        "generator": (f"diffusers:{klein}", dict(options.get("generator", {})), pipe),
        "editor": (f"diffusers:{klein}", dict(options.get("editor", {})), None),
        "observer": (f"hf:{vlm}", {}, model),
    }


def hand_over(backend, built) -> None:
    """Give a backend the model built in memory, as its ``load()`` would have set it (a
    ``diffusers:`` pipeline placed by the backend: on the device, or CPU offload); its
    ``load()`` then has nothing to do."""
    if hasattr(backend, "pipe"):
        backend.pipe = backend._place(built)
    else:
        model, processor = built
        backend.model, backend.processor, backend.is_vision = model.eval(), processor, True
        backend._tokenizer(processor).padding_side = "left"


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
    parser.add_argument("--arch", choices=list(ARCHS), default="legacy", help="see above")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--candidates", type=int, default=4, help="images per round")
    parser.add_argument("--rounds", type=int, default=5, help="editing rounds after round 0")
    parser.add_argument("--questions", type=int, default=12, help="judge questions per image")
    parser.add_argument("--answer-tokens", type=int, default=200, help="tokens per description")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls a stage (median)")
    parser.add_argument(
        "--in-memory",
        action="store_true",
        help="hand FLUX.2 [klein] and Qwen3-VL to the backends as built (no save and load)",
    )
    parser.add_argument("--workdir", help="where the models are saved (default: the temp dir)")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes: a check of the script")
    args = parser.parse_args(argv)

    import gc

    import torch
    from PIL import Image

    from refine.backends import create

    n = args.candidates
    seeds = list(range(1, n + 1))
    cuda = args.device.startswith("cuda")
    with tempfile.TemporaryDirectory(prefix="bench-gpu-round-", dir=args.workdir) as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        models = build_models(args.arch, root, args.tiny, args.device, args.in_memory)
        print(f"built the random-weight models in {time.perf_counter() - t:.0f} s")
        gc.collect()  # what was built and saved leaves the device before it is loaded
        if cuda:
            torch.cuda.empty_cache()
        backends = {}
        for role, (name, options, _) in models.items():
            if role == "generator" and args.tiny:
                options = {**options, "width": 64, "height": 64}
            if role == "observer":
                options = {**options, "batch_size": n}
            backends[role] = create(role, name, device=args.device, **options)
        gen, editor, vlm = backends["generator"], backends["editor"], backends["observer"]
        t = time.perf_counter()
        for role, (_, _, built) in models.items():
            if built is not None:
                hand_over(backends[role], built)
        del models, built
        for backend in (gen, editor, vlm):
            backend.load()  # an editor of the generator's model shares its pipeline
        gc.collect()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()  # the round's peak, not the build's
        print(f"loaded them through the backends in {time.perf_counter() - t:.0f} s")
        side = gen.width
        image = Image.new("RGB", (side, side), (150, 90, 40))
        images = [image] * n
        prompt = "List what this image shows: setting, objects, attire, interaction, spatial."
        questions = [f"Is there a teapot {k} in the image?" for k in range(args.questions)]

        def describe():
            vlm.load()
            batch = vlm._encode([prompt] * n, images)
            with torch.inference_mode():
                vlm.model.generate(
                    **batch,
                    max_new_tokens=args.answer_tokens,
                    min_new_tokens=args.answer_tokens,
                    do_sample=False,
                )

        work = {
            f"generate {n} ({side} px, {gen.steps} steps)": lambda: gen.generate("a feast", seeds),
            f"edit {n} ({editor.steps} steps)": lambda: editor.edit(image, "add a teapot", seeds),
            f"observe {n} ({args.answer_tokens} tokens each, one batch)": describe,
            f"judge {n} x {args.questions} questions": lambda: vlm.yes_probability(
                images * args.questions, questions * n
            ),
        }  # fmt: skip
        stages = {}
        for name, fn in work.items():
            stages[name] = timed(fn, args.repeat)
            print(f"  timed {name}: {stages[name]:.2f} s")
        mem = ""
        if cuda:
            mem = f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB"
        print(f"\none round on {args.device} with {ARCHS[args.arch]}{mem}")
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
