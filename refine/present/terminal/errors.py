"""How the command line says an error in one line: a click usage error (the option, the
value given and what is wrong), a full disk (what to do), and which errors' messages say
what to do (shown without a traceback, exit code 1): :func:`error_exit`."""

from __future__ import annotations

import importlib
import os
from typing import Any

from refine.backends.registry import error_names

# errors whose message says what to do, shown in one line (exit code 1): these, and the
# registered backends' own (refine.backends.registry.BackendInfo.errors: an API's)
EXPLAINED = (
    "BatchJournalError",
    "CellsFailed",
    "ModelUnavailable",
    "ModelsUnavailable",
    "OutOfMemory",
    "OutOfMemoryError",
    "QuotaSpent",
    "Refused",  # a model's refusal (every candidate of round 0, say), in its own words
)


def _given(opts: list[str], argv: list[str]) -> str | None:
    """The value given on the command line to one of ``opts`` (``--x V`` or ``--x=V``)."""
    for k, arg in enumerate(argv):
        for opt in opts:
            if arg == opt and k + 1 < len(argv):
                return argv[k + 1]
            if arg.startswith(opt + "="):
                return arg[len(opt) + 1 :]
    return None


def usage_line(err: Exception, argv: list[str], path: str = "refine") -> str:
    """A click usage error as one line: the option, the value given and what is wrong
    (``path``: the command named, ``refine metrics vendi``, for where to see its help)."""
    param = getattr(err, "param", None)
    if param is not None and type(err).__name__ == "BadParameter":
        opts = list(getattr(param, "opts", []) or [])
        name = "/".join(opts) or str(getattr(param, "human_readable_name", "argument"))
        value = _given(opts, argv)
        shown = f" {value!r}" if value is not None else ""
        said = getattr(err, "message", "") or err.format_message()
        if _not_finite(value):  # NaN fails every bound's comparison: "less than or equal"
            said = "not a finite number"
        return f"{name}{shown}: {said}"
    message = err.format_message() if hasattr(err, "format_message") else str(err)
    return f"{message} (see '{path} --help')"


def _not_finite(value: str | None) -> bool:
    """Whether an option's text reads as NaN or an infinity."""
    import math

    try:
        return value is not None and not math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def full_disk(err: BaseException) -> str:
    """What to do about a disk (or quota) that is full, in one line; empty for any other
    error. What was written before is whole (every record is written through a temp file):
    a run goes on with --resume, and an export or a task written again."""
    import errno

    if not isinstance(err, OSError) or err.errno not in (errno.ENOSPC, errno.EDQUOT):
        return ""
    where = f" writing {err.filename}" if err.filename else ""
    return (
        f"the disk is full{where} ({os.strerror(err.errno)}): free some space, then run the "
        "same command again (a run: refine run --resume DIR, its record is whole)"
    )


def explained(err: BaseException) -> bool:
    """Whether ``err``'s message says what to do: one line, no traceback."""
    names = {c.__name__ for c in type(err).__mro__}
    return bool(names & {*EXPLAINED, *error_names()})


def error_exit(err: BaseException) -> tuple[str, int]:
    """An error the command line says in one line, and its exit code: a run or task folder
    another process holds (2), a full disk (1), a model that cannot answer (no API key,
    not downloaded, a full GPU: its message says what to do) or an extra not installed
    (1); ``("", 0)`` for any other, whose traceback is shown."""
    if type(err).__name__ == "RunLocked":
        return str(err), 2
    if full_disk(err):
        return full_disk(err), 1
    missing_extra = isinstance(err, ImportError) and "cultural-refine[" in str(err)
    if not explained(err) and not missing_extra:
        return "", 0
    from refine.backends.loading import describe_error

    said = describe_error(err)
    if type(err).__name__ == "QuotaSpent":  # a batch's or a bench's: done is kept
        said += "; what was done is kept: run the same command again once it is back"
    return said, 1


def click_errors() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(ClickException, Abort) classes of the click that typer uses: typer 0.29 and newer
    carry their own copy (``typer._click``), older ones use the ``click`` package."""
    import typer

    errors: list[type] = []
    aborts: list[type] = [typer.Abort] if hasattr(typer, "Abort") else []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        errors.append(module.ClickException)
        if hasattr(module, "Abort"):
            aborts.append(module.Abort)
    return tuple(errors), tuple(aborts)


def command_path(tree: Any, argv: list[str]) -> str:
    """``refine metrics vendi`` for ``["metrics", "vendi", "--q"]``: the subcommands of the
    click command ``tree`` that ``argv`` names."""
    path, node = ["refine"], tree
    for token in argv:
        commands = getattr(node, "commands", None)
        if not commands or token not in commands:
            break
        path.append(token)
        node = commands[token]
    return " ".join(path)
