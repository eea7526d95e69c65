"""Refinement runs as training data (``refine export``).

* ``imagefolder``: every accepted image (the chosen candidate of an accepted editing
  round; with ``include_initial`` round 0's too) copied to ``OUT/train/`` with
  ``metadata.jsonl`` (file_name, prompt, activity, country, round, faith, align, hal, exag,
  run): ``datasets.load_dataset("imagefolder", data_dir=OUT)`` loads it.
* ``pairs``: preference pairs for one prompt, ``image_w`` preferred over ``image_l``
  (``image_w_file_name`` and ``image_l_file_name`` in the metadata):
  ``best-vs-first`` (the run's best round against its round 0) and ``within-round`` (two
  candidates of one editing round); a pair is kept when FAITH differs by at least
  ``min_margin`` and the drift is at most ``max_drift`` (within a round: both candidates'
  drift from their parent; best against first: the accepted rounds' drifts added up);
  the same two images make one pair. Activities are held out whole:
  ``OUT/{train,test}/metadata.jsonl``, each split's images under its ``images/``.
* ``edits``: (input image, instruction, edited image) of every accepted editing round,
  ``OUT/train/metadata.jsonl``; loaded, its columns are those diffusers' InstructPix2Pix
  training reads (``input_image``, ``edit_prompt``, ``edited_image``).

Every format loads as written with ``datasets.load_dataset("imagefolder", data_dir=OUT)``
or ``datasets.load_dataset(OUT)``: a column ``file_name`` or ``NAME_file_name`` names an
image beside the metadata, loaded as the ``Image`` feature ``image`` or ``NAME``. Each export
writes a dataset card, ``OUT/README.md`` (:mod:`refine.train.card`).

Every export returns how many items it took and, per reason, how many it left out.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.assets import prompt_template
from refine.io.files import atomic_write, atomic_write_text
from refine.io.store import RunStore

FORMATS = ("imagefolder", "pairs", "edits", "dpo", "judge-dpo", "judge-kto")
PARQUET = ("dpo", "judge-dpo", "judge-kto")  # refine.train.preference writes these


@dataclass
class ExportResult:
    format: str
    out: Path
    taken: int = 0
    skipped: Counter = field(default_factory=Counter)
    splits: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"{self.format}: {self.taken} item(s) written to {self.out}"]
        out += [f"  {split}: {n}" for split, n in self.splits.items()]
        out += [f"  skipped {n}: {why}" for why, n in sorted(self.skipped.items())]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "out": str(self.out),
            "taken": self.taken,
            "splits": self.splits,
            "skipped": dict(self.skipped),
        }


def find_runs(paths: Sequence[str | Path]) -> list[Path]:
    """Run directories (holding ``run.json``) among ``paths`` and their sub-folders (a
    batch's runs, a folder of runs); ValueError naming a path that holds none."""
    runs: list[Path] = []
    for p in paths:
        path = Path(p)
        if not path.is_dir():
            raise ValueError(f"{path}: no such folder")
        found = sorted(f.parent for f in path.rglob("run.json") if not f.is_symlink())
        if not found:
            raise ValueError(f"{path}: no runs inside (no run.json)")
        runs += found
    return list(dict.fromkeys(runs))


def _unsafe(run_dir: Path, run: Any) -> str:
    """Why a run folder is not exported (empty when it is): its id, which the files copied
    are named after, is not a plain name (``../../x`` or an absolute path would write
    outside the export); or an image it names is a link, lies outside the folder or is
    missing (a link would copy, and upload, whatever it points to)."""
    from refine.io.files import confined

    rid = str(run.id)
    if not rid or rid in (".", "..") or Path(rid).name != rid or "\\" in rid or "\x00" in rid:
        return "a run whose id is not a plain name (its files would be named outside --out)"
    for r in run.rounds:
        for c in r.candidates:
            try:
                src = confined(run_dir, c.image, "image of its run")
            except ValueError:
                return "a run whose image is a link, outside its folder or missing"
            if not src.is_file():
                return "a run whose image is a link, outside its folder or missing"
    return ""


def _copy(src: Path, folder: Path, name: str) -> str:
    """``src`` copied into ``folder`` as ``name``, whole or not at all: through a temp file
    beside it (a full disk left a 0-byte image under the image's own name)."""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / name, lambda tmp: shutil.copyfile(src, tmp))
    return name


