"""CAIRE's scores against people's ratings (CAIRE Sec. 4.2, C.9 and Tab. 2).

Each image is scored 1-5 by CAIRE once per country label, and rated 1-5 by raters of
every country (the ``caire`` protocol: relevance to the rater's own culture).

* :func:`image_level`: the paper's statistic (C.9). Per image, the Pearson correlation of
  its country scores with the mean ratings of each country's raters (10 pairs in the
  paper); a country's column is the mean of those correlations over the images of that
  country's concepts (Sec. 6, RQ3: "averaged over all concepts within specific
  countries"), and Avg the mean of the countries' columns.
* :func:`per_rater_country`: another figure, kept under its own name. Per rater country,
  the Pearson correlation over images of the image's score for that country with that
  country's raters' mean rating.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MIN_PAIRS = 3  # a Pearson correlation of fewer pairs is always +-1 or undefined


@dataclass(frozen=True)
class Column:
    """One column of Tab. 2: the value, its 95% interval, how many images (or pairs) it
    stands on, and its p-value where it is one correlation."""

    value: float | None
    interval: tuple[float, float] | None
    n: int
    p: float | None = None
    note: str = ""


def image_level(
    scores: Sequence[Sequence[float]],
    labels: Sequence[str],
    origins: Sequence[str],
    human: Mapping[tuple[int, str], float],
    seed: int = 0,
) -> tuple[dict[str, Column], list[float | None]]:
    """(each origin country's column and ``"Avg"``, each image's correlation). ``scores[i]``
    holds image ``i``'s score per label; ``origins[i]`` is the country its prompt named;
    ``human[(i, country)]`` the mean rating of that country's raters for image ``i``. An
    image needs :data:`MIN_PAIRS` rated countries and scores and ratings that vary."""
    from metrics.stats import mean_interval, mean_of_means_interval, pearson

    per_image: list[float | None] = []
    for i, row in enumerate(scores):
        pairs = [(row[k], human[(i, c)]) for k, c in enumerate(labels) if (i, c) in human]
        r = None
        if len(pairs) >= MIN_PAIRS:
            r = pearson([p[0] for p in pairs], [p[1] for p in pairs])
        per_image.append(r)
    columns: dict[str, Column] = {}
    means: list[float] = []
    kept: list[list[float]] = []  # each country's images' correlations, for Avg's interval
    for country in dict.fromkeys(origins):
        mine = [i for i, o in enumerate(origins) if o == country]
        got = [r for i in mine if (r := per_image[i]) is not None]
        if not got:
            columns[country] = Column(
                None, None, 0,
                note=f"none of its {len(mine)} images has {MIN_PAIRS} rated countries whose "
                "scores and ratings vary",
            )  # fmt: skip
            continue
        mean = sum(got) / len(got)
        means.append(mean)
        kept.append(got)
        interval = mean_interval(got, seed) if len(got) > 1 else None
        left = len(mine) - len(got)
        note = (
            f"{left} of its {len(mine)} images left out (fewer than {MIN_PAIRS} rated "
            "countries, or scores or ratings that do not vary)"
            if left
            else ""
        )
        columns[country] = Column(mean, interval, len(got), note=note)
    columns["Avg"] = Column(
        sum(means) / len(means) if means else None, mean_of_means_interval(kept, seed),
        len(means), note="the mean of the countries' columns; its interval resamples each "
        "country's images within the country",
    )  # fmt: skip
    return columns, per_image


def per_rater_country(
    scores: Sequence[Sequence[float]],
    labels: Sequence[str],
    human: Mapping[tuple[int, str], float],
    seed: int = 0,
) -> dict[str, Column]:
    """Per label country: Pearson, over the images its raters rated, of the image's score
    for that country with their mean rating; its interval and p-value; ``"Avg"`` the mean
    over countries."""
    from metrics.stats import correlation_interval, correlation_p, pearson

    columns: dict[str, Column] = {}
    values: list[float] = []
    for k, c in enumerate(labels):
        pairs = [(scores[i][k], v) for (i, cc), v in human.items() if cc == c]
        if len(pairs) < MIN_PAIRS:
            columns[c] = Column(None, None, len(pairs), note=f"{len(pairs)} images rated")
            continue
        x, y = [p[0] for p in pairs], [p[1] for p in pairs]
        r = pearson(x, y)
        columns[c] = Column(
            r, correlation_interval(x, y, "pearson", seed=seed), len(pairs),
            p=correlation_p(x, y, "pearson"),
        )  # fmt: skip
        if r is not None:
            values.append(r)
    columns["Avg"] = Column(sum(values) / len(values) if values else None, None, len(values))
    return columns
