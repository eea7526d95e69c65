"""A recipe's table from a bench's results (and, for an agreement table, people's
ratings), in the paper's layout, each cell beside the paper's figure where the recipe
carries it (the recipes: :mod:`refine.harness.recipes`; the files written:
:mod:`refine.present.report.recipe`).

* A metrics table: per generator and group of countries, each metric's mean over the
  prompts in the group (a per-image metric averaged within a prompt first, as the bench
  does) with its 95% bootstrap interval over prompts (:func:`metrics.stats.mean_interval`).
* Some metrics are computed in one of several ways (:func:`way_of`): EXAG and FAITH by an
  EXAG variant, CUBE's CD by the source of its quality. A cell says its way; prompts of
  different ways are never averaged together (the row is split, a row per way); and a
  paper's figure is set beside a cell only where the cell's way is the paper's
  (:data:`PAPER_WAYS`); elsewhere the table's notes say why it is not.
* An agreement table: per metric, its correlation with the people's mean answer to the
  recipe's question, over the rated images of each group and of all (the studies'
  :func:`refine.human.agree.agreement`, its bootstrap interval included).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metrics.catalog import VARIANT_BOUND
from metrics.stats import mean_interval
from refine.harness.recipes import PaperRow, Recipe
from refine.harness.results import cell_mean
from refine.harness.ways import differs as way_differs
from refine.harness.ways import made as made_of
from refine.records import variant_name

ALL = "All"
# how the papers computed the metrics that have several ways: AHEaD's EXAG (and so FAITH)
# is Eq. 3-4 on real photos (exag:ita); CUBE's CD takes HPS v2 as its quality (Sec. 5.2)
PAPER_WAYS = {"exag": "exag:ita", "faith": "exag:ita", "cd:": "hpsv2"}
WAY_WORDS = {
    "exag": "EXAG variant",
    "faith": "EXAG variant",
    "cd:": "quality source",
}


@dataclass
class TableCell:
    value: float | None
    interval: tuple[float, float] | None = None
    n: int = 0  # prompts (metrics) or rated images (agreement) behind the value
    paper: float | None = None  # the paper's figure for this cell, where the recipe has it
    note: str = ""  # why the value is missing, where it is
    way: str = ""  # how the value was computed, where a metric has several ways (way_of)
    p: float | None = None  # a correlation's two-sided p-value (None: not a correlation)
    # what made the value: its models, the judge's reading and tau (refine.harness.ways.made)
    made: dict[str, Any] = field(default_factory=dict)
    # where the paper's figure was made another way: what differs, in words (then no
    # difference is computed; "" where every stated part is the paper's)
    paper_differs: str = ""


@dataclass
class Row:
    label: str  # shown
    block: str  # the rows whose best is bolded together (a generator; "" for one block)
    key: str  # the generator or metric
    group: str | None = None
    backbone: str | None = None  # an agreement row of another backbone (None: the bench's)


@dataclass
class RecipeTable:
    recipe: Recipe
    kind: str  # "metrics" or "agreement": what the cells hold
    rows: list[Row]
    columns: list[tuple[str, str, str, str]]  # (key, header, span, better)
    cells: dict[tuple[str, str], TableCell] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # what this table lacks, in words
    notes: list[str] = field(default_factory=list)  # how its figures differ from the paper's

    @property
    def caption(self) -> str:
        t = self.recipe.table
        if self.kind == "agreement" or t.kind == "metrics":
            return t.caption
        return f"{t.caption} (the metric side: means per group; the ratings are missing)"

    def paper_figures(self) -> int:
        """The paper's figures set beside values made the paper's way."""
        return sum(c.paper is not None and not c.paper_differs for c in self.cells.values())

    def apart_figures(self) -> int:
        """The paper's figures shown apart: their values were made another way."""
        return sum(c.paper is not None and bool(c.paper_differs) for c in self.cells.values())


def _groups_of(recipe: Recipe, cells: list[dict[str, Any]], regions: dict[str, str]) -> list[str]:
    """The table's groups in the recipe's order, then any other found in the results."""
    t = recipe.table
    found = sorted({group_of(recipe, c, regions) for c in cells})
    return [g for g in t.group_order if g in found] + [g for g in found if g not in t.group_order]


