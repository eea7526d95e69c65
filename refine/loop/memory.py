"""Fixes remembered across runs (``--memory``): a local store of what accepted rounds fixed,
and the best matching past fixes given to the instruction writer as hints.

The store is a JSON-lines file per profile under the data directory
(``DATA/fixes/PROFILE.jsonl``; a bench keeps its own). Each entry is one change an
accepted round made (refine.loop.tracking): a reference descriptor that became aligned
(``fixed``) or a hallucinated phrase or stereotype that was removed (``removed``), with the
country, activity, dimension, the round's instruction, the model that made the image and
the round's FAITH gain over the round it beat. It holds no image, only words and figures,
so a team can share it (``refine memory export`` and ``import``).

A hint is a past fix of the same country and of a descriptor a planned change names (the
descriptor to add, or the item to remove), compared by their words folded; among them the
same activity first, then the larger FAITH gain, at most :data:`HINTS` of them, one per
past instruction.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from refine.io.files import (
    append_jsonl_rows,
    atomic_write_text,
    json_lines,
    json_value,
    read_jsonl,
)
from refine.io.inputs import InputError
from refine.loop.tracking import folded, lineage, track_round
from refine.records import PastFix, PlannedChange, Round, Run, RunSpec

HINTS = 3  # past fixes given to the writer at most
HINT_CHARS = 300  # a past instruction is cut at this length in a hint
STATES = {"became aligned": "fixed", "removed": "removed"}


def store_path(profile: str) -> Path:
    """The profile's store under the data directory."""
    from refine.evaluate.data_dir import data_dir

    name = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in profile) or "profile"
    return data_dir() / "fixes" / f"{name}.jsonl"


def fix_id(f: PastFix) -> str:
    """An entry's identity: the same change of the same round of the same run is one."""
    key = json.dumps([f.run, f.round, f.kind, f.dimension, folded(f.descriptor), f.country,
                      f.activity, f.instruction])  # fmt: skip
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class FixStore:
    """One store file: entries appended as rounds are accepted, read as a list."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def entries(self) -> list[PastFix]:
        """Every entry (a line a kill cut short is left out); a line that is no entry is
        an InputError naming the file and the line."""
        try:
            rows = read_jsonl(self.path)
        except ValueError as err:  # not UTF-8, nested past reading, NaN: named
            raise InputError(str(err)) from err
        return [_fix(self.path, n, row) for n, row in rows]

    def add(self, fixes: Iterable[PastFix]) -> int:
        """Append the entries not in the store yet; how many were new."""
        seen = {fix_id(f) for f in self.entries()}
        new = []
        for f in fixes:
            if fix_id(f) not in seen:
                new.append(f.model_dump(mode="json"))
                seen.add(fix_id(f))
        append_jsonl_rows(self.path, new)  # one sync for them all
        return len(new)

    def export(self, dest: str | Path) -> int:
        """The store as one JSON-lines file at ``dest``; how many entries."""
        got = self.entries()
        text = "".join(_line(f) for f in got)
        atomic_write_text(dest, text)
        return len(got)


def read_shared(path: str | Path) -> list[PastFix]:
    """An exported store's entries, every line checked (a shared file is not trusted)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file (an exported store of fixes, JSON lines)")
    out = []
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{p}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    for n, line in enumerate(json_lines(text), 1):
        if line.strip():
            try:
                row = json_value(line)  # (NaN, Infinity or nested past reading: not JSON)
            except json.JSONDecodeError as err:
                raise InputError(f"{p}: line {n} is not JSON ({err.msg})") from err
            out.append(_fix(p, n, row))
    return out


def _fix(path: Path, n: int, row: Any) -> PastFix:
    """Line ``n`` of ``path`` as an entry, or an InputError naming both."""
    try:
        return PastFix.model_validate(row)
    except ValidationError as err:
        e = err.errors()[0]
        where = ".".join(str(x) for x in e["loc"]) or "the line"
        raise InputError(f"{path}: line {n} is not a remembered fix ({where}: {e['msg']})") from err


def _line(f: PastFix) -> str:
    return json.dumps(f.model_dump(mode="json"), ensure_ascii=False) + "\n"


def round_fixes(run: Run, r: Round, editor: str) -> list[PastFix]:
    """What an accepted round fixed, as store entries (none for a round that was not
    accepted or gained nothing measurable)."""
    if r.decision != "accepted" or r.index == 0:
        return []
    beaten = _beaten(run, r)
    gain = None
    if beaten is not None and r.best.scores.faith is not None:
        was = run.rounds[beaten].best.scores.faith
        gain = None if was is None else r.best.scores.faith - was
    tracked = r.tracked or track_round(run, r.index)
    return [
        PastFix(
            country=run.references.country,
            activity=run.spec.activity,
            dimension=t.dimension,
            descriptor=t.item,
            kind=STATES[t.state],
            instruction=r.text,
            move=r.kind,
            editor=editor,
            faith_gain=gain,
            run=run.id,
            round=r.index,
        )
        for t in tracked
        if t.state in STATES
    ]


