"""``refine export``'s Parquet formats: the loop's preferences in the layouts other trainers
read as they are.

* ``dpo``: Pick-a-Pic v2's columns, which diffusers' Diffusion-DPO example
  (``examples/research_projects/diffusion_dpo/train_diffusion_dpo.py`` and ``_sdxl.py``)
  reads: ``jpg_0`` and ``jpg_1`` the images' bytes (the files as the run wrote them, PNG:
  the example opens them with ``Image.open(io.BytesIO(x))``, which reads any format),
  ``label_0`` 1 when ``jpg_0`` is preferred and 0 when ``jpg_1`` is (``label_1`` the
  other), ``caption`` the prompt. The pairs are :mod:`refine.train.pairs`' (the same as
  ``--format pairs``). Which image is ``jpg_0`` goes by the images' sha256, not by the
  preference, so both labels occur and a trainer cannot learn the position. **Ties are left
  out**: a pair whose FAITH differs by less than ``--min-margin`` is not written. Pick-a-Pic
  writes 0.5 for a tie; the original Diffusion-DPO code drops those rows and the diffusers
  example would read 0.5 as "``jpg_0`` preferred", so a tie written here would train as a
  preference.
* ``judge-dpo``: the same pairs for a vision-language *judge* in TRL's conversational
  preference layout (``images``, ``prompt``, ``chosen``, ``rejected``): the question asks
  which of the two images shows the activity in the country more faithfully; ``chosen``
  names the image FAITH prefers, ``rejected`` the other, each with the evidence the run's
  descriptor matching gives for it (the reference descriptors it shows that the other
  lacks, what is out of place or exaggerated in the other).
* ``judge-kto``: the loop's keep-or-reject verdicts on single edits in TRL's unpaired layout
  (``images``, ``prompt``, ``completion``, ``label``): for every decided editing round, the
  image before and after, the instruction, and two completions with the same evidence: the
  loop's verdict (``label`` true) and the opposite one (``label`` false), so the two labels
  are balanced as KTO's weighting assumes.

Each split is written as ``OUT/data/SPLIT-0000I-of-0000N.parquet`` (shards of at most
:data:`SHARD_BYTES` of images), the names ``datasets`` reads splits from, with the
features in the files' own schema, so ``datasets.load_dataset(OUT)`` and
``load_dataset("parquet", data_dir=OUT/"data")`` both load them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

SHARD_BYTES = 500 * 2**20  # the Hub's own default shard size for Parquet uploads
EVIDENCE = 5  # descriptors named per kind of evidence, at most
GROUP = 64  # rows per Parquet row group (one image pair per row)


def _phrases(items) -> list[str]:
    return list(dict.fromkeys(m.phrase for m in items))


def evidence(better, worse, name_b: str, name_w: str) -> str:
    """Sentences saying why ``better`` is more faithful than ``worse``, from their descriptor
    matching; "" when the matching gives no reason."""
    shown = set(_phrases(worse.feedback.aligned))
    gains = [p for p in _phrases(better.feedback.aligned) if p not in shown][:EVIDENCE]
    clean = set(_phrases(better.feedback.hallucinated))
    wrong = [p for p in _phrases(worse.feedback.hallucinated) if p not in clean][:EVIDENCE]
    calm = {e.candidate for e in better.feedback.exaggerated}
    loud = [e.candidate for e in worse.feedback.exaggerated if e.candidate not in calm]
    out = []
    if gains:
        out.append(f"{name_b} shows {', '.join(gains)}, which {name_w} lacks.")
    if wrong:
        out.append(f"{name_w} shows what does not belong: {', '.join(wrong)}.")
    if loud:
        out.append(f"{name_w} exaggerates: {', '.join(list(dict.fromkeys(loud))[:EVIDENCE])}.")
    return " ".join(x[0].upper() + x[1:] for x in out)


def _user(images: int, text: str) -> list[dict[str, Any]]:
    content = [{"type": "image", "text": None} for _ in range(images)]
    return [{"role": "user", "content": content + [{"type": "text", "text": text}]}]


def _assistant(text: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": [{"type": "text", "text": text}]}]


def _image(path: Path) -> dict[str, Any]:
    return {"bytes": path.read_bytes(), "path": path.name}


def dpo_rows(pairs, prompt_of) -> Iterator[dict[str, Any]]:
    for p in pairs:
        first, second = (p.w, p.lo) if p.sha_w < p.sha_l else (p.lo, p.w)
        label = 1.0 if first is p.w else 0.0
        yield (
            {
                "jpg_0": (p.run_dir / first.image).read_bytes(),
                "jpg_1": (p.run_dir / second.image).read_bytes(),
                "label_0": label,
                "label_1": 1.0 - label,
                "caption": prompt_of(p.run),
                "faith_0": first.scores.faith,
                "faith_1": second.scores.faith,
                "margin": p.margin,
                "source": p.source,
                "activity": p.run.spec.activity,
                "country": p.run.references.country,
                "run": p.run.id,
                "split": p.split,
            }
        )


def judge_dpo_rows(pairs, prompt_of) -> Iterator[dict[str, Any]]:
    for p in pairs:
        first, second = (p.w, p.lo) if p.sha_w < p.sha_l else (p.lo, p.w)
        k = 1 if first is p.w else 2  # the preferred image's number
        names = {1: "Image 1", 2: "Image 2"}
        activity, country = p.run.spec.activity, p.run.references.country
        question = (
            f'Both images were made for the prompt "{prompt_of(p.run)}". Which one shows '
            f"{activity} in {country} more faithfully: what belongs there present, nothing "
            'out of place, no exaggerated stereotype? Answer "Image 1" or "Image 2", then '
            "say why."
        )
        chosen = f"{names[k]}. " + evidence(p.w, p.lo, names[k], names[3 - k])
        rejected = f"{names[3 - k]}. " + evidence(p.lo, p.w, names[3 - k], names[k])
        yield (
            {
                "images": [_image(p.run_dir / first.image), _image(p.run_dir / second.image)],
                "prompt": _user(2, question),
                "chosen": _assistant(chosen.strip()),
                "rejected": _assistant(rejected.strip()),
                "margin": p.margin,
                "source": p.source,
                "activity": activity,
                "country": country,
                "run": p.run.id,
                "split": p.split,
            }
        )


def judge_kto_rows(loaded, held: set[str], skipped) -> Iterator[dict[str, Any]]:
    for run_dir, run in loaded:
        took = 0
        for r in run.rounds:
            if r.kind != "edit" or r.parent is None or r.decision not in ("accepted", "rejected"):
                continue
            before, after = run.rounds[r.parent].best, r.best
            keep = r.decision == "accepted"
            if keep:
                why = evidence(after, before, "The edited image", "the image before")
            else:
                why = evidence(before, after, "The image before", "the edited image")
            activity, country = run.spec.activity, run.references.country
            question = (
                f"The first image shows {activity} in {country}; the second is the first "
                f'edited with the instruction "{r.text}". Should the edit be kept: does it '
                "show the scene more faithfully, without losing what was right? Answer "
                '"Keep" or "Reject", then say why.'
            )
            verdict, other = ("Keep.", "Reject.") if keep else ("Reject.", "Keep.")
            split = "test" if activity.casefold() in held else "train"
            for text, label in ((verdict, True), (other, False)):
                yield (
                    {
                        "images": [_image(run_dir / before.image), _image(run_dir / after.image)],
                        "prompt": _user(2, question),
                        "completion": _assistant(f"{text} {why}".strip()),
                        "label": label,
                        "decision": r.decision,
                        "reason": r.reason,
                        "by_hand": r.by_hand,
                        "round": r.index,
                        "activity": activity,
                        "country": country,
                        "run": run.id,
                        "split": split,
                    }
                )
            took += 1
        if not took:
            skipped["run without a decided edit"] += 1


def features(fmt: str):
    """The columns of format ``fmt`` as ``datasets`` features (images as ``Image``, the
    Diffusion-DPO bytes as ``binary``, the conversations as lists of messages)."""
    import datasets as ds

    text = ds.Value("string")
    turn = [{"role": text, "content": [{"type": text, "text": text}]}]
    where = {"activity": text, "country": text, "run": text}
    if fmt == "dpo":
        return ds.Features(
            {"jpg_0": ds.Value("binary"), "jpg_1": ds.Value("binary")}
            | {"label_0": ds.Value("float64"), "label_1": ds.Value("float64"), "caption": text}
            | {k: ds.Value("float64") for k in ("faith_0", "faith_1", "margin")}
            | {"source": text}
            | where
        )
    if fmt == "judge-dpo":
        return ds.Features(
            {"images": [ds.Image()], "prompt": turn, "chosen": turn, "rejected": turn}
            | {"margin": ds.Value("float64"), "source": text}
            | where
        )
    return ds.Features(
        {"images": [ds.Image()], "prompt": turn, "completion": turn, "label": ds.Value("bool")}
        | {"decision": text, "reason": text, "by_hand": ds.Value("bool")}
        | {"round": ds.Value("int64")}
        | where
    )


def write_parquet(out: Path, fmt: str, rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """``rows`` (each naming its ``split``) as ``OUT/data/SPLIT-*.parquet`` shards, written
    as they come, :data:`GROUP` rows to a row group (a shard holds at most
    :data:`SHARD_BYTES` of images, so a large export never sits in memory whole); the
    items per split."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    feats = features(fmt)
    schema = feats.arrow_schema  # carries the features, which datasets reads back
    folder = out / "data"
    # split -> its writer, the bytes in its shard, its files, the rows waiting
    writers: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}

    def flush(state: dict[str, Any]) -> None:
        if state["rows"]:
            state["writer"].write_table(pa.Table.from_pylist(state["rows"], schema=schema))
            state["rows"] = []

    for row in rows:
        split = row["split"]
        item = feats.encode_example({k: v for k, v in row.items() if k != "split"})
        size = sum(len(i["bytes"]) for i in row.get("images", ()))
        size += len(row.get("jpg_0", b"")) + len(row.get("jpg_1", b""))
        state = writers.get(split)
        if state is None or (state["bytes"] and state["bytes"] + size > SHARD_BYTES):
            files = [] if state is None else state["files"]
            if state is not None:
                flush(state)
                state["writer"].close()
            folder.mkdir(parents=True, exist_ok=True)
            files.append(folder / f".{split}-{len(files):05d}.parquet")
            writer = pq.ParquetWriter(files[-1], schema)
            state = writers[split] = {"writer": writer, "bytes": 0, "files": files, "rows": []}
        state["rows"].append(item)
        state["bytes"] += size
        if len(state["rows"]) >= GROUP:
            flush(state)
        counts[split] = counts.get(split, 0) + 1
    for split, state in writers.items():
        flush(state)
        state["writer"].close()
        files = state["files"]
        for i, f in enumerate(files):  # the names datasets reads the split from
            f.rename(folder / f"{split}-{i:05d}-of-{len(files):05d}.parquet")
    return counts
