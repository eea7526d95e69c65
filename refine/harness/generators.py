"""The generators a bench or concepts run names, made on its scorer's device.

A generator is named on the command line by a backend name (``prefix:model``) or a
profile (its generator with the profile's options), optionally followed by LoRA adapters
(``diffusers:ID+lora=PATH[@SCALE]``, repeatable), so a base model and the same model with
an adapter are two generators of one job. Every generator is loaded, or checked with its
API, before the first image is paid for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from refine.backends.lora import MARK, split_adapters
from refine.profiles import load_profile


@dataclass(frozen=True)
class GeneratorSpec:
    """A generator as named on the command line: a backend name, optionally followed by
    LoRA adapters, ``diffusers:ID+lora=PATH[@SCALE]`` (repeatable), so a base model and
    the same model with an adapter are two generators of one bench."""

    label: str
    name: str
    loras: tuple[tuple[str, float], ...] = ()
    options: tuple[tuple[str, Any], ...] = ()  # a profile's generator options


def parse_generator(spec: str) -> GeneratorSpec:
    """``NAME`` or ``NAME+lora=PATH[@SCALE]...``, NAME a backend name (``prefix:model``) or
    a profile (its generator with the profile's options); raises ValueError naming the
    problem."""

    label = spec.strip()
    try:
        name, loras = split_adapters(label)
    except ValueError as err:
        raise ValueError(f"generator {err}") from None
    options: tuple[tuple[str, Any], ...] = ()
    if ":" not in name:  # a profile: its generator and that generator's options
        try:
            profile = load_profile(name)
        except (ValueError, OSError) as err:
            raise ValueError(
                f"generator {spec!r}: neither a backend name (prefix:model) nor a profile ({err})"
            ) from None
        options = tuple(sorted(profile.options.get("generator", {}).items()))
        name = profile.backend("generator")
    if "+" in name and not loras:
        raise ValueError(f"generator {spec!r}: adapters are written NAME{MARK}PATH[@SCALE]")
    if loras and not name.startswith("diffusers:"):
        raise ValueError(f"generator {spec!r}: LoRA adapters apply to diffusers: generators only")
    return GeneratorSpec(label, name, tuple(loras), options)


# a recipe's generator settings -> the pipeline call's parameter each one sets
SETTINGS = {
    "steps": "num_inference_steps",
    "guidance": "guidance_scale",
    "width": "width",
    "height": "height",
    "negative_prompt": "negative_prompt",
    "true_cfg": "true_cfg_scale",  # classifier-free guidance where guidance_scale is distilled
    "scheduler": None,  # the scheduler's config entries: checked against its config
}


def make_generator(scorer: Any, label: str, settings: dict[str, Any] | None = None) -> Any:
    """The generator a bench names (see :func:`parse_generator`), on the scorer's device;
    ``settings`` (a recipe's: :data:`SETTINGS`) over the profile's options."""
    spec = parse_generator(label)
    extra: dict[str, Any] = dict(spec.options)
    if spec.loras:
        extra["loras"] = spec.loras
    given = {k: v for k, v in (settings or {}).items() if v is not None}
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        raise ValueError(
            f"generator {label!r}: no setting {unknown[0]!r} (one of {', '.join(SETTINGS)})"
        )
    if given and not spec.name.startswith("diffusers:"):
        raise ValueError(
            f"generator {label!r}: steps, guidance, size, negative prompt and scheduler are set on "
            "diffusers: generators only (an API model draws with its own)"
        )
    return scorer.named("generator", spec.name, **{**extra, **given})  # the recipe's win


def check_settings(label: str, generator: Any, settings: dict[str, Any]) -> None:
    """Each setting given is a parameter of the loaded pipeline's call, as the edit
    pipelines' options are checked: a ValueError names the one it does not take."""
    import inspect

    pipe = getattr(generator, "pipe", None)
    if pipe is None:
        return
    takes = inspect.signature(pipe.__call__).parameters
    for name, value in settings.items():
        if value is not None and SETTINGS[name] is not None and SETTINGS[name] not in takes:
            raise ValueError(
                f"generator {label!r}: its pipeline {type(pipe).__name__} takes no "
                f"{SETTINGS[name]} (the recipe's {name}); leave it out"
            )


def generate(scorer: Any, generator: Any, prompt: str, seeds: list[int]) -> list[Any]:
    """A generator's images of a prompt: API generators at once, a local pipeline one job
    at a time on the device."""
    if getattr(generator, "thread_safe", False):
        return generator.generate(prompt, seeds)
    with scorer.model_lock:
        return generator.generate(prompt, seeds)


def checked_generators(
    scorer: Any, labels: Sequence[str], settings: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The generators a job names, each with its ``settings`` (by label: a recipe's), each
    loaded (or checked with its API) before the first image is paid for, and its settings
    checked against its pipeline."""
    settings = settings or {}
    generators = {label: make_generator(scorer, label, settings.get(label)) for label in labels}
    for label, generator in generators.items():
        check = getattr(generator, "verify", None) or getattr(generator, "load", None)
        if callable(check):
            check()
        check_settings(label, generator, settings.get(label) or {})
    return generators
