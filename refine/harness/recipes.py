"""Recipes: a paper's protocol as data (one TOML file each; the bundled ones in
``assets/recipes/``, named for the paper's table, or a user's own file).

A recipe holds:

* ``task``: what runs it, a registered task (:mod:`refine.harness.registry`, whose spec says
  which metrics and table kinds a recipe of it may give): ``bench`` (CULTIVate
  activities), ``concepts`` (CUBE-style concept prompts), ``sos`` (an SoS bank per
  generator) or ``caire`` (CAIRE's universal set: each concept of ``--concepts``
  generated in each country, every image scored for every country);
* ``[select]``: the countries, activities, categories or concepts file, the sample per
  country, images per prompt, the first seed, the generators the paper compared (as
  this toolkit names them; ``--generator`` replaces them), the baselines and tau;
* ``[table]``: the table it produces in the paper's layout:

  - ``kind = "metrics"``: one block of rows per generator, one row per group of
    countries (``groups = "region"``: Global North and South from ``assets/regions.json``;
    ``"country"``; ``"concept"``, a concepts run's concept; ``"all"``), one column per
    entry of ``metrics``, each cell the mean over prompts
    with its 95% bootstrap interval; ``best = "block"`` bolds the best of each column
    within a generator's block (AHEaD Tab. 1), ``"group"`` among the generators of each
    group (CUBE Tab. 5: the best model per concept), ``"column"`` over all rows;
  - ``kind = "agreement"``: one row per entry of ``metrics``, one column per group and
    ``All``, each
    cell the correlation of the metric with the people's answer to ``question`` of
    ``protocol`` (needs ``--ratings``; without it the recipe writes the metric side and
    says so); ``human_row``: a last row of the raters' own agreement; with
    ``[[select.backbones]]``, the rows of ``backbone_metrics`` again for each other
    backbone scoring the same images (AHEaD Tab. 2's two MLLMs);

  - ``kind = "settings"``: one row per setting the bench is rescored at (``settings =
    "tau-quantiles"``: tau at Q1, the median and Q3 of the best-match similarities on the
    real photos, AHEaD Tab. 5), one column per correlation of the one metric with the
    answers to ``question``;

  - ``kind = "labels"`` (the ``sos`` task: a bank per generator, their centroids pooled):
    one row per method (``sos``, and the caption classifiers ``clipscore``, ``mclip``)
    and per method without the English prompts, its accuracy and the precision of each
    label against people's majority labels (SoS Tab. 2);

  and ``[[table.paper]]``: the paper's own figures, a row each (its label, the
  generator or metric it is, its group, ``values`` by column), shown beside the
  bench's value in every output.

Nothing about a paper is in code: :func:`load_recipe` validates any recipe, and
:mod:`refine.harness.recipe_tables` makes any recipe's table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from refine.harness import registry
from refine.harness.plan import MAX_IMAGES_PER_PROMPT, refusal


class _Strict(BaseModel):
    # NaN and infinity are no setting's value (a NaN weight compared as nothing)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Backbone(_Strict):
    """A second scoring backbone of an agreement recipe (AHEaD Tab. 2's Qwen2.5-VL beside
    InternVL3): the bench's images observed again by ``observer`` (and the judge's
    baselines in ``rejudge`` read again by ``judge``) at its own tau, with nothing
    generated again (``refine rescore``, into ``OUT/backbones/<label>``); the table's
    ``backbone_metrics`` get a row each for it."""

    label: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._+-]*$")
    observer: str
    judge: str | None = None  # None: the bench's judge (nothing read again)
    tau: float | None = Field(None, gt=0, le=1)  # None: the observer's calibrated tau
    rejudge: list[str] = Field(default_factory=lambda: ["judge_align"])
    observer_prompts: Literal["toolkit", "ahead"] | None = None  # None: the recipe's

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() or c in "._-" else "-" for c in self.label)


class SecondJudge(_Strict):
    """A judge other than the profile's, for some of the baselines the table holds (AHEaD
    Tab. 2: the MLLM-as-a-judge row is InternVL3's, where VQAScore and EXAG are
    CLIP-FlanT5's): the bench's images read again by it for ``metrics`` (a rescore into
    ``OUT/judges/<slug>``, nothing generated or observed again), and the table's values of
    those metrics are its. Run on the recipe's own profile only; on another, the profile's
    judge reads them, and the table sets the paper's figures apart."""

    judge: str = Field(min_length=1)
    metrics: list[str] = Field(min_length=1)

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() or c in "._-" else "-" for c in self.judge)


