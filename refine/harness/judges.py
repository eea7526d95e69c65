"""A recipe's second judges (``[[select.judges]]``): baselines the paper read with another
judge than the profile's, read again by it on the bench's images (a rescore each, into
``OUT/judges/<slug>``: nothing generated, nothing observed again), and the bench's cells
with those values and their judge's records in place of the profile judge's
(:func:`with_judges`), which the recipe's table is made from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.harness.recipes import Recipe, SecondJudge
from refine.records import DEFAULT_PROFILE


def _named(profile: str | None) -> str | None:
    """A profile by its name (a profile file's is its stem, as it loads)."""
    return Path(profile).stem if profile and profile.endswith(".toml") else profile


def judges_apply(recipe: Recipe, profile: str | None) -> bool:
    """Whether the recipe's second judges run for a bench on ``profile``: on the recipe's
    own profile only (on another, the profile's judge reads every baseline)."""
    own = _named(recipe.select.profile or DEFAULT_PROFILE)
    return bool(recipe.select.judges) and _named(profile) == own


def judges_note(recipe: Recipe, profile: str | None) -> str:
    """What the table says where the second judges did not run ("" where they did)."""
    if not recipe.select.judges or judges_apply(recipe, profile):
        return ""
    said = "; ".join(f"{', '.join(j.metrics)} by {j.judge}" for j in recipe.select.judges)
    return (
        f"the paper read {said}; on profile {_named(profile)} (not the recipe's "
        f"{recipe.select.profile or 'gemini'}) the profile's judge read them"
    )


def judge_rescores(
    recipe: Recipe, out: Path, profile: str | None, emit: Callable[[str], None]
) -> list[tuple[SecondJudge, Path, Any]]:
    """Each second judge's rescore of the bench in ``out`` (kept and gone on with by a
    second run); none where they do not apply (:func:`judges_apply`)."""
    if not judges_apply(recipe, profile):
        return []
    from refine.harness.results import ResultsError
    from refine.harness.tasks.rescore.task import RescorePlan, run_rescore

    made = []
    for j in recipe.select.judges:
        folder = out / "judges" / j.slug
        plan = RescorePlan(source=str(out), backends={"judge": j.judge}, rejudge=tuple(j.metrics))
        emit(f"judge {j.judge}: {', '.join(j.metrics)} of the bench's images read into {folder}")
        try:
            done = run_rescore(plan, folder, on_event=emit)
        except (ValueError, ResultsError) as err:
            raise ValueError(f"judge {j.judge}: {err}") from err
        made.append((j, folder, done))
    return made


def with_judges(
    cells: list[dict[str, Any]], made: list[tuple[SecondJudge, Path, Any]]
) -> list[dict[str, Any]]:
    """The bench's cells with each second judge's metrics (values, judge records and why
    missing) from its rescore's cell of the same key."""
    if not made:
        return cells
    from refine.harness.tasks.bench.cells import cell_key

    theirs = [(j, {cell_key(c): c for c in done.cells}) for j, _, done in made]
    out = []
    for cell in cells:
        mine = {**cell, "images": [dict(im) for im in cell.get("images") or []]}
        for j, index in theirs:
            other = index.get(cell_key(cell))
            if other is None:  # not read again (a rescore cut short): none of its values
                for im in mine["images"]:
                    _take(im, {}, j)
                continue
            for im, them in zip(mine["images"], other.get("images") or [], strict=True):
                _take(im, them, j)
        out.append(mine)
    return out


def _take(image: dict[str, Any], other: dict[str, Any], judge: SecondJudge) -> None:
    judged = dict(image.get("judged") or {})
    missing = dict(image.get("missing") or {})
    for m in judge.metrics:
        image[m] = other.get(m)
        judged.pop(m, None)
        missing.pop(m, None)
        if other.get(m) is not None:
            judged[m] = (other.get("judged") or {}).get(m) or {"by": judge.judge, "read": None}
        else:
            missing[m] = (other.get("missing") or {}).get(m) or f"not read by {judge.judge}"
    for key, value in (("judged", judged), ("missing", missing)):
        if value:
            image[key] = value
        else:
            image.pop(key, None)