def group_of(recipe: Recipe, cell: dict[str, Any], regions: dict[str, str]) -> str:
    """A cell's group: all, its country, its country's region, or its concept."""
    t = recipe.table
    if t.groups == "all":
        return ALL
    if t.groups == "concept":
        return cell.get("concept") or "no concept"
    country = cell.get("country")
    if t.groups == "country":
        return country or "no country"
    return regions.get((country or "").casefold(), "no region")


def _variants(cell: dict[str, Any]) -> set[str]:
    return {
        v
        for im in cell.get("images", [])
        if (v := variant_name(im.get("exag_variant"))) is not None
    }


def _value(cell: dict[str, Any], metric: str) -> float | None:
    """A cell's value of a recipe metric: ``cd:<kernel>`` is a concepts cell's Eq. 3 under
    that kernel; anything else the cell's output or its images' mean."""
    if metric.startswith("cd:"):
        return (cell.get("cd_kernels") or {}).get(metric[3:])
    return cell_mean(cell, metric)


def _family(metric: str) -> str | None:
    """The key of :data:`PAPER_WAYS` a metric falls under (None: it has one way)."""
    if metric in VARIANT_BOUND:
        return metric
    return "cd:" if metric.startswith("cd:") else None


def way_of(cell: dict[str, Any], metric: str) -> str | None:
    """How a bench cell's ``metric`` was computed, where the metric has several ways: the
    EXAG variant of its images (EXAG, FAITH), or what rated a concepts cell's quality (CD:
    ``hpsv2`` or ``judge``); None where it has one way or the cell does not say."""
    family = _family(metric)
    if family in VARIANT_BOUND:
        return ", ".join(sorted(_variants(cell))) or None
    if family == "cd:":
        by = str(cell.get("quality_by") or "").split(" ")[0]
        return by or None
    return None


def metrics_table(
    recipe: Recipe,
    cells: list[dict[str, Any]],
    generators: list[str],
    regions: dict[str, str] | None = None,
    seed: int = 0,
    backbones: list[tuple[str, list[dict[str, Any]]]] = (),  # type: ignore[assignment]
) -> RecipeTable:
    """Per generator and group, each metric's mean over prompts and its interval; then,
    per other backbone (its label and its bench's cells), the same rows holding the
    table's ``backbone_metrics`` alone."""
    from refine.human.groups import regions as bundled_regions

    regions = regions if regions is not None else bundled_regions()
    t = recipe.table
    groups = _groups_of(recipe, cells, regions)
    columns = [(m.metric, m.shown(), m.span, m.better) for m in t.metrics]
    rows: list[Row] = []
    table: dict[tuple[str, str], TableCell] = {}
    pairs = [(g, group) for g in generators for group in groups]
    if t.best == "group":  # a group's generators side by side
        pairs = [(g, group) for group in groups for g in generators]
    for backbone, theirs in [(None, cells), *backbones]:
        for g, group in pairs:
            inside = [
                c
                for c in theirs
                if c.get("generator") == g and group_of(recipe, c, regions) == group
            ]
            if not inside:
                continue
            name = g if g is not None else recipe.task  # a task of one row: its name
            label = name if t.groups == "all" else f"{name} · {t.group_label(group)}"
            label = f"{backbone}: {label}" if backbone else label
            block = group if t.best == "group" else g
            block = f"{backbone}: {block}" if backbone else block
            rows.append(Row(label, block, g, group))
            chosen = [m.metric for m in t.metrics if not backbone or m.metric in t.backbone_metrics]
            for m in t.metrics:
                if m.metric not in chosen:
                    table[(label, m.metric)] = TableCell(None, note="the bench's row holds it")
            _way_rows(rows, table, Row(label, block, g, group), inside, chosen, seed)
    out = RecipeTable(recipe, "metrics", rows, columns, table)
    _paper(out)
    return out


