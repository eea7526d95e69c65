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
