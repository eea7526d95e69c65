"""Agreement by group, and the papers' other agreement statistics, beside
:func:`refine.human.agree.agreement`.

* ``by``: the whole agreement (every correlation with its interval, both alphas, the
  human-human ceiling, the raters' kappas, Fleiss' kappa) per group of images or raters
  (a region's alphas the mean of its countries', as AHEaD A.4 reports them, the pooled
  ones beside them):
  ``country``, ``region`` (Global North or South, from a table of the 16 CULTIVate
  countries: ``assets/regions.json``, AHEaD Sec. 3 after the UN, or a user's file),
  ``generator`` and ``category`` (from the bench that made the image),
  ``rater-country`` (from the raters' profiles in the set). A group under
  :data:`refine.human.agree.FEW_IMAGES` images carries the rough-figures note.
* ``kappa``: Cohen's quadratic-weighted kappa for each pair of raters, per question, on
  the images both rated.
* ``fleiss``: Fleiss' kappa of nominal answers (SoS's forced choice) per question, with
  each image's majority answer (a tie has none) and, for SoS, its tendency (the prompt's
  culture: semantic; its language's: surface; another: other).
* ``ceiling``: the human-human ceiling, each rater against the mean of the others on the
  images they share, per question, and the mean over raters (AHEaD's and CulturalFrames'
  human-human rows).
* ``differences``: how much better the headline metric agrees with people than each
  other metric on the same images (Spearman in the agreeing direction: negated for HAL
  and EXAG; the paired bootstrap's interval).
* ``matrix``: the metric-metric Spearman correlations over the rated images.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from metrics.catalog import HEADLINE
from metrics.stats import CORRELATIONS, cohen_kappa, correlation_difference, fleiss_kappa

GROUPINGS = ("country", "region", "generator", "category", "rater-country")
NO_GROUP = "(unknown)"


def regions(path: str | Path | None = None) -> dict[str, str]:
    """Country -> region: the bundled table, or the file given (the same layout)."""
    if path is None:
        from importlib.resources import files

        text = (files("refine.assets") / "regions.json").read_text("utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    try:
        table = json.loads(text)["regions"]
        return {str(k).casefold(): str(v) for k, v in table.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(
            f"{path}: not a regions file ({{'regions': {{'USA': 'Global North', ...}}}}): {err}"
        ) from None


def group_key(rating: Any, stored: Any, by: str, table: dict[str, str]) -> str:
    """The group a rating falls in, by ``by`` (:data:`GROUPINGS`)."""
    if by == "rater-country":
        return rating.rater_country or NO_GROUP
    meta = stored.meta(rating)
    if by == "generator":
        return (meta.generator if meta else None) or NO_GROUP
    country = rating.country or (meta.country if meta else None)
    if by == "country":
        return country or NO_GROUP
    if by == "region":
        return table.get((country or "").casefold(), NO_GROUP)
    if by == "category":
        category = meta.category if meta else None
        if category is None and country and rating.activity:
            from refine.evaluate.reference_source import activity_category

            category = activity_category(rating.activity, country)
        return category or NO_GROUP
    raise ValueError(f"--by: {by!r} is not one of {', '.join(GROUPINGS)}")


def by_groups(
    ratings: Sequence[Any],
    stored: Any,
    metrics: Sequence[str],
    groupings: Sequence[str],
    regions_file: str | Path | None = None,
    seed: int = 0,
    reps: int = 1000,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per grouping and group: the agreement of the ratings in it (images, raters, alpha
    at both levels, every correlation with its n and interval, notes)."""
    from refine.human.agree import agreement

    unknown = [g for g in groupings if g not in GROUPINGS]
    if unknown:
        raise ValueError(f"--by: {unknown[0]!r} is not one of {', '.join(GROUPINGS)}")
    table = regions(regions_file) if "region" in groupings else {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for by in groupings:
        groups: dict[str, list[Any]] = {}
        for r in ratings:
            groups.setdefault(group_key(r, stored, by, table), []).append(r)
        out[by] = {}
        for key in sorted(groups, key=lambda k: (k == NO_GROUP, k)):
            got = agreement(groups[key], stored, metrics, seed=seed, reps=reps)
            alphas = {"alpha": got.alpha, "alpha_ordinal": got.alpha_ordinal}
            if by == "region":  # AHEaD A.4: a region's alpha is its countries' mean
                alphas = countries_alpha(groups[key], stored, table)
            out[by][key] = {
                "images": got.images,
                "raters": got.raters,
                **alphas,
                "metrics": got.table,
                # the raters' own agreement in the group: the row a paper sets beside it
                "ceiling": ceiling(got.answers),
                "kappa": rater_kappas(got.answers),
                "fleiss": {
                    q: {k: v for k, v in f.items() if k != "majority"}
                    for q, f in nominal(groups[key]).items()
                },
                "notes": [n for n in got.notes() if n.startswith("only ")],
                "scores": answer_scores(got.answers),
            }
    return out


def answer_scores(answers: dict[Path, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Per question, the mean and the sample standard deviation over the images of each
    image's mean answer (each rater's latest), and how many images: AHEaD Tab. 13's "mean
    (standard deviation)" by country. Over images, not single ratings: its SDs (0.20 for
    Brazil's realism at a mean of 3.46) are below what whole 1-5 ratings with those means
    can have (at least 0.50), so they are spread of images' means."""
    import statistics

    out: dict[str, Any] = {}
    for q in sorted({q for by_q in answers.values() for q in by_q}):
        means = [sum(g.values()) / len(g) for by_q in answers.values() if (g := by_q.get(q))]
        sd = statistics.stdev(means) if len(means) > 1 else None
        out[q] = {"mean": statistics.fmean(means), "sd": sd, "images": len(means)}
    return out


def countries_alpha(ratings: Sequence[Any], stored: Any, table: dict[str, str]) -> dict[str, Any]:
    """A region's Krippendorff alphas as AHEaD reports them (A.4: "the average agreement
    among Global North countries is 0.28"): per question, the mean of its countries'
    alphas (those defined), at the interval and the ordinal level; each country's alphas;
    and the alphas of the region's ratings pooled (``alpha_pooled``, the second figure)."""
    from metrics.stats import krippendorff_alpha
    from refine.human.ratings import latest_answers

    def alphas(rs: Sequence[Any]) -> dict[str, dict[str, float | None]]:
        answers, _, _ = latest_answers(rs)
        asked = list(dict.fromkeys(q for by_q in answers.values() for q in by_q))
        units = {q: [list(answers[i].get(q, {}).values()) for i in answers] for q in asked}
        return {
            level: {q: krippendorff_alpha(u, level) for q, u in units.items()}
            for level in ("interval", "ordinal")
        }

    by_country: dict[str, list[Any]] = {}
    for r in ratings:
        by_country.setdefault(group_key(r, stored, "country", table), []).append(r)
    each = {c: alphas(rs) for c, rs in sorted(by_country.items())}
    pooled = alphas(ratings)

    def mean(level: str) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for q in pooled[level]:
            got = [a for c in each.values() if (a := c[level].get(q)) is not None]
            out[q] = sum(got) / len(got) if got else None
        return out

    return {
        "alpha": mean("interval"),
        "alpha_ordinal": mean("ordinal"),
        "alpha_pooled": pooled["interval"],
        "alpha_ordinal_pooled": pooled["ordinal"],
        "alpha_countries": {c: a["interval"] for c, a in each.items()},
    }


def rater_kappas(answers: dict[Path, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Per question, Cohen's quadratic-weighted kappa of each pair of raters on the images
    both answered (pairs sharing fewer than two images are left out)."""
    out: dict[str, Any] = {}
    questions = sorted({q for by_q in answers.values() for q in by_q})
    for q in questions:
        # the pairs that share images, found image by image: a study of thousands of raters
        # who each rated a few images (CulturalFrames: each rating its own rater) never
        # walks the pairs that share none
        shared: dict[tuple[str, str], list[dict[str, float]]] = {}
        for by_q in answers.values():
            given = by_q.get(q, {})
            for a, b in combinations(sorted(given), 2):
                shared.setdefault((a, b), []).append(given)
        pairs = {}
        for (a, b), both in sorted(shared.items()):
            if len(both) < 2:
                continue
            k = cohen_kappa([x[a] for x in both], [x[b] for x in both], "quadratic")
            pairs[f"{a} | {b}"] = {"n": len(both), "kappa": k}
        if pairs:
            defined = [p["kappa"] for p in pairs.values() if p["kappa"] is not None]
            mean = sum(defined) / len(defined) if defined else None
            out[q] = {"pairs": pairs, "mean": mean}
    return out


def between_groups(ratings: Sequence[Any]) -> dict[str, Any]:
    """Per question, AHEaD A.4's kappa "between the two annotator groups" ("each image is
    annotated by two independent raters"): per image country, each image's first rater's
    answer against its second's (raters in the order the ratings file first names them
    for the image, each rater's latest answer), Cohen's kappa over the country's images;
    then the mean over the countries where it is defined. The paper states no weighting:
    quadratic, as the per-pair kappas."""
    order: dict[tuple[str, str, Path], dict[str, float]] = {}
    for r in ratings:  # the file's order; a later answer of the same rater replaces its own
        for q, v in r.answers.items():
            order.setdefault((r.country or NO_GROUP, q, r.image), {})[r.rater] = v
    pairs: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for (country, q, _), given in order.items():
        if len(given) >= 2:
            first, second = list(given.values())[:2]
            xs, ys = pairs.setdefault(q, {}).setdefault(country, ([], []))
            xs.append(first)
            ys.append(second)
    out: dict[str, Any] = {}
    for q, by_country in sorted(pairs.items()):
        countries = {
            c: {"n": len(xs), "kappa": cohen_kappa(xs, ys, "quadratic") if len(xs) >= 2 else None}
            for c, (xs, ys) in sorted(by_country.items())
        }
        defined = [c["kappa"] for c in countries.values() if c["kappa"] is not None]
        out[q] = {
            "countries": countries,
            "mean": sum(defined) / len(defined) if defined else None,
            "weights": "quadratic",
        }
    return out


POOLED = "pooled over ratings"  # a ceiling's way where no rater rated two images


def ceiling(answers: dict[Path, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Per question, each rater's correlations with the mean of the other raters on the
    images they share, and their mean over raters: the human-human ceiling. ``pooled``:
    the same over every rating at once (each against the others' mean on its image), the
    one figure where raters are not named across images (CulturalFrames' published
    annotations, where each rating is its own rater); where no rater rated two images,
    the figures are the pooled ones and ``way`` says so."""
    out: dict[str, Any] = {}
    questions = sorted({q for by_q in answers.values() for q in by_q})
    for q in questions:
        # each rater's (answer, the others' mean) on every image they share, in one pass
        mine: dict[str, list[tuple[float, float]]] = {}
        for by_q in answers.values():
            given = by_q.get(q, {})
            total = sum(given.values())
            for r, v in given.items():
                if len(given) > 1:
                    mine.setdefault(r, []).append((v, (total - v) / (len(given) - 1)))
        rows: dict[str, Any] = {}
        every: list[tuple[float, float]] = []
        for r in sorted(mine):
            pairs = mine[r]
            every += pairs
            if len(pairs) < 2:
                continue
            x, y = [p[0] for p in pairs], [p[1] for p in pairs]
            rows[r] = {"n": len(pairs), **{n: fn(x, y) for n, fn in CORRELATIONS.items()}}
        if rows or len(every) >= 2:
            mean: dict[str, Any] = {}
            for n in CORRELATIONS:
                got = [row[n] for row in rows.values() if row[n] is not None]
                mean[n] = sum(got) / len(got) if got else None
            x, y = [p[0] for p in every], [p[1] for p in every]
            pooled = {"n": len(every), **{n: fn(x, y) for n, fn in CORRELATIONS.items()}}
            out[q] = {"raters": rows, **mean, "pooled": pooled, "way": "mean over raters"}
            if not rows:  # no rater rated two images: the pooled figure is the only one
                out[q] |= {n: pooled[n] for n in CORRELATIONS} | {"way": POOLED}
    return out


def nominal(ratings: Sequence[Any]) -> dict[str, Any]:
    """Per nominal question: Fleiss' kappa over the images (each rater's latest answer),
    each image's majority answer, and for SoS the tendency of the majorities."""
    latest: dict[str, dict[Path, dict[str, str]]] = {}
    first: dict[Path, Any] = {}
    for r in ratings:
        first.setdefault(r.image, r)
        for q, v in r.choices.items():
            latest.setdefault(q, {}).setdefault(r.image, {})[r.rater] = v
    out: dict[str, Any] = {}
    root = Path(os.path.commonpath([str(i.parent) for i in first])) if first else Path()
    for q, by_image in latest.items():
        units = [list(v.values()) for v in by_image.values()]
        majority = {}
        for image, given in by_image.items():
            top = Counter(given.values()).most_common()
            tie = len(top) > 1 and top[0][1] == top[1][1]
            majority[image.relative_to(root).as_posix()] = None if tie else top[0][0]
        entry: dict[str, Any] = {
            "images": len(units),
            "kappa": fleiss_kappa(units),
            "majority": majority,
        }
        tendency = _sos_tendency(by_image, first, majority, root)
        if tendency:
            entry["tendency"] = tendency
        out[q] = entry
    return out


def _sos_tendency(by_image, first, majority, root: Path) -> dict[str, int]:
    """How many images' majority is the prompt's culture (semantic), its language's
    (surface), another or none (a tie): SoS Sec. 4.2's labels."""
    from refine.evaluate.sos_captions import surface_cultures

    table = surface_cultures()
    counts: Counter[str] = Counter()
    for image in by_image:
        r = first[image]
        lang = getattr(r, "language", None)
        if not r.country or lang is None or lang not in table:
            return {}
        label = majority[image.relative_to(root).as_posix()]
        surface = {table[lang]["identity"], table[lang]["country"]}
        counts[
            "none"
            if label is None
            else "semantic"
            if label == r.country
            else "surface"
            if label in surface
            else "other"
        ] += 1
    return dict(counts)


def agreeing_sign(name: str) -> float:
    """-1 for a metric where lower is better (HAL, EXAG): it agrees with people when its
    correlation is negative."""
    from metrics.catalog import CATALOG

    m = CATALOG.get(name.split("@", 1)[0])
    return -1.0 if m is not None and m.better == "lower" else 1.0


def differences(result: Any, seed: int = 0, reps: int = 1000) -> list[dict[str, Any]]:
    """The headline metric against each other metric, per question: the difference of
    their agreement with people (Spearman, negated for a metric where lower is better) on
    the images both have, and its paired interval."""
    out = []
    heads = [m for m in result.values if m.split("@")[0] == HEADLINE]
    for head in heads:
        for other in result.values:
            if other == head:
                continue
            for q in sorted({q for by_q in result.answers.values() for q in by_q}):
                images = [
                    i
                    for i in result.values[head]
                    if i in result.values[other] and result.answers.get(i, {}).get(q)
                ]
                if len(images) < 3:
                    continue
                people = [
                    sum(result.answers[i][q].values()) / len(result.answers[i][q]) for i in images
                ]
                point, interval = correlation_difference(
                    [agreeing_sign(head) * result.values[head][i] for i in images],
                    [agreeing_sign(other) * result.values[other][i] for i in images],
                    people, "spearman", seed=seed, reps=reps,
                )  # fmt: skip
                out.append(
                    {
                        "metric": head,
                        "versus": other,
                        "question": q,
                        "n": len(images),
                        "difference": point,
                        "interval": interval,
                    }
                )
    return out


def matrix(result: Any) -> dict[str, Any]:
    """The metric-metric Spearman correlations over the rated images both have."""
    names = list(result.values)
    spearman = CORRELATIONS["spearman"]
    rows = []
    for a in names:
        row = []
        for b in names:
            common = [i for i in result.values[a] if i in result.values[b]]
            x = [result.values[a][i] for i in common]
            y = [result.values[b][i] for i in common]
            row.append(spearman(x, y) if len(common) >= 2 else None)
        rows.append(row)
    return {"metrics": names, "spearman": rows}


def questions_matrix(answers: dict[Path, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """People's answers against each other (CulturalFrames Sec. 3.3: the overall score
    against alignment 0.68, quality 0.45, stereotype -0.21; AHEaD Fig. 5a): per pair of
    questions, Spearman's correlation over the ratings that answer both (a rater's latest
    answers to one image), and over the images of their mean answers; with each n. The
    papers do not say which: both are given, named."""
    names = sorted({q for by_q in answers.values() for q in by_q})
    spearman = CORRELATIONS["spearman"]

    def pairs(a: str, b: str, over: str) -> tuple[list[float], list[float]]:
        xs, ys = [], []
        for by_q in answers.values():
            got_a, got_b = by_q.get(a, {}), by_q.get(b, {})
            if over == "ratings":
                both = [w for w in got_a if w in got_b]
                xs += [got_a[w] for w in both]
                ys += [got_b[w] for w in both]
            elif got_a and got_b:
                xs.append(sum(got_a.values()) / len(got_a))
                ys.append(sum(got_b.values()) / len(got_b))
        return xs, ys

    out: dict[str, Any] = {"questions": names}
    for over in ("ratings", "images"):
        rows = []
        for a in names:
            row = []
            for b in names:
                xs, ys = pairs(a, b, over)
                value = spearman(xs, ys) if len(xs) >= 2 else None
                row.append({"spearman": value, "n": len(xs)})
            rows.append(row)
        out[f"over_{over}"] = rows
    return out


def extend(result: Any, ratings: Sequence[Any], seed: int = 0, reps: int = 1000) -> Any:
    """``result`` (an :class:`refine.human.agree.Agreement`) with the kappas, Fleiss' kappa
    and majorities, the ceiling, the paired differences and the matrix."""
    result.kappa = rater_kappas(result.answers)
    for q, got in between_groups(ratings).items():  # AHEaD A.4's, beside the pairs' mean
        result.kappa.setdefault(q, {"pairs": {}, "mean": None})["between_groups"] = got
    result.fleiss = nominal(ratings)
    result.ceiling = ceiling(result.answers)
    result.differences = differences(result, seed, reps)
    result.matrix = matrix(result)
    if len({q for by_q in result.answers.values() for q in by_q}) >= 2:
        result.matrix["answers"] = questions_matrix(result.answers)
    return result
