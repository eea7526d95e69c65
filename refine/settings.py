"""Run settings: the one place that turns raw settings into a validated :class:`RunSpec`.

The command line (options), the app (its form) and batch files (one line each) hand their
values here as a plain mapping of RunSpec field names; each shows a :class:`SettingsError`
its own way (``--option: message``, ``line N: field: message``, a message box). The loop
trusts the spec it gets. Each setting's type, bounds, default, help and the fronts that show
it live in :class:`refine.records.RunSpec`'s fields and nowhere else: :data:`SETTINGS` is that
table, from which ``refine run``'s options (``refine.cli.inputs.setting_option``) and the app's
form are made, and against which batch lines are checked.

Besides the RunSpec fields, a mapping may hold ``image`` (an image to refine instead of
generating) and ``refs`` (a references file); relative paths (``image``, ``refs``,
``caire_kb``, ``sos_bank``) are read against ``base_dir`` (a batch file's folder).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from refine.backends.registry import parse_overrides
from refine.evaluate.caire.scorer import parse_labels
from refine.evaluate.references import load_references_file
from refine.evaluate.sos import LANGUAGES
from refine.io.files import IMAGE_SUFFIXES, image_files
from refine.records import ReferencePack, RunSpec

IMAGE_TYPES = IMAGE_SUFFIXES  # what an image or a folder of photos may hold


class SettingsError(ValueError):
    """A setting that cannot run; ``field`` names it (a RunSpec field, ``image`` or
    ``refs``), the message says what is wrong; ``related`` names another field the fix
    involves (each front end names it its own way)."""

    def __init__(self, field: str, message: str, related: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.related = related


def default(name: str) -> Any:
    """The default of a RunSpec field (what every front end shows)."""
    return RunSpec.model_fields[name].default


def _bound(field: Any, kind: str) -> Any:
    for rule in field.metadata:
        bound = getattr(rule, kind, None)
        if bound is not None:
            return bound
    return None


def upper(name: str) -> Any:
    """The upper bound of a RunSpec field (``le``), or None: what no caller can exceed."""
    return _bound(RunSpec.model_fields[name], "le")


def lower(name: str) -> Any:
    """The lower bound of a RunSpec field (``ge``), or None."""
    return _bound(RunSpec.model_fields[name], "ge")


@dataclass(frozen=True)
class Setting:
    """One run setting as every front shows it: its flag on ``refine run``, its type,
    default and bounds (``above``: a bound the value must exceed, not reach), its help,
    and the fronts that show it (``run``, ``batch``, ``app``)."""

    name: str
    flag: str
    kind: type
    default: Any
    lower: Any
    upper: Any
    above: Any
    help: str
    surfaces: tuple[str, ...]
    choices: tuple[str, ...] = ()
    # how a front takes it: ``value`` (one value of ``kind``), ``list`` (names separated
    # by commas), ``path`` (a file or folder), ``repeat`` (an option given once per item),
    # ``arguments`` (the command's positional arguments, one or more), ``argument`` (its
    # one positional argument, a path), ``text`` (its one positional argument, a text)
    given: str = "value"
    label: str = ""  # its name in the app's form and messages ("target FAITH")
    box: str = ""  # the form box's own words where they say more than the label
    info: str = ""  # a line under the box
    placeholder: str = ""  # an example in an empty text box
    required: bool = False  # a field with no default: the command line must give it


GIVEN = ("value", "list", "path", "repeat", "arguments", "argument", "text")


def flag_of(name: str, spec: type[RunSpec] = RunSpec) -> str:
    """How ``refine run`` names a setting in its messages: the field's ``flag``, else
    ``--the-name`` (``image``, ``refs``, ``out``: the command's own options)."""
    field = spec.model_fields.get(name)
    extra = field.json_schema_extra if field is not None else None
    flag = extra.get("flag") if isinstance(extra, dict) else None
    return flag or "--" + name.replace("_", "-")


def _setting(name: str, field: Any, spec: type[RunSpec] = RunSpec) -> Setting:
    extra = field.json_schema_extra or {}
    annotation = field.annotation
    given = extra.get("given", "value")
    if given not in GIVEN:
        raise ValueError(
            f"{spec.__name__}.{name}: given {given!r} is not one of {', '.join(GIVEN)}"
        )
    choices: tuple[str, ...] = ()
    kind: type = str
    for option in (annotation, *get_args(annotation)):
        if given != "value":
            break  # names, a path or repeated items: text
        if option in (int, float, bool, str):
            kind = option
            break
        if get_origin(option) is Literal:
            choices, kind = tuple(get_args(option)), str
            break
    # an option not given is None (a list's or a path's, a required field's: the model
    # then names it), or no items
    default = None if field.is_required() or field.default_factory else field.default
    if given == "repeat":
        default = []
    if given == "list" and isinstance(default, list | tuple):  # as it is typed: "1,0,0"
        default = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in default) or None
    return Setting(
        name=name,
        flag=flag_of(name, spec),
        kind=kind,
        default=default,
        lower=_bound(field, "ge"),
        upper=_bound(field, "le"),
        above=_bound(field, "gt"),
        help=field.description or "",
        surfaces=tuple(extra["surfaces"]),
        choices=choices,
        given=given,
        label=extra.get("label", name.replace("_", " ")),
        box=extra.get("box", ""),
        info=extra.get("info", ""),
        placeholder=extra.get("placeholder", ""),
        required=field.is_required(),
    )


