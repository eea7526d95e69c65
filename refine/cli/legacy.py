"""Command forms kept for one release after their task got a command of its own: the
arguments are read as the new command's, and a line on stderr says which it is.

``refine bench --strategies ...`` is ``refine strategies ...`` (``--generator G``, the one
generator every strategy draws with, is ``--backend generator=G``); ``refine bench
--editor M [--loops K] [--localize] ...`` is ``refine editor-loops ...``. A form with
``--recipe`` is the bench's own."""

from __future__ import annotations

import shlex

# the new command of each old form, by the options that made it that form
FORMS = (
    ("editor-loops", ("--editor", "--loops", "--localize")),
    ("strategies", ("--strategies", "--budget-calls", "--budget-seconds")),
    ("concepts", ("--concepts",)),
)


def _flag(token: str) -> str:
    return token.split("=", 1)[0] if token.startswith("--") else ""


def forwarded(args: list[str]) -> tuple[list[str], str]:
    """``args`` as the new command takes them, and the line saying so ("" when ``args`` is
    no old form)."""
    if not args or args[0] != "bench":
        return args, ""
    flags = {_flag(t) for t in args[1:]}
    if "--recipe" in flags:
        return args, ""
    for command, marks in FORMS:
        if flags & set(marks):
            rest = list(args[1:])
            if command == "strategies":
                rest = _generator_as_backend(rest)
            new = [command, *rest]
            said = (
                f"refine bench {'/'.join(sorted(flags & set(marks)))} is now refine {command}; "
                f"this form goes in the next release: refine {shlex.join(new)}"
            )
            return new, said
    return args, ""


def _generator_as_backend(rest: list[str]) -> list[str]:
    out, k = [], 0
    while k < len(rest):
        token = rest[k]
        if token == "--generator" and k + 1 < len(rest):
            out += ["--backend", f"generator={rest[k + 1]}"]
            k += 2
            continue
        if token.startswith("--generator="):
            out += ["--backend", "generator=" + token.split("=", 1)[1]]
        else:
            out.append(token)
        k += 1
    return out