def _way_rows(
    rows: list[Row],
    table: dict[tuple[str, str], TableCell],
    row: Row,
    inside: list[dict[str, Any]],
    metrics: list[str],
    seed: int,
) -> None:
    """``row``'s cells of ``metrics``; where a metric's prompts were computed in several
    ways, its cell in ``row`` says so and a row per way follows (``LABEL [way]``), holding
    the metrics of that way alone."""
    ways = {m: sorted({w for c in inside if (w := way_of(c, m))}) for m in metrics}
    split = {m for m in metrics if len(ways[m]) > 1}
    for m in metrics:
        if m in split:
            words = WAY_WORDS[_family(m) or m]
            table[(row.label, m)] = TableCell(
                None, note=f"{words}s differ ({'; '.join(ways[m])}): a row per {words} below"
            )
        else:
            table[(row.label, m)] = _metric_cell(inside, m, seed)
    for way in sorted({w for m in split for w in ways[m]}):
        label = f"{row.label} [{way}]"
        rows.append(Row(label, row.block, row.key, row.group, row.backbone))
        for m in metrics:
            if m not in split or way not in ways[m]:
                table[(label, m)] = TableCell(None, note="the row above holds it")
                continue
            table[(label, m)] = _metric_cell([c for c in inside if way_of(c, m) == way], m, seed)


def _metric_cell(cells: list[dict[str, Any]], metric: str, seed: int) -> TableCell:
    """The mean of ``metric`` over ``cells`` (prompts) with its interval, and its way where
    every prompt has the same (see :func:`_way_rows` for prompts that differ)."""
    values = [_value(c, metric) for c in cells]
    got = [v for v in values if v is not None]
    ways = {w for c in cells if (w := way_of(c, metric))}
    way = next(iter(ways)) if len(ways) == 1 else ""
    made = made_of(cells, metric, way)
    if not got:
        return TableCell(None, note=f"no prompt has {metric}", way=way, made=made)
    return TableCell(sum(got) / len(got), mean_interval(got, seed), len(got), way=way, made=made)


def _replaced(table: RecipeTable, row: str, paper: str, runs_as: str) -> None:
    """The note of a paper's model that is shut down, and the model run in its place."""
    from refine.backends.gemini import model_status

    known = model_status(paper) if paper.startswith("gemini:") else None
    why = known.words().split("; use ")[0] if known is not None else "no longer served"
    said = (
        f"{row}: the paper's model ({paper}) is {why}; its figures are set beside "
        f"{runs_as}, which this recipe runs in its place"
    )
    if said not in table.notes:
        table.notes.append(said)


def _paper(table: RecipeTable) -> None:
    """The paper's figures beside the cells they match: a metrics row by generator and
    group, an agreement row by metric and the column by group; never beside a cell
    computed in another way than the paper's (said in the table's notes)."""
    t = table.recipe.table
    for p in t.paper:
        for row in table.rows:
            if table.kind == "metrics":
                names = {(row.group or "").casefold(), t.group_label(row.group or "").casefold()}
                same_group = p.group is None or p.group.casefold() in names
                if (p.runs_as or p.generator) != row.key or not same_group:
                    continue
                if p.runs_as:
                    _replaced(table, p.row, p.generator or "", p.runs_as)
                for key, value in p.values.items():
                    if (row.label, key) in table.cells:
                        beside(table, table.cells[(row.label, key)], key, value, p)
            elif p.metric == row.key and p.backbone == row.backbone:
                for key, value in p.values.items():
                    column = _column_of(table, key)
                    if column is not None and (row.label, column) in table.cells:
                        beside(table, table.cells[(row.label, column)], row.key, value, p)


def beside(
    table: RecipeTable, cell: TableCell, metric: str, value: float, row: PaperRow | None = None
) -> None:
    """Set the paper's ``value`` beside ``cell``: with a difference where the cell was made
    the paper's way (its variant, and the models, the judge's reading and tau the recipe
    states: :func:`refine.harness.ways.differs`); apart, headed by what differs, where it
    was not (the table's notes say so once per metric and difference)."""
    if cell.value is None:
        return  # nothing to set it beside (a row split by way: the figure goes to its own)
    paper = table.recipe.table.paper_way(metric, row)
    here = dict(cell.made)
    paper_variant = PAPER_WAYS.get(_family(metric) or "")
    if paper_variant is not None:
        words = WAY_WORDS[_family(metric) or ""]
        paper["variant"] = f"{words} {paper_variant}"
        here["variant"] = f"{words} {cell.way}" if cell.way else f"{words} not recorded"
    cell.paper = value
    cell.paper_differs = way_differs(here, paper)
    if not cell.paper_differs:
        return
    shown = {m.metric: m.shown() for m in table.recipe.table.metrics}
    said = (
        f"{shown.get(metric, metric)}: made another way than the paper's figures ("
        f"{cell.paper_differs}): each is marked with a dagger and set apart, with no difference"
    )
    if said not in table.notes:
        table.notes.append(said)