def table(spec: type[RunSpec] = RunSpec) -> dict[str, Setting]:
    """The table of run settings of ``spec`` (RunSpec, or a subclass with more fields):
    its fields that name the fronts showing them, in field order."""
    return {
        name: _setting(name, field, spec)
        for name, field in spec.model_fields.items()
        if isinstance(field.json_schema_extra, dict) and "surfaces" in field.json_schema_extra
    }


# the table of run settings, from RunSpec's fields that name the fronts showing them
SETTINGS: dict[str, Setting] = table()


def shown_on(surface: str, spec: type[RunSpec] = RunSpec) -> list[Setting]:
    """The settings a front shows (``run``, ``batch`` or ``app``), in RunSpec's order."""
    settings = SETTINGS if spec is RunSpec else table(spec)
    return [s for s in settings.values() if surface in s.surfaces]


def split_list(value: str | Iterable[str] | None) -> list[str]:
    """``"fr, ja"`` or ``["fr", "ja"]`` -> ``["fr", "ja"]`` (blanks dropped)."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(x).strip() for x in items if str(x).strip()]


def parse_instructions(values: Iterable[str]) -> dict[int, str]:
    """``ROUND=TEXT`` items (round 1 or later) -> ``{round: text}``."""
    out = {}
    for v in values:
        k, sep, text = v.partition("=")
        if not sep or not k.strip().isdigit() or int(k) < 1 or not text.strip():
            raise SettingsError("instructions", f"{v!r}: use ROUND=TEXT with ROUND >= 1")
        out[int(k)] = text.strip()
    return out


def parse_backends(values: Iterable[str]) -> dict[str, str]:
    """``ROLE=NAME`` items -> ``{role: name}``; roles are checked, names by the registry
    (:func:`refine.backends.registry.parse_overrides`), a wrong one a SettingsError."""
    try:
        return parse_overrides(values)
    except ValueError as err:
        raise SettingsError("backends", str(err)) from err


def _path(value: Any, base_dir: Path | None) -> Path:
    path = Path(str(value)).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    return path.resolve()


def check_image(path: str | Path) -> None:
    """An input image that can be refined: a file of a known type that opens as an image
    and is not a decompression bomb; else a SettingsError naming the file."""
    _check_image(Path(path))


def _check_image(path: Path) -> None:
    # messages name the file, never its folder (an upload's is the server's own)
    if not path.is_file():
        raise SettingsError("image", f"{path.name}: no such image file")
    if path.suffix.lower() not in IMAGE_TYPES:
        raise SettingsError("image", f"{path.name}: use a {', '.join(IMAGE_TYPES)} image")
    from PIL import Image, UnidentifiedImageError

    from refine.io.images import ImageError, declared_size

    try:  # the declared size first, from the header: a bomb is never decoded
        declared_size(path)
    except ImageError as err:
        if err.limit is not None:
            size = f"{err.size[0]} x {err.size[1]}; " if err.size else ""
            raise SettingsError(
                "image",
                f"{path.name}: too many pixels to open safely ({size}limit {err.limit:,} pixels)",
            ) from None
    try:
        with Image.open(path) as im:
            im.verify()
    except (UnidentifiedImageError, OSError) as err:
        why = str(err).replace(str(path), path.name)
        raise SettingsError("image", f"{path.name}: not an image that can be read ({why})") from err


def output_folder(path: str | Path) -> Path:
    """A folder runs can be written to: it is one, or it can be created (it is not created
    here, so a run that never starts leaves nothing behind)."""
    import os

    folder = Path(path).expanduser().absolute()
    if folder.exists() and not folder.is_dir():
        raise SettingsError("out", f"{folder} is a file, not a folder")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise SettingsError("out", f"{folder}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise SettingsError("out", f"{folder}: {existing} cannot be written to")
    return folder


def _folder(value: Any, base_dir: Path | None, root: Path | None, what: str) -> Path:
    """A folder a setting names: read against ``base_dir``, and with ``root`` confined to
    it (no ``..`` out of it, no link on the way: what a client of the app may name)."""
    if root is not None:
        from refine.io.files import confined

        return confined(root, value, what)
    return _path(value, base_dir)


def _caire(row: dict[str, Any], base_dir: Path | None, root: Path | None = None) -> None:
    labels, kb = row.get("caire_labels"), row.get("caire_kb")
    if not split_list(labels):
        row.pop("caire_labels", None)
        if kb:
            raise SettingsError(
                "caire_kb", "a CAIRE knowledge base needs culture labels to rate", "caire_labels"
            )
        row.pop("caire_kb", None)
        return

    try:
        row["caire_labels"] = parse_labels(split_list(labels))
    except ValueError as err:
        raise SettingsError("caire_labels", str(err)) from err
    if kb:
        # its manifest only: the run's CAIRE step opens it before anything is spent
        from refine.evaluate.caire.kb import KBError, check_folder

        try:
            path = _folder(kb, base_dir, root, "CAIRE knowledge base")
            check_folder(path)
        except (KBError, ValueError) as err:
            raise SettingsError("caire_kb", str(err)) from err
        row["caire_kb"] = str(path)
    else:
        row.pop("caire_kb", None)


def _languages(row: dict[str, Any], base_dir: Path | None, root: Path | None = None) -> None:

    langs = split_list(row.get("prompt_languages"))
    row["prompt_languages"] = langs
    problems = [f"unknown language {x!r}" for x in langs if x not in LANGUAGES]
    if len(set(langs)) != len(langs):
        problems.append("a prompt language is given twice")
    if "en" in langs:
        problems.append("'en' is the run's own prompt language; name only the others")
    if problems:
        known = ", ".join(sorted(LANGUAGES))
        raise SettingsError("prompt_languages", "; ".join(problems) + f" (known: {known})")
    if row.get("language_scores") and not langs:
        raise SettingsError(
            "language_scores", "language scores need prompt languages to score", "prompt_languages"
        )
    if langs and row.get("input_image"):
        raise SettingsError(
            "prompt_languages", "prompt languages need a generated round 0, not an input image"
        )
    if row.get("sos_bank"):
        # its manifest only: the run's languages step reads it before anything is spent
        from refine.evaluate.sos import check_bank_folder

        try:
            path = _folder(row["sos_bank"], base_dir, root, "SoS bank")
            check_bank_folder(path)
        except ValueError as err:
            raise SettingsError("sos_bank", str(err)) from err
        row["sos_bank"] = str(path)
    else:
        row.pop("sos_bank", None)


def _review(row: dict[str, Any], base_dir: Path | None) -> None:
    """A review file (``--review``): its path, and every line checked now, before the run."""
    if not row.get("review_file"):
        row.pop("review_file", None)
        return
    from refine.loop.review_file import read_review

    path = _path(row["review_file"], base_dir)
    try:
        read_review(path)
    except ValueError as err:
        raise SettingsError("review_file", str(err)) from err
    row["review_file"] = str(path)


def _expectations(row: dict[str, Any], base_dir: Path | None) -> None:
    """An expectations file (``refine expectations build --out``) becomes the list of
    expectations the run checks; a list given as such is validated by the spec."""
    value = row.get("expectations")
    if not value:
        row.pop("expectations", None)
        return
    if isinstance(value, (str, Path)):
        from refine.evaluate.expectations import load_expectations

        try:
            row["expectations"] = [
                e.model_dump() for e in load_expectations(_path(value, base_dir)).expectations
            ]
        except ValueError as err:
            raise SettingsError("expectations", str(err)) from err


def run_spec(
    raw: Mapping[str, Any],
    base_dir: str | Path | None = None,
    spec: type[RunSpec] = RunSpec,
    root: str | Path | None = None,
) -> RunSpec:
    """A validated RunSpec (or ``spec``) from raw settings (None values take the default).
    No model and no knowledge base or bank is opened: a folder a setting names is checked
    to be one (its manifest), inside ``root`` when given (the app's ``--out``); the steps
    that use them open them when the run starts, before anything is spent."""
    from pydantic import ValidationError

    base = Path(base_dir) if base_dir is not None else None
    row = {k: v for k, v in raw.items() if v is not None and k != "refs"}
    image = row.pop("image", None) or row.pop("input_image", None)
    if image:
        path = _path(image, base)
        _check_image(path)
        row["input_image"] = str(path)
    given = row.get("instructions")
    if isinstance(given, str):
        try:
            row["instructions"] = json.loads(given)
        except json.JSONDecodeError as err:
            raise SettingsError("instructions", f"must be JSON ({err.msg})") from err
    elif isinstance(given, list | tuple):  # ROUND=TEXT items, as refine run takes them
        row["instructions"] = parse_instructions(given)
    for key in ("activity", "country"):
        if not str(row.get(key) or "").strip():
            raise SettingsError(key, f"give the {key}")
        row[key] = str(row[key]).strip()
    inside = Path(root) if root is not None else None
    _caire(row, base, inside)
    _languages(row, base, inside)
    _expectations(row, base)
    _review(row, base)
    try:
        return spec(**row)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(x) for x in first["loc"]) or "settings"
        if first["type"] == "value_error":  # a validator's own words, which name the input
            message = str(first["msg"]).removeprefix("Value error, ")
            raise SettingsError(field, message) from err
        raise SettingsError(field, f"{first['msg']} (got {first.get('input')!r})") from err


def references(
    activity: str,
    country: str,
    refs: str | Path | None = None,
    base_dir: str | Path | None = None,
    find: Callable[[str, str], ReferencePack] | None = None,
) -> ReferencePack:
    """The run's references: a references file when given (with the photo set of its
    activity and country, :mod:`refine.evaluate.photo_sets`, when it lists no photos), else
    ``find``'s, else the first found in
    :class:`refine.evaluate.reference_source.ReferenceSource`'s order."""

    try:
        if refs:
            from refine.evaluate.photo_sets import with_photo_set

            path = _path(refs, Path(base_dir) if base_dir is not None else None)
            return with_photo_set(load_references_file(path, activity, country))
        if find is None:
            from refine.evaluate.reference_source import ReferenceSource

            return ReferenceSource.default().find(activity, country).pack
        return find(activity, country)
    except ValueError as err:
        raise SettingsError("refs", str(err)) from err


