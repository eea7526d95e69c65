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
from refine.backends.siglip_embedder import SiglipEmbedder

if TYPE_CHECKING:
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

    prefix = "hfclip"
    # CLIP reads each text up to its end token: padded to the longest, masked
    text_padding: Any = True

    def text_inputs(self, batch: Any) -> dict[str, Any]:
        return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}

    def check_model(self, model: Any) -> None:
        if not hasattr(model, "get_image_features") or hasattr(model, "logit_bias"):
            raise ValueError(
                f"{self.model_name} is a {type(model).__name__}, not a CLIP model (a SigLIP "
                "loads as siglip:)"
            )

    def processor_source(self) -> tuple[str, str | None]:
        """The processor named (PickScore's is CLIP-H's), else the model's own."""
        if self.processor_name:
            return self.processor_name, None
        return self.model_name, self.revision

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
