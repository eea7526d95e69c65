"""A task's plan: what it is asked for, as a pydantic model whose fields carry their flag,
help, bounds and the fronts that show them, as :class:`refine.records.RunSpec`'s do.

Every check of a plan is a validator on it, so a plan that exists can run: the command
line, a recipe and the Python API build the same model and get the same refusal.
:func:`option` declares a field a front shows (``surfaces``: ``cli``, the task's own
command), :func:`refusal` turns a :class:`pydantic.ValidationError` into the one line a
front shows, naming the flag. :func:`refine.settings.table` reads a plan's fields as it
reads RunSpec's: a task's command is made from them."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
)

from refine.harness.registry import resolve
from refine.records import DEFAULT_PROFILE, option
from refine.settings import flag_of, parse_backends

__all__ = ["option"]  # a plan field a front shows, re-exported for the task plans

MAX_IMAGES_PER_PROMPT = 1000  # CUBE draws 80; a bound stops a typo's billions

# what a run of a recipe may be asked besides its [select], by the plan field each sets,
# with its flag: the run-level options first (every task takes them; where its Plan has no
# such field one is refused in a line, and --limit keeps the task's first N jobs), then
# those some tasks' recipes read
ASKED = {
    "generators": "--generator",
    "limit": "--limit",
    "profile": "--profile",
    "backends": "--backend",
    "baseline_models": "--baseline-model",
    "tau": "--tau",
    "baselines": "--baselines",
    "concepts": "--concepts",
    "quality": "--cube-quality",
}


def asked_only(asked: dict[str, Any]) -> dict[str, Any]:
    """The options of ``asked`` that were asked: None is not asked (an empty value is:
    ``--baselines none``); a ``limit`` under 1 is a ValueError."""
    limit = asked.get("limit")
    if limit is not None and limit < 1:
        raise ValueError(f"--limit: at least 1, got {limit}")
    return {k: v for k, v in asked.items() if v is not None}


class Plan(BaseModel):
    """The base of every task's plan: no field it does not declare, no NaN or infinity."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, arbitrary_types_allowed=True)
    # the fields that may be given by position, in order, as they could when plans were
    # dataclasses (StrategyPlan(["edit"], prompts, budget_calls=5))
    positional: ClassVar[tuple[str, ...]] = ()
    # "module:function" that reads a recipe into this plan where it reads more than the
    # plan's own fields from [select] (a bench: the catalog's prompts), called with the
    # options asked (of ASKED: its fields', ``limit``, which it applies, and also_takes);
    # without one, the fields [select] gives, the asked ones replacing them
    recipe_reader: ClassVar[str | None] = None
    also_takes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *args: Any, **fields: Any) -> None:
        if len(args) > len(self.positional):
            raise TypeError(
                f"{type(self).__name__} takes {len(self.positional)} field(s) by position "
                f"({', '.join(self.positional)}), got {len(args)}"
            )
        for name, value in zip(self.positional, args, strict=False):
            if name in fields:
                raise TypeError(f"{type(self).__name__}: {name} given twice")
            fields[name] = value
        super().__init__(**fields)

    @classmethod
    def from_recipe(cls, recipe: Any, **asked: Any) -> Plan:
        """This task's plan of ``recipe`` (a :class:`refine.harness.recipes.Recipe`), with
        the options ``asked`` (None or empty: not asked) in place of the recipe's. One this
        plan cannot take is a ValueError naming its flag; ``limit`` where the plan takes no
        limit of its own is left to the run (:func:`jobs_limit`: its first N jobs)."""
        asked = asked_only(asked)
        takes = cls.takes()
        refused = [k for k in asked if k not in takes]
        if refused:
            name = refused[0]
            shown = ", ".join(ASKED[k] for k in ASKED if k in takes)
            raise ValueError(
                f"{ASKED.get(name, name)}: a {recipe.task} recipe takes no {name}; it takes {shown}"
            )
        if cls.recipe_reader is not None:
            return resolve(cls.recipe_reader)(recipe, **asked)
        select = recipe.select
        fields = {k: getattr(select, k) for k in select.model_fields_set if k in cls.model_fields}
        fields.update(select.model_extra or {})
        fields.update({k: v for k, v in asked.items() if k in cls.model_fields})
        return cls(**fields)

    @classmethod
    def takes(cls) -> tuple[str, ...]:
        """The options of :data:`ASKED` a recipe's run of this plan may be asked."""
        own = [k for k in ASKED if k in cls.model_fields or k in cls.also_takes]
        if cls.recipe_reader is not None:
            return (*own, *(["limit"] if "limit" not in own else []))
        return (*cls.model_fields, *(["limit"] if "limit" not in cls.model_fields else []))

    @classmethod
    def jobs_limit(cls, asked: dict[str, Any]) -> int | None:
        """The ``limit`` of ``asked`` that the run applies to the task's jobs (its first N):
        None where this plan takes a limit itself (a bench's first K prompts)."""
        if "limit" in cls.model_fields or cls.recipe_reader is not None:
            return None
        return asked.get("limit")