def _prompt(run: Any) -> str:

    if run.rounds and run.rounds[0].kind == "generate":
        return run.rounds[0].text
    return (
        prompt_template("generate")
        .strip()
        .format(activity=run.spec.activity, country=run.references.country)
    )


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def export(
    paths: Sequence[str | Path],
    out: str | Path,
    fmt: str,
    min_margin: float = 0.02,
    max_drift: float = 0.5,
    holdout: Sequence[str] = (),
    include_initial: bool = False,
    dry_run: bool = False,
) -> ExportResult:
    """Export the runs under ``paths`` in format ``fmt`` (see the module docstring); with
    ``dry_run`` only count what would be written."""
    copy = (lambda src, folder, name: name) if dry_run else _copy
    write = (lambda path, rows: None) if dry_run else _write_jsonl

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    if min_margin < 0 or max_drift < 0:
        raise ValueError("the margin and the drift limit are at least 0")
    out = Path(out)
    result = ExportResult(fmt, out)
    loaded = []
    for run_dir in find_runs(paths):
        try:
            run = RunStore(run_dir).load()
        except ValueError as err:
            result.skipped[f"unreadable run ({err})"] += 1
            continue
        refused = _unsafe(run_dir, run)
        if refused:
            result.skipped[refused] += 1
            continue
        loaded.append((run_dir, run))
    held = {a.casefold() for a in holdout}
    if fmt == "imagefolder":
        rows = []
        for run_dir, run in loaded:
            took = 0
            for r in run.rounds:
                keep = r.decision == "accepted" or (include_initial and r.decision == "initial")
                if not keep:
                    continue
                c = r.best
                name = copy(run_dir / c.image, out / "train", f"{run.id}-r{r.index}-{c.image}")
                s = c.scores
                rows.append(
                    {
                        "file_name": name,
                        "prompt": _prompt(run),
                        "activity": run.spec.activity,
                        "country": run.references.country,
                        "round": r.index,
                        "faith": s.faith,
                        "align": s.align,
                        "hal": s.hal,
                        "exag": s.exag,
                        "run": run.id,
                    }
                )
                took += 1
            if not took:
                result.skipped["run without an accepted round"] += 1
        if rows:
            write(out / "train" / "metadata.jsonl", rows)
        result.taken = len(rows)
        result.splits = {"train": len(rows)} if rows else {}
    elif fmt == "edits":
        rows = []
        for run_dir, run in loaded:
            took = 0
            for r in run.rounds:
                if r.kind != "edit" or r.decision != "accepted" or r.parent is None:
                    continue
                parent = run.rounds[r.parent].best
                stem = f"{run.id}-r{r.index}"
                rows.append(
                    {
                        "input_image_file_name": copy(
                            run_dir / parent.image, out / "train", f"{stem}-input.png"
                        ),
                        "edit_prompt": r.text,
                        "edited_image_file_name": copy(
                            run_dir / r.best.image, out / "train", f"{stem}-edited.png"
                        ),
                        "activity": run.spec.activity,
                        "country": run.references.country,
                        "faith_gain": _gain(r.best.scores.faith, parent.scores.faith),
                        "run": run.id,
                    }
                )
                took += 1
            if not took:
                result.skipped["run without an accepted edit"] += 1
        if rows:
            write(out / "train" / "metadata.jsonl", rows)
        result.taken = len(rows)
        result.splits = {"train": len(rows)} if rows else {}
    elif fmt in PARQUET:
        summary = _preference(loaded, out, result, fmt, min_margin, max_drift, held, dry_run)
    else:
        result = _pairs(loaded, out, result, min_margin, max_drift, held, copy, write)
    if result.taken == 0:
        reasons = "; ".join(f"{n} {why}" for why, n in result.skipped.items()) or "no runs"
        raise ValueError(f"nothing to export as {fmt} ({reasons})")
    if not dry_run:
        from refine.train.card import write_card

        made: dict[str, Any] = {"runs": len(loaded), "models": _models(loaded)}
        if fmt in ("pairs", "dpo", "judge-dpo"):
            made |= {"min_margin": min_margin, "max_drift": max_drift, "held out": list(holdout)}
        elif fmt == "imagefolder":
            made["round 0 included"] = include_initial
        if fmt in PARQUET:
            made["held out"] = list(holdout)
            write_card(out, fmt, made, summary)
        else:
            write_card(out, fmt, made)
    return result


