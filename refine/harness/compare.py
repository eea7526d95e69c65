"""Two benches of the same images set side by side (``refine compare A B``): a bench and
its rescore under another tau or observer, or two benches of the same plan.

Cells are paired by generator, activity, country and seeds, and kept only where every
image has the same bytes in both (the same images, scored two ways); for each metric both
have, the mean over the paired cells of each, their difference B - A and the paired
bootstrap interval of the mean difference (prompts resampled: the bench's unit). With
ratings, each bench's agreement with people on the rated images both hold, and the paired
difference of the two agreements with its interval
(:func:`metrics.stats.correlation_difference`): how the agreement tables across settings
(AHEaD Tab. 2's observers, Tab. 5's tau) are made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from metrics.catalog import BENCH_IMAGE, BENCH_PROMPT, image_extras
from metrics.stats import correlation_difference, mean_interval, spearman
from refine.harness.results import Results, cell_mean
from refine.records import option
from refine.settings import split_list


class ComparePlan(BaseModel):
    """``refine compare``'s options (the command is made from its fields)."""

    model_config = ConfigDict(extra="forbid")

    a: Path = option(help="The first bench (the base).", flag="A", given="argument")
    b: Path = option(help="The second bench, of the same images.", flag="B", given="argument")
    ratings: Path | None = option(
        None, "Also each bench's agreement with these ratings, and the difference.", given="path"
    )
    metrics: str = option("faith,align,hal", "With --ratings: the metrics set against them.")
    question: str | None = option(
        None, "With --ratings: the question (default: the first answered)."
    )
    seed: int = option(0, "Seed of the bootstrap intervals.")
    out: Path | None = option(None, "Write compare.json into this folder.", given="path")

    @field_validator("metrics")
    @classmethod
    def _known(cls, value: str) -> str:
        from metrics.catalog import CATALOG

        unknown = [m for m in split_list(value) if m not in CATALOG]
        if unknown:
            raise ValueError(f"no metric {unknown[0]!r} (metrics: {', '.join(CATALOG)})")
        return value


def _key(cell: dict[str, Any]) -> tuple[Any, ...]:
    return (cell["generator"], cell["activity"], cell["country"], tuple(cell["seeds"]))


def _shas(folder: Path, cell: dict[str, Any]) -> list[str | None]:
    from refine.io.files import file_sha256

    out = []
    for im in cell.get("images", []):
        path = folder / im["file"]
        out.append(file_sha256(path) if path.is_file() else None)
    return out


def pair_cells(a: str | Path, b: str | Path) -> dict[str, Any]:
    """The two benches' cells paired on the same images: ``pairs`` [(cell_a, cell_b)],
    and the cells left out, with why."""
    ra, rb = Results.read(a, "bench"), Results.read(b, "bench")
    by_b = {_key(c): c for c in rb.cells}
    pairs, different, alone = [], [], []
    for ca in ra.cells:
        cb = by_b.get(_key(ca))
        if cb is None:
            alone.append(_key(ca))
            continue
        sa, sb = _shas(Path(a), ca), _shas(Path(b), cb)
        if None in sa or sa != sb:
            different.append(_key(ca))
            continue
        pairs.append((ca, cb))
    return {"a": ra, "b": rb, "pairs": pairs, "different": different, "only_a": alone}


def compare(a: str | Path, b: str | Path, seed: int = 0) -> dict[str, Any]:
    """Each metric both benches have: means, mean difference B - A over the paired cells
    and its paired bootstrap interval; the cells paired and those left out."""
    paired = pair_cells(a, b)
    pairs = paired["pairs"]
    rows: dict[str, Any] = {}
    for m in (*BENCH_IMAGE, *image_extras(), *BENCH_PROMPT):
        xs = [(cell_mean(ca, m), cell_mean(cb, m)) for ca, cb in pairs]
        xs = [(x, y) for x, y in xs if x is not None and y is not None]
        if not xs:
            continue
        diffs = [y - x for x, y in xs]
        rows[m] = {
            "cells": len(xs),
            "a": sum(x for x, _ in xs) / len(xs),
            "b": sum(y for _, y in xs) / len(xs),
            "difference": sum(diffs) / len(diffs),
            "interval": mean_interval(diffs, seed),
            "changed": sum(abs(d) > 1e-12 for d in diffs),
        }
    ra, rb = paired["a"], paired["b"]
    return {
        "a": str(a),
        "b": str(b),
        "settings": {
            side: {k: r.config.get(k) for k in ("tau", "scorer", "baselines")}
            for side, r in (("a", ra), ("b", rb))
        },
        "cells": len(pairs),
        "images": sum(len(ca.get("images", [])) for ca, _ in pairs),
        "not_the_same_images": [list(k[:3]) for k in paired["different"]],
        "only_in_a": [list(k[:3]) for k in paired["only_a"]],
        "metrics": rows,
    }


def agreement_difference(
    a: str | Path,
    b: str | Path,
    ratings: list[Any],
    metrics: list[str],
    question: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Per metric: Spearman of A's and of B's values with the raters' mean answer to
    ``question`` (the first scored question the ratings hold, by default) over the rated
    images both benches hold (found by their file in either bench, else by their bytes
    where no other image has them: ``unclear`` counts those left out), and the paired
    difference B - A with its interval."""
    from refine.human.ratings import latest_answers

    paired = pair_cells(a, b)
    # each paired image by its file in the benches (both keep it under the same name),
    # and by its bytes where no other image has them
    by_file: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    by_sha: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for ca, cb in paired["pairs"]:
        for sha, ia, ib in zip(_shas(Path(a), ca), ca["images"], cb["images"], strict=True):
            by_file[ia["file"]] = (ia, ib)
            by_sha.setdefault(sha, []).append((ia, ib))
    answers, first, _ = latest_answers(ratings)
    asked = list(dict.fromkeys(q for per in answers.values() for q in per))
    q = question or (asked[0] if asked else None)
    if q is None or q not in asked:
        raise ValueError(
            f"the ratings answer no question {question!r} (they answer: {', '.join(asked)})"
        )
    rated, unclear = [], 0
    for i, per in answers.items():
        if not per.get(q):
            continue
        found = None
        for root in (Path(a), Path(b)):
            try:
                found = by_file.get(i.resolve().relative_to(root.resolve()).as_posix())
            except ValueError:
                continue
            if found:
                break
        if found is None:
            same = by_sha.get(first[i].sha256) or []
            if len(same) > 1:
                unclear += 1
                continue
            found = same[0] if same else None
        if found is not None:
            rated.append((found, sum(per[q].values()) / len(per[q])))
    out: dict[str, Any] = {"question": q, "images": len(rated), "unclear": unclear, "metrics": {}}
    for m in metrics:
        have = [
            (ia[m], ib[m], y)
            for (ia, ib), y in rated
            if ia.get(m) is not None and ib.get(m) is not None
        ]
        if len(have) < 2:
            out["metrics"][m] = {"n": len(have), "a": None, "b": None, "difference": None}
            continue
        xa, xb, y = (list(c) for c in zip(*have, strict=True))
        diff, interval = correlation_difference(xb, xa, y, "spearman", seed=seed)
        out["metrics"][m] = {
            "n": len(have),
            "a": spearman(xa, y),
            "b": spearman(xb, y),
            "difference": diff,
            "interval": interval,
        }
    return out
