"""Reference-guided rounds (``--reference-guided``): the real photos of the activity and
country that a round's edit (or regeneration) request carries beside the image and the
instruction.

The photos are the run's photo set (the references' ``reference_images``: the set
``refine photos search`` or ``add`` made, or the AHEaD paper's photos). They are ranked
by the mean cosine, on the run's image embedder (CLIP or SigLIP), of each photo's
embedding with the embeddings of the descriptors the round adds (what is missing, and
what replaces a wrong item); the first ``reference_count`` go, each recorded with its
cosine and its attribution. A round that adds nothing carries no photo.

Backends declare how many reference images a request takes (``reference_images``; 0 or
absent: none): a run asks for reference-guided edits only of an editor (and, when it may
regenerate, a generator) that takes some.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refine.records import PlannedChange, ReferencePhoto, RunSpec

# backends that take reference images, as the refusal names them
TAKING = (
    "gemini:<image model> (the Gemini image models: 3 photos)",
    "diffusers: a QwenImageEditPlus or FLUX.2-klein pipeline (2 photos)",
)


def takes(backend: Any) -> int:
    """How many reference images ``backend``'s requests take (0: none)."""
    return int(getattr(backend, "reference_images", 0) or 0)


def check(spec: RunSpec, backends: Any, references: Any) -> None:
    """A reference-guided run's refusal, in one line, when its editor (or, when it may
    regenerate, its generator) takes no reference images, or it has no photos."""
    if not spec.reference_guided:
        return
    roles = {"edit": ["editor"], "regenerate": ["generator"], "auto": ["editor", "generator"]}
    for role in roles[spec.strategy]:
        backend = backends.get(role)
        if not takes(backend):
            name = backends.names.get(role) or getattr(backend, "id", "?")
            raise ValueError(
                f"--reference-guided: the {role} {name} takes no reference images; "
                f"{role}s that do: {'; '.join(TAKING)}"
            )
    has_photos(spec, references)


def has_photos(spec: RunSpec, references: Any) -> None:
    """A reference-guided run's refusal when it has no photos: checked before any model
    loads, since it needs none."""
    if spec.reference_guided and not references.reference_images:
        raise ValueError(
            f"--reference-guided: no real photos of {references.activity} in "
            f"{references.country} (refine photos search, refine photos add, or refine data "
            "fetch ahead --photos)"
        )


def added(changes: Sequence[PlannedChange]) -> list[str]:
    """The descriptors a round adds: what is missing, and what replaces a wrong item."""
    out = [c.reference or c.item for c in changes if c.kind in ("add", "replace")]
    return list(dict.fromkeys(out))


def closest_photos(
    embedder: Any, files: Sequence[str], texts: Sequence[str], k: int
) -> list[tuple[str, float]]:
    """The ``k`` photos of ``files`` whose embeddings have the highest mean cosine with
    those of ``texts`` (ties: the file name), each with that cosine."""
    import torch
    from PIL import Image

    if not files or not texts or k < 1:
        return []
    images = []
    for f in files:
        with Image.open(f) as im:
            images.append(im.convert("RGB"))
    with torch.no_grad():
        a = torch.nn.functional.normalize(embedder.encode_images(images).float(), dim=-1)
        b = torch.nn.functional.normalize(embedder.encode_texts(list(texts)).float(), dim=-1)
        mean = (a @ b.T).mean(dim=1).tolist()
    ranked = sorted(zip(files, mean, strict=True), key=lambda x: (-x[1], x[0]))
    return [(f, float(v)) for f, v in ranked[:k]]


def round_photos(
    spec: RunSpec, references: Any, changes: Sequence[PlannedChange], backend: Any,
    embedder: Any,
) -> list[ReferencePhoto]:  # fmt: skip
    """The photos a reference-guided round's request carries (none when the run is not
    reference-guided, the round adds nothing, or the set is empty): at most the fewer of
    ``reference_count`` and what ``backend`` takes, with their attribution."""
    if not spec.reference_guided:
        return []
    files = list(references.reference_images)
    k = min(spec.reference_count, takes(backend))
    chosen = closest_photos(embedder, files, added(changes), k)
    details = _details(references.activity, references.country)
    origin = details.get("", {}).get("origin", "given")
    return [
        ReferencePhoto(  # a photo not in the set was given with the references
            file=f,
            similarity=v,
            origin=origin if f in details else "given",
            attribution=details.get(f, {}),
        )
        for f, v in chosen
    ]


def _details(activity: str, country: str) -> dict[str, dict[str, Any]]:
    """Each photo's details in the set of ``activity`` in ``country`` (address, licence,
    author), by its file; ``""`` holds the set's origin."""
    from pathlib import Path

    from refine.evaluate.photo_sets import find_photo_set

    found = find_photo_set(activity, country)
    if found is None:
        return {"": {"origin": "given"}}
    out: dict[str, dict[str, Any]] = {"": {"origin": found.origin, "where": found.where}}
    for f, p in zip(found.files, found.photos, strict=False):
        out[str(Path(f).resolve())] = {k: v for k, v in p.items() if k != "file"}
        out[f] = out[str(Path(f).resolve())]
    return out


def for_round(
    run: Any, changes: Sequence[PlannedChange], backends: Any, role: str
) -> tuple[list[ReferencePhoto], list[Any]]:
    """A round's photos (as recorded) and their images (as sent), for the ``role`` that
    makes its candidates; none when the run is not reference-guided."""
    if not run.spec.reference_guided:
        return [], []
    from PIL import Image

    with backends.using("image_embedder") as embedder:
        photos = round_photos(run.spec, run.references, changes, backends.get(role), embedder)
    images = []
    for p in photos:
        with Image.open(p.file) as im:
            images.append(im.convert("RGB"))
    return photos, images