def attach_paper(table: RecipeTable, key_of: Callable[[Any], str | None]) -> None:
    """The paper's figure beside each cell of a row whose key is ``key_of(paper row)``, in
    the column the figure names."""
    for p in table.recipe.table.paper:
        for r in table.rows:
            if key_of(p) == r.key:
                for k, v in p.values.items():
                    if (r.label, k) in table.cells:
                        table.cells[(r.label, k)].paper = v


def _column_of(table: RecipeTable, key: str) -> str | None:
    t = table.recipe.table
    for column, header, _, _ in table.columns:
        if key in (column, header, t.group_label(column)):
            return column
    return None


def agreement_table(
    recipe: Recipe,
    ratings: Any,
    stored: Any,
    regions_file: str | Path | None = None,
    seed: int = 0,
    backbones: list[tuple[str, Any]] = (),  # type: ignore[assignment]
) -> RecipeTable:
    """Per metric (a row each; one per EXAG variant where the rated images have several),
    its correlation with the mean answer to the recipe's question in each group and in
    all, with the interval and the number of rated images; then, per other backbone
    (its label and its bench's stored metrics), a row for each of the table's
    ``backbone_metrics``."""
    t = recipe.table
    whole, parts, ceilings = _agreements(recipe, ratings, stored, regions_file, seed)
    if t.columns == "questions":
        return _by_questions(recipe, whole, stored)
    columns = [(g, t.group_label(g), "", "max") for g in parts]
    rows: list[Row] = []
    cells: dict[tuple[str, str], TableCell] = {}
    _agreement_rows(recipe, t.metrics, whole, parts, rows, cells, made_in=stored)
    for label, theirs in backbones:
        got_whole, got_parts, _ = _agreements(recipe, ratings, theirs, regions_file, seed)
        chosen = [m for m in t.metrics if m.metric in t.backbone_metrics]
        _agreement_rows(recipe, chosen, got_whole, got_parts, rows, cells, label, theirs)
    if t.human_row:  # each rater against the others' mean, per column (the ceiling)
        rows.append(Row("Human", "", "human"))
        for g in parts:
            top = (ceilings.get(g) or {}).get(t.question or "") or {}
            cells[("Human", g)] = _human_cell(top, t.correlation)
    out = RecipeTable(recipe, "agreement", rows, columns, cells)
    _pooled_note(out)
    if whole.images == 0:
        out.missing.append("no rated image matches the bench's images")
    if t.question not in whole.alpha:
        out.missing.append(
            f"the ratings answer no question {t.question!r} (the {t.protocol or 'recipe'}'s)"
        )
    _paper(out)
    return out