def with_reference_images(
    pack: ReferencePack, folder: str | Path | None, base_dir: str | Path | None = None
) -> ReferencePack:
    """``pack`` with the real photos in ``folder`` as its reference images (the paper's
    EXAG: a stereotype's yes-probability on an image over its mean on these); each photo
    is checked like an input image. Unchanged without a folder."""
    if not folder:
        return pack
    path = _path(folder, Path(base_dir) if base_dir is not None else None)
    if not path.is_dir():
        raise SettingsError("reference_images", f"{path}: not a folder of real photos")
    photos = image_files(path)
    if not photos:
        raise SettingsError("reference_images", f"{path}: no {', '.join(IMAGE_TYPES)} images in it")
    for photo in photos:
        try:
            _check_image(photo)
        except SettingsError as err:
            raise SettingsError("reference_images", err.message) from err
    return pack.model_copy(update={"reference_images": [str(p.resolve()) for p in photos]})


def load(
    raw: Mapping[str, Any],
    base_dir: str | Path | None = None,
    find: Callable[[str, str], ReferencePack] | None = None,
    spec: type[RunSpec] = RunSpec,
    root: str | Path | None = None,
) -> tuple[RunSpec, ReferencePack]:
    """Raw settings -> (validated spec, references), every path read against ``base_dir``
    (and the folders they name confined to ``root``, see :func:`run_spec`)."""
    made = run_spec(raw, base_dir, spec, root)
    refs = references(made.activity, made.country, raw.get("refs"), base_dir, find)
    return made, refs
