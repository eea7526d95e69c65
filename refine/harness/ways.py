"""What made a table's value, and whether it is what made the paper's figure (a recipe
table's way check, :mod:`refine.harness.recipe_tables`).

A value's way is everything that moves it besides the images: the formula where a metric
has several (the EXAG variant, CUBE's quality source), and, as the catalog says the metric
needs them (``metrics.catalog.Metric.needs``), the observer's model id and the match
threshold tau it was scored at, the judge's model id and how it was read (by
log-probabilities, or sampled, with the mean answers a reading). A bench cell records its
scorer's ids and tau; each image records, per value a judge read, the judge and its
reading (``judged``: the bench's ``_image_record``, kept through a rescore).

A recipe states the paper's way (``[table.made_with]``, per metric and per paper row where
they differ). The paper's figure and a difference from it are set beside a value only
where every part the recipe states is the same; elsewhere the figure is shown apart,
headed by what differs, with no difference."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# the parts of a way, in the order they are said
PARTS = ("variant", "observer", "tau", "judge", "read")
SAMPLED = "sampled"
UNKNOWN = "not recorded"
# the judged values whose judges and readings a metric's value carries: FAITH EXAG's,
# VIEScore its semantic score's and the quality reading's (a rescore may read the first
# again and keep the second: then the way names both judges)
CARRIED = {"faith": ("exag",), "vie_overall": ("vie_sc", "quality")}


def parts_of(metric: str) -> tuple[str, ...]:
    """The parts of ``metric``'s way besides its variant: the observer and tau where the
    catalog says it needs an observer, the judge and its reading where it needs a judge
    (none for a metric outside the catalog)."""
    from metrics.catalog import CATALOG

    found = CATALOG.get(metric)
    if found is None:
        return ()
    needs = found.needs
    out: tuple[str, ...] = ()
    if "observer" in needs:
        out += ("observer", "tau")
    if "judge" in needs:
        out += ("judge", "read")
    return out


def _observer(cell: dict[str, Any]) -> str | None:
    """The observer whose observations the cell's values stand on: a rescore that did not
    observe again kept its source's."""
    rescored = cell.get("rescored") or {}
    if rescored and not rescored.get("observed_again") and rescored.get("observer"):
        return rescored["observer"][0]
    return (cell.get("scorer") or {}).get("observer")


def _judged(cell: dict[str, Any], image: dict[str, Any], source: str) -> tuple[Any, Any]:
    """(the judge, its reading) of one image's judged value ``source``: as the image
    records it, else the judge of the cell that read it with its reading not recorded (a
    bench made before they were: a rescore's kept value is its source's judge's)."""
    got = (image.get("judged") or {}).get(source)
    if got:
        return got.get("by"), _read_words(got.get("read"))
    rescored = cell.get("rescored") or {}
    if rescored.get("judge") and source in (rescored.get("kept") or ()):
        return rescored["judge"][0], None
    return (cell.get("scorer") or {}).get("judge"), None


def _read_words(mode: str | None) -> str | None:
    """``logprobs`` or ``sampled`` (the answers of each reading are counted apart)."""
    if not mode:
        return None
    return SAMPLED if str(mode).startswith(SAMPLED) else str(mode)


def _answers(image: dict[str, Any], source: str) -> int | None:
    got = (image.get("judged") or {}).get(source) or {}
    mode = str(got.get("read") or "")
    k = mode.partition(" k=")[2]
    return int(k) if k.isdigit() else None


def _of_variant(image: dict[str, Any], metric: str, variant: str) -> bool:
    """Whether an image's ``metric`` was made by ``variant`` (EXAG's and FAITH's; any image
    where no variant is asked, or the metric has one way)."""
    from metrics.catalog import VARIANT_BOUND
    from refine.records import variant_name

    if not variant or metric not in VARIANT_BOUND:
        return True
    return variant_name(image.get("exag_variant")) == variant