class GeneratorSettings(_Strict):
    """How a diffusers generator draws, where a paper states it (CulturalFrames A.1.4,
    CUBE Tab. 13): each checked against the loaded pipeline's call."""

    steps: int | None = Field(None, ge=1, le=1000)
    guidance: float | None = Field(None, ge=0, le=100)
    width: int | None = Field(None, ge=64, le=4096, multiple_of=8)
    height: int | None = Field(None, ge=64, le=4096, multiple_of=8)
    negative_prompt: str | None = Field(None, max_length=2000)
    # classifier-free guidance where the pipeline's guidance_scale is a distilled
    # embedding or unused (FLUX, Qwen-Image: true_cfg_scale)
    true_cfg: float | None = Field(None, ge=0, le=100)
    # entries of the pipeline's scheduler config set anew (a distilled model's own); TOML
    # has no null, so the string "null" stands for None
    scheduler: dict[str, float | int | bool | str | None] | None = Field(None, max_length=50)

    @field_validator("scheduler", mode="before")
    @classmethod
    def _nulls(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: None if v == "null" else v for k, v in value.items()}
        return value


class Select(_Strict):
    # the fields below are read by a Plan's recipe reader (Plan.recipe_reader: the bench's,
    # concepts', CAIRE's and SoS's); a recipe of a task whose Plan has none gives its Plan's
    # fields here, checked by that Plan as the recipe loads (and those of the fields below
    # its Plan has)
    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    countries: list[str] = Field(default_factory=list)  # empty: every country with refs
    activities: list[str] = Field(default_factory=list)  # empty: all
    categories: list[str] = Field(default_factory=list)  # empty: all
    sample: int | None = Field(None, ge=1, le=100_000)  # prompts drawn per country
    concepts: str | None = None  # the concepts task's file (a path; --concepts replaces it)
    images_per_prompt: int = Field(1, ge=1, le=MAX_IMAGES_PER_PROMPT)
    seed: int = Field(0, ge=0, le=2**32 - 1)
    generators: list[str] = Field(default_factory=list)  # the paper's models
    # each generator's settings where the paper states them (by its name in generators)
    generator_settings: dict[str, GeneratorSettings] = Field(default_factory=dict)
    baselines: list[str] = Field(default_factory=list)
    tau: float | None = Field(None, gt=0, le=1)  # None: the scorer profile's
    # the observer's prompts: the toolkit's, or AHEaD's per dimension (Tab. 22-27)
    observer_prompts: Literal["toolkit", "ahead"] = "toolkit"
    # CUBE Eq. 3's weights of its three kernels' terms
    cube_weights: list[Annotated[float, Field(ge=0, le=1e6)]] = Field(
        default_factory=lambda: [1.0, 0.0, 0.0], min_length=3, max_length=3
    )
    # the sos task: the cultures and prompt languages of each generator's bank (empty: all
    # the native-speaker prompts have), the concept, the prompts of each cell used
    cultures: list[str] = Field(default_factory=list)
    languages: list[str] = Field(default_factory=list)
    concept: str = "person"
    prompts_per_cell: int | None = Field(None, ge=1, le=1_000)
    kb: str | None = None  # the caire task: a CAIRE knowledge base (None: kb-free)
    # a bench recipe on a dataset's own images and ratings, fetched into the data directory
    # (refine data fetch culturalframes) in place of generated ones
    dataset: Literal["culturalframes"] | None = None
    # agreement recipes: other backbones scoring the same images (a rescore each)
    backbones: list[Backbone] = Field(default_factory=list)
    # the scoring profile that holds the paper's models (None: --profile's, gemini by
    # default); --profile replaces it, and the table then says what differs
    profile: str | None = None
    # bench recipes: baselines the paper read with another judge than the profile's
    judges: list[SecondJudge] = Field(default_factory=list)

    @field_validator("profile")
    @classmethod
    def _a_profile(cls, value: str | None) -> str | None:
        if value is not None:
            from refine.profiles import load_profile

            load_profile(value)  # a ValueError names the profiles there are
        return value


# a labels table's columns (SoS Tab. 2): agreement with people's labels, and the
# precision of each label
LABEL_COLUMNS = {"accuracy": "Acc", "precision_surface": "P_sur", "precision_semantic": "P_sem"}


