"""Culturally faithful image generation: find, explain and fix cultural errors.

The refinement loop, its records, reference packs, backends and command line live in
this package; scoring formulas live in the sibling package :mod:`metrics`. Importing
``refine`` is light: model libraries are imported only when a backend is loaded.
"""

__version__ = "0.1.0"

__all__ = ["Refiner", "__version__"]


def __getattr__(name: str):
    if name == "Refiner":  # imported on first use, so `import refine` stays light
        from refine.loop.refiner import Refiner

        return Refiner
    raise AttributeError(f"module 'refine' has no attribute {name!r}")
