"""The true labels of CAIRE's specific set (``refine caire evaluate --truth``): per image
file name, the culture labels it is relevant to. A CSV with the columns ``image`` and
``labels`` (``;`` between labels), or JSON lines with ``image`` and ``labels`` (a list or
such a text)."""

from __future__ import annotations

import csv
import json
from pathlib import Path


def read_truth(path: str | Path) -> dict[str, list[str]]:
    """Image file name -> its relevant labels; a ValueError names the file and line."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    rows: list[tuple[str, dict]] = []
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        if not {"image", "labels"} <= set(reader.fieldnames or []):
            raise ValueError(f"{path}: needs the columns image and labels")
        rows = [(f"{path}:{k}", r) for k, r in enumerate(reader, start=2)]
    else:
        for k, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((f"{path}:{k}", json.loads(line)))
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{k}: not JSON ({err.msg})") from None
    out: dict[str, list[str]] = {}
    for where, row in rows:
        if not isinstance(row, dict) or not str(row.get("image") or "").strip():
            raise ValueError(f"{where}: each row names its image")
        labels = row.get("labels") or []
        if isinstance(labels, str):
            labels = labels.split(";")
        if not isinstance(labels, list):
            raise ValueError(f"{where}: labels are a list, or a text with ';' between them")
        name = Path(str(row["image"]).strip()).name
        if name in out:
            raise ValueError(f"{where}: {name} is given twice")
        out[name] = [str(x).strip() for x in labels if str(x).strip()]
    return out


def evaluate_scores(scores: Path, truth: Path) -> dict:
    """CAIRE's specific-set evaluation of the scores of ``refine caire score --out``
    against ``truth`` (:func:`read_truth`): precision, recall and F1 per threshold. A file
    that is not what it should be raises :class:`refine.io.inputs.InputError`, naming the
    argument (``SCORES``) or the option (``--truth``)."""
    from metrics.caire import threshold_scores
    from refine.io.inputs import InputError

    def not_scores(err: Exception) -> InputError:
        return InputError(f"SCORES: {scores}: not the scores of refine caire score ({err})")

    try:
        doc = json.loads(scores.read_text(encoding="utf-8"))
        labels, rows = doc["labels"], doc["scores"]
        names = [im.get("image") for im in doc["images"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise not_scores(err) from None
    try:
        relevant = read_truth(truth)
        keys = [Path(n).name if n else None for n in names]
        missing = [n for n in keys if n not in relevant]
        if missing:
            raise ValueError(f"no truth for {', '.join(str(m) for m in missing[:3])}")
        known = {x.casefold() for x in labels}
        stray = sorted({x for v in relevant.values() for x in v if x.casefold() not in known})
        if stray:
            raise ValueError(f"labels not scored: {', '.join(stray[:3])} (scored: {labels})")
        wanted = [
            [lab.casefold() in {x.casefold() for x in relevant[k]} for lab in labels] for k in keys
        ]
        got = threshold_scores(rows, wanted)
    except ValueError as err:
        raise InputError(f"--truth: {err}") from err
    except (TypeError, AttributeError, KeyError) as err:
        raise not_scores(err) from None
    return {"labels": labels, "images": len(rows), "thresholds": got}
