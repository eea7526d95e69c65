"""open_clip image and text embedder, and CLIPScore.

``clip:<architecture>/<pretrained tag or checkpoint path>``, e.g. ``clip:ViT-L-14/openai``
or ``clip:ViT-B-32/laion2b_s34b_b79k``. Embeddings are L2-normalised. CLIPScore follows
the torchmetrics convention: ``100 * max(cos(image, text), 0)``; CLIP-IQA is the share of
"Good photo." against "Bad photo." (:mod:`metrics.quality`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from metrics.quality import BAD, GOOD, clip_iqa
from refine.backends.device import LazyDevice
from refine.backends.imports import require
from refine.backends.loading import serialised_load

if TYPE_CHECKING:
    import torch
    from PIL import Image


class OpenClipEmbedder:
    role = "image_embedder"
    device = LazyDevice()

    def __init__(self, name: str, device: str | None = None, batch_size: int = 32) -> None:
        arch, sep, pretrained = name.partition("/")
        if not arch or not sep or not pretrained:
            raise ValueError(
                f"clip backend name must be 'clip:<architecture>/<pretrained>', got 'clip:{name}' "
                "(e.g. clip:ViT-L-14/openai)"
            )
        self.arch, self.pretrained = arch, pretrained
        self.device = device
        self.batch_size = batch_size
        self.model: Any = None
        self.preprocess: Any = None
        self.tokenizer: Any = None

    @property
    def id(self) -> str:
        return f"clip:{self.arch}/{self.pretrained}"

    @serialised_load(lambda self: self.model is not None)
    def load(self) -> OpenClipEmbedder:
        if self.model is None:
            open_clip = require("open_clip", "open_clip_torch", "the clip: embedders")
            try:
                model, _, preprocess = open_clip.create_model_and_transforms(
                    self.arch, pretrained=self.pretrained, device=self.device
                )
            except RuntimeError as err:
                if "download" in str(err).lower():
                    from refine.backends.loading import ModelUnavailable

                    raise ModelUnavailable(
                        f"cannot load {self.id}: its weights are not in the cache and could not "
                        "be downloaded; run once where there is internet (the weights are "
                        "cached), or name a local checkpoint file as clip:ARCH/PATH"
                    ) from err
                raise ValueError(
                    f"cannot load open_clip {self.arch!r} with weights {self.pretrained!r}: {err}. "
                    "`open_clip.list_pretrained()` lists the known pairs"
                ) from err
            self.model = model.eval()
            self.preprocess = preprocess
            self.tokenizer = open_clip.get_tokenizer(self.arch)
        return self

    def image_size(self) -> int:
        """The side of the square images the model sees."""
        self.load()
        size = self.model.visual.image_size
        return int(size[0] if isinstance(size, tuple | list) else size)

    def info(self) -> dict[str, str]:
        self.load()
        dtype = str(next(self.model.parameters()).dtype).replace("torch.", "")
        return {"id": self.id, "device": self.device, "dtype": dtype}

    def encode_images(self, images: Sequence[Image.Image]) -> torch.Tensor:
        import torch

        self.load()
        chunks = []
        with torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = torch.stack(
                    [
                        self.preprocess(im.convert("RGB"))
                        for im in images[start : start + self.batch_size]
                    ]
                ).to(self.device)
                chunks.append(
                    torch.nn.functional.normalize(self.model.encode_image(batch).float(), dim=-1)
                )
        return torch.cat(chunks).clone()

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        import torch

        self.load()
        chunks = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                tokens = self.tokenizer(list(texts[start : start + self.batch_size])).to(
                    self.device
                )
                chunks.append(
                    torch.nn.functional.normalize(self.model.encode_text(tokens).float(), dim=-1)
                )
        return torch.cat(chunks).clone()

    def logit_scale(self) -> float:
        """CLIP's learned temperature: cosines times this are the model's logits."""
        self.load()
        return float(self.model.logit_scale.exp().item())

    def clip_iqa(self, images: Sequence[Image.Image]) -> list[float]:
        """CLIP-IQA of each image: the softmax share of "Good photo." against "Bad photo."
        at the model's logit scale (see :func:`metrics.quality.clip_iqa`)."""

        if not images:
            return []
        pair = self.encode_texts([GOOD, BAD]).cpu().numpy()
        emb = self.encode_images(images).cpu().numpy()
        return clip_iqa(emb, pair[0], pair[1], self.logit_scale())

    def clip_score(self, images: Sequence[Image.Image], texts: Sequence[str]) -> list[float]:
        """CLIPScore of each (image, text) pair: 100 * max(cosine, 0)."""
        if len(images) != len(texts):
            raise ValueError(f"{len(images)} images but {len(texts)} texts")
        cos = (self.encode_images(images) * self.encode_texts(texts)).sum(dim=-1)
        return (100.0 * cos.clamp(min=0)).tolist()
