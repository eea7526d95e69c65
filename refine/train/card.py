"""The dataset card of a ``refine export`` folder: ``OUT/README.md``, its YAML header as the
Hugging Face Hub reads it (licence, task categories, ``configs`` naming each split's files,
``dataset_info.features`` with each image column an ``image``) and a body saying how the
data was made and how many items each country and activity gave.

The features are read from the metadata as written, so ``datasets.load_dataset(OUT)``
(which reads the card) and ``load_dataset("imagefolder", data_dir=OUT)`` (which does not)
give the same columns."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from refine.io.files import atomic_write_text

SCHEMA = 1  # the export's layout version, in the card's ``refine`` header

TASKS = {
    "imagefolder": "text-to-image",
    "pairs": "text-to-image",
    "edits": "image-to-image",
    "dpo": "text-to-image",
    "judge-dpo": "image-text-to-text",
    "judge-kto": "image-text-to-text",
}
WHAT = {
    "imagefolder": "accepted images of refinement runs, each with its prompt and its AHEaD "
    "scores (FAITH, ALIGN, HAL, EXAG)",
    "pairs": "preference pairs for one prompt (image_w preferred over image_l by FAITH, "
    "with the margin between them), for Diffusion-DPO (`refine tune --data`)",
    "edits": "(input image, instruction, edited image) of every accepted editing round, in "
    "the columns diffusers' InstructPix2Pix training reads",
    "dpo": "preference pairs for one prompt in Pick-a-Pic v2's columns (`jpg_0`, `jpg_1` the "
    "images' bytes, `label_0` 1 when `jpg_0` is preferred by FAITH, `caption`), which "
    "diffusers' Diffusion-DPO example reads as they are; ties (a FAITH margin below the "
    "least asked) are left out, as the original Diffusion-DPO code drops them",
    "judge-dpo": "pairs of images for one prompt with the question which shows the activity "
    "in the country more faithfully, the answer FAITH prefers (`chosen`) and the other "
    "(`rejected`), each with its evidence from the descriptor matching: TRL's "
    "vision-language preference layout, for distilling a judge",
    "judge-kto": "the loop's keep-or-reject verdicts on single edits (the image before and "
    "after, the instruction): the loop's verdict as a desirable completion and the opposite "
    "one as an undesirable one, in TRL's unpaired (KTO) layout",
}
TRAINS = {
    "dpo": "accelerate launch train_diffusion_dpo.py --dataset_name PATH_OR_REPO "
    "--dataset_split_name train ...",
    "judge-dpo": "trl.DPOTrainer(model, train_dataset=ds, processing_class=processor, ...)",
    "judge-kto": "trl.KTOTrainer(model, train_dataset=ds, processing_class=processor, ...)",
}


def _rows(out: Path) -> dict[str, list[dict[str, Any]]]:
    rows = {}
    for meta in sorted(out.glob("*/metadata.jsonl")):
        lines = meta.read_text(encoding="utf-8").splitlines()
        rows[meta.parent.name] = [json.loads(x) for x in lines if x.strip()]
    return rows


def _dtype(values: list[Any]) -> str:
    seen = {type(v) for v in values if v is not None}
    if seen == {bool}:
        return "bool"
    if seen == {int}:
        return "int64"
    if seen and seen <= {int, float}:
        return "float64"
    return "string"


def features(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Each column as ``datasets`` loads it: ``file_name`` as ``image`` and ``NAME_file_name``
    as ``NAME``, both images; the others by the type of their values."""
    out = []
    for key in rows[0]:
        if key == "file_name" or key.endswith("_file_name"):
            out.append({"name": key.removesuffix("_file_name").removesuffix("file_name") or "image",
                        "dtype": "image"})  # fmt: skip
        else:
            out.append({"name": key, "dtype": _dtype([r.get(key) for r in rows])})
    return out


