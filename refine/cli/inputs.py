"""Loading and validating command-line input files.

Every problem with a user's file raises :class:`UserInputError` with one line that names
the file, the field and what is wrong; the command line prints it and exits with code 2.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from metrics.descriptors import DIMENSIONS
from refine.harness.plan import refusal
from refine.records import RunSpec
from refine.settings import SETTINGS, Setting, shown_on, table


class UserInputError(Exception):
    """A bad input file or argument; the message is shown to the user as is."""


def _read_text(path: Path) -> str:
    if not path.exists():
        raise UserInputError(f"{path}: file not found")
    if path.is_dir():
        raise UserInputError(f"{path}: is a directory, expected a file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UserInputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err


def load_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UserInputError(
            f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}"
        ) from err


def check_descriptor_map(data: Any, path: Path, where: str) -> dict[str, list[str]]:
    """Validate ``{dimension: [phrase, ...]}``; ``where`` names the object in messages."""
    if not isinstance(data, dict):
        raise UserInputError(
            f"{path}: {where} must be an object {{dimension: [phrase, ...]}}, "
            f"got {type(data).__name__}"
        )
    out: dict[str, list[str]] = {}
    for dim, phrases in data.items():
        if dim not in DIMENSIONS:
            raise UserInputError(
                f"{path}: {where}: unknown dimension {dim!r} "
                f"(expected one of {', '.join(DIMENSIONS)})"
            )
        if not isinstance(phrases, list):
            raise UserInputError(
                f"{path}: {where}.{dim} must be a list of phrases, got {type(phrases).__name__}"
            )
        for k, phrase in enumerate(phrases):
            if not isinstance(phrase, str):
                raise UserInputError(
                    f"{path}: {where}.{dim}[{k}] must be a string, got {json.dumps(phrase)}"
                )
        out[dim] = phrases
    return out


def load_refs(path: Path) -> dict[str, list[str]]:
    refs = check_descriptor_map(load_json(path), path, "references")
    if not any(p.strip() for phrases in refs.values() for p in phrases):
        raise UserInputError(f"{path}: the reference set is empty (no phrase in any dimension)")
    return refs


def load_preds(path: Path) -> list[dict[str, list[str]]]:
    data = load_json(path)
    if isinstance(data, dict):
        raise UserInputError(
            f"{path}: predictions must be a list with one {{dimension: [phrase, ...]}} "
            "object per image (wrap a single image's object in [ ])"
        )
    if not isinstance(data, list):
        raise UserInputError(f"{path}: predictions must be a list, got {type(data).__name__}")
    if not data:
        raise UserInputError(f"{path}: predictions list is empty (need one object per image)")
    return [check_descriptor_map(item, path, f"image[{i}]") for i, item in enumerate(data)]


def _finite_number(value: Any, path: Path, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserInputError(f"{path}: {where} must be a number, got {json.dumps(value)}")
    if not math.isfinite(value):
        raise UserInputError(f"{path}: {where} must be finite, got {value}")
    return float(value)


def load_exag(path: Path, n_images: int) -> tuple[list[str], list[list[float]], list[float]]:
    """Validate ``{"candidates": [...], "scores": [[...] per image], "baseline": [...]}``."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: must be an object with candidates, scores and baseline")
    for key in ("candidates", "scores", "baseline"):
        if key not in data:
            raise UserInputError(f"{path}: missing field {key!r}")
    candidates, scores, baseline = data["candidates"], data["scores"], data["baseline"]
    if not isinstance(candidates, list) or not candidates:
        raise UserInputError(f"{path}: candidates must be a non-empty list of strings")
    for k, c in enumerate(candidates):
        if not isinstance(c, str):
            raise UserInputError(f"{path}: candidates[{k}] must be a string, got {json.dumps(c)}")
    n_cand = len(candidates)
    if not isinstance(baseline, list) or len(baseline) != n_cand:
        got = len(baseline) if isinstance(baseline, list) else type(baseline).__name__
        raise UserInputError(
            f"{path}: baseline must have {n_cand} numbers (one per candidate), got {got}"
        )
    base = [_finite_number(v, path, f"baseline[{k}]") for k, v in enumerate(baseline)]
    if not isinstance(scores, list):
        raise UserInputError(f"{path}: scores must be a list with one row per image")
    if len(scores) != n_images:
        raise UserInputError(
            f"{path}: scores has {len(scores)} rows but the predictions have {n_images} images"
        )
    rows: list[list[float]] = []
    for i, row in enumerate(scores):
        if not isinstance(row, list) or len(row) != n_cand:
            got = len(row) if isinstance(row, list) else type(row).__name__
            raise UserInputError(
                f"{path}: scores[{i}] must have {n_cand} numbers (one per candidate), got {got}"
            )
        rows.append([_finite_number(v, path, f"scores[{i}][{j}]") for j, v in enumerate(row)])
    return candidates, rows, base


