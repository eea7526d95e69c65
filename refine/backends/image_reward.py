"""ImageReward (Xu et al., 2023) on transformers' BLIP modules.

The authors' ``image-reward`` package pins timm 0.6.13 (the toolkit's open_clip needs a
newer one) and fetches BERT's tokenizer at load time, so it is not used: their checkpoint
``ImageReward.pt`` (BLIP's ViT image encoder, its BERT text encoder with cross-attention
to the image, and a 5-layer MLP head) is loaded here into ``BlipVisionModel`` and
``BlipTextModel``, whose parameters are BLIP's under other names (:func:`renamed`). The
vision encoder's size is read from the checkpoint's shapes (BLIP's ViTs have 64-wide
attention heads), the text encoder's from ``med_config.json`` beside it. The reward is the
authors': the MLP of the text encoder's first token, standardised with their mean and
standard deviation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refine.backends.device import LazyDevice
from refine.backends.loading import serialised_load

if TYPE_CHECKING:
    from PIL import Image

# the authors' standardisation of the MLP's output (ImageReward.py)
REWARD_MEAN = 0.16717362830052426
REWARD_STD = 1.0333394966054072
MAX_TOKENS = 35  # the prompt is padded or cut to 35 tokens, as the authors' score does
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
HEAD_WIDTH = 64  # BLIP's ViT-B and ViT-L both use 64-wide attention heads

_VISION = (
    (r"^cls_token$", "embeddings.class_embedding"),
    (r"^pos_embed$", "embeddings.position_embedding"),
    (r"^patch_embed\.proj\.", "embeddings.patch_embedding."),
    (r"^blocks\.(\d+)\.norm1\.", r"encoder.layers.\1.layer_norm1."),
    (r"^blocks\.(\d+)\.norm2\.", r"encoder.layers.\1.layer_norm2."),
    (r"^blocks\.(\d+)\.attn\.qkv\.", r"encoder.layers.\1.self_attn.qkv."),
    (r"^blocks\.(\d+)\.attn\.proj\.", r"encoder.layers.\1.self_attn.projection."),
    (r"^blocks\.(\d+)\.mlp\.", r"encoder.layers.\1.mlp."),
    (r"^norm\.", "post_layernorm."),
)


def renamed(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """ImageReward's state dict split and renamed: (vision encoder, text encoder, MLP
    head), each under the names of transformers' modules. BLIP's other parts (its
    projections, unused by the reward) are left out."""
    vision: dict[str, Any] = {}
    text: dict[str, Any] = {}
    head: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith("blip.visual_encoder."):
            name = key.removeprefix("blip.visual_encoder.")
            for pattern, repl in _VISION:
                if re.search(pattern, name):
                    vision[re.sub(pattern, repl, name)] = value
                    break
        elif key.startswith("blip.text_encoder.") and not key.endswith("position_ids"):
            text[key.removeprefix("blip.text_encoder.")] = value
        elif key.startswith("mlp.layers."):
            head[key.removeprefix("mlp.layers.")] = value
    return vision, text, head


def vision_config(vision: dict[str, Any]) -> dict[str, Any]:
    """BlipVisionConfig's sizes read from the encoder's weights."""
    patch = vision["embeddings.patch_embedding.weight"]
    width, size = int(patch.shape[0]), int(patch.shape[-1])
    grid = round((vision["embeddings.position_embedding"].shape[1] - 1) ** 0.5)
    layers = 1 + max(int(k.split(".")[2]) for k in vision if k.startswith("encoder.layers."))
    return {
        "hidden_size": width,
        "intermediate_size": int(vision["encoder.layers.0.mlp.fc1.weight"].shape[0]),
        "num_hidden_layers": layers,
        "num_attention_heads": max(1, width // HEAD_WIDTH),
        "image_size": grid * size,
        "patch_size": size,
        "layer_norm_eps": 1e-6,  # BLIP's ViT
        "hidden_act": "gelu",
    }


class ImageReward:
    """The ImageReward model of ``checkpoint`` (ImageReward.pt) and ``med_config``
    (med_config.json), its prompt tokenized by BERT's tokenizer ``tokenizer`` (a folder or
    a hub id) with BLIP's two added tokens."""

    device = LazyDevice()

    def __init__(
        self, checkpoint: str, med_config: str, tokenizer: str, device: str | None = None
    ) -> None:
        self.checkpoint, self.med_config, self.tokenizer_name = checkpoint, med_config, tokenizer
        self.device = device
        self.vision: Any = None
        self.text: Any = None
        self.head: Any = None
        self.tokenizer: Any = None
        self.image_size = 0

    @property
    def id(self) -> str:
        return f"imagereward:{self.checkpoint}"

    @serialised_load(lambda self: self.head is not None)
    def load(self) -> ImageReward:
        if self.head is not None:
            return self
        import torch
        from transformers import BertTokenizer, BlipTextConfig, BlipVisionConfig, BlipVisionModel
        from transformers.models.blip.modeling_blip_text import BlipTextModel

        from refine.backends.loading import load_or_explain

        state = torch.load(self.checkpoint, map_location="cpu", weights_only=True)
        vision, text, head = renamed(state)
        if not vision or not text or not head:
            raise ValueError(
                f"{self.checkpoint} is not an ImageReward checkpoint (no blip.visual_encoder, "
                "blip.text_encoder or mlp.layers weights)"
            )
        med = json.loads(Path(self.med_config).read_text(encoding="utf-8"))
        vcfg = vision_config(vision)
        tcfg = BlipTextConfig(
            vocab_size=med["vocab_size"],
            hidden_size=med["hidden_size"],
            encoder_hidden_size=vcfg["hidden_size"],
            intermediate_size=med["intermediate_size"],
            num_hidden_layers=med["num_hidden_layers"],
            num_attention_heads=med["num_attention_heads"],
            max_position_embeddings=med["max_position_embeddings"],
            layer_norm_eps=med.get("layer_norm_eps", 1e-12),
            hidden_act=med.get("hidden_act", "gelu"),
            pad_token_id=med.get("pad_token_id", 0),
        )
        self.vision = BlipVisionModel(BlipVisionConfig(**vcfg)).eval()
        self.vision.load_state_dict(vision, strict=True)
        self.text = BlipTextModel(tcfg, add_pooling_layer=False).eval()
        missing, unexpected = self.text.load_state_dict(text, strict=False)
        if unexpected or [m for m in missing if not m.endswith("position_ids")]:
            raise ValueError(
                f"{self.checkpoint}: its text encoder does not match med_config.json "
                f"(missing {missing[:3]}, unexpected {unexpected[:3]})"
            )
        self.head = _mlp(head).eval()
        name = self.tokenizer_name
        tokenizer = load_or_explain(name, lambda: BertTokenizer.from_pretrained(name))
        tokenizer.add_special_tokens({"bos_token": "[DEC]"})
        tokenizer.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
        if len(tokenizer) != med["vocab_size"]:
            raise ValueError(
                f"the tokenizer {name} has {len(tokenizer)} tokens with BLIP's two, where "
                f"med_config.json says {med['vocab_size']}"
            )
        self.tokenizer = tokenizer
        self.image_size = vcfg["image_size"]
        for module in (self.vision, self.text, self.head):
            module.to(self.device)
        return self

    def pixels(self, images: Sequence[Image.Image]) -> Any:
        """The authors' transform: bicubic resize of the short side, centre crop, CLIP's
        normalisation."""
        import torch
        import torchvision.transforms.functional as F

        out = []
        for im in images:
            im = F.resize(
                im.convert("RGB"), self.image_size, interpolation=F.InterpolationMode.BICUBIC
            )
            im = F.center_crop(im, [self.image_size, self.image_size])
            out.append(F.normalize(F.to_tensor(im), CLIP_MEAN, CLIP_STD))
        return torch.stack(out)

    def score(self, images: Sequence[Image.Image], prompt: str) -> list[float]:
        """The reward of each image for ``prompt``."""
        import torch

        self.load()
        tokens = self.tokenizer(
            prompt,
            padding="max_length",
            truncation=True,
            max_length=MAX_TOKENS,
            return_tensors="pt",
        ).to(self.device)
        out = []
        with torch.inference_mode():
            for start in range(0, len(images), 8):
                pixels = self.pixels(images[start : start + 8]).to(self.device)
                embeds = self.vision(pixel_values=pixels).last_hidden_state
                n = embeds.shape[0]
                hidden = self.text(
                    input_ids=tokens["input_ids"].expand(n, -1),
                    attention_mask=tokens["attention_mask"].expand(n, -1),
                    encoder_hidden_states=embeds,
                    encoder_attention_mask=torch.ones(embeds.shape[:-1], dtype=torch.long,
                                                      device=embeds.device),
                    return_dict=True,
                ).last_hidden_state[:, 0, :]  # fmt: skip
                rewards = (self.head(hidden.float()).squeeze(-1) - REWARD_MEAN) / REWARD_STD
                out.extend(float(r) for r in rewards.cpu())
        return out


def _mlp(head: dict[str, Any]) -> Any:
    """The authors' MLP head from its weights: linear layers at the indices given (their
    dropouts between them hold no weights), no activation between them, as theirs."""
    import torch

    indices = sorted({int(k.split(".")[0]) for k in head})
    layers: list[Any] = []
    for i in range(indices[-1] + 1):
        if i in indices:
            w = head[f"{i}.weight"]
            linear = torch.nn.Linear(int(w.shape[1]), int(w.shape[0]))
            linear.load_state_dict({"weight": w, "bias": head[f"{i}.bias"]})
            layers.append(linear)
        else:
            layers.append(torch.nn.Dropout(0.0))
    return torch.nn.Sequential(*layers)
