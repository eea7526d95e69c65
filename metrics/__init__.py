"""Pure scoring for culturally faithful image generation.

Everything here is a formula over tensors, embeddings or descriptor lists:
AHEaD (:mod:`metrics.ahead`), how a judge's answers become numbers (:mod:`metrics.judge`),
Surface-over-Semantics (:mod:`metrics.sos`) and the
Vendi score (:mod:`metrics.vendi`). Nothing in this package loads a model or imports
from ``refine`` or ``ui``; heavy packages (torch) are imported inside the modules
that need them, so ``import metrics`` stays light.
"""

from metrics.descriptors import DIMENSIONS, normalise_descriptor_map, normalise_phrases

__all__ = ["DIMENSIONS", "normalise_descriptor_map", "normalise_phrases"]
