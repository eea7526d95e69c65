"""``refine rate export SET --to TOOL`` and ``refine rate import FILE --from TOOL``: a study
taken to an annotation tool and its answers joined back (:mod:`refine.human.exchange`;
the formats in :mod:`refine.human.label_studio` and :mod:`refine.human.argilla_files`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refine.human.exchange import read_export
from refine.human.packs import Joining, Merged
from refine.human.study import Study

TOOLS = ("label-studio", "argilla")


def _module(tool: str) -> Any:
    if tool == "label-studio":
        from refine.human import label_studio

        return label_studio
    if tool == "argilla":
        from refine.human import argilla_files

        return argilla_files
    raise ValueError(f"{tool!r} is not a tool this exports to ({', '.join(TOOLS)})")


def export_study(
    rating_set: str | Path,
    tool: str,
    out: str | Path,
    protocol: str | None = None,
    image_url: str | None = None,
) -> tuple[Study, int]:
    """The set's images and its protocol's questions in ``tool``'s formats, in the new
    folder ``out``; the study and how many images."""
    module = _module(tool)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"--out: {out} is not an empty folder; give a new folder")
    if image_url is not None and not image_url.startswith(("https://", "http://")):
        raise ValueError(f"--image-url: {image_url!r} is not an http(s) address")
    study = Study.open(rating_set, protocol)
    out.mkdir(parents=True, exist_ok=True)
    return study, module.export(study, out, image_url)


def import_answers(
    path: str | Path, tool: str, into: str | Path, profiles: str | Path | None = None
) -> Merged:
    """The answers in ``tool``'s export ``path`` joined into the set ``into`` (all or
    nothing, as ``refine rate merge``), with the raters' profiles the export carries, or
    those of ``profiles`` (a JSON object: rater -> profile, as ``.profiles.json``)."""
    module = _module(tool)
    study = Study.open(into)
    joining = Joining(study)
    module.import_rows(study, path, joining)
    if profiles is not None:
        where = Path(profiles)
        try:
            doc = read_export(where)  # bounded: size, depth (it was a RecursionError)
        except ValueError as err:
            raise ValueError(f"--profiles: {err}") from None
        if not isinstance(doc, dict):
            raise ValueError(f"--profiles: {where}: not an object of rater -> profile")
        joining.profiles([(str(where), str(rater), data) for rater, data in doc.items()])
    return joining.write()
