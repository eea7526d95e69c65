"""Tiny random-weight models built from configs, saved like hub checkpoints.

They exercise the real loading and inference code of the backends in seconds on CPU.
"""

from __future__ import annotations

import json
import os
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


def tiny_vae():
    """A two-level AutoencoderKL (4 latent channels, a factor of 2)."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        block_out_channels=(32, 64),
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        norm_num_groups=8,
        sample_size=32,
    )


def clip_tokenizer(folder: Path):
    """The byte-level CLIP tokenizer of :func:`write_clip_tokenizer`, 77 tokens long."""
    from transformers import CLIPTokenizer

    write_clip_tokenizer(folder)
    return CLIPTokenizer(
        str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=77
    )


def build_tiny_sd(path: Path, in_channels: int = 4) -> Path:
    """A Stable Diffusion (in_channels=4) or InstructPix2Pix (in_channels=8) pipeline."""
    import torch
    from diffusers import (
        EulerAncestralDiscreteScheduler,
        StableDiffusionInstructPix2PixPipeline,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )

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
    vae = tiny_vae()
    scheduler = EulerAncestralDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear"
    )
    tokenizer = clip_tokenizer(path / "_tokenizer_src")
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


def build_tiny_sdxl(path: Path) -> Path:
    """A Stable Diffusion XL pipeline: two text encoders (the second with a projection,
    whose pooled output and the size/crop ids condition the UNet), random weights."""
    import torch
    from diffusers import (
        EulerDiscreteScheduler,
        StableDiffusionXLPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64),
        layers_per_block=1,
        sample_size=16,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=(2, 4),
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=8,
        transformer_layers_per_block=(1, 2),
        projection_class_embeddings_input_dim=6 * 8 + 32,  # six size ids + the pooled text
        cross_attention_dim=64,  # the two encoders' hidden states side by side
        norm_num_groups=8,
    )
    vae = tiny_vae()
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", steps_offset=1
    )
    tokenizer = clip_tokenizer(path / "_tokenizer_src")
    text_encoder = tiny_clip_text(len(tokenizer))
    n = len(tokenizer)
    text_encoder_2 = CLIPTextModelWithProjection(
        CLIPTextConfig(
            vocab_size=n,
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            max_position_embeddings=77,
            projection_dim=32,
            bos_token_id=n - 2,
            eos_token_id=n - 1,
            pad_token_id=n - 1,
        )
    )
    pipe = StableDiffusionXLPipeline(
        unet=unet,
        vae=vae,
        scheduler=scheduler,
        text_encoder=text_encoder,
        text_encoder_2=text_encoder_2,
        tokenizer=tokenizer,
        tokenizer_2=tokenizer,
    )
    out = path / "tiny-sdxl"
    pipe.save_pretrained(out)
    return out


# A chat template in the Qwen style: images become <|vision_start|><|image_pad|><|vision_end|>
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN_SPECIALS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# The template of the models that think first (Qwen3, Qwen3.5): the assistant's turn opens
# with an empty reasoning block when the caller passes enable_thinking=False, as theirs do
THINKING_CHAT_TEMPLATE = CHAT_TEMPLATE.replace(
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n{% endif %}{% endif %}",
)
# merges so that the judge's answers "Yes" and "No" are single tokens, as in real vocabularies
QWEN_MERGES = (("Y", "e"), ("Ye", "s"), ("N", "o"))


def tiny_qwen_tokenizer(path: Path, thinking: bool = False):
    """A byte-level Qwen2 tokenizer with the chat template and special tokens of Qwen2.5, or
    (``thinking``) of the Qwen3 models that reason in <think> blocks."""
    from transformers import Qwen2Tokenizer

    chars = byte_alphabet()
    vocab = {c: i for i, c in enumerate(chars)}
    for a, b in QWEN_MERGES:
        vocab[a + b] = len(vocab)
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.json").write_text(json.dumps(vocab))
    merges = "\n".join(f"{a} {b}" for a, b in QWEN_MERGES)
    (path / "merges.txt").write_text(f"#version: 0.2\n{merges}\n")
    tok = Qwen2Tokenizer(
        str(path / "vocab.json"),
        str(path / "merges.txt"),
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[*QWEN_SPECIALS, *(("<think>", "</think>") if thinking else ())],
    )
    tok.chat_template = THINKING_CHAT_TEMPLATE if thinking else CHAT_TEMPLATE
    return tok


def build_tiny_qwen_vl(path: Path) -> Path:
    """A random Qwen2.5-VL (hidden 32, 2 layers, vision depth 2) with its processor."""
    return build_qwen_vl(
        path,
        text={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2},
        heads=(4, 2),
        # m-RoPE sections (time, height, width) sum to half the head dim (32 / 4 / 2)
        mrope=[2, 1, 1],
        vision={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4},
        vision_out=32,
        full_attention=[1],
        window=28,
        max_pixels=112 * 112,
        name="tiny-qwen2.5-vl",
        max_positions=2048,
        rope_theta=1e4,
    )


def build_qwen_vl(
    path: Path,
    text: dict,
    heads: tuple[int, int],
    mrope: list[int],
    vision: dict,
    vision_out: int,
    full_attention: list[int],
    window: int,
    max_pixels: int,
    name: str,
    max_positions: int,
    rope_theta: float,
    vocab_size: int | None = None,
) -> Path:
    """A Qwen2.5-VL of the given shape (random weights) with the test suite's byte-level
    tokenizer and a processor that takes up to ``max_pixels`` pixels an image."""
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    tok = tiny_qwen_tokenizer(path / "_tokenizer_src")
    ids = tok.convert_tokens_to_ids
    sizes = {"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2}
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(**sizes, min_pixels=56 * 56, max_pixels=max_pixels),
        video_processor=Qwen2VLVideoProcessor(**sizes),
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
    )
    cfg = Qwen2_5_VLConfig(
        text_config={
            **text,
            "vocab_size": vocab_size or len(tok),
            "num_attention_heads": heads[0],
            "num_key_value_heads": heads[1],
            "max_position_embeddings": max_positions,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": rope_theta,
                "mrope_section": mrope,
            },
            "bos_token_id": ids("<|endoftext|>"),
            "eos_token_id": ids("<|im_end|>"),
            "pad_token_id": ids("<|endoftext|>"),
        },
        vision_config={
            **vision,
            "out_hidden_size": vision_out,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "fullatt_block_indexes": full_attention,
            "window_size": window,
        },
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
    )
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration(cfg).eval()
    out = path / name
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def build_tiny_qwen3(path: Path, kind: str) -> Path:
    """A random Qwen3-VL (``kind="qwen3-vl"``: DeepStack vision features, interleaved
    m-RoPE) or Qwen3.5 (``"qwen3.5"``: Gated DeltaNet layers with one full-attention layer in
    four, the architecture of Qwen3.5-0.8B to 27B) with a thinking chat template, hidden 32,
    saved with its Qwen3-VL processor (16-pixel patches)."""
    import torch
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen3_5Config,
        Qwen3_5ForConditionalGeneration,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    tok = tiny_qwen_tokenizer(path / f"_tokenizer_src_{kind}", thinking=True)
    ids = tok.convert_tokens_to_ids
    sizes = {"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2}
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(**sizes, min_pixels=64 * 64, max_pixels=128 * 128),
        video_processor=Qwen3VLVideoProcessor(**sizes),
        tokenizer=tok,
        chat_template=THINKING_CHAT_TEMPLATE,
    )
    text = {
        "vocab_size": len(tok),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "max_position_embeddings": 2048,
        "bos_token_id": ids("<|endoftext|>"),
        "eos_token_id": ids("<|im_end|>"),
        "pad_token_id": ids("<|endoftext|>"),
    }
    vision = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 4,
        "out_hidden_size": 32,
        "num_position_embeddings": 64,
    }
    special = {
        "image_token_id": ids("<|image_pad|>"),
        "video_token_id": ids("<|video_pad|>"),
        "vision_start_token_id": ids("<|vision_start|>"),
        "vision_end_token_id": ids("<|vision_end|>"),
    }
    # m-RoPE sections (time, height, width) sum to half the rotated part of the head dim
    if kind == "qwen3-vl":
        rope = {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 1, 1]}
        cfg = Qwen3VLConfig(
            text_config={**text, "num_hidden_layers": 2, "rope_parameters": rope},
            vision_config={**vision, "deepstack_visual_indexes": [0]},
            **special,
        )
        model_cls = Qwen3VLForConditionalGeneration
    elif kind == "qwen3.5":
        # a quarter of each head is rotated, as in the published configs: 2 of 8 dimensions
        rope = {
            "rope_type": "default",
            "rope_theta": 1e4,
            "mrope_section": [1, 0, 0],
            "mrope_interleaved": True,
            "partial_rotary_factor": 0.25,
        }
        linear = {
            "linear_key_head_dim": 8,
            "linear_value_head_dim": 8,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
        }
        cfg = Qwen3_5Config(
            text_config={**text, **linear, "num_hidden_layers": 4, "rope_parameters": rope},
            vision_config=vision,
            **special,
        )
        model_cls = Qwen3_5ForConditionalGeneration
    else:
        raise ValueError(f"unknown kind {kind!r}: qwen3-vl or qwen3.5")
    torch.manual_seed(0)
    model = model_cls(cfg).eval()
    out = path / f"tiny-{kind}"
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def build_tiny_qwen_lm(path: Path) -> Path:
    """A random text-only Qwen2 causal LM with the same tokenizer and chat template."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = tiny_qwen_tokenizer(path / "_tokenizer_src_lm")
    ids = tok.convert_tokens_to_ids
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=ids("<|endoftext|>"),
        eos_token_id=ids("<|im_end|>"),
        pad_token_id=ids("<|endoftext|>"),
    )
    torch.manual_seed(1)
    model = Qwen2ForCausalLM(cfg).eval()
    out = path / "tiny-qwen2-lm"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def build_tiny_flux2_klein(path: Path) -> Path:
    """A random FLUX.2-klein pipeline (Qwen3 text encoder, Flux2 transformer and VAE)."""
    import torch
    from diffusers import (
        AutoencoderKLFlux2,
        FlowMatchEulerDiscreteScheduler,
        Flux2KleinPipeline,
        Flux2Transformer2DModel,
    )
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tok = tiny_qwen_tokenizer(path / "_tokenizer_src_klein")
    torch.manual_seed(0)
    # the pipeline reads hidden states 9, 18 and 27 of the text encoder: 28 layers, 16 wide
    text_encoder = Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=len(tok),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=28,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
            max_position_embeddings=1024,
        )
    )
    transformer = Flux2Transformer2DModel(
        patch_size=1,
        in_channels=16,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=48,
        timestep_guidance_channels=32,
        axes_dims_rope=(4, 4, 4, 4),
        guidance_embeds=False,
    )
    vae = AutoencoderKLFlux2(
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=4,
        sample_size=32,
    )
    pipe = Flux2KleinPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tok,
        transformer=transformer,
        is_distilled=True,
    )
    out = path / "tiny-flux2-klein"
    pipe.save_pretrained(out)
    return out