def _agreements(
    recipe: Recipe, ratings: Any, stored: Any, regions_file: Any, seed: int
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The agreement over all rated images, each column's table of correlations (the
    groups in the recipe's order, and All), and each column's raters' own agreement (the
    human-human ceiling)."""
    from refine.human.agree import agreement
    from refine.human.groups import by_groups

    t = recipe.table
    wanted = [m.metric for m in t.metrics]
    whole = agreement(ratings, stored, wanted, seed=seed)
    parts: dict[str, Any] = {}
    if t.groups != "all" and t.columns == "groups":
        by = "region" if t.groups == "region" else "country"
        found = by_groups(ratings, stored, wanted, [by], regions_file, seed=seed)[by]
        order = [g for g in t.group_order if g in found] + sorted(
            g for g in found if g not in t.group_order
        )
        parts = {g: found[g]["metrics"] for g in order}
        ceilings = {g: found[g]["ceiling"] for g in order}
    else:
        ceilings = {}
    if t.with_all or not parts:
        parts[ALL] = whole.table
        from refine.human.groups import ceiling

        ceilings[ALL] = ceiling(whole.answers)
    return whole, parts, ceilings


def _part_row(
    table: dict[str, Any], key: str, metric: str, variant: str | None, question: str
) -> dict[str, Any] | None:
    """A group's row of ``key``: by its name, or, where the group's images were scored by
    one variant only (the group names it plainly, ``exag``), its row of that variant."""
    got = (table.get(key) or {}).get(question)
    if got is None and variant is not None:
        plain = (table.get(metric) or {}).get(question)
        if plain is not None and plain.get("variant") == variant:
            return plain
    return got


def _agreement_rows(
    recipe: Recipe,
    metrics: Any,
    whole: Any,
    parts: dict[str, Any],
    rows: list[Row],
    cells: dict[tuple[str, str], TableCell],
    backbone: str | None = None,
    made_in: Any = None,
) -> None:
    """A row per metric (and per EXAG variant among the rated images), labelled with the
    backbone where it is another's, each cell a group's correlation; what made the
    metric's values is read from the bench cells ``made_in`` holds (its ``cells``)."""
    t = recipe.table
    name = t.correlation
    stored_cells = getattr(made_in, "cells", None) or []
    for m in metrics:
        shown = [k for k in whole.table if k == m.metric or k.startswith(f"{m.metric} [")]
        for key in shown or [m.metric]:
            label = m.shown() + key[len(m.metric) :]
            label = f"{backbone}, {label}" if backbone else label
            rows.append(Row(label, "", m.metric, backbone=backbone))
            variant = key[len(m.metric) :].strip(" []") or None
            made = made_of(stored_cells, m.metric, variant or "")
            for g, table in parts.items():
                got = _part_row(table, key, m.metric, variant, t.question or "")
                if not got or got.get(name) is None:
                    cells[(label, g)] = TableCell(None, note=f"no rated image in {g} has {key}")
                    continue
                iv = got.get(f"{name}_interval")
                cells[(label, g)] = TableCell(
                    got[name], tuple(iv) if iv else None, got["n"], p=got.get(f"{name}_p"),
                    way=got.get("variant") or "", made=made,
                )  # fmt: skip


def tau_settings(made: list[tuple[str, float, Any]], folder: Path) -> list[tuple[str, str, Path]]:
    """The settings rows of a bench rescored at the photos' quartiles (``folder/tau-q1``...)."""
    names = {"q1": "Q1", "median": "median", "q3": "Q3"}
    return [(n, f"{names.get(n, n)} (tau {tau:.2f})", folder / f"tau-{n}") for n, tau, _ in made]


def settings_table(
    recipe: Recipe,
    settings: list[tuple[str, str, str | Path]],
    ratings: Any | None = None,
    seed: int = 0,
) -> RecipeTable:
    """One row per setting (its key, its label, its bench folder): with ratings, each of
    the recipe's correlations of its metric with the mean answer to its question over the
    rated images (and the interval); without, the metric's mean over the setting's prompts
    and its interval (the metric side), the ratings said missing."""
    from refine.harness.results import Results

    t = recipe.table
    metric = t.metrics[0]
    rows, cells = [], {}
    if ratings is not None:
        columns = [(c, c.capitalize(), "", "max") for c in t.correlations]
    else:
        columns = [(metric.metric, metric.shown(), "", metric.better)]
    for name, label, folder in settings:
        rows.append(Row(label, "", name))
        if ratings is None:
            done = Results.read(folder, "bench")
            cells[(label, metric.metric)] = _metric_cell(done.cells, metric.metric, seed)
            continue
        from refine.human.agree import agreement
        from refine.human.stored import stored_metrics

        found = stored_metrics([folder])
        got = agreement(ratings, found, [metric.metric], seed=seed)
        row = (got.table.get(metric.metric) or {}).get(t.question or "") or {}
        made = made_of(found.cells, metric.metric, row.get("variant") or "")
        for c in t.correlations:
            if row.get(c) is None:
                cells[(label, c)] = TableCell(None, note=f"no rated image has {metric.metric}")
                continue
            iv = row.get(f"{c}_interval")
            cells[(label, c)] = TableCell(
                row[c], tuple(iv) if iv else None, row["n"], p=row.get(f"{c}_p"),
                way=row.get("variant") or "", made=made,
            )  # fmt: skip
    out = RecipeTable(
        recipe, "agreement" if ratings is not None else "metrics", rows, columns, cells
    )
    # a setting's row holds one metric (FAITH): its way decides, as in every table
    for p in t.paper:
        for r in out.rows:
            if p.setting == r.key:
                for k, v in p.values.items():
                    if (r.label, k) in out.cells:
                        beside(out, out.cells[(r.label, k)], metric.metric, v, p)
    return out


