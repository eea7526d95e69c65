"""How a bench's cells are summarised: per generator, per generator and country and per
generator and category, each metric's mean over prompts (per-image metrics averaged within
a prompt first) with its 95% bootstrap interval; the first generator against each other
one on their common prompts; and the CSV's rows, one per image."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metrics.catalog import (
    BENCH_EXPECTATIONS,
    BENCH_IMAGE,
    BENCH_PROMPT,
    HEADLINE,
    VARIANT_BOUND,
    image_extras,
    pooled,
)
from metrics.stats import paired_difference
from refine.harness.cells import Cell
from refine.records import variant_name

NO_EXAG = "no EXAG"  # the group of prompts whose images have none


def summarise(cells: list[Cell], generators: Sequence[str], seed: int = 42) -> dict[str, Any]:
    """Per generator and per generator and country: each metric's mean over prompts
    (per-image metrics averaged within a prompt first) and its bootstrap interval; the
    first generator against each other one on their common prompts."""
    out: dict[str, Any] = {"generators": {}, "countries": {}, "categories": {}, "paired": []}
    for g in generators:
        mine = [c for c in cells if c.inputs["generator"] == g]
        out["generators"][g] = _stats(mine, seed)
        by_country: dict[str, Any] = {}
        for country in sorted({c.inputs["country"] for c in mine}):
            by_country[country] = _stats([c for c in mine if c.inputs["country"] == country], seed)
        out["countries"][g] = by_country
        by_category: dict[str, Any] = {}
        for cat in sorted({c.inputs.get("category") or "" for c in mine}):
            if cat:
                same = [c for c in mine if c.inputs.get("category") == cat]
                by_category[cat] = _stats(same, seed)
        out["categories"][g] = by_category
    out["missing"] = missing_baselines(cells)
    out["exaggerated"] = top_exaggerated(cells)
    base = generators[0] if generators else None
    for other in generators[1:]:
        a, b = _headline_by_prompt(cells, base), _headline_by_prompt(cells, other)
        common = sorted(k for k in a if k in b and a[k] is not None and b[k] is not None)
        diffs = [b[k] - a[k] for k in common]
        pair = {"base": base, "other": other, "metric": HEADLINE}
        out["paired"].append({**pair, **paired_difference(diffs, seed)})
    return out


def missing_baselines(cells: list[Cell]) -> dict[str, str]:
    """Each baseline asked for that no image has a value of, and why (the first reason
    recorded): a column the leaderboard cannot show, said rather than left out."""
    why: dict[str, str] = {}
    got: set[str] = set()
    for c in cells:
        for im in c.images:
            for m, reason in (im.get("missing") or {}).items():
                why.setdefault(m, reason)
            got |= {m for m in c.inputs.get("baselines") or () if im.get(m) is not None}
    return {m: w for m, w in why.items() if m not in got}


def _headline_by_prompt(
    cells: list[Cell], generator: str | None
) -> dict[tuple[str, str, str | None], Any]:
    """Each prompt's FAITH, keyed with its EXAG variant: two generators are compared on a
    prompt only where the same variant made both values."""
    return {
        (c.inputs["activity"], c.inputs["country"], exag_variant(c)): c.mean(HEADLINE)
        for c in cells
        if c.inputs["generator"] == generator
    }


def exag_variant(cell: Cell) -> str | None:
    """The EXAG variant of a cell's images (``exag:ita`` with real photos, ``exag:mllm``
    without; None where no image has an EXAG; the names joined where they differ)."""
    made = sorted(
        {v for im in cell.images if (v := variant_name(im.get("exag_variant"))) is not None}
    )
    return "+".join(made) if made else None


def _stats(cells: list[Cell], seed: int) -> dict[str, Any]:
    """Each metric's mean over the cells and its interval. EXAG and FAITH, whose values
    depend on the EXAG variant, are never averaged over cells of different variants: with
    one variant their entry names it; with several its mean is None and ``by_variant``
    holds each variant's mean, interval and number of prompts."""
    row: dict[str, Any] = {"prompts": len(cells), "images": sum(len(c.images) for c in cells)}
    extras = image_extras()
    groups: dict[str, list[Cell]] = {}
    for c in cells:
        # prompts whose images have no EXAG (their FAITH leaves it out) are a group too
        groups.setdefault(exag_variant(c) or NO_EXAG, []).append(c)
    for metric in (*BENCH_IMAGE, *extras, *BENCH_PROMPT, *BENCH_EXPECTATIONS):
        values = [c.mean(metric) for c in cells]
        optional = (*extras, *BENCH_EXPECTATIONS)
        if metric in optional and all(v is None for v in values):
            continue  # a bench without expectations, a scorer that reads no quality
        stat = pooled(metric, values, seed)
        if metric in VARIANT_BOUND and groups and set(groups) != {NO_EXAG}:
            if len(groups) == 1:
                stat["variant"] = next(iter(groups))
            else:
                stat = {**pooled(metric, [], seed), "by_variant": {}}
                for v, same in sorted(groups.items()):
                    got = [c.mean(metric) for c in same]
                    stat["by_variant"][v] = {"prompts": len(same), **pooled(metric, got, seed)}
        row[metric] = stat
    return row