# taught weights kept in the repository (see :func:`teach`'s ``keep``)
TAUGHT = Path(__file__).resolve().parent / "taught"


def teach(
    backend,
    prompt: str,
    answer: str,
    image=None,
    max_steps: int = 400,
    images=None,
    keep: str | None = None,
) -> float:
    """Train an hf: backend's tiny model until it answers ``prompt`` (about ``image``, or
    about each of ``images`` in turn, so the answer holds for any image) with ``answer``;
    returns the largest loss over the pictures once taught. Makes a random model produce a
    known answer through the real generation path.

    Taught means: for every picture, at every position of the answer the answer's token
    beats every other by :data:`TAUGHT_MARGIN` in the logits, with the answer before it
    given, at the final weights. Greedy generation then writes the answer token by token
    (a float32 forward pass with a cache moves logits by about 1e-5, far below the margin).
    Stopping there rather than at a mean loss of 0.005 takes about half the steps.

    ``keep`` names taught weights kept under :data:`TAUGHT` for this prompt and answer
    (``REFINE_TAUGHT=record`` writes them). Where they are there and taught for every
    picture, the model takes them instead of training: teaching the observers of the
    suite's local runs took about 35 of its worker-seconds, each training step a forward
    and backward pass over a prompt of about 1,200 tokens. Weights kept for another prompt,
    another answer or another architecture, or not taught for this machine's pictures (its
    float arithmetic may draw them a little differently), are a warning, and the model is
    trained as without them."""
    import torch

    backend.load()
    proc = backend.processor
    pictures = list(images) if images else [image]
    chat = backend._chat_text(prompt, pictures[0] is not None)
    full = chat + answer + "<|im_end|>"
    batches = []
    for picture in pictures:
        if picture is not None:
            batch = proc(text=[full], images=[picture.convert("RGB")], return_tensors="pt")
            n_prompt = proc(text=[chat], images=[picture.convert("RGB")], return_tensors="pt")
        else:
            batch = proc([full], return_tensors="pt", add_special_tokens=False)
            n_prompt = proc([chat], return_tensors="pt", add_special_tokens=False)
        labels = batch["input_ids"].clone()
        labels[:, : n_prompt["input_ids"].shape[1]] = -100
        batches.append((batch, labels))
    model = backend.model

    def taught() -> float | None:
        """The largest loss over the pictures when every one is taught, else None."""
        model.eval()
        worst = 0.0
        with torch.no_grad():
            for batch, labels in batches:
                out = model(**batch, labels=labels)
                logits, want = out.logits[0, :-1].float(), labels[0, 1:]
                mask = want != -100
                logits, want = logits[mask], want[mask]
                right = logits.gather(1, want[:, None])[:, 0]
                others = logits.scatter(1, want[:, None], float("-inf")).max(dim=1).values
                if float((right - others).min()) < TAUGHT_MARGIN:
                    model.train()
                    return None
                worst = max(worst, out.loss.item())
        return worst

    if keep is not None and (done := _kept(model, keep, full, taught)) is not None:
        return done
    model.train()
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses = [float("inf")] * len(batches)
    for step in range(max_steps):
        k = step % len(batches)
        batch, labels = batches[k]
        out = model(**batch, labels=labels)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        losses[k] = out.loss.item()
        if max(losses) < 0.05 and (done := taught()) is not None:
            if keep is not None and os.environ.get("REFINE_TAUGHT") == "record":
                _keep(model, keep, full)
            return done
    model.eval()
    raise AssertionError(f"not taught in {max_steps} steps (losses {losses})")