def _beaten(run: Run, r: Round) -> int | None:
    """The round an accepted round was compared with (refine.loop.policy.compared_with):
    its parent, or with ``edit_from`` ``last`` the kept round before it."""
    if run.spec.edit_from != "last" and r.parent is not None:
        return r.parent
    before = lineage(run, r.index)
    return before[-1] if before else None


def targets(changes: Sequence[PlannedChange]) -> set[str]:
    """The descriptors planned changes name, folded: the one to add (an add's item, a
    replacement's reference) and the one to remove (a removal's or replacement's item)."""
    out = set()
    for c in changes:
        if c.kind == "other":
            continue
        out.add(folded(c.item))
        if c.reference:
            out.add(folded(c.reference))
    return out


def best_hints(
    fixes: Sequence[PastFix], country: str, activity: str, changes: Sequence[PlannedChange],
    at_most: int = HINTS,
) -> list[PastFix]:  # fmt: skip
    """The past fixes that match the round's planned changes (see the module's docstring)."""
    wanted = targets(changes)
    here = folded(country)
    found = [f for f in fixes if folded(f.country) == here and folded(f.descriptor) in wanted]
    found.sort(
        key=lambda f: (
            folded(f.activity) != folded(activity),
            -(f.faith_gain if f.faith_gain is not None else float("-inf")),
        )
    )
    out: list[PastFix] = []
    said: set[str] = set()
    for f in found:
        if f.instruction in said:
            continue
        said.add(f.instruction)
        out.append(f)
        if len(out) == at_most:
            break
    return out


def hint_lines(hints: Sequence[PastFix]) -> str:
    """The hints as the writer's prompt lists them: a line each, starting "* " (the
    planned changes' lines start "- "), the instruction on one line and cut at
    :data:`HINT_CHARS`."""
    lines = []
    for h in hints:
        what = "fixed" if h.kind == "fixed" else "removed"
        gain = "" if h.faith_gain is None else f", FAITH {h.faith_gain:+.3f}"
        words = _flat(h.instruction)
        if len(words) > HINT_CHARS:
            words = words[: HINT_CHARS - 3].rstrip() + "..."
        said = f"{_flat(h.dimension)}: {_flat(h.descriptor)} ({_flat(h.activity)}{gain})"
        lines.append(f'* "{words}" {what} {said}')
    return "\n".join(lines)


def _flat(text: str) -> str:
    """A store's words on one line (a shared store is not trusted to hold none)."""
    return " ".join(text.split())


def store_of(spec: RunSpec) -> FixStore:
    """The store a run with ``--memory`` reads and adds to."""
    return FixStore(spec.memory_store or store_path(spec.profile))


def hints_for(run: Run, changes: Sequence[PlannedChange]) -> list[PastFix]:
    """The past fixes a round's writer is given for its planned ``changes``."""
    fixes = [f for f in store_of(run.spec).entries() if not _own(run, f)]
    if run.spec.memory_other_prompts:  # a bench's: what other prompts' runs fixed
        here = (folded(run.references.country), folded(run.spec.activity))
        fixes = [f for f in fixes if (folded(f.country), folded(f.activity)) != here]
    return best_hints(fixes, run.references.country, run.spec.activity, changes)


def _own(run: Run, f: PastFix) -> bool:
    """Whether ``f`` is one of ``run``'s own rounds (a run is not its own hint; two runs
    begun in the same second may share an id, so the round's words must match too)."""
    mine = f.run == run.id and 0 < f.round < len(run.rounds)
    return mine and run.rounds[f.round].text == f.instruction


def check(spec: RunSpec, backends: Any) -> None:
    """Before a run begins: ``--memory`` has a language model to give hints to, and its
    store can be read."""
    if not spec.memory:
        return
    if spec.writer != "llm":
        raise ValueError(
            f"--memory gives past fixes to the language model that words the instruction; "
            f"--writer {spec.writer} uses none (use --writer llm, the default)"
        )
    if not backends.names.get("llm"):
        raise ValueError(
            "--memory gives past fixes to the language model that words the instruction, and "
            "the profile has none (give one: --backend llm=...)"
        )
    try:
        store_of(spec).entries()
    except InputError as err:
        raise ValueError(f"--memory: {err}") from err


def remember(run: Run, r: Round, names: dict[str, str]) -> int:
    """An accepted round's fixes added to the run's store (``--memory``); how many.
    ``names``: the backends' names by role, for a run whose record names none yet."""
    if not run.spec.memory or r.decision != "accepted":
        return 0
    role = "generator" if r.kind == "regenerate" else "editor"
    made_by = run.backend_ids.get(role) or names.get(role, "")
    return store_of(run.spec).add(round_fixes(run, r, made_by))