def _models(loaded) -> dict[str, list[str]]:
    """Per role, every model the runs used, each with the weights it resolved to: a local
    model's commit, an API model's ``modelVersion`` (or ``no_revision_available``)."""
    from refine.backends.provenance import NO_REVISION

    out: dict[str, set[str]] = {}
    for _, run in loaded:
        for role, info in run.backend_info.items():
            at = info.get("commit") or info.get("model_version") or NO_REVISION
            out.setdefault(role, set()).add(f"{info.get('id') or role} @ {at}")
    return {role: sorted(v) for role, v in sorted(out.items())}


def _preference(loaded, out, result, fmt, min_margin, max_drift, held, dry_run):
    """The Parquet formats (:mod:`refine.train.preference`); the (split, country, activity)
    of every item written, for the card."""
    from refine.train import preference
    from refine.train.pairs import select_pairs

    if fmt == "judge-kto":
        rows = preference.judge_kto_rows(loaded, held, result.skipped)
    else:
        pairs = select_pairs(loaded, min_margin, max_drift, held, result.skipped)
        make = preference.dpo_rows if fmt == "dpo" else preference.judge_dpo_rows
        rows = make(pairs, _prompt)
    summary: list[dict[str, Any]] = []

    def noted(rows):
        for r in rows:
            summary.append({k: r[k] for k in ("split", "country", "activity")})
            yield r

    if dry_run:
        list(noted(rows))
    else:
        from refine.backends.imports import require

        require("datasets", "datasets", f"refine export --format {fmt}", "data")
        preference.write_parquet(out, fmt, noted(rows))
    result.splits = dict(Counter(r["split"] for r in summary))
    result.taken = len(summary)
    return summary


def _pairs(loaded, out: Path, result: ExportResult, min_margin, max_drift, held, copy, write):
    from refine.train.pairs import select_pairs

    rows: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for p in select_pairs(loaded, min_margin, max_drift, held, result.skipped):
        images = out / p.split / "images"  # beside the split's metadata, as datasets reads it
        rows[p.split].append(
            {
                "image_w_file_name": "images/"
                + copy(p.run_dir / p.w.image, images, f"{p.sha_w[:16]}.png"),
                "image_l_file_name": "images/"
                + copy(p.run_dir / p.lo.image, images, f"{p.sha_l[:16]}.png"),
                "prompt": _prompt(p.run),
                "margin": p.margin,
                "faith_w": p.w.scores.faith,
                "faith_l": p.lo.scores.faith,
                "source": p.source,
                "activity": p.run.spec.activity,
                "country": p.run.references.country,
                "run": p.run.id,
            }
        )
    for split, items in rows.items():
        if items:
            write(out / split / "metadata.jsonl", items)
    result.splits = {k: len(v) for k, v in rows.items() if v}
    result.taken = sum(result.splits.values())
    return result


def _gain(after: float | None, before: float | None) -> float | None:
    """FAITH gained by an edit; None (null in metadata.jsonl) when either is missing,
    never a difference with a made-up 0."""
    return None if after is None or before is None else after - before