def _yaml(value: Any, indent: int = 0) -> list[str]:
    """A small YAML writer for the card's header (dicts, lists, scalars as JSON strings,
    which YAML reads as they are)."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict | list):
                lines.append(f"{pad}{k}:")
                lines += _yaml(v, indent + 2)
            else:
                lines.append(f"{pad}{k}: {json.dumps(v)}")
    else:
        for item in value:
            if isinstance(item, dict):
                first, *rest = _yaml(item, indent + 2)
                lines.append(f"{pad}- {first.strip()}")
                lines += rest
            else:
                lines.append(f"{pad}- {json.dumps(item)}")
    return lines


def _bytes(out: Path, pattern: str) -> int:
    return sum(f.stat().st_size for f in out.glob(pattern) if f.is_file())


def write_card(
    out: Path, fmt: str, made: dict[str, Any], summary: list[dict[str, Any]] | None = None
) -> Path:
    """``OUT/README.md`` for the export in ``out`` of format ``fmt``; ``made`` holds how it
    was made (the runs, the options). A Parquet format passes ``summary``, the split,
    country and activity of each item; the others' items are read from their metadata."""
    from refine import __version__

    if summary is None:
        rows = _rows(out)
        every = [r for split in rows.values() for r in split]
        feats = features(every)
        files = {s: f"{s}/**" for s in rows}
    else:
        from refine.train.preference import features as parquet_features

        rows = {}
        for r in summary:
            rows.setdefault(r["split"], []).append(r)
        every = summary
        feats = parquet_features(fmt)._to_yaml_list()  # the Hub's own YAML of the features
        files = {s: f"data/{s}-*" for s in rows}
    from refine.usage import package_versions, toolkit_version

    header = {
        "license": "other",
        "license_name": "generators-terms",
        "task_categories": [TASKS[fmt]],
        "tags": ["cultural-refine", f"refine-export-{fmt}", "culture"],
        "pretty_name": f"refine export ({fmt})",
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": s, "path": p} for s, p in files.items()],
            }
        ],
        # what made it: the layout's version, the toolkit, the packages, the models
        "refine": {
            "schema": SCHEMA,
            "toolkit": toolkit_version(),
            "packages": package_versions(),
            "models": made.get("models", {}),
        },
        "dataset_info": {
            "features": feats,
            # num_bytes: the split's files as written (the Hub's field; datasets wants it)
            "splits": [
                {"name": s, "num_bytes": _bytes(out, files[s]), "num_examples": len(r)}
                for s, r in rows.items()
            ],
        },
    }
    by = Counter((r.get("country"), r.get("activity")) for r in every)
    body = [
        f"# refine export: {fmt}",
        "",
        f"{WHAT[fmt][0].upper()}{WHAT[fmt][1:]}. Made by cultural-refine {__version__} "
        f"(`refine export --format {fmt}`) "
        f"from {made.get('runs', '?')} run(s); "
        + ", ".join(f"{k} {v}" for k, v in made.items() if k not in ("runs", "models"))
        + ".",
        "",
        "The images were drawn and edited by the generators and editors the runs name "
        "(each run's `run.json`): their terms of use apply to them, hence the licence "
        "`other`.",
        "",
        "| split | items |",
        "|---|---|",
        *(f"| {s} | {len(r)} |" for s, r in rows.items()),
        "",
        "| country | activity | items |",
        "|---|---|---|",
        *(f"| {c} | {a} | {n} |" for (c, a), n in sorted(by.items(), key=str)),
        "",
        "```python",
        "import datasets",
        "",
        'ds = datasets.load_dataset("PATH_OR_REPO")',
        "```",
        "",
    ]
    if fmt in TRAINS:
        body += ["Trains as it is with:", "", "```", TRAINS[fmt], "```", ""]
    path = out / "README.md"
    atomic_write_text(path, "---\n" + "\n".join(_yaml(header)) + "\n---\n\n" + "\n".join(body))
    return path