def _taught_for(model, text: str) -> str:
    """What kept weights are for: the model's architecture (its parameters' names, shapes
    and types) and the text taught, prompt and answer."""
    import hashlib

    shapes = [(n, tuple(p.shape), str(p.dtype)) for n, p in model.state_dict().items()]
    return hashlib.sha256(json.dumps([type(model).__name__, shapes, text]).encode()).hexdigest()


def _kept(model, name: str, text: str, taught) -> float | None:
    """The largest loss once ``model`` has taken the weights kept as ``name``, where they
    are for it and ``text`` and taught for every picture; else None, the model as it was,
    and a warning (none while recording a name not kept yet)."""
    import warnings

    from safetensors import safe_open
    from safetensors.torch import load_model

    path = TAUGHT / f"{name}.safetensors"
    if not path.is_file():
        if os.environ.get("REFINE_TAUGHT") == "record":
            return None  # trained, then kept
        why = "are not kept"
    else:
        with safe_open(str(path), "pt") as f:
            meant = f.metadata().get("for")
        why = "are for another model, prompt or answer"
    if path.is_file() and meant == _taught_for(model, text):
        before = {k: v.clone() for k, v in model.state_dict().items()}
        load_model(model, str(path))
        if (done := taught()) is not None:
            return done
        model.load_state_dict(before)
        why = "are not taught for this machine's pictures"
    warnings.warn(
        f"the taught weights {path.name} {why}: the model is trained instead "
        "(REFINE_TAUGHT=record ./dev test keeps new ones)",
        stacklevel=3,
    )
    return None


