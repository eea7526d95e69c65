"""A random-weight Qwen3.5 for the round benchmarks (bench_cpu_round.py, bench_gpu_round.py):
the published 0.8B shape or a tiny one, with the suite's thinking chat template."""

from __future__ import annotations

from pathlib import Path

# Qwen/Qwen3.5-0.8B (Qwen, 2026-03-02): text hidden 1024, 24 layers (Gated DeltaNet, one
# full-attention layer in four), 8 query and 2 key-value heads of 256, 16 linear-attention
# heads of 128, vocabulary 248320, tied embeddings (the model card and vendor pages); the
# vision tower as read for the small Qwen3.5 models: 12 blocks, 768 wide, 12 heads.
PUBLISHED = {
    "text": {
        "hidden_size": 1024,
        "intermediate_size": 3584,
        "num_hidden_layers": 24,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "vocab_size": 248320,
        "tie_word_embeddings": True,
    },
    "vision": {
        "depth": 12,
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_heads": 12,
        "out_hidden_size": 1024,
    },
}
TINY = {
    "text": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 8,
    },
    "vision": {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 4,
        "out_hidden_size": 32,
    },
}


def build_qwen35(root: Path, tiny: bool) -> Path:
    """A Qwen3.5 of the published 0.8B size (or tiny) with the suite's thinking template."""
    import torch
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen3_5Config,
        Qwen3_5ForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    from tests.fakes.tiny_models import THINKING_CHAT_TEMPLATE, tiny_qwen_tokenizer

    shape = TINY if tiny else PUBLISHED
    tok = tiny_qwen_tokenizer(root / "tok-qwen", thinking=True)
    ids = tok.convert_tokens_to_ids
    sizes = {"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2}
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(**sizes),
        video_processor=Qwen3VLVideoProcessor(**sizes),
        tokenizer=tok,
        chat_template=THINKING_CHAT_TEMPLATE,
    )
    head = shape["text"]["head_dim"]
    rotated = head // 4  # partial_rotary_factor 0.25: a quarter of each head is rotated
    mrope = [rotated // 2 - 2 * (rotated // 8), rotated // 8, rotated // 8]
    text = {
        "vocab_size": len(tok),
        "max_position_embeddings": 32768,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 1e7,
            "mrope_section": mrope,
            "mrope_interleaved": True,
            "partial_rotary_factor": 0.25,
        },
        "bos_token_id": ids("<|endoftext|>"),
        "eos_token_id": ids("<|im_end|>"),
        "pad_token_id": ids("<|endoftext|>"),
        **shape["text"],
    }
    cfg = Qwen3_5Config(
        text_config=text,
        vision_config={**shape["vision"], "num_position_embeddings": 2304},
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
        tie_word_embeddings=bool(shape["text"].get("tie_word_embeddings")),
    )
    torch.manual_seed(0)
    model = Qwen3_5ForConditionalGeneration(cfg).eval()
    out = root / "qwen3.5"
    model.save_pretrained(out)
    processor.save_pretrained(out)
    n = sum(p.numel() for p in model.parameters()) / 1e9
    print(f"  Qwen3.5 of {n:.2f} B parameters")
    return out
