"""What a rescore reads again with its judge (:mod:`refine.harness.tasks.rescore.cell`):
EXAG by another variant, and the record of each image whose EXAG was read again; which
baselines a new judge cannot read."""

from __future__ import annotations

from typing import Any

from refine.harness.tasks.rescore.plan import RescoreError


def image_again(
    im: dict[str, Any], observed: Any, ahead: Any, exag: dict[str, Any], faith: Any, judge: Any
) -> dict[str, Any]:
    """A source image's record with its ALIGN, HAL and FAITH scored again, and its EXAG
    (with the judge that read it, ``judged``) where it was read again."""
    exag = dict(exag)
    again, read = "read" in exag, exag.pop("read", None)
    record = {**im, **exag, "observed": observed, "align": ahead.align, "hal": ahead.hal,
              "faith": faith}  # fmt: skip
    if again:  # EXAG read again by this judge, and FAITH with it
        mine = {"by": judge, "read": read}
        record["judged"] = {**(im.get("judged") or {}), "exag": mine, "faith": mine}
    return record


def exag_again(
    maker: Any, images: list[Any], observed: list[Any], refs: Any, tau: float, where: str
) -> list[dict[str, Any]]:
    """EXAG of each image read again by the rescore's variant (AHEaD Tab. 9 on the same
    images): ``exag:ita`` against the prompt's real photos (a ValueError says how to get
    them where there are none), ``exag:mllm`` from the judge's rating without them."""
    from metrics.ahead import exag_of
    from refine.evaluate.assess import ita
    from refine.harness.tasks.bench.cells import exaggerated_record

    if not refs.stereotypes:
        raise RescoreError(f"{where}: no stereotype candidates, so no EXAG to read again")
    if maker.exag == "exag:ita" and not ita(refs):
        raise RescoreError(
            f"{where}: --exag ita reads the activity's real photos, and it has none (refine "
            "data fetch ahead --photos, or refine photos search / add)"
        )
    if maker.exag == "exag:mllm":
        refs = refs.model_copy(update={"reference_images": []})
    out = []
    for image, o in zip(images, observed, strict=True):
        judged = maker.assessor.exaggeration(image, o, refs, tau)
        (got,) = exag_of([judged.answer])
        listed = exaggerated_record(judged.exaggerated)
        read = got.reading.mode if got.reading is not None else None
        out.append(
            {
                "exag": got.value,
                "exag_variant": judged.answer.variant,
                "exaggerated": listed,
                "read": read,
            }
        )
    return out


RATED_BY = {"judge_align": "rate_prefixed", "judge_hal": "rate_prefixed",
            "vie_sc": "rate_scale", "vie_overall": "rate_scale"}  # fmt: skip


def unreadable(scorer: Any, baselines: tuple[str, ...]) -> dict[str, str]:
    """The baselines a judge cannot read (it lacks the rating they take), and why."""
    judge = scorer.get("judge")
    return {
        b: f"the judge {scorer.names.get('judge')} gives no {RATED_BY[b]} ratings"
        for b in baselines
        if b in RATED_BY and not callable(getattr(judge, RATED_BY[b], None))
    }


def baselines_again(
    maker: Any, images: list[Any], refs: Any, records: list[dict[str, Any]], names: list[str],
    judge: Any,
) -> None:  # fmt: skip
    """The baselines ``names`` scored from the images into their ``records`` (with the
    judge that read each, TIFA's answers, and why any is missing)."""
    from refine.evaluate.baselines import rescored
    from refine.harness.tasks.bench.top_up import with_baselines

    got = rescored(maker.assessor, images, refs, names, known=records)
    for i, scores in enumerate(got):  # each record in place: the caller's list holds them
        records[i] = with_baselines(records[i], scores, names, judge)