def _keep(model, name: str, text: str) -> None:
    from safetensors.torch import save_model

    TAUGHT.mkdir(exist_ok=True)
    save_model(model, str(TAUGHT / f"{name}.safetensors"), {"for": _taught_for(model, text)})


TAUGHT_MARGIN = 2.0


SIGLIP_WORDS = (
    "<pad> </s> <unk> a photo of people eating food at home in iran tea rice carpet red blue"
).split()


def build_tiny_siglip(path: Path) -> Path:
    """A random SigLIP (32-wide, one layer per tower) with a word-level tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        SiglipConfig,
        SiglipImageProcessor,
        SiglipModel,
        SiglipProcessor,
    )

    words = Tokenizer(
        models.WordLevel({w: i for i, w in enumerate(SIGLIP_WORDS)}, unk_token="<unk>")
    )
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=words,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=16,
    )
    processor = SiglipProcessor(
        image_processor=SiglipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok
    )
    layer = {"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1}
    cfg = SiglipConfig(
        text_config={
            **layer,
            "vocab_size": len(SIGLIP_WORDS),
            "num_attention_heads": 2,
            "max_position_embeddings": 16,
        },
        vision_config={**layer, "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
    )
    torch.manual_seed(0)
    out = path / "tiny-siglip"
    SiglipModel(cfg).save_pretrained(out)
    processor.save_pretrained(out)
    return out


def save_random_lora(sd_dir: Path | str, out: Path | str, strength: float = 20.0) -> Path:
    """A random LoRA on the UNet attention projections of the tiny SD pipeline in
    ``sd_dir``, scaled up so it visibly changes the images, saved as a trained one is."""
    import torch
    from diffusers import StableDiffusionPipeline
    from peft import LoraConfig, get_peft_model_state_dict

    torch.manual_seed(0)
    pipe = StableDiffusionPipeline.from_pretrained(str(sd_dir))
    cfg = LoraConfig(
        r=4,
        lora_alpha=4,
        target_modules=["to_q", "to_k", "to_v", "to_out.0"],
        init_lora_weights=False,
    )
    pipe.unet.add_adapter(cfg)
    with torch.no_grad():
        for name, p in pipe.unet.named_parameters():
            if "lora_" in name:
                p.mul_(strength)
    StableDiffusionPipeline.save_lora_weights(
        Path(out), unet_lora_layers=get_peft_model_state_dict(pipe.unet)
    )
    return Path(out)


TINY_OPEN_CLIP = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


def build_tiny_open_clip(path: Path) -> str:
    """A tiny random open_clip model registered as ``tiny-clip-test`` with its weights saved;
    returns the ``clip:`` backend name that loads it."""
    import open_clip
    import torch

    path.mkdir(parents=True, exist_ok=True)
    (path / "tiny-clip-test.json").write_text(json.dumps(TINY_OPEN_CLIP))
    open_clip.add_model_config(path)
    torch.manual_seed(0)
    model = open_clip.create_model("tiny-clip-test")
    ckpt = path / "weights.pt"
    torch.save(model.state_dict(), ckpt)
    return f"clip:tiny-clip-test/{ckpt}"


def build_tiny_hf_clip(path: Path, seed: int = 0, processor_apart: bool = False) -> Path:
    """A random transformers CLIP (32-wide, one layer per tower, 16-d projections) with
    the byte-level CLIP tokenizer, saved as a hub CLIP checkpoint is (config,
    model.safetensors, the processor's files; with ``processor_apart``, the processor in
    ``tiny-hf-clip-processor`` beside it, as PickScore v1's repository holds none)."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    out = path / "tiny-hf-clip"
    tok = clip_tokenizer(path / "tiny-hf-clip-tokenizer")
    layer = {"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1}
    cfg = CLIPConfig(
        text_config={
            **layer,
            "vocab_size": len(tok),
            "num_attention_heads": 2,
            "max_position_embeddings": 77,
            "bos_token_id": tok.bos_token_id,
            "eos_token_id": tok.eos_token_id,
            "pad_token_id": tok.pad_token_id,
        },
        vision_config={**layer, "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
        projection_dim=16,
    )
    torch.manual_seed(seed)
    CLIPModel(cfg).save_pretrained(out)
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    apart = path / "tiny-hf-clip-processor"
    CLIPProcessor(image_processor=images, tokenizer=tok).save_pretrained(
        apart if processor_apart else out
    )
    return out


# a small BERT wordpiece vocabulary (BLIP adds [DEC] and [ENC] after it)
BERT_WORDS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "photo", "photorealistic",
              "of", "people", "eating", "food", "at", "home", "in", "iran", ".", "##s")  # fmt: skip
# BLIP's ViT parameter names, from transformers' BlipVisionModel's (ImageReward.pt's layout)
BLIP_VIT_NAMES = (
    (r"^embeddings\.class_embedding$", "cls_token"),
    (r"^embeddings\.position_embedding$", "pos_embed"),
    (r"^embeddings\.patch_embedding\.", "patch_embed.proj."),
    (r"^encoder\.layers\.(\d+)\.layer_norm1\.", r"blocks.\1.norm1."),
    (r"^encoder\.layers\.(\d+)\.layer_norm2\.", r"blocks.\1.norm2."),
    (r"^encoder\.layers\.(\d+)\.self_attn\.qkv\.", r"blocks.\1.attn.qkv."),
    (r"^encoder\.layers\.(\d+)\.self_attn\.projection\.", r"blocks.\1.attn.proj."),
    (r"^encoder\.layers\.(\d+)\.mlp\.", r"blocks.\1.mlp."),
    (r"^post_layernorm\.", "norm."),
)


def build_tiny_image_reward(path: Path, seed: int = 0):
    """A random ImageReward in the layout of the authors' files: ``ImageReward.pt`` (BLIP's
    ViT under ``blip.visual_encoder``, its BERT under ``blip.text_encoder``, the MLP head
    under ``mlp.layers``, and BLIP's projections the reward does not use),
    ``med_config.json`` and BERT's ``vocab.txt``. Returns the folder and the modules the
    weights came from (vision, text, head), to compute the reward by hand."""
    import re

    import torch
    from transformers import BlipTextConfig, BlipVisionConfig, BlipVisionModel
    from transformers.models.blip.modeling_blip_text import BlipTextModel

    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(BERT_WORDS) + "\n")
    med = {
        "architectures": ["BertModel"],
        "hidden_size": 32,
        "intermediate_size": 37,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "max_position_embeddings": 40,
        "vocab_size": len(BERT_WORDS) + 2,
        "layer_norm_eps": 1e-12,
        "hidden_act": "gelu",
        "pad_token_id": 0,
        "add_cross_attention": True,
        "encoder_width": 64,
    }
    (path / "med_config.json").write_text(json.dumps(med))
    torch.manual_seed(seed)
    vision = BlipVisionModel(
        BlipVisionConfig(hidden_size=64, intermediate_size=37, num_hidden_layers=1,
                         num_attention_heads=1, image_size=32, patch_size=8,
                         layer_norm_eps=1e-6)
    ).eval()  # fmt: skip
    text = BlipTextModel(
        BlipTextConfig(vocab_size=med["vocab_size"], hidden_size=32, intermediate_size=37,
                       num_hidden_layers=1, num_attention_heads=2, encoder_hidden_size=64,
                       max_position_embeddings=40, pad_token_id=0),
        add_pooling_layer=False,
    ).eval()  # fmt: skip
    widths = (32, 1024, 128, 64, 16, 1)
    layers = []
    for k in range(5):  # the authors' head: dropouts after the first three linear layers
        layers.append(torch.nn.Linear(widths[k], widths[k + 1]))
        if k < 3:
            layers.append(torch.nn.Dropout(0.2))
    head = torch.nn.Sequential(*layers).eval()
    with torch.no_grad():  # every weight drawn (some of the models' own inits are constant)
        for module in (vision, text, head):
            for p in module.parameters():
                p.normal_(0.0, 0.3)
    state = {}
    for key, value in vision.state_dict().items():
        for pattern, repl in BLIP_VIT_NAMES:
            if re.search(pattern, key):
                state["blip.visual_encoder." + re.sub(pattern, repl, key)] = value
                break
    for key, value in text.state_dict().items():
        state["blip.text_encoder." + key] = value
    for key, value in head.state_dict().items():
        state["mlp.layers." + key] = value
    state["blip.vision_proj.weight"] = torch.zeros(16, 64)
    torch.save(state, path / "ImageReward.pt")
    return path, (vision, text, head)


def build_tiny_altclip(path: Path, seed: int = 0) -> Path:
    """A random AltCLIP (transformers' ``AltCLIPModel``: a CLIP ViT and an XLM-R text
    encoder, as BAAI/AltCLIP-m9), 32-wide with one layer per tower and 16-d projections,
    with an XLM-R tokenizer over a small sentencepiece-style vocabulary, saved as the hub
    checkpoint is (config, weights, the processor's files)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import (
        AltCLIPConfig,
        AltCLIPModel,
        AltCLIPProcessor,
        CLIPImageProcessor,
        XLMRobertaTokenizerFast,
    )

    out = path / "tiny-altclip"
    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    words = [f"\u2581{w}" for w in ("A", "a", "photo", "of", "person", "in", "")] + [
        f"\u2581{w}" for w in ("Japanese", "Nigerian", "Mexican", "US-american", "French")
    ]
    letters = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-.'")
    vocab = [(w, -float(i)) for i, w in enumerate(special + words + letters)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)],
    )
    tokenizer = XLMRobertaTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
    )
    layer = {"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1}
    cfg = AltCLIPConfig(
        text_config={
            **layer,
            "vocab_size": len(vocab),
            "num_attention_heads": 2,
            "project_dim": 16,
            "max_position_embeddings": 80,
            "pad_token_id": 1,
            "type_vocab_size": 1,
        },
        vision_config={**layer, "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
        projection_dim=16,
    )
    torch.manual_seed(seed)
    AltCLIPModel(cfg).save_pretrained(out)
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    AltCLIPProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(out)
    return out


def build_tiny_alt_diffusion(path: Path) -> Path:
    """An AltDiffusion pipeline laid out as BAAI/AltDiffusion-m9's: the tiny SD pipeline's
    UNet, VAE and scheduler, a RobertaSeriesModelWithTransformation text encoder whose
    model_index.json entry names the library "alt_diffusion", random weights (the CLIP
    tokenizer stands in for XLM-R's, which needs a vocabulary file)."""
    import json
    import shutil

    import torch
    from diffusers.pipelines.deprecated.alt_diffusion.modeling_roberta_series import (
        RobertaSeriesConfig,
        RobertaSeriesModelWithTransformation,
    )
    from transformers import CLIPTokenizer

    alt = Path(path) / "tiny-alt-diffusion"
    shutil.copytree(build_tiny_sd(Path(path) / "base"), alt)
    tok = CLIPTokenizer.from_pretrained(alt / "tokenizer")
    unet = json.loads((alt / "unet" / "config.json").read_text())
    torch.manual_seed(0)
    config = RobertaSeriesConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=tok.model_max_length + 4,
        project_dim=unet["cross_attention_dim"], pad_token_id=1, bos_token_id=0, eos_token_id=2,
    )  # fmt: skip
    shutil.rmtree(alt / "text_encoder")
    RobertaSeriesModelWithTransformation(config).save_pretrained(alt / "text_encoder")
    index = json.loads((alt / "model_index.json").read_text())
    index["_class_name"] = "AltDiffusionPipeline"
    index["text_encoder"] = ["alt_diffusion", "RobertaSeriesModelWithTransformation"]
    (alt / "model_index.json").write_text(json.dumps(index))
    return alt


def build_tiny_clip_t5(path: Path, seed: int = 0) -> Path:
    """A random CLIP-FlanT5 in its checkpoint's layout (zhiqiulin/clip-flant5-xxl's): a
    FlanT5 32 wide, one layer each side, with ``mm_projector`` (Linear, GELU, Linear) from a
    tiny CLIP vision tower (saved beside it, named by ``mm_vision_tower``), a config of
    model type ``clip_t5``, and a T5 tokenizer over a small sentencepiece-style vocabulary
    holding the words of VQAScore's chat prompt."""
    import json

    import torch
    import torch.nn as nn
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        CLIPVisionModel,
        T5Config,
        T5ForConditionalGeneration,
        T5TokenizerFast,
    )

    out = path / "tiny-clip-flant5"
    tower = path / "tiny-clip-vision"
    torch.manual_seed(seed)
    vision = CLIPVisionModel(
        CLIPVisionConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=2, image_size=32, patch_size=8)
    )  # fmt: skip
    vision.save_pretrained(tower)
    CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    ).save_pretrained(tower)
    special = ["<pad>", "</s>", "<unk>"]
    words = ("A chat between a curious user and an artificial intelligence assistant. The gives "
             "helpful, detailed, polite answers to the user's questions. USER: ASSISTANT: Does "
             "this figure show Please answer yes or no? Yes").split()  # fmt: skip
    pieces = list(dict.fromkeys(f"\u2581{w}" for w in words)) + list(
        "abcdefghijklmnopqrstuvwxyz\".'?:"
    )
    vocab = [(w, -float(i)) for i, w in enumerate(special + pieces)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=2, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    tokenizer = T5TokenizerFast(
        tokenizer_object=tok, eos_token="</s>", unk_token="<unk>", pad_token="<pad>", extra_ids=0
    )
    # FlanT5's vocabulary has 28 more rows than its tokenizer (32128 against 32100)
    config = T5Config(vocab_size=len(vocab) + 28, d_model=32, d_kv=16, d_ff=37, num_layers=1,
                      num_decoder_layers=1, num_heads=2, decoder_start_token_id=0,
                      pad_token_id=0, eos_token_id=1)  # fmt: skip
    model = T5ForConditionalGeneration(config)
    model.mm_projector = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 32))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # the checkpoint carries vision-tower weights of its own (other than the tower's)
    from safetensors.torch import load_file, save_file

    torch.manual_seed(seed + 1)
    own = CLIPVisionModel(vision.config).state_dict()
    weights = load_file(out / "model.safetensors")
    weights |= {f"vision_tower.vision_tower.{k}": v.contiguous() for k, v in own.items()}
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    doc = json.loads((out / "config.json").read_text())
    doc.update(model_type="clip_t5", architectures=["CLIPT5ForConditionalGeneration"],
               mm_vision_tower=str(tower), mm_hidden_size=32, mm_projector_type="mlp2x_gelu",
               mm_vision_select_layer=-2, mm_vision_select_feature="patch")  # fmt: skip
    (out / "config.json").write_text(json.dumps(doc, indent=2))
    return out


