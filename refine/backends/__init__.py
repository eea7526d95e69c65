"""Model backends, one protocol per role, created by name from a registry.

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