def labels_table(
    recipe: Recipe, result: dict[str, Any], humans: dict[Any, Any] | None
) -> RecipeTable:
    """SoS Tab. 2: per method (and without the English prompts), accuracy and each label's
    precision against people's majority labels; without ratings, each caption
    classifier's against SoS's own labels (the metric side)."""
    from refine.harness.recipes import LABEL_COLUMNS
    from refine.human.sos_labels import agreement_rows

    t = recipe.table
    methods = [m.metric for m in t.metrics]
    if humans is not None:
        got = agreement_rows(result, humans, methods)
    else:
        captioned = (result.get("caption_classifiers") or {}).get("classifiers") or {}
        got = {m: captioned[m] for m in methods if m in captioned}
    columns = [(k, h, "", "max") for k, h in LABEL_COLUMNS.items()]
    rows, cells = [], {}
    shown = {m.metric: m.shown() for m in t.metrics}
    for key, row in got.items():
        base = key.split(" \\ ")[0]
        label = shown.get(base, base) + key[len(base) :]
        rows.append(Row(label, "", key))
        for c, _, _, _ in columns:
            cells[(label, c)] = TableCell(row.get(c), None, int(row.get("n") or 0))
    out = RecipeTable(
        recipe, "agreement" if humans is not None else "metrics", rows, columns, cells
    )
    attach_paper(out, lambda p: p.metric)
    return out


def _human_cell(top: dict[str, Any], name: str) -> TableCell:
    """The Human row's cell from a question's ceiling: the mean over raters, or, where no
    rater rated two images, the figure pooled over ratings (its ``way``)."""
    from refine.human.groups import POOLED

    value = top.get(name)
    pooled = top.get("way") == POOLED
    n = (top.get("pooled") or {}).get("n", 0) if pooled else len(top.get("raters") or {})
    note = "" if value is not None else "fewer than two raters an image"
    return TableCell(value, None, n, note=note, way=POOLED if pooled else "")


def _pooled_note(table: RecipeTable) -> None:
    """The note of a Human row pooled over ratings (raters not named across images)."""
    from refine.human.groups import POOLED

    if any(c.way == POOLED for (row, _), c in table.cells.items() if row == "Human"):
        table.notes.append(
            "Human: the ratings name no rater across images (as CulturalFrames' published "
            "annotations), so each rating is set against the others' mean on its image, "
            "pooled over all ratings (n: ratings)"
        )


def _by_questions(recipe: Recipe, whole: Any, stored: Any = None) -> RecipeTable:
    """An agreement table whose columns are the protocol's questions (CulturalFrames
    Fig. 6): each metric's correlation with the mean answer to each, over all rated
    images; with ``human_row``, each rater's correlation with the others' mean, averaged
    (the human-human ceiling)."""
    from refine.human.groups import ceiling

    t = recipe.table
    name = t.correlation
    columns = [(q, q, "", "max") for q in t.questions]
    rows, cells = [], {}
    for m in t.metrics:
        shown = [k for k in whole.table if k == m.metric or k.startswith(f"{m.metric} [")]
        for key in shown or [m.metric]:
            label = m.shown() + key[len(m.metric) :]
            rows.append(Row(label, "", m.metric))
            variant = key[len(m.metric) :].strip(" []")
            made = made_of(getattr(stored, "cells", None) or [], m.metric, variant)
            for q in t.questions:
                got = (whole.table.get(key) or {}).get(q) or {}
                if got.get(name) is None:
                    cells[(label, q)] = TableCell(None, note=f"no rated image has {key} and {q}")
                    continue
                iv = got.get(f"{name}_interval")
                cells[(label, q)] = TableCell(
                    got[name], tuple(iv) if iv else None, got["n"], p=got.get(f"{name}_p"),
                    way=got.get("variant") or "", made=made,
                )  # fmt: skip
    if t.human_row:
        top = ceiling(whole.answers)
        rows.append(Row("Human", "", "human"))
        for q in t.questions:
            cells[("Human", q)] = _human_cell(top.get(q) or {}, name)
    out = RecipeTable(recipe, "agreement", rows, columns, cells)
    _pooled_note(out)
    if whole.images == 0:
        out.missing.append("no rated image matches the bench's images")
    _paper(out)
    return out