def row_fields() -> tuple[str, ...]:
    """rows.csv's columns: the image's and prompt's, then the metrics in catalog order."""
    return (
        "generator",
        "activity",
        "country",
        "category",
        "seed",
        "file",
        *BENCH_IMAGE,
        "exag_variant",
        *image_extras(),
        *BENCH_PROMPT,
        *BENCH_EXPECTATIONS,
    )


def image_rows(cell: dict[str, Any]) -> list[dict[str, Any]]:
    """A cell's rows of rows.csv, one per image, from its line."""
    return [
        {
            "generator": cell["generator"],
            "activity": cell["activity"],
            "country": cell["country"],
            "category": cell.get("category"),
            "seed": im["seed"],
            "file": im["file"],
            # a metric added since the cell was made: none recorded
            **{k: im.get(k) for k in BENCH_IMAGE},
            # by name, also for cells written when variants were said in words
            "exag_variant": variant_name(im.get("exag_variant")),
            **{k: im.get(k) for k in image_extras()},
            **{k: cell[k] for k in BENCH_PROMPT},
            **{k: im.get(k) for k in BENCH_EXPECTATIONS},
        }
        for im in cell["images"]
    ]


TOP_EXAGGERATED = 3  # AHEaD Tab. 12: the top 3 of each country and activity category
NO_CATEGORY = " (by its phrase: no category)"  # a group that is an activity, not a category


def _group(cell: Cell) -> tuple[str, str]:
    """A cell's Tab. 12 group: its country and CULTIVate category (AHEaD groups by category:
    "Celebration", "Eating"), or its activity's phrase where it has none."""
    category = cell.inputs.get("category")
    return cell.inputs["country"], category or f"{cell.inputs['activity']}{NO_CATEGORY}"


def top_exaggerated(cells: list[Cell]) -> dict[str, list[dict[str, Any]]]:
    """AHEaD Tab. 12: per "country / activity category" (an activity with no category: by
    its phrase, said so), over every generator's images of its activities, the stereotype
    candidates its images exaggerate most: by the share of images that exaggerate each,
    then by its mean excess over the real photos where EXAG(ITA) gave one; the first
    :data:`TOP_EXAGGERATED`. A group with no exaggerated candidate is left out."""
    out: dict[str, list[dict[str, Any]]] = {}
    for country, group in sorted({_group(c) for c in cells}):
        images = [im for c in cells if _group(c) == (country, group) for im in c.images]
        seen: dict[str, list[float | None]] = {}
        for im in images:
            for e in im.get("exaggerated") or []:
                seen.setdefault(e["candidate"], []).append(e.get("excess"))
        rows = []
        for cand, excesses in seen.items():
            given = [x for x in excesses if x is not None]
            rows.append(
                {
                    "candidate": cand,
                    "images": len(excesses),
                    "share": len(excesses) / len(images),
                    "mean_excess": sum(given) / len(given) if given else None,
                }
            )
        rows.sort(key=lambda r: (-r["share"], -(r["mean_excess"] or 0.0), r["candidate"]))
        if rows:
            out[f"{country} / {group}"] = rows[:TOP_EXAGGERATED]
    return out