class Metric(_Strict):
    metric: str  # a bench metric (catalog name), or for concepts cd:<kernel>, cube_cd, ...
    header: str = ""  # shown; the metric's name when empty
    span: str = ""  # a header over the columns that share it ("N=1")
    better: Literal["max", "min"] = "max"

    def shown(self) -> str:
        return self.header or self.metric


class PaperWay(_Strict):
    """What made the paper's figures (a part left out: not compared): the observer's and
    the judge's model ids as this toolkit names them, how the judge was read, and tau
    (:mod:`refine.harness.ways`)."""

    observer: str | None = None
    judge: str | None = None
    read: Literal["logprobs", "sampled"] | None = None
    tau: float | None = Field(None, gt=0, le=1)


class MadeWith(PaperWay):
    """The paper's way for the table's metrics, and for some metrics another (AHEaD
    Tab. 2's MLLM row, judged by InternVL3 where VQAScore is CLIP-FlanT5's)."""

    metrics: dict[str, PaperWay] = Field(default_factory=dict)


class PaperRow(_Strict):
    row: str  # the paper's label of the row
    generator: str | None = None  # metrics tables: the toolkit's name of the paper's model
    # metrics tables: the model the recipe runs in place of the paper's, which is shut down
    # (assets/gemini_models.toml); the paper's figures are set beside its row, and the
    # table's notes say so
    runs_as: str | None = None
    metric: str | None = None  # agreement tables: the toolkit's metric the row is
    group: str | None = None  # metrics tables: the row's group (Global North ...)
    setting: str | None = None  # settings tables: the setting the row is (q1, median, q3)
    backbone: str | None = None  # agreement tables: the backbone the row is (None: the bench's)
    values: dict[str, float | None] = Field(default_factory=dict)  # column -> figure
    made_with: PaperWay | None = None  # where this row's way is not the table's


class Table(_Strict):
    kind: Literal["metrics", "agreement", "settings", "labels"] = "metrics"
    caption: str
    label: str = Field(pattern=r"^[A-Za-z0-9:_.-]+$")
    groups: Literal["region", "country", "concept", "all"] = "all"
    group_order: list[str] = Field(default_factory=list)  # e.g. the paper's GN before GS
    group_labels: dict[str, str] = Field(default_factory=dict)  # "Global North" -> "GN"
    # the metrics: a metrics table's columns, an agreement table's rows
    metrics: list[Metric] = Field(min_length=1)
    best: Literal["block", "group", "column", "none"] = "column"
    digits: int = Field(2, ge=0, le=6)
    # agreement tables
    protocol: str | None = None  # the rating protocol the ratings follow
    question: str | None = None  # the question whose answers the metrics are set against
    correlation: Literal["spearman", "kendall", "pearson"] = "spearman"
    with_all: bool = True  # an "All" column beside the groups
    # an agreement table's columns: its groups (the one question), or several questions
    # of the protocol (CulturalFrames Fig. 6), over all the rated images
    columns: Literal["groups", "questions"] = "groups"
    questions: list[str] = Field(default_factory=list)
    human_row: bool = False  # a last row: each rater against the others' mean (the ceiling)
    # agreement tables with [[select.backbones]]: the metrics given a row per backbone
    backbone_metrics: list[str] = Field(default_factory=list)
    # settings tables: the settings each row is (the bench rescored at tau's quartiles on
    # the real photos), and the correlations of the one metric with the answers, a column
    # each
    # the settings rows: tau at the photos' quartiles (AHEaD Tab. 5), or each proposer's own
    # reference set beside the refined one (Tab. 4)
    settings: Literal["tau-quantiles", "proposers"] | None = None
    correlations: list[Literal["spearman", "kendall", "pearson"]] = Field(
        default_factory=lambda: ["spearman", "kendall"]
    )
    paper: list[PaperRow] = Field(default_factory=list)
    # said in the table's notes beside the paper's figures: what the paper leaves open about
    # the statistic they are (AHEaD Tab. 4 and 5), and how the table reads it
    caveat: str = ""
    # the models and settings behind the paper's figures: a figure is compared with a value
    # made the same way only (refine.harness.ways)
    made_with: MadeWith = Field(default_factory=MadeWith)

    def paper_way(self, metric: str, row: PaperRow | None = None) -> dict[str, Any]:
        """The paper's way of ``metric`` (of ``row``'s figures): the table's, the metric's
        own over it, the row's over both; the parts no one states left out."""
        out: dict[str, Any] = {}
        for way in (self.made_with, self.made_with.metrics.get(metric), row and row.made_with):
            if way is not None:
                out.update(
                    {k: v for k in PaperWay.model_fields if (v := getattr(way, k)) is not None}
                )
        return out

    @model_validator(mode="after")
    def _consistent(self) -> Table:
        keys = [c.metric for c in self.metrics]
        if len(set(keys)) != len(keys):
            raise ValueError("a metric is given twice")
        if self.kind == "agreement" and self.columns == "questions" and not self.questions:
            raise ValueError("an agreement table by questions names them (questions = [...])")
        if (
            self.kind in ("agreement", "settings")
            and self.columns == "groups"
            and not self.question
        ):
            raise ValueError("an agreement table names the rated question (question = ...)")
        stray = [m for m in self.backbone_metrics if m not in keys]
        if stray:
            raise ValueError(f"backbone_metrics: {stray[0]!r} is not among the table's metrics")
        if self.kind == "settings" and (self.settings is None or len(self.metrics) != 1):
            raise ValueError("a settings table names its settings and one metric")
        for p in self.paper:
            stray = [
                k
                for k in p.values
                if k not in keys
                and k not in self._group_keys()
                and k not in self.correlations
                and k not in LABEL_COLUMNS
            ]
            if stray:
                raise ValueError(
                    f"paper row {p.row!r}: {stray[0]!r} is neither a metric nor a group of "
                    "the table"
                )
        return self

    def _group_keys(self) -> set[str]:
        """The column keys of an agreement table: its groups and All."""
        return {*self.group_order, *self.group_labels.values(), "All", *self.questions}

    def group_label(self, group: str) -> str:
        return self.group_labels.get(group, group)


