"""A registry of backends keyed by role and name prefix.

``create("text_embedder", "st:all-MiniLM-L6-v2")`` imports the module that implements
the ``st`` prefix for that role and builds the backend (unloaded: weights are loaded by
its ``load()`` or on first use). Unknown roles or prefixes raise ``ValueError`` listing
what is registered.

What a backend of each role answers (duck-typed: nothing checks a class; the tests drive
each bundled backend and the stand-ins through these methods):

- every role: ``id`` (model, revision when known, dtype, device: recorded in each round)
  and ``load()`` (imports heavy packages and loads weights, idempotent; a call made before
  it loads on first use);
- ``generator``: ``generate(prompt, seeds) -> list[Image]``, one image per seed, the same
  seed the same image;
- ``editor``: ``edit(image, instruction, seeds) -> list[Image]``, each the input's size;
- ``observer``: ``describe(image, dimensions, max_per_dimension=10) -> {dimension: [...]}``,
  the descriptors it sees;
- ``judge``: ``yes_probability(images, questions) -> [P(Yes) / (P(Yes) + P(No))]`` and
  ``rate(images, prompts) -> [Rating]`` (:class:`refine.backends.rating.Rating`, 1-5);
  optionally ``rate_scale`` (another scale: quality's 0-10), ``vqa_score`` (VQAScore,
  exag:ita) and ``rate_prefixed`` (exag:mllm); a judge without one names what it lacks
  when asked;
- ``llm``: ``complete_json(prompt, schema) -> schema`` (a pydantic model; the bundled ones
  also take ``temperature=``);
- ``text_embedder``: ``encode(phrases) -> tensor``, a row per phrase; ``image_embedder``:
  ``encode_images(images)`` and ``encode_texts(texts)``, in one space.

These are :data:`ROLE_METHODS`, and each registered backend's class is checked to have its
role's (``tests/integration/test_backend_contract.py``). A backend registered ``remote`` (an API's)
also keeps the usage contract of :mod:`refine.usage` (:data:`USAGE_CONTRACT`), which the call
budget, the app's quotas, a run's token counts and Ctrl-C rely on: ``sent(model)`` before
each request it sends (a retry is a request: under ``--budget-calls`` it takes a call, and
none is sent past the budget), ``record(model, ...)`` with each answer's token counts,
``abandonable(call)`` around the wait for an answer (a stop is not held up by it), and
``time_left()`` to cap its timeout and retries by the run's deadline. A test drives every
registered remote backend against its stand-in under a call budget and counts the requests
that reach the stand-in. A backend's options are declared where it is registered
(:attr:`BackendInfo.options`) and checked when a profile is loaded: an unknown one is
refused then, naming it, not when the run builds the backend.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROLES: tuple[str, ...] = (
    "generator",
    "editor",
    "observer",
    "judge",
    "llm",
    "text_embedder",
    "image_embedder",
)


@dataclass(frozen=True)
class BackendInfo:
    """A registered backend and what it is: whether it is called through an API
    (``remote``: nothing to download, load or lease here), the environment variables it
    reads (``env``: Ray's workers get them) and those of which one must be set for it to
    answer (``key_env``: readiness and the deployment say so before a run), its errors that
    a user can put right (``errors``: the command line says them in one line, exit code 1)
    and its methods that run a model here (``model_calls``: ZeroGPU leases the GPU for each
    call). Everything that asks "is this an API model?" reads it, never a name prefix."""

    role: str
    prefix: str
    target: str  # "module:attribute" of the factory
    description: str
    example: str
    remote: bool = False
    env: tuple[str, ...] = ()
    key_env: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # "module:Class"
    # ("module:Class", its methods that each run the model once), a class and its bases
    model_calls: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the options it takes (a profile's [options.ROLE], --backend-option), as its
    # constructor and what that passes them to take them (constructor_options); None: not
    # declared (a backend registered by a user), the constructor's own TypeError then
    options: tuple[str, ...] | None = None

    @property
    def methods(self) -> tuple[str, ...]:
        """What a backend of its role answers (:data:`ROLE_METHODS`)."""
        return ROLE_METHODS[self.role]

    def check_options(self, given: dict[str, Any], where: str = "") -> None:
        """A ValueError naming the first option of ``given`` this backend does not take,
        and those it does; through a pydantic model of its options (extra ones forbidden),
        as a task's plan is checked."""
        if self.options is None:
            return
        from pydantic import ValidationError

        try:
            _options_model(self.prefix, self.role, self.options)(**given)
        except ValidationError as err:
            name = err.errors()[0]["loc"][0]
            raise ValueError(
                f"{where}{name}: {self.prefix}: takes no option {name!r} for its {self.role} "
                f"(it takes {', '.join(sorted(self.options)) or 'none'})"
            ) from None


# what a backend of each role answers (the module docstring); optional methods aside
ROLE_METHODS: dict[str, tuple[str, ...]] = {
    "generator": ("generate",),
    "editor": ("edit",),
    "observer": ("describe",),
    "judge": ("yes_probability",),  # rate, rate_scale, ...: a judge without one says so
    "llm": ("complete_json",),
    "text_embedder": ("encode",),
    "image_embedder": ("encode_images", "encode_texts"),
}
# what a remote backend calls of refine.usage around each request (the module docstring)
USAGE_CONTRACT = ("sent", "record", "abandonable", "time_left")


@functools.cache
def _options_model(prefix: str, role: str, options: tuple[str, ...]) -> type:
    """A backend's options as a pydantic model, extra ones forbidden: made once (1.2 ms
    each, and a profile is loaded wherever a plan names one)."""
    from pydantic import ConfigDict, create_model

    return create_model(
        f"{prefix}_{role}_options",
        __config__=ConfigDict(extra="forbid"),
        **dict.fromkeys(options, (Any, None)),
    )


_REGISTRY: dict[str, dict[str, BackendInfo]] = {role: {} for role in ROLES}
_DEFAULTS: dict[str, str] = {}


def register(
    role: str,
    prefix: str,
    target: str,
    description: str,
    example: str,
    default: bool = False,
    **what: Any,
) -> None:
    """Register ``target`` (``"module:factory"``) as the backend for ``prefix:`` names;
    ``what`` says what it is (:class:`BackendInfo`'s ``remote``, ``env``, ``key_env``,
    ``errors``, ``model_calls``)."""
    _check_role(role)
    _REGISTRY[role][prefix] = BackendInfo(role, prefix, target, description, example, **what)
    if default:
        _DEFAULTS[role] = example


def unregister(role: str, prefix: str) -> None:
    _check_role(role)
    _REGISTRY[role].pop(prefix)


def info(role: str, name: str) -> BackendInfo:
    """What the backend named ``name`` for ``role`` is."""
    return _REGISTRY[role][split_name(role, name)[0]]


def is_remote(role: str, name: str) -> bool:
    """Whether ``name`` is called through an API (False for a name no backend answers)."""
    try:
        return info(role, name).remote
    except ValueError:
        return False


def environment() -> tuple[str, ...]:
    """Every environment variable a registered backend reads, in registration order."""
    return tuple(dict.fromkeys(v for i in available() for v in (*i.env, *i.key_env)))


def error_names() -> set[str]:
    """The class names of the registered backends' errors a user can put right."""
    return {t.rpartition(":")[2] for i in available() for t in i.errors}


def model_calls() -> dict[str, tuple[str, ...]]:
    """Each class (``"module:Class"``) of a registered backend and its methods that run a
    model here."""
    out: dict[str, tuple[str, ...]] = {}
    for i in available():
        for cls, methods in i.model_calls:
            out[cls] = tuple(dict.fromkeys((*out.get(cls, ()), *methods)))
    return out


def missing_keys(names: dict[str, str], env: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    """(role, name, the variables of which one must be set) for each backend of ``names``
    (role -> name) whose key is not in ``env``."""
    out = []
    for role, name in names.items():
        try:
            needs = info(role, name).key_env
        except ValueError:
            continue
        if needs and not any(env.get(k) for k in needs):
            out.append((role, name, needs))
    return out


def _check_role(role: str) -> None:
    if role not in _REGISTRY:
        raise ValueError(f"unknown backend role {role!r}; roles are {', '.join(ROLES)}")


def available(role: str | None = None) -> list[BackendInfo]:
    """Registered backends, for one role or all."""
    roles = [role] if role else list(ROLES)
    for r in roles:
        _check_role(r)
    return [info for r in roles for info in _REGISTRY[r].values()]


def split_name(role: str, name: str) -> tuple[str, str]:
    """``"st:all-MiniLM-L6-v2"`` -> ``("st", "all-MiniLM-L6-v2")``.

    A bare local path is given to the role's default prefix.
    """
    _check_role(role)
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"backend name for role {role!r} must be a non-empty string, got {name!r}")
    prefix, sep, rest = name.partition(":")
    if sep and prefix in _REGISTRY[role]:
        return prefix, rest
    if Path(name).exists() and role in _DEFAULTS:
        return split_name(role, _DEFAULTS[role])[0], name
    known = ", ".join(f"{i.prefix}: ({i.example})" for i in _REGISTRY[role].values()) or "none"
    raise ValueError(f"unknown {role} backend {name!r}; registered: {known}")


_INSTANCES: dict[tuple, Any] = {}


def _resolve(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def create(role: str, name: str, shared: bool = True, **options: Any) -> Any:
    """The backend named ``name`` for ``role`` (weights load on first use).

    With ``shared`` (the default) the same name and options give the same instance for
    the life of the process, so a model is loaded once and reused across rounds and runs.
    """
    prefix, rest = split_name(role, name)
    key = (role, prefix, rest, tuple(sorted((k, repr(v)) for k, v in options.items())))
    if shared and key in _INSTANCES:
        return _INSTANCES[key]
    backend = _resolve(_REGISTRY[role][prefix].target)(rest, **options)
    if shared:
        _INSTANCES[key] = backend
    return backend


def instances(role: str, name: str) -> list[Any]:
    """Shared instances already created for ``role`` under ``name`` (any options)."""
    prefix, rest = split_name(role, name)
    return [b for key, b in _INSTANCES.items() if key[:3] == (role, prefix, rest)]


# the options each bundled backend takes (BackendInfo.options), as its constructor and
# what that passes them to take them (constructor_options; the test of the contract
# compares them), the objects a caller may hand in (client, calls, sleep) aside
_GEMINI = ("api_key", "base_url", "concurrency", "initial_delay_s", "jitter", "max_delay_s",
           "max_retries", "store", "timeout_s")  # fmt: skip
_GEMINI_TEXT = (*_GEMINI, "max_repairs", "prompts", "temperature", "thinking_level")
_GEMINI_JUDGE = (*_GEMINI, "agree", "judge_mode", "samples", "thinking_budget", "thinking_level")
_OPENAI = ("api_key_env", "base_url", "concurrency", "max_retries", "timeout_s")
_OPENAI_TEXT = (*_OPENAI, "max_repairs", "prompts", "temperature")
_OPENAI_JUDGE = (*_OPENAI, "agree", "judge_mode", "max_tokens", "samples")
_DIFFUSERS = ("cpu_offload", "device", "dtype", "guidance", "revision", "steps", "vae_tiling",
              "variant")  # fmt: skip
_DIFFUSERS_GENERATOR = (*_DIFFUSERS, "height", "lora", "lora_scale", "loras", "negative_prompt",
                        "scheduler", "true_cfg", "width")  # fmt: skip
_HF = ("batch_size", "device", "dtype", "max_image_side", "max_new_tokens", "max_repairs",
       "prompts", "revision", "temperature", "thinking")  # fmt: skip

register(
    "text_embedder",
    "st",
    "refine.backends.st_text:SentenceTransformerTextEmbedder",
    "sentence-transformers text embedder; all-MiniLM-L6-v2 ships with the package",
    "st:all-MiniLM-L6-v2",
    default=True,
    options=("batch_size", "device"),
)

for _role, _cls, _example, _what, _options in (
    ("generator", "GeminiGenerator", "gemini:gemini-3.1-flash-lite-image", "text-to-image",
     _GEMINI),
    ("editor", "GeminiEditor", "gemini:gemini-nano-banana-2.1", "instruction-based editing",
     _GEMINI),
    ("observer", "GeminiObserver", "gemini:gemini-3.8-flash", "descriptor listing",
     _GEMINI_TEXT),
    ("judge", "GeminiJudge", "gemini:gemini-3.8-flash", "yes-probability and 1-5 ratings",
     _GEMINI_JUDGE),
    ("llm", "GeminiLanguageModel", "gemini:gemini-3.8-flash", "JSON answers", _GEMINI_TEXT),
):  # fmt: skip
    register(
        _role,
        "gemini",
        f"refine.backends.gemini:{_cls}",
        f"Gemini API {_what} (needs GEMINI_API_KEY)",
        _example,
        remote=True,
        env=("GOOGLE_GEMINI_BASE_URL",),
        key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        errors=("refine.backends.gemini:GeminiError",),
        options=_options,
    )

for _role, _cls, _what, _options in (
    ("observer", "OpenAIObserver", "descriptor listing", _OPENAI_TEXT),
    ("judge", "OpenAIJudge", "yes-probability and 1-5 ratings", _OPENAI_JUDGE),
    ("llm", "OpenAILanguageModel", "JSON answers", _OPENAI_TEXT),
):
    register(
        _role,
        "openai",
        f"refine.backends.openai_compat:{_cls}",
        f"any OpenAI-compatible chat server (vLLM, SGLang, Ollama, OpenAI), {_what}; "
        "OPENAI_BASE_URL or the role's base_url",
        "openai:Qwen/Qwen3-VL-8B-Instruct",
        remote=True,
        env=("OPENAI_API_KEY", "OPENAI_BASE_URL"),  # a local server may want no key
        errors=("refine.backends.openai_compat:OpenAIServerError",),
        options=_options,
    )

register(
    "generator",
    "diffusers",
    "refine.backends.diffusers_backends:DiffusersGenerator",
    "any diffusers text-to-image pipeline (hub id or local path); LoRA, offload, tiling",
    "diffusers:black-forest-labs/FLUX.2-klein-4B",
    model_calls=(("refine.backends.diffusers_backends:DiffusersGenerator", ("generate",)),),
    options=_DIFFUSERS_GENERATOR,
)
register(
    "editor",
    "diffusers",
    "refine.backends.diffusers_backends:DiffusersEditor",
    "instruction editing: FLUX.2-klein, FLUX.1 Kontext, Qwen-Image-Edit, InstructPix2Pix",
    "diffusers:black-forest-labs/FLUX.1-Kontext-dev",
    model_calls=(("refine.backends.diffusers_backends:DiffusersEditor", ("edit",)),),
    options=(*_DIFFUSERS, "image_guidance"),
)
register(
    "editor",
    "img2img",
    "refine.backends.diffusers_backends:DiffusersImg2Img",
    "strength-based img2img sharing the weights of the generator of the same name",
    "img2img:stabilityai/sd-turbo",
    model_calls=(("refine.backends.diffusers_backends:DiffusersImg2Img", ("edit",)),),
    options=(*_DIFFUSERS_GENERATOR, "strength"),
)
register(
    "editor",
    "inpaint",
    "refine.backends.diffusers_backends:DiffusersInpainter",
    "inpainting inside a localized edit's boxes (the pixels outside pasted back), sharing "
    "the weights of the generator of the same name",
    "inpaint:stabilityai/stable-diffusion-2-inpainting",
    # its own edit (a localized inpaint), not the img2img edit it inherits
    model_calls=(("refine.backends.diffusers_backends:DiffusersInpainter", ("edit",)),),
    options=(*_DIFFUSERS_GENERATOR, "strength"),
)

for _role, _cls, _example, _what in (
    ("observer", "HFObserver", "hf:Qwen/Qwen3-VL-8B-Instruct", "descriptor listing"),
    ("judge", "HFJudge", "hf:Qwen/Qwen3-VL-8B-Instruct", "yes-probability and 1-5 ratings"),
    ("llm", "HFLanguageModel", "hf:Qwen/Qwen3.5-0.8B", "JSON answers"),
):
    register(
        _role,
        "hf",
        f"refine.backends.hf_models:{_cls}",
        f"transformers chat model, {_what} (Qwen3-VL, Qwen3.5, Qwen2.5-VL, InternVL3-hf, "
        "LLaVA; text LMs for llm)",
        _example,
        model_calls=(
            ("refine.backends.hf_models:HFModel", ("_generate",)),
            (
                "refine.backends.hf_judging:HFJudging",
                ("answer_distribution", "next_token_probability", "vqa_score", "rate_prefixed"),
            ),
        ),
        options=_HF,
    )

register(
    "judge",
    "clip-t5",
    "refine.backends.clip_t5:ClipT5Judge",
    "CLIP-FlanT5, VQAScore's own model (t2v-metrics' checkpoints, loaded with transformers): "
    "VQAScore and yes-probabilities, no ratings",
    "clip-t5:zhiqiulin/clip-flant5-xxl",
    model_calls=(("refine.backends.clip_t5:ClipT5Judge", ("_yes",)),),
    options=("batch_size", "device", "dtype", "revision", "tokenizer", "vision_tower"),
)
register(
    "image_embedder",
    "clip",
    "refine.backends.clip_embedder:OpenClipEmbedder",
    "open_clip image/text embedder and CLIPScore",
    "clip:ViT-L-14/openai",
    default=True,
    model_calls=(
        (
            "refine.backends.clip_embedder:OpenClipEmbedder",
            ("encode_images", "encode_texts", "logit_scale"),
        ),
    ),
    options=("batch_size", "device"),
)
register(
    "image_embedder",
    "hfclip",
    "refine.backends.hf_clip_embedder:HFClipEmbedder",
    "CLIP image/text embedder through transformers (CLIPModel checkpoints)",
    "hfclip:openai/clip-vit-base-patch32",
    # a SigLIP embedder's subclass: its calls are SiglipEmbedder's methods
    model_calls=(
        (
            "refine.backends.siglip_embedder:SiglipEmbedder",
            ("encode_images", "encode_texts", "match_probability"),
        ),
    ),
    options=("batch_size", "device", "dtype", "processor", "revision"),
)
register(
    "image_embedder",
    "siglip",
    "refine.backends.siglip_embedder:SiglipEmbedder",
    "SigLIP / SigLIP 2 image/text embedder through transformers",
    "siglip:google/siglip-so400m-patch14-384",
    model_calls=(
        (
            "refine.backends.siglip_embedder:SiglipEmbedder",
            ("encode_images", "encode_texts", "match_probability"),
        ),
    ),
    options=("batch_size", "device", "dtype", "revision"),
)


def constructor_options(cls: type) -> set[str]:
    """The options a backend class takes: the keyword parameters of every ``__init__`` of
    its classes (the model's name aside), and of the classes its ``options_go_to`` names
    (``"module:Class"``: where its ``**kw`` go, a shared client's)."""
    import inspect

    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names: set[str] = set()
    for k in cls.__mro__:
        init = k.__dict__.get("__init__")
        if init is not None and k is not object:
            names |= {
                p.name
                for p in inspect.signature(init).parameters.values()
                if p.kind in kinds and p.name not in ("self", "model", "name")
            }
        for target in k.__dict__.get("options_go_to", ()):
            names |= constructor_options(_resolve(target))
    return names


def parse_overrides(values: Iterable[str]) -> dict[str, str]:
    """``ROLE=NAME`` items (``--backend``) -> ``{role: name}``; a ValueError names the item
    whose role is unknown or whose name no backend of that role takes."""
    out = {}
    for v in values:
        role, sep, name = v.partition("=")
        if not sep or role not in ROLES or not name:
            raise ValueError(f"{v!r}: use ROLE=NAME with ROLE one of {', '.join(ROLES)}")
        try:
            split_name(role, name)
        except ValueError as err:
            raise ValueError(f"{v!r}: {err}") from err
        out[role] = name
    return out
