"""Which models a task's cell maker used, and the weights each resolved to, for the task's
``results.json`` (``models``): read the same way by the local engine and by each Ray
worker."""

from __future__ import annotations

from typing import Any


def maker_models(maker: Any) -> dict[str, str]:
    """``maker.models()`` where the maker has one; else every backend its ``scorer`` or
    ``backends`` (a :class:`refine.backends.selection.Backends`) made and every one of
    its ``generators``, each with a local model's commit or an API model's
    ``modelVersion`` (``no_revision_available`` when neither is known)."""
    own = getattr(maker, "models", None)
    if callable(own):
        return dict(own())
    from refine.backends.provenance import weights_of
    from refine.backends.selection import described

    infos: list[dict[str, str]] = []
    since = 0
    for attr in ("scorer", "backends"):
        made = getattr(maker, attr, None)
        if made is not None and callable(getattr(made, "info", None)):
            infos += list(made.info().values())
            since = max(since, getattr(made, "since", 0))
    generators = getattr(maker, "generators", None)
    if isinstance(generators, dict):  # their answers since the maker's models began
        infos += [described(g, label, since=since) for label, g in generators.items()]
    return {info["id"]: weights_of(info) for info in infos}


def merge_models(seen: list[dict[str, str]]) -> dict[str, str]:
    """Several workers' (or runs') models as one: a model whose weights differ between them
    names every one of them (an API may answer from several versions); unknown weights are
    named only where no other is known."""
    from refine.backends.provenance import NO_REVISION

    out: dict[str, set[str]] = {}
    for models in seen:
        for model, weights in models.items():
            out.setdefault(model, set()).update(weights.split(", "))
    for weights in out.values():  # unknown only where nothing is known
        if len(weights) > 1:
            weights.discard(NO_REVISION)
    return {m: ", ".join(sorted(w)) for m, w in sorted(out.items())}
