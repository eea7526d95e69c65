"""The text-embedder protocol the metrics use, and a phrase-level embedding cache.

Any object with an ``id`` string and an ``encode(phrases) -> Tensor[n, d]`` method that
returns L2-normalised rows can score descriptors; ``refine.backends`` provides the
sentence-transformers implementation (all-MiniLM-L6-v2 by default).

:class:`PhraseEmbeddingCache` keys embeddings by ``(embedder id, phrase)``: a phrase
is encoded once per embedder for the life of the cache, so repeated rounds of a
refinement loop re-encode only phrases they have not seen before.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch


@runtime_checkable
class TextEmbedder(Protocol):
    """Encodes phrases to L2-normalised vectors (one row per phrase)."""

    @property
    def id(self) -> str: ...

    def encode(self, phrases: Sequence[str]) -> torch.Tensor: ...


class PhraseEmbeddingCache:
    """Embeddings of every phrase seen, per embedder, stored as one growing matrix.

    ``lookup(embedder, phrases)`` returns row indices into ``matrix(embedder)``,
    encoding only the phrases that are new (in one batched call).
    """

    def __init__(self) -> None:
        self._rows: dict[str, dict[str, int]] = {}
        self._matrix: dict[str, torch.Tensor] = {}
        self._lock = threading.Lock()
        self.encoded_phrases = 0  # how many phrases were sent to an embedder

    def __len__(self) -> int:
        return sum(len(rows) for rows in self._rows.values())

    def matrix(self, embedder: TextEmbedder) -> torch.Tensor:
        """All cached embeddings of ``embedder``, one row per phrase."""
        import torch

        return self._matrix.get(embedder.id, torch.empty(0, 0))

    def lookup(self, embedder: TextEmbedder, phrases: Sequence[str]) -> list[int]:
        """Row index of each phrase in :meth:`matrix`, encoding new phrases first."""
        import torch

        with self._lock:
            rows = self._rows.setdefault(embedder.id, {})
            new = [p for p in dict.fromkeys(phrases) if p not in rows]
            if new:
                vectors = embedder.encode(new)
                if vectors.ndim != 2 or vectors.shape[0] != len(new):
                    raise ValueError(
                        f"embedder {embedder.id!r} returned shape {tuple(vectors.shape)} "
                        f"for {len(new)} phrases"
                    )
                vectors = vectors.detach().float()
                old = self._matrix.get(embedder.id)
                if old is not None and old.numel():
                    vectors = vectors.to(old.device)
                    self._matrix[embedder.id] = torch.cat([old, vectors])
                else:
                    self._matrix[embedder.id] = vectors
                start = len(rows)
                for offset, phrase in enumerate(new):
                    rows[phrase] = start + offset
                self.encoded_phrases += len(new)
            return [rows[p] for p in phrases]

    def embed(self, embedder: TextEmbedder, phrases: Sequence[str]) -> torch.Tensor:
        """Embeddings of ``phrases`` (rows in the given order)."""
        import torch

        index = self.lookup(embedder, phrases)
        matrix = self.matrix(embedder)
        return matrix[torch.as_tensor(index, dtype=torch.long, device=matrix.device)]

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
            self._matrix.clear()


_DEFAULT_CACHE = PhraseEmbeddingCache()


def default_cache() -> PhraseEmbeddingCache:
    """The process-wide cache the metrics use when none is given."""
    return _DEFAULT_CACHE
