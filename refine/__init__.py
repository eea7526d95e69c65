"""Culturally faithful image generation: find, explain and fix cultural errors.

The refinement loop, its records, reference packs, backends and command line live in
this package; scoring formulas live in the sibling package :mod:`metrics`. Importing
``refine`` is light: model libraries are imported only when a backend is loaded.
"""

__version__ = "0.1.0"