class Recipe(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    paper: str  # the paper, in words
    source: str  # where in the paper: the file and the table or figure
    about: str = ""  # what the recipe runs and how it departs from the paper
    task: str = "bench"  # a registered task (refine.harness.registry)
    select: Select = Field(default_factory=Select)
    table: Table

    @model_validator(mode="after")
    def _metrics_known(self) -> Recipe:
        """The task is a registered one, each metric one it computes and the table's kind
        one it makes, as its :class:`refine.harness.registry.TaskSpec` says: a catalog
        metric (bench), a CUBE kernel's ``cd:NAME`` or figure (concepts), a method (sos),
        ``caire``."""
        spec = registry.task(self.task)
        known = spec.table_names()
        kinds = spec.tables
        if not kinds:
            raise ValueError(f"task {self.task!r} makes no recipe table")
        if self.table.kind not in kinds:
            raise ValueError(
                f"a {self.task} recipe makes a table of kind {' or '.join(kinds)}, "
                f"not {self.table.kind!r}"
            )
        self._plan_fields(spec)
        extra = sorted(set(self.select.generator_settings) - set(self.select.generators))
        if extra:
            raise ValueError(
                f"select.generator_settings: {extra[0]!r} is not one of the recipe's generators"
            )
        if self.select.generator_settings and self.task not in ("bench", "concepts"):
            raise ValueError("select.generator_settings: for bench and concepts recipes")
        if self.select.dataset and (self.task != "bench" or self.table.kind != "agreement"):
            raise ValueError("select.dataset: only a bench recipe's agreement table reads one")
        if self.select.dataset and self.select.generator_settings:
            raise ValueError("select.generator_settings: a dataset's images are drawn already")
        backbones = self.select.backbones
        if backbones and (self.task != "bench" or self.table.kind != "agreement"):
            raise ValueError("select.backbones: only a bench recipe's agreement table has them")
        if backbones and not self.table.backbone_metrics:
            raise ValueError("select.backbones: name the rows they get (table.backbone_metrics)")
        labels = [b.label for b in backbones]
        if len({b.slug for b in backbones}) != len(labels):
            raise ValueError("select.backbones: a label is given twice")
        from metrics.baselines import JUDGE_READ

        for b in backbones:
            if stray := [r for r in b.rejudge if r not in JUDGE_READ]:
                raise ValueError(
                    f"select.backbones {b.label!r}: rejudge {stray[0]!r} is no baseline the "
                    f"judge reads ({', '.join(JUDGE_READ)})"
                )
        for p in self.table.paper:
            if p.backbone is not None and p.backbone not in labels:
                raise ValueError(f"paper row {p.row!r}: no backbone {p.backbone!r} in select")
        for m in self.table.metrics:
            if m.metric not in known:
                from refine.evaluate.references import suggest

                raise ValueError(
                    f"table.metrics: no metric {m.metric!r} in a {self.task} recipe"
                    f"{suggest(m.metric, sorted(known))}"
                )
        return self

    @model_validator(mode="after")
    def _second_judges(self) -> Recipe:
        """Each second judge reads baselines the bench's judge reads and the recipe asks
        for, each metric by one judge alone."""
        from metrics.baselines import JUDGE_READ

        seen: set[str] = set()
        for j in self.select.judges:
            if self.task != "bench":
                raise ValueError("select.judges: only a bench recipe has them")
            for m in j.metrics:
                if m not in JUDGE_READ or m not in self.select.baselines:
                    raise ValueError(
                        f"select.judges {j.judge!r}: {m!r} is not a baseline of the recipe "
                        f"the judge reads ({', '.join(JUDGE_READ)})"
                    )
                if m in seen:
                    raise ValueError(f"select.judges: {m!r} is given two judges")
                seen.add(m)
        return self

    def _plan_fields(self, spec: registry.TaskSpec) -> None:
        """A task whose Plan reads no recipe of its own takes its fields from [select];
        one with a reader takes only the fields above."""
        given = dict(self.select.model_extra or {})
        if not given:
            return
        if spec.plan is None or spec.plan_class().recipe_reader is not None:
            raise ValueError(f"select.{sorted(given)[0]}: Extra inputs are not permitted")
        plan = spec.plan_class()
        stray = sorted(set(given) - set(plan.model_fields))
        if stray:
            raise ValueError(
                f"select.{stray[0]}: task {self.task}'s plan has no such field "
                f"({', '.join(plan.model_fields)})"
            )
        try:
            plan(**given)
        except ValidationError as err:
            raise ValueError(f"select: {refusal(err, plan)}") from None

    @property
    def needs_ratings(self) -> bool:
        return self.table.kind in ("agreement", "settings", "labels")


def recipes_dir() -> Path:
    from refine.assets import assets_dir

    return assets_dir() / "recipes"


def bundled() -> list[str]:
    """The bundled recipes' names."""
    from refine.assets import bundled_names

    return bundled_names("recipe")


def load_recipe(name_or_path: str | Path) -> Recipe:
    """A bundled recipe by name, or a recipe file; a ValueError says what is wrong."""
    from refine.assets import bundled_or_file
    from refine.io.files import toml_model

    path, where = bundled_or_file(name_or_path, "recipe")

    return toml_model(path.read_text(encoding="utf-8"), where, Recipe)


def interleaved(prompts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The prompts taken in turn from each country (the first of each, then the second of
    each, ...): a bench cut short with ``limit`` still covers the countries, and with
    them the table's groups."""
    by: dict[str, list[tuple[str, str]]] = {}
    for p in prompts:
        by.setdefault(p[1], []).append(p)
    out = []
    for k in range(max((len(v) for v in by.values()), default=0)):
        out += [v[k] for v in by.values() if k < len(v)]
    return out


def generator_settings(recipe: Recipe, generators: list[str]) -> dict[str, dict[str, Any]]:
    """The recipe's settings of those of ``generators`` it sets (a generator named in
    place of the recipe's draws with its own)."""
    return {
        g: st.model_dump(exclude_none=True)
        for g, st in recipe.select.generator_settings.items()
        if g in generators
    }


def recipe_concepts(
    recipe: Recipe, given: str | Path | None, limit: int | None, read: Any, what: str
) -> list[Any]:
    """The first ``limit`` concepts of ``given`` (else the recipe's own file), read by
    ``read``; a ValueError asks for ``--concepts FILE`` where there is neither."""
    path = given or recipe.select.concepts
    if path is None:
        raise ValueError(f"recipe {recipe.name} runs on {what}: give them with --concepts FILE")
    found = read(path)
    return found[:limit] if limit else found


def chosen_profile(asked: str | None, recipe: Recipe) -> dict[str, str]:
    """A recipe plan's ``profile``: the one asked, else the recipe's; neither, none (the
    plan's own default)."""
    chosen = asked or recipe.select.profile
    return {"profile": chosen} if chosen else {}