INTERNVL_TEMPLATE = CHAT_TEMPLATE.replace(
    "<|vision_start|><|image_pad|><|vision_end|>", "<IMG_CONTEXT>\n"
)
# InternVL's image tokens, as its tokenizer names them (the processor reads these attributes)
INTERNVL_IMAGE_TOKENS = {
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "context_image_token": "<IMG_CONTEXT>",
    "video_token": "<video>",
}


def build_tiny_internvl(path: Path, seed: int = 0) -> Path:
    """A random InternVL3 in the layout of its transformers build (OpenGVLab/InternVL3-14B-hf:
    ``InternVLForConditionalGeneration``): a vision tower 32 wide at 56 px (16 patches,
    pixel-shuffled to 4 image tokens) and a Qwen2 language model 32 wide, with the test
    suite's byte-level tokenizer carrying InternVL's image tokens, one tile an image."""
    import torch
    from transformers import (
        GotOcr2ImageProcessor,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
        InternVLVideoProcessor,
        Qwen2Tokenizer,
    )

    src = path / "_internvl_tokenizer"
    tiny_qwen_tokenizer(src)  # its vocabulary and merges
    tok = Qwen2Tokenizer(
        str(src / "vocab.json"), str(src / "merges.txt"), unk_token=None, bos_token=None,
        eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=[*QWEN_SPECIALS, *INTERNVL_IMAGE_TOKENS.values()],
        extra_special_tokens=INTERNVL_IMAGE_TOKENS,
    )  # fmt: skip
    tok.chat_template = INTERNVL_TEMPLATE
    size, tokens = 56, 4  # (56 / 14)^2 patches, a quarter of them after the pixel shuffle
    square = {"height": size, "width": size}
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(
            size=square, crop_to_patches=False, min_patches=1, max_patches=1
        ),
        tokenizer=tok,
        video_processor=InternVLVideoProcessor(size=square),
        image_seq_length=tokens,
        chat_template=INTERNVL_TEMPLATE,
    )
    config = InternVLConfig(
        vision_config={"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                       "intermediate_size": 64, "image_size": [size, size],
                       "patch_size": [14, 14]},
        text_config={"model_type": "qwen2", "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4,
                     "num_key_value_heads": 2, "vocab_size": len(tok),
                     "max_position_embeddings": 2048, "rope_theta": 1e4,
                     "tie_word_embeddings": True},
        image_token_id=tok.context_image_token_id, image_seq_length=tokens,
        downsample_ratio=0.5,
    )  # fmt: skip
    torch.manual_seed(seed)
    out = path / "tiny-internvl3"
    InternVLForConditionalGeneration(config).save_pretrained(out)
    processor.save_pretrained(out)
    return out


def serve_from_hub_cache(cache: Path, repo: str, folder: Path) -> None:
    """``folder`` in a Hugging Face cache at ``cache`` as the main revision of ``repo``: a
    model loads by the hub's id (offline) as if it had been downloaded."""
    import shutil

    sha = "0" * 39 + "1"
    repo_dir = cache / ("models--" + repo.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / "main").write_text(sha)
    shutil.copytree(folder, repo_dir / "snapshots" / sha, dirs_exist_ok=True)
