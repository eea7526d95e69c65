"""Model backends, one file per backend, created by name from a registry (each role's
methods: :mod:`refine.backends.registry`).

Names are the strings users type, ``prefix:rest`` (``st:all-MiniLM-L6-v2``); see
:func:`create` and :func:`available`. Heavy packages are imported in ``load()``.
"""

from refine.backends.registry import (
    ROLES,
    BackendInfo,
    available,
    create,
    register,
)

__all__ = ["ROLES", "BackendInfo", "available", "create", "register"]