def _some(prompts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    if not prompts:
        raise ValueError("no prompts: the countries and activities given leave none")
    return prompts


def _roles(value: Any) -> Any:
    if isinstance(value, list | tuple):  # ROLE=NAME items, as the command line gives them
        return parse_backends(value)
    return value


# a plan's (activity, country) prompts, chosen on the command line by the options of
# refine.harness.tasks.bench.plan.PromptPlan
Prompts = Annotated[list[tuple[str, str]], AfterValidator(_some)]
PROMPTS = Field(
    default_factory=list, json_schema_extra={"flag": "--countries/--activity/--category"}
)
# the roles' overrides: {role: name}, or ROLE=NAME items (refine.settings.parse_backends)
Backends = Annotated[dict[str, str], BeforeValidator(_roles)]
BACKENDS = Field(
    default_factory=dict,
    description="A role's backend in place of the profile's, ROLE=NAME (repeatable).",
    json_schema_extra={"flag": "--backend", "surfaces": ("cli",), "given": "repeat"},
)


def _generators(value: list[str]) -> list[str]:
    from refine.harness.generators import parse_generator

    if not value:
        raise ValueError("name at least one generator")
    if len(set(value)) != len(value):
        raise ValueError("a generator is named twice")
    for spec in value:
        parse_generator(spec)
    return value


# generator names ("gemini:...", "diffusers:...+lora=PATH@0.8"), each once, each parsed
Generators = Annotated[list[str], AfterValidator(_generators)]


def _baselines(value: Any) -> tuple[str, ...]:
    from metrics.baselines import parse_baselines

    return parse_baselines(value)


# baselines scored beside FAITH ("a,b", all, none, or names), checked against the catalog
Baselines = Annotated[tuple[str, ...], BeforeValidator(_baselines)]


def _checkpoints(value: tuple[str, ...]) -> tuple[str, ...]:
    from refine.evaluate.baseline_models import parse_baseline_models

    parse_baseline_models(value)
    return value


# checkpoints in place of the baselines' own, NAME=WHERE each
Checkpoints = Annotated[tuple[str, ...], AfterValidator(_checkpoints)]


def _known_profile(name: str) -> str:
    from refine.profiles import load_profile

    load_profile(name)  # a ValueError names the profiles there are
    return name


# a profile's name or file, found as the plan is made
Profile = Annotated[str, AfterValidator(_known_profile)]
PROFILE = Field(
    DEFAULT_PROFILE,
    description="The profile whose models score (and draw, where not named).",
    json_schema_extra={"flag": "--profile", "surfaces": ("cli",)},
)


def refusal(err: ValidationError, plan: type[BaseModel]) -> str:
    """The first problem of ``err`` in one line: ``--flag: what is wrong`` for a field, the
    validator's own words (which name their flags) for the plan as a whole."""
    first = err.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    loc = [str(x) for x in first["loc"]]
    if not loc:
        return message
    where = flag_of(loc[0], plan) + "".join(f"[{x}]" for x in loc[1:])
    got = first.get("input")
    shown = "" if first["type"] == "value_error" or isinstance(got, dict) else f" (got {got!r})"
    return f"{where}: {message}{shown}"


def profile_generator(data: Any) -> Any:
    """A plan's raw fields with ``generators`` as the profile's generator where none are
    named (a plan's "before" validator)."""
    if not isinstance(data, dict) or "generators" in data:
        return data
    from refine.profiles import load_profile

    try:
        generator = load_profile(data.get("profile") or DEFAULT_PROFILE).backend("generator")
    except ValueError as err:
        raise ValueError(f"--profile: {err}") from err
    return {**data, "generators": [generator]}