def made(cells: Iterable[dict[str, Any]], metric: str, variant: str = "") -> dict[str, Any]:
    """What made ``metric``'s values in ``cells``: each part of its way, one value or, where
    the cells differ, a sorted list of them (None: not recorded); ``answers``: the mean
    answers a sampled reading took, where the judge sampled."""
    seen: dict[str, set[Any]] = {p: set() for p in parts_of(metric)}
    answers: list[int] = []
    for cell in cells:
        images = [im for im in cell.get("images") or [] if _of_variant(im, metric, variant)]
        if cell.get("images") and not images:
            continue  # its images were made another way: another row holds them
        if "observer" in seen:
            seen["observer"].add(_observer(cell))
            seen["tau"].add(cell.get("tau"))
        if "judge" in seen:
            for image in images:
                if image.get(metric) is None:
                    continue
                for source in CARRIED.get(metric, (metric,)):
                    by, read = _judged(cell, image, source)
                    seen["judge"].add(by)
                    seen["read"].add(read)
                    if (k := _answers(image, source)) is not None:
                        answers.append(k)
    out: dict[str, Any] = {"variant": variant or None} if variant else {}
    for part, values in seen.items():
        known = sorted(v for v in values if v is not None)
        if len(values) > 1:  # several, those not recorded among them
            out[part] = known + [UNKNOWN] * (None in values)
        else:
            out[part] = known[0] if known else None
    if answers:
        out["answers"] = sum(answers) / len(answers)
    return out


def short(model: str) -> str:
    """A model id as people name it: ``hf:OpenGVLab/InternVL3-14B-hf`` -> ``InternVL3-14B-hf``."""
    return str(model).split(":", 1)[-1].rstrip("/").split("/")[-1] or str(model)


def _said(part: str, value: Any, answers: float | None = None) -> str:
    if value is None or value == UNKNOWN:
        return f"{part} {UNKNOWN}"
    if isinstance(value, list):
        return f"several: {' or '.join(_said(part, v) for v in value)}"
    if part in ("observer", "judge"):
        return short(value)
    if part == "tau":
        return f"tau {value:g}"
    if part == "read":
        if value == SAMPLED and answers:
            return f"sampled ({answers:.1f} answers a reading)"
        return "by log-probabilities" if value == "logprobs" else str(value)
    return str(value)


def words(here: dict[str, Any]) -> str:
    """What made a value (:func:`made`), in words: ``observer InternVL3-14B-hf, tau 0.52,
    judge clip-flant5-xxl, by log-probabilities`` ("" where nothing is recorded)."""
    out = []
    for part in PARTS[1:]:
        if part not in here:
            continue
        said = _said(part, here[part], here.get("answers"))
        out.append(f"{part} {said}" if part in ("observer", "judge") and here[part] else said)
    return ", ".join(out)


def differs(here: dict[str, Any], paper: dict[str, Any]) -> str:
    """Where ``here`` (:func:`made`) is not the paper's way (the parts the recipe states),
    in words: ``paper: InternVL3-14B-hf, tau 0.52; here: gemini-3.8-flash, tau 0.6``; ""
    where every stated part is the same."""
    apart = [
        p
        for p in PARTS
        if p in paper and paper[p] is not None and (p in here or p == "variant")
        and not _same(p, here.get(p), paper[p])
    ]  # fmt: skip
    if not apart:
        return ""
    theirs = ", ".join(_said(p, paper[p]) for p in apart)
    ours = ", ".join(_said(p, here.get(p), here.get("answers")) for p in apart)
    return f"paper: {theirs}; here: {ours}"


def _same(part: str, here: Any, paper: Any) -> bool:
    if isinstance(here, list) or here is None:
        return False
    if part == "tau":
        return abs(float(here) - float(paper)) < 5e-4  # stated to two or three decimals
    if part in ("observer", "judge"):
        return model_key(here) == model_key(paper)
    return str(here) == str(paper)


def model_key(model: Any) -> str:
    """A model as its weights are named, whatever backend served them: the hub id without
    the backend's prefix, case or the transformers build's ``-hf`` (``hf:OpenGVLab/
    InternVL3-14B-hf`` and vLLM's ``openai:OpenGVLab/InternVL3-14B`` are one model); a
    local path stays itself."""
    name = str(model).split(":", 1)[-1].rstrip("/").casefold()
    return name.removesuffix("-hf")
