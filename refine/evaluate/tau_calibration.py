"""tau for an observer from real photos, as the AHEaD paper sets it: a quantile (the 75th)
of the best-match cosine similarities between the reference descriptors and what the
observer lists on real images of the activity (0.52 for InternVL3, 0.67 for Qwen2.5-VL)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from metrics.ahead import best_match_similarities, check_tau
from metrics.descriptors import DIMENSIONS
from refine.records import DEFAULT_PROFILE, option


class TauError(ValueError):
    """What keeps a calibration from being made; the message names the option."""


class TauPlan(BaseModel):
    """``refine calibrate-tau``'s options."""

    model_config = ConfigDict(extra="forbid")

    images: list[Path] | None = option(
        None,
        "Real photos of the activity in the country (files or folders; default: the "
        "activity's and country's photo set, from refine photos search or refine data fetch "
        "ahead --photos).",
        flag="IMAGES",
        given="arguments",
    )
    activity: str = option(help="What the photos show.")
    country: str = option(help="Where they were taken.")
    refs: Path | None = option(None, "References JSON instead of the pack.", given="path")
    profile: str = option(DEFAULT_PROFILE, "Backend profile (name or .toml).")
    backends: list[str] = option(
        [], "Override a role: ROLE=NAME.", flag="--backend", given="repeat"
    )
    q: float = option(0.75, "The quantile (paper: 0.75).", ge=0.0, le=1.0)
    write: Path | None = option(
        None, "Write a profile file (a copy of --profile) that carries tau.", given="path"
    )
    html: Path | None = option(
        None, "Also write the distribution as a self-contained HTML page.", given="path"
    )


def calibrate(
    descriptors: Any,
    images: Sequence[Any],
    backends: Any,
    q: float = 0.75,
    on_image: Callable[[int], None] | None = None,
) -> tuple[float, list[float]]:
    """(tau, the similarities): each image observed by the backends' observer, its
    descriptors matched to ``descriptors`` by the text embedder, and the ``q`` quantile of
    the best matches. A ValueError says why these photos give no usable threshold."""
    import numpy as np

    observer = backends.get("observer")
    observed = []
    for k, image in enumerate(images):
        if on_image is not None:
            on_image(k)
        observed.append(observer.describe(image, list(DIMENSIONS), 10))
    try:
        sims = best_match_similarities(descriptors, observed, backends.get("text_embedder"))
    except ValueError as err:
        raise ValueError(f"{err}: try other photos, or check --activity") from err
    tau = float(np.quantile(np.asarray(sims), q))
    try:
        check_tau(tau)
    except ValueError as err:
        raise ValueError(
            f"the calibrated {err}: these photos give no usable threshold; try other photos "
            "or another --q"
        ) from None
    return tau, list(sims)


def calibrate_plan(
    plan: TauPlan, refs: Any, emit: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """The calibration ``plan`` asks for against ``refs`` (its activity's and country's
    references, :func:`refine.settings.references`), with ``--write``'s profile written:
    the document ``refine calibrate-tau --json`` prints (tau, the similarities, the
    observer, the photos and where they came from). A :class:`TauError` says what cannot
    be done."""
    from refine.backends.registry import parse_overrides
    from refine.backends.selection import Backends
    from refine.evaluate.photo_sets import find_photo_set
    from refine.io.files import image_files
    from refine.io.inputs import load_images
    from refine.profiles import load_profile, write_profile

    emit = emit or (lambda line: None)
    photos = ""
    if plan.images:  # a folder stands for the photos in it
        images = [f for p in plan.images for f in (image_files(p) if p.is_dir() else [p])]
        if not images:
            raise TauError("IMAGES: no .png, .jpg, .jpeg or .webp photos given")
    else:  # the references' photos: a references file's, else the activity's photo set
        if not refs.reference_images:
            raise TauError(
                f"IMAGES: none given, and no photo set of {refs.activity!r} in {refs.country}: "
                f'`refine photos search "{refs.activity}" --country {refs.country}`, `refine '
                "data fetch ahead --photos`, `refine photos add`, or give the photos"
            )
        images = [Path(f) for f in refs.reference_images]
        found = find_photo_set(refs.activity, refs.country)
        photos = (
            found.describe()
            if found is not None and list(found.files) == refs.reference_images
            else f"photos: {len(images)} listed in the references file"
        )
        emit(f"{refs.activity} in {refs.country}: {photos}")
    loaded = load_images(images)
    try:
        base = load_profile(plan.profile)
        backends = Backends(base, parse_overrides(plan.backends))
    except ValueError as err:
        raise TauError(f"--profile/--backend: {err}") from err
    if plan.write is not None and plan.write.suffix != ".toml":
        raise TauError(f"--write: {plan.write}: a profile file ends in .toml")
    try:
        tau, sims = calibrate(
            refs.descriptors,
            loaded,
            backends,
            plan.q,
            on_image=lambda k: emit(f"observing {images[k]}"),
        )
    except ValueError as err:
        raise TauError(str(err)) from err
    observer = backends.names.get("observer", "?")
    source = (
        f"refine calibrate-tau: q={plan.q:g} of {len(sims)} best-match similarities on "
        f"{len(images)} real photos of {refs.activity} in {refs.country}"
        f"{f' ({photos})' if photos else ''}, observer "
        f"{observer}, text embedder {backends.names.get('text_embedder', '?')}, "
        f"{time.strftime('%Y-%m-%d')}"
    )
    if plan.write is not None:
        write_profile(base.path, plan.write, tau, source, dict(backends.names), backends.options)
    return {
        "tau": tau,
        "q": plan.q,
        "similarities": sims,
        "observer": observer,
        "images": [str(p) for p in images],
        "photo_set": photos or None,
        "profile": str(plan.write) if plan.write else None,
        "html": str(plan.html) if plan.html else None,
        "source": source,
    }
