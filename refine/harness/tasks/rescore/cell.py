"""One cell of a rescore (:mod:`refine.harness.tasks.rescore.task`): the source cell's images
and observations scored again under the new tau, observer or baselines."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from metrics.catalog import BENCH_IMAGE, BENCH_PROMPT, prompt_values
from refine.harness.cells import Cell
from refine.harness.tasks.rescore.plan import RescoreError


def copy_image(src: Path, dst: Path) -> None:
    """The stored image in the new bench: a hard link where the filesystem allows one,
    else a copy."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _source_cell(maker: Any, key: tuple[Any, ...]) -> Cell:
    """The source's last cell of ``key``; the source's cells are read once a maker."""
    kept = getattr(maker, "source_cells", None)
    if kept is None:
        kept = maker.source_cells = {c.key: c for c in maker.source.cells()}  # the last wins
    if key not in kept:
        raise RescoreError(f"{key[0]}: {key[1]} ({key[2]}): no such cell in {maker.source.dir}")
    return kept[key]


def rescore_cell(maker: Any, job: tuple[str, ...]) -> Cell:
    """The source's cell of ``job`` with ALIGN, HAL, FAITH, pooled ALIGN, DDIV, SDIV and
    qVendi computed again (the stored observations at the new tau, or a new observer's),
    EXAG, quality and the kept baselines carried over, and the baselines it lacks scored
    from its images; its ``rescored`` names what was recomputed and from what."""
    from PIL import Image

    from metrics.ahead import faith, score_images, score_pooled
    from refine.evaluate.assess import DEFAULT_MAX_PER_DIMENSION as MOST
    from refine.evaluate.assess import DIMENSIONS, CallCounter, observer_calls
    from refine.evaluate.reference_source import ReferenceSource

    began = time.perf_counter()
    gen, act, country = job[:3]
    src = _source_cell(maker, (gen, act, country, tuple(maker.seeds)))
    if maker.references is not None:  # another reference set (a proposer's own)
        from refine.evaluate.references import find_references

        refs = find_references(act, country, maker.references)
    else:
        refs = ReferenceSource.default().find(act, country).pack
    images, files = [], []
    for im in src.images:
        path = maker.source.dir / im["file"]
        if not path.is_file():
            raise RescoreError(f"{gen}: {act} ({country}): its image {im['file']} is gone")
        copy_image(path, maker.store.dir / im["file"])
        with Image.open(path) as opened:
            images.append(opened.convert("RGB"))
        files.append(im["file"])
    calls = CallCounter()
    before = maker.assessor.calls.n
    if maker.new_observer:
        with maker.scorer.using("observer") as observer:
            many = getattr(observer, "describe_many", None)
            if callable(many) and len(images) > 1:
                observed = many(images, list(DIMENSIONS), MOST)
            else:
                observed = [observer.describe(im, list(DIMENSIONS), MOST) for im in images]
            calls.add(len(images) * observer_calls(observer))
    else:
        observed = [im["observed"] for im in src.images]
    tau = maker.tau
    with maker.scorer.using("text_embedder") as embedder:
        aheads = score_images(refs.descriptors, observed, embedder, tau=tau)
        pooled = score_pooled(refs.descriptors, observed, embedder, tau)
    exags = [{"exag": im.get("exag"), "exag_variant": im.get("exag_variant")} for im in src.images]
    if getattr(maker, "exag", None):
        from refine.harness.tasks.rescore.again import exag_again

        exags = exag_again(maker, images, observed, refs, tau, f"{gen}: {act} ({country})")
    from refine.harness.tasks.rescore.again import image_again

    judge = maker.scoring.get("judge")
    records = [
        image_again(im, o, a, x, faith(a.align, a.hal, x["exag"])[0], judge)
        for im, o, a, x in zip(src.images, observed, aheads, exags, strict=True)
    ]
    had = list(src.inputs.get("baselines") or ())
    added = [b for b in maker.plan.baselines if b not in had]
    # the kept baselines the judge reads, read again under a new judge
    rejudged = [b for b in had if b in getattr(maker, "rejudge", ())]
    lost = {b: why for b, why in (getattr(maker, "unreadable", None) or {}).items() if b in had}
    for record in records:  # the new judge cannot read them: gone, and said why
        for b, why in lost.items():
            record.pop(b, None)
            (record.get("judged") or {}).pop(b, None)
            record["missing"] = {**(record.get("missing") or {}), b: why}
    if rejudged:  # vie_sc is read with vie_overall: both go again, or neither
        rejudged += [b for b in ("vie_sc", "vie_overall") if b in had and b not in rejudged
                     and {"vie_sc", "vie_overall"} & set(rejudged)]  # fmt: skip
        for record in records:
            for b in rejudged:
                record.pop(b, None)
                (record.get("judged") or {}).pop(b, None)
    if added or rejudged:
        from refine.harness.tasks.rescore.again import baselines_again

        baselines_again(maker, images, refs, records, [*added, *rejudged], judge)
    calls.add(maker.assessor.calls.n - before)
    vendi = src.outputs.get("vendi")
    faiths = [r["faith"] for r in records]
    old = maker.source_config
    # every per-image and per-prompt figure but EXAG (the judge's, unless read again by
    # another variant) and Vendi (the images')
    again = bool(getattr(maker, "exag", None))
    recomputed = [m for m in (*BENCH_IMAGE, *BENCH_PROMPT) if m != "vendi"]
    recomputed = [m for m in recomputed if m != "exag" or again]
    rescored_note = {
        "from": str(Path(maker.source.dir).resolve()),
        "recomputed": recomputed + added + rejudged,
        "kept": [
            "images",
            *([] if again else ["exag"]),
            "quality",
            "vendi",
            *(b for b in had if b not in rejudged and b not in lost),
        ]
        + ([] if maker.new_observer else ["observed"]),  # fmt: skip
        **(
            {
                "exag_variant": [
                    sorted({str(im.get("exag_variant")) for im in src.images}),
                    maker.exag,
                ]
            }
            if again
            else {}
        ),  # fmt: skip
        "tau": [old.get("tau"), tau],
        "observer": [(old.get("scorer") or {}).get("observer"), maker.scoring.get("observer")],
        "observed_again": maker.new_observer,
        "judge": [(old.get("scorer") or {}).get("judge"), maker.scoring.get("judge")],
        "judged_again": rejudged,
        **({"unreadable": lost} if lost else {}),
        "baselines_added": added,
        "model_calls": calls.n,
    }
    return Cell(
        key=src.key,
        inputs={
            **src.inputs,
            "tau": tau,
            "scorer": maker.scoring,
            "baselines": [*had, *added],
            "baseline_models": {
                **(src.inputs.get("baseline_models") or {}),
                **maker.plan.checkpoints(),
            },
            "rescored": rescored_note,
        },
        outputs={
            **src.outputs,
            # every prompt figure again but the images' Vendi, kept
            **prompt_values(recomputed, {"vendi": vendi}, pooled=pooled, weights=faiths),
        },
        images=records,
        data=dict(src.data),
        timings={"rescore_s": time.perf_counter() - began},
    )