def load_matrix(path: Path, what: str) -> np.ndarray:
    """A 2-D finite float array from a ``.npy`` file."""
    arr = _load_npy(path)
    if arr.ndim != 2:
        raise UserInputError(f"{path}: {what} must be a 2-D array, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise UserInputError(f"{path}: {what} has no rows")
    _check_finite(arr, path, what)
    return arr


def load_vector(path: Path, what: str) -> np.ndarray:
    arr = _load_npy(path)
    if arr.ndim != 1:
        raise UserInputError(f"{path}: {what} must be a 1-D array, got shape {arr.shape}")
    _check_finite(arr, path, what)
    return arr


def _load_npy(path: Path) -> np.ndarray:
    if not path.exists():
        raise UserInputError(f"{path}: file not found")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise UserInputError(f"{path}: not a readable .npy array ({err})") from err
    if not isinstance(arr, np.ndarray):
        raise UserInputError(f"{path}: expected a single .npy array, not an archive")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise UserInputError(f"{path}: array must hold real numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64)


def _check_finite(arr: np.ndarray, path: Path, what: str) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise UserInputError(f"{path}: {what} contains NaN or inf (first at index {list(where)})")


def load_labels(path: Path, n_rows: int) -> tuple[list[str], list[str]]:
    """Culture and language per embedding row from a CSV with columns culture,language."""
    text = _read_text(path)
    reader = csv.DictReader(text.splitlines())
    fields = reader.fieldnames or []
    for column in ("culture", "language"):
        if column not in fields:
            raise UserInputError(
                f"{path}: missing column {column!r} (header must name culture,language; "
                f"got {','.join(fields) or 'no header'})"
            )
    cultures: list[str] = []
    languages: list[str] = []
    for line, row in enumerate(reader, start=2):
        culture = (row.get("culture") or "").strip()
        language = (row.get("language") or "").strip()
        if not culture or not language:
            empty = "culture" if not culture else "language"
            raise UserInputError(f"{path}: line {line}: empty {empty}")
        cultures.append(culture)
        languages.append(language)
    if len(cultures) != n_rows:
        raise UserInputError(
            f"{path}: {len(cultures)} label rows but the embeddings have {n_rows} rows"
        )
    return cultures, languages


def parse_order(value: str) -> float:
    """The Vendi order q: a non-negative number or ``inf``."""
    try:
        q = float(value)
    except ValueError as err:
        raise UserInputError(f"--q: expected a number or 'inf', got {value!r}") from err
    if math.isnan(q) or q < 0:
        raise UserInputError(f"--q: the order must be >= 0 or 'inf', got {value!r}")
    return q


def load_images(paths: list[Path]) -> list[Any]:
    """Each file as an RGB PIL image; a missing or unreadable one names the file."""
    from PIL import Image, UnidentifiedImageError

    loaded = []
    for path in paths:
        if not path.is_file():
            raise UserInputError(f"{path}: image not found")
        try:
            with Image.open(path) as im:
                loaded.append(im.convert("RGB"))
        except Image.DecompressionBombError as err:
            raise UserInputError(f"{path}: too large to open safely ({err})") from err
        except (UnidentifiedImageError, OSError) as err:
            raise UserInputError(f"{path}: not an image PIL can read ({err})") from err
    return loaded


def spec_option(name: str, spec: type[RunSpec] = RunSpec) -> Any:
    """The option of a run setting, all from the settings table (its flag, default, bounds
    and help; see :data:`refine.settings.SETTINGS`). A bound the value must exceed (a
    budget above 0) is the spec's to check: click's ranges include their ends."""
    import typer

    setting = (SETTINGS if spec is RunSpec else table(spec))[name]
    bounds = {}
    if setting.lower is not None:
        bounds["min"] = setting.lower
    if setting.upper is not None:
        bounds["max"] = setting.upper
    return typer.Option(setting.default, setting.flag, help=setting.help, **bounds)


def _option_type(setting: Setting) -> Any:
    return {"path": Path, "list": str, "repeat": list[str]}.get(setting.given, setting.kind)


def with_settings(
    command: Callable[..., Any], surface: str, spec: type[RunSpec] = RunSpec, after: str = ""
) -> Callable[..., Any]:
    """``command`` (whose ``**settings`` take them) with an option for every setting of
    ``spec`` that ``surface`` shows, placed after its parameter ``after``: a field added to
    RunSpec with its ``surfaces`` is an option of the command with no other change."""
    import inspect

    own = [
        p
        for p in inspect.signature(command).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    at = next((i + 1 for i, p in enumerate(own) if p.name == after), len(own))
    taken = {p.name for p in own}
    more = []
    for setting in shown_on(surface, spec):
        if setting.name in taken:
            raise ValueError(f"{command.__name__} already has a parameter {setting.name!r}")
        more.append(
            inspect.Parameter(
                setting.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=spec_option(setting.name, spec),
                annotation=_option_type(setting),
            )
        )
    kinds = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    command.__signature__ = inspect.Signature([*kinds[:at], *more, *kinds[at:]])  # type: ignore[attr-defined]
    return command


def tau_option() -> Any:
    """``--tau`` as ``run`` and ``score`` take it."""
    return spec_option("tau")


def baselines_option(default: str | None = "none") -> Any:
    """``--baselines`` as ``score`` and ``bench`` take it (``bench``'s default: clipscore,
    or a recipe's own; None here lets the command tell the default from a choice)."""
    import typer

    return typer.Option(
        default,
        "--baselines",
        help="Baselines to score beside FAITH, comma-separated (clipscore, pickscore, hpsv2, "
        "cure, caire_probe, imagereward, vqascore, judge_align, judge_hal, vie_sc, "
        "vie_overall, tifa, soft_tifa; all; none). clipscore costs no call; pickscore, hpsv2, "
        "cure, caire_probe and imagereward load checkpoints of their own (no call of the "
        "judge); the judge "
        "baselines cost one judge call an image each (none for vie_overall beside vie_sc), "
        "k where the judge samples; tifa one language-model call a prompt and one judge "
        "call a question and image.",
    )


def baseline_model_option() -> Any:
    """``--baseline-model`` as ``score``, ``bench`` and ``models download`` take it."""
    import typer

    return typer.Option(
        [],
        "--baseline-model",
        help="NAME=WHERE: a local folder or file, another hub checkpoint or an embedder "
        "(clip:ARCH/PATH, hfclip:ID, siglip:ID) in place of a baseline's own (pickscore, hpsv2, "
        "cure, caire_probe, imagereward; hpsv2=v2.1 for HPS v2.1). Repeatable.",
    )


def parsed_baseline_models(values: list[str]) -> dict[str, Any]:
    """``--baseline-model`` items as checkpoints; a wrong one is a usage error."""
    from refine.evaluate.baseline_models import parse_baseline_models

    try:
        return parse_baseline_models(values)
    except ValueError as err:
        raise UserInputError(f"--baseline-model: {err}") from err


def reference_images_option() -> Any:
    """``--reference-images`` as ``run`` and ``score`` take it."""
    import typer

    return typer.Option(
        None,
        "--reference-images",
        help="A folder of real photos: EXAG as the paper defines it (exag:ita).",
    )


def with_engine(
    command: Callable[..., Any],
    workers: int = 1,
    workers_help: str = "Jobs at a time.",
    batch: bool = False,
) -> Callable[..., Any]:
    """``command`` (which takes ``engine``, a :class:`refine.harness.engine.EngineOptions`)
    with the options that make it: ``--engine local|ray``, ``--workers`` (``workers`` by
    default), Ray's ``--address`` and ``--gpus-per-worker``, and ``--batch`` where
    ``batch`` (Gemini batch jobs); a bad combination is a usage error naming the option,
    and Ray itself is looked for when asked for."""
    import inspect

    import typer

    from refine.harness.engine import EngineOptions

    def wrapped(
        *args: Any,
        engine: str = "local",
        workers: int = workers,
        address: str | None = None,
        gpus_per_worker: float = 0.0,
        batch: bool = False,
        **kwargs: Any,
    ) -> Any:
        options = EngineOptions(engine, workers, address, gpus_per_worker, batch)
        try:
            options.check()
        except ValueError as err:
            raise UserInputError(str(err)) from err
        if options.kind == "ray":
            from refine.harness.ray import RayEngineError, import_ray

            try:
                import_ray()
            except RayEngineError as err:
                raise UserInputError(f"--engine: {err}") from err
        return command(*args, engine=options, **kwargs)

    # the command's own options, their annotations resolved (they are text in its module)
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "engine"]
    added = {
        "engine": typer.Option(
            "local",
            "--engine",
            help="local (this process, one set of models) or ray (Ray actors).",
        ),
        "workers": typer.Option(workers, "--workers", min=1, help=workers_help),
        "address": typer.Option(
            None, "--address", help="ray: the cluster (auto, host:port or ray://host:port)."
        ),
        "gpus_per_worker": typer.Option(
            0.0, "--gpus-per-worker", min=0.0, help="ray: GPUs each worker holds (0: API models)."
        ),
    }
    if batch:
        added["batch"] = typer.Option(
            False,
            "--batch",
            help="Gemini requests as batch jobs: half the price, answered within a day "
            "(the same command again goes on after a kill).",
        )
    kinds = {
        "engine": str, "workers": int, "address": str, "gpus_per_worker": float, "batch": bool
    }  # fmt: skip
    more = [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=o, annotation=kinds[n])
        for n, o in added.items()
    ]
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    wrapped.__signature__ = inspect.Signature([*params, *more])  # type: ignore[attr-defined]
    wrapped.__name__, wrapped.__doc__ = command.__name__, command.__doc__
    return wrapped


def made_plan(plan: type, where: str = "", **fields: Any) -> Any:
    """A task's plan of these fields, or the one line saying what cannot be, naming its
    flag (after ``where``: ``--recipe NAME: ``)."""
    try:
        return plan(**fields)
    except ValidationError as err:
        raise UserInputError(where + refusal(err, plan)) from err
