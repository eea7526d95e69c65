"""CLIP image and text embedder through transformers (``CLIPModel``).

``hfclip:<hub id or path>``, e.g. ``hfclip:openai/clip-vit-base-patch32`` or
``hfclip:laion/CLIP-ViT-H-14-laion2B-s32B-b79K``: the checkpoints published in the
transformers layout, which the papers' CLIP baselines load (CLIPScore as torchmetrics
computes it, PickScore's CLIP-H, CAIRE's CLIP ViT-B/32). Embeddings are L2-normalised;
``logit_scale`` is the model's learned temperature, so CLIP-IQA and CLIPScore are computed
as for the ``clip:`` (open_clip) embedders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from metrics.quality import BAD, GOOD, clip_iqa
from refine.backends.imports import require
from refine.backends.loading import load_or_explain, pick_dtype, serialised_load
from refine.backends.siglip_embedder import SiglipEmbedder, _features

if TYPE_CHECKING:
    import torch
    from PIL import Image


class HFClipEmbedder(SiglipEmbedder):
    """A transformers CLIP (``CLIPModel``, its processor from the same folder, or from
    ``processor`` where the checkpoint was trained with another's, as PickScore was)."""

    def __init__(
        self,
        model: str,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 32,
        revision: str | None = None,
        processor: str | None = None,
    ) -> None:
        if not model:
            raise ValueError("an hfclip: embedder needs a model id or a local path")
        super().__init__(model, device, dtype, batch_size, revision)
        self.processor_name = processor

    @property
    def id(self) -> str:
        return f"hfclip:{self.model_name}" + (f"@{self.revision}" if self.revision else "")

    @serialised_load(lambda self: self.model is not None)
    def load(self) -> HFClipEmbedder:
        if self.model is None:
            transformers = require("transformers", "transformers", "the hfclip: embedders")
            dtype = pick_dtype(self.device, self.dtype_name)
            name = self.model_name
            model = load_or_explain(
                name,
                lambda: transformers.AutoModel.from_pretrained(
                    name, dtype=dtype, revision=self.revision
                ),
            )
            if not hasattr(model, "get_image_features") or hasattr(model, "logit_bias"):
                raise ValueError(
                    f"{name} is a {type(model).__name__}, not a CLIP model (a SigLIP loads "
                    "as siglip:)"
                )
            source = self.processor_name or name
            revision = None if self.processor_name else self.revision
            self.processor = load_or_explain(
                source,
                lambda: transformers.AutoProcessor.from_pretrained(source, revision=revision),
            )
            self.model = model.to(self.device).eval()
        return self

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        import torch

        self.load()
        chunks = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                # CLIP reads each text up to its end token: padded to the longest, masked
                batch = self.processor(
                    text=list(texts[start : start + self.batch_size]),
                    padding=True,
                    truncation=True,
                    return_tensors="pt",
                ).to(self.device)
                feats = _features(
                    self.model.get_text_features(
                        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
                    )
                )
                chunks.append(torch.nn.functional.normalize(feats.float(), dim=-1))
        return torch.cat(chunks).clone()

    def logit_scale(self) -> float:
        """CLIP's learned temperature: cosines times this are the model's logits."""
        self.load()
        return float(self.model.logit_scale.float().exp().item())

    def clip_iqa(self, images: Sequence[Image.Image]) -> list[float]:
        """CLIP-IQA of each image (see :func:`metrics.quality.clip_iqa`)."""
        if not images:
            return []
        pair = self.encode_texts([GOOD, BAD]).cpu().numpy()
        emb = self.encode_images(images).cpu().numpy()
        return clip_iqa(emb, pair[0], pair[1], self.logit_scale())

    def match_probability(self, images: Any, texts: Any) -> list[float]:
        raise NotImplementedError("match_probability is SigLIP's sigmoid; CLIP has none")
