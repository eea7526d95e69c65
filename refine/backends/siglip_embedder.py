"""SigLIP / SigLIP 2 image and text embedder through transformers.

``siglip:<hub id or path>``, e.g. ``siglip:google/siglip-so400m-patch14-384``. Embeddings
are L2-normalised; ``clip_score`` is ``100 * max(cos, 0)`` as for the clip: embedders, and
``match_probability`` is SigLIP's own sigmoid(scale * cos + bias).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from refine.backends.device import LazyDevice
from refine.backends.imports import require
from refine.backends.loading import load_or_explain, pick_dtype, serialised_load, torch_dtype_name

if TYPE_CHECKING:
    import torch
    from PIL import Image


def _features(output: Any) -> torch.Tensor:
    """transformers 5 returns model outputs from ``get_*_features``; 4.x returned tensors."""
    return output if hasattr(output, "dim") else output.pooler_output


class SiglipEmbedder:
    role = "image_embedder"
    device = LazyDevice()

    def __init__(
        self,
        model: str,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 32,
        revision: str | None = None,
    ) -> None:
        if not model:
            raise ValueError("a siglip: embedder needs a model id or a local path")
        self.revision = revision
        self.model_name = model
        self.device = device
        self.dtype_name = dtype
        self.batch_size = batch_size
        self.model: Any = None
        self.processor: Any = None

    prefix = "siglip"  # the backend's name in the registry
    # SigLIP was trained on texts padded to the maximum length, and reads no mask
    text_padding: Any = "max_length"

    def text_inputs(self, batch: Any) -> dict[str, Any]:
        """What the text tower reads of a tokenized batch."""
        return {"input_ids": batch["input_ids"]}

    @property
    def id(self) -> str:
        return f"{self.prefix}:{self.model_name}" + (f"@{self.revision}" if self.revision else "")

    def check_model(self, model: Any) -> None:
        """A ValueError unless ``model`` is what this embedder reads (a SigLIP)."""
        if not hasattr(model, "get_image_features") or not hasattr(model, "logit_bias"):
            raise ValueError(f"{self.model_name} is a {type(model).__name__}, not a SigLIP model")

    def processor_source(self) -> tuple[str, str | None]:
        """Where the processor comes from: (folder or hub id, revision)."""
        return self.model_name, self.revision

    @serialised_load(lambda self: self.model is not None)
    def load(self) -> SiglipEmbedder:
        if self.model is None:
            transformers = require("transformers", "transformers", f"the {self.prefix}: embedders")
            dtype = pick_dtype(self.device, self.dtype_name)
            name = self.model_name
            model = load_or_explain(
                name,
                lambda: transformers.AutoModel.from_pretrained(
                    name, dtype=dtype, revision=self.revision
                ),
            )
            self.check_model(model)
            source, revision = self.processor_source()
            self.processor = load_or_explain(
                source,
                lambda: transformers.AutoProcessor.from_pretrained(source, revision=revision),
            )
            self.model = model.to(self.device).eval()
        return self

    def image_size(self) -> int:
        """The side of the square images the model sees."""
        self.load()
        return int(self.model.config.vision_config.image_size)

    def info(self) -> dict[str, str]:
        self.load()
        return {
            "id": self.id,
            "architecture": type(self.model).__name__,
            "device": str(self.device),
            "dtype": torch_dtype_name(self.model.dtype),
            "revision": self.revision or "",
        }

    def encode_images(self, images: Sequence[Image.Image]) -> torch.Tensor:
        import torch

        self.load()
        chunks = []
        with torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = [im.convert("RGB") for im in images[start : start + self.batch_size]]
                pixels = self.processor(images=batch, return_tensors="pt")["pixel_values"]
                pixels = pixels.to(self.device, self.model.dtype)
                feats = _features(self.model.get_image_features(pixel_values=pixels))
                chunks.append(torch.nn.functional.normalize(feats.float(), dim=-1))
        return torch.cat(chunks).clone()

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        import torch

        self.load()
        chunks = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = self.processor(
                    text=list(texts[start : start + self.batch_size]),
                    padding=self.text_padding,
                    truncation=True,
                    return_tensors="pt",
                ).to(self.device)
                feats = _features(self.model.get_text_features(**self.text_inputs(batch)))
                chunks.append(torch.nn.functional.normalize(feats.float(), dim=-1))
        return torch.cat(chunks).clone()

    def pair_cosines(self, images: Sequence[Image.Image], texts: Sequence[str]) -> torch.Tensor:
        if len(images) != len(texts):
            raise ValueError(f"{len(images)} images but {len(texts)} texts")
        return (self.encode_images(images) * self.encode_texts(texts)).sum(dim=-1)

    def clip_score(self, images: Sequence[Image.Image], texts: Sequence[str]) -> list[float]:
        """100 * max(cosine, 0) of each (image, text) pair."""
        return (100.0 * self.pair_cosines(images, texts).clamp(min=0)).tolist()

    def match_probability(self, images: Sequence[Image.Image], texts: Sequence[str]) -> list[float]:
        """SigLIP's probability that each text describes its image: sigmoid(s * cos + b)."""
        import torch

        cos = self.pair_cosines(images, texts)
        scale = self.model.logit_scale.float().exp().cpu()
        bias = self.model.logit_bias.float().cpu()
        return torch.sigmoid(cos * scale + bias).reshape(-1).tolist()
