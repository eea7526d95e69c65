"""Views of a run record: metric series, table rows, the descriptor checklist and short
texts. The CLI summary, the app (``ui/adapters.py``) and the HTML report are all built from
these, so they show the same numbers for the same run. No model code, no UI code.

Series are per round (the chosen candidate): FAITH, ALIGN, HAL, EXAG, drift (1 - cosine to
the parent), the best FAITH so far, quality (the judge's VIEScore reading) and CLIP-IQA,
SoS per prompt language (``SoS en``, ``SoS fr``), FAITH
per extra language (``FAITH fr``, with language scores), and the country's CAIRE score on
a 0-1 scale (``CAIRE Iran (0-1)`` = (score - 1) / 4). A series that never has a value is left
out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metrics.catalog import CATALOG, heading_of, label, names
from metrics.catalog import computed as computed_metrics
from metrics.descriptors import DIMENSIONS
from refine.loop import tracking
from refine.loop.instructions import NEAR_MARGIN, near_matches
from refine.numbers import MISSING, shown, with_error
from refine.records import Exaggerated, Match, RefusedRound, Round, Run, Scores
from refine.usage import tokens_text

FAITH, ALIGN, HAL, EXAG = label("faith"), label("align"), label("hal"), label("exag")
DRIFT, QUALITY = label("drift"), label("quality")
BEST_FAITH = f"best {FAITH}"
CHART_X, CHART_Y = "round", "score (0 to 1; SoS -1 to 1)"
CHECK_KINDS = ("aligned", "missing", "hallucinated")
# the table's own columns, before and after the metrics the catalog adds (table_extras);
# a metric's carries its direction (FAITH ↑, HAL ↓)
_TABLE_FIRST = ("round", "decision", FAITH, QUALITY, ALIGN, HAL, EXAG, DRIFT)
_TABLE_LAST = ("reason", "CAIRE 1-5", "SoS / languages", "API tokens")


def quality_names() -> tuple[str, ...]:
    """The catalog's quality readings, in its order."""
    return names("quality")


# image metrics computed only when asked for (``--baselines``), which a run never asks
ASKED_FOR = ("baseline",)


def image_metrics_after() -> tuple[str, ...]:
    """The image metrics a run's chart and glossary show after AHEaD's (the quality
    readings, and whatever else the assessor computes for a run), in catalog order."""
    first = names("ahead", level="image")
    more = [m.name for m in computed_metrics("image") if m.group not in ASKED_FOR]
    return tuple(
        m for m in names(level="image") if m not in first and m in (*quality_names(), *more)
    )


def table_extras() -> tuple[str, ...]:
    """The image metrics the rounds table shows after drift: those the catalog computes
    beyond the quality readings (a registered metric; the judge's quality has its own
    column), in catalog order. Read when the app is built and as each table is made."""
    return tuple(m for m in image_metrics_after() if CATALOG[m].group != "quality")


def table_headers() -> list[str]:
    """The rounds table's headers, in :func:`rounds_table`'s order."""
    extras = tuple(label(m) for m in table_extras())
    return [heading_of(h) for h in (*_TABLE_FIRST, *extras, *_TABLE_LAST)]


def series_names() -> tuple[str, ...]:
    """The chart's series of a run's metrics, in their order (see :func:`metric_series`)."""
    first = tuple(label(m) for m in names("ahead", level="image"))
    return (*first, DRIFT, BEST_FAITH, *(label(m) for m in image_metrics_after()))


def run_metrics() -> tuple[str, ...]:
    """Every metric a run can show, in the glossary's order."""
    first = names("ahead", "quality")
    more = tuple(m for m in image_metrics_after() if m not in first)
    return (*first, *more, "caire", *names("sos"), *names("expectations"))


def scores_made_by(scores: Scores) -> str:
    """How EXAG (and FAITH, where not by AHEaD's formula) were made, in words
    (:meth:`refine.records.Scores.made_by`)."""
    return scores.made_by()


def exag_in(scores: Scores) -> str:
    """Which EXAG a run's scores used, for the app's glossary: the variant in words, the
    photos, the tau, and whether it compares with the AHEaD paper's tables."""
    words = scores_made_by(scores)
    variant = scores.variants.get("exag")
    if variant == "exag:ita":
        words += "; the paper's EXAG (Eq. 3-4)"
    elif variant in ("exag:mllm", "exag:judge-rubric"):
        words += (
            "; no real photos of this activity, so not comparable with the paper's Table 1 "
            "(refine photos search, or refine data fetch ahead --photos)"
        )
    if scores.tau is not None:
        words += f"; tau {scores.tau:g}"
    return words


def glossary() -> list[tuple[str, str]]:
    """(term, what it means) for every number a run shows: its metrics from the catalog
    (with direction and range), then the best FAITH, the target, tau and the round marks."""
    from refine.settings import SETTINGS

    out = [(CATALOG[n].heading, _meaning(n)) for n in run_metrics()]
    out += [
        (
            heading_of(BEST_FAITH),
            "the FAITH of the best round so far (the pale band under FAITH): the image the "
            "next edit starts from.",
        ),
        ("target", f"{SETTINGS['target'].help.rstrip('.')}: the dotted line on the chart."),
        (
            "tau",
            f"{SETTINGS['tau'].help} A phrase the image shows counts as a reference it matches "
            "when their similarity reaches tau; a near match falls just below it.",
        ),
        (
            "\u00b1",
            "a value read from a judge's sampled answers (an API judge without "
            "log-probabilities) carries its standard error: FAITH 0.712 \u00b1 0.031 (on the "
            "chart, the shaded band around its line). An edit is kept only when its gain is "
            "more than that error can explain.",
        ),
        (
            "\u2713 accepted / \u2717 rejected",
            "an edit is kept when it raises FAITH enough without drifting too far or losing "
            "quality; after a rejected one, the next edit starts again from the best round.",
        ),
    ]
    return out


def _meaning(name: str) -> str:
    m = CATALOG[name]
    return f"{m.better} is better, {m.span}. {m.help}"


def rounded(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def drift_value(r: Round) -> float | None:
    """1 - cosine of the chosen image and its parent (None for round 0)."""
    d = r.best.drift
    return None if d is None else d.value


def caire_unit(r: Round) -> tuple[str, float] | None:
    """(label, the run country's CAIRE score on a 0-1 scale) of a round, or None."""
    if not r.caire:
        return None
    from metrics.caire import unit_score

    own = r.caire.labels[0]
    return own.label, unit_score(own.score)


# the series whose values can be read from sampled answers, and so carry an error
WITH_ERRORS = {FAITH: "faith", EXAG: "exag", QUALITY: "quality"}


def metric_errors(run: Run) -> dict[str, list[float | None]]:
    """The standard error of each round's value in the series that have one
    (:data:`WITH_ERRORS`, read from sampled answers): a series is left out where no
    round's value was sampled (log-probabilities read a value once, with no error)."""
    out: dict[str, list[float | None]] = {}
    for name, metric in WITH_ERRORS.items():
        errors = [r.best.scores.stderr(metric) for r in run.rounds]
        if any(e is not None for e in errors):
            out[name] = errors
    return out


def metric_series(run: Run) -> dict[str, list[float | None]]:
    """Every metric per round, in a stable order (see the module docstring)."""
    n = len(run.rounds)
    series: dict[str, list[float | None]] = {}

    def put(name: str, k: int, value: float | None) -> None:
        if value is not None:
            series.setdefault(name, [None] * n)[k] = value

    best: float | None = None
    for k, r in enumerate(run.rounds):
        s = r.best.scores
        put(FAITH, k, s.faith)
        put(ALIGN, k, s.align)
        put(HAL, k, s.hal)
        put(EXAG, k, s.exag)
        put(DRIFT, k, drift_value(r))
        if r.decision in ("initial", "accepted"):
            best = s.faith
        put(BEST_FAITH, k, best)
        for m in image_metrics_after():
            put(label(m), k, s.value(m))
    order = [m for m in series_names() if m in series]
    series = {m: series[m] for m in order}
    for k, r in enumerate(run.rounds):
        put("SoS en", k, r.sos)
        for lang, entry in r.languages.items():
            put(f"SoS {lang}", k, entry.sos)
        for lang, entry in r.languages.items():
            put(f"FAITH {lang}", k, entry.scores.faith if entry.scores else None)
        own = caire_unit(r)
        if own is not None:
            put(f"CAIRE {own[0]} (0-1)", k, own[1])
        if r.expectations:
            put("explicit met", k, r.expectations.explicit_met)
            put("implicit met", k, r.expectations.implicit_met)
    return series


def expectation_lines(r: Round) -> list[tuple[str, str, float, bool]]:
    """The chosen image's expectations as (kind, statement, yes-probability, met), explicit
    first, in the order they were listed."""
    if not r.expectations:
        return []
    checks = sorted(r.expectations.checks, key=lambda c: c.kind != "explicit")
    return [(c.kind, c.statement, c.p_yes, c.met) for c in checks]


def expectations_text(r: Round) -> str:
    """``explicit 1/2 met, implicit 1/3 met`` (empty without expectations)."""
    if not r.expectations:
        return ""
    parts = []
    for kind in ("explicit", "implicit"):
        mine = [c for c in r.expectations.checks if c.kind == kind]
        if mine:
            parts.append(f"{kind} {sum(c.met for c in mine)}/{len(mine)} met")
    return ", ".join(parts)


def metric_rows(run: Run) -> list[dict[str, object]]:
    """The series in long format, ``{"round", "metric", "value"}`` (values rounded)."""
    return [
        {"round": k, "metric": name, "value": rounded(v)}
        for k in range(len(run.rounds))
        for name, values in metric_series(run).items()
        if (v := values[k]) is not None
    ]


def chart_range(series: dict[str, list[float | None]]) -> tuple[float, float]:
    """[0, 1], widened to [-1, 1] when a value (an SoS) is negative."""
    low = min([0.0, *(v for vs in series.values() for v in vs if v is not None)])
    return (-1.0 if low < 0 else 0.0, 1.0)


YOURS = "your references"


def decision_text(r: Round) -> str:
    """``accepted``, ``rejected (by hand)``; a regenerating round, or one whose move auto
    chose, says its move: ``accepted · regenerate``; a round scored against references a
    person changed says so: ``accepted · your references``."""
    move = f" · {r.kind}" if r.kind == "regenerate" or r.move_reason else ""
    # scored against references a person changed (refine.loop.aims)
    mine = f" · {YOURS}" if r.references else ""
    return r.decision + (" (by hand)" if r.by_hand else "") + move + mine


def reason_text(r: Round) -> str:
    """The decision's reason, after the move's where auto chose it."""
    return f"{r.kind}: {r.move_reason}; {r.reason}" if r.move_reason else r.reason


def rounds_table(run: Run) -> list[list[object]]:
    """One row per round, in :func:`table_headers` order; the numbers to 3 decimals, as
    the chart, the checklist and the "so far" line show them, a value read from sampled
    answers with its standard error (``0.712 ± 0.031``), and the dash where a value is
    missing (round 0's drift, a quality the judge does not give)."""

    def cell(x: float | None, stderr: float | None = None) -> float | str:
        if x is not None and stderr is not None:  # read from sampled answers: ± its error
            return with_error(x, stderr)
        return MISSING if x is None else round(x, 3)

    rows = []
    extras = table_extras()
    refused = list(run.refused)  # each before the round made again in its place
    for r in run.rounds:
        while refused and refused[0].round <= r.index:
            rows.append(refused_row(refused.pop(0), len(extras)))
        s = r.best.scores
        rows.append(
            [
                r.index,
                decision_text(r),
                cell(s.faith, s.stderr("faith")),
                cell(s.quality, s.stderr("quality")),
                cell(s.align),
                cell(s.hal),
                cell(s.exag, s.stderr("exag")),
                drift_text(r),
                *(cell(s.value(m)) for m in extras),
                reason_text(r),
                caire_text(r),
                languages_text(r),
                tokens_text(r.usage),
            ]
        )
    rows.extend(refused_row(x, len(extras)) for x in refused)
    return rows


def refused_row(x: RefusedRound, extras: int) -> list[object]:
    """A round the model refused, in :func:`rounds_table`'s columns: nothing was made, so
    no number; its reason says what each candidate was refused for."""
    move = " · regenerate" if x.kind == "regenerate" else ""
    return [x.round, f"refused{move}", *[MISSING] * (6 + extras), x.why(), "", "", ""]


@dataclass(frozen=True)
class Check:
    """One line of the descriptor checklist."""

    dimension: str
    kind: str  # aligned, missing, hallucinated, near (a near match the edit leaves alone)
    match: Match


def checklist(
    r: Round, near_margin: float | None = None
) -> tuple[dict[str, list[Check]], list[Exaggerated]]:
    """The chosen image's descriptors per dimension (aligned, missing, hallucinated, in
    that order) and the stereotype candidates seen as exaggerated. A hallucinated item
    within ``near_margin`` below tau of its reference is a ``near`` match (the edit leaves
    it alone; see :mod:`refine.loop.instructions`)."""

    fb = r.best.feedback
    margin = NEAR_MARGIN if near_margin is None else near_margin
    near = {id(m) for m in near_matches(fb, r.best.scores.tau, margin)}
    by_dim: dict[str, list[Check]] = {}
    for d in DIMENSIONS:
        items = [
            Check(d, "near" if id(m) in near else kind, m)
            for kind in CHECK_KINDS
            for m in getattr(fb, kind)
            if m.dimension == d
        ]
        if items:
            by_dim[d] = items
    return by_dim, list(fb.exaggerated)


def near_lines(run: Run) -> list[str]:
    """``round 0: Bowl of stew ~ bowl of stew with herbs (0.50)`` per near match of a
    round's chosen image (what the next edit leaves alone)."""

    lines = []
    for r in run.rounds:
        near = near_matches(r.best.feedback, r.best.scores.tau, run.spec.near_margin)
        if near:
            items = "; ".join(f"{m.phrase} ~ {m.best_match} ({m.similarity:.2f})" for m in near)
            lines.append(f"near matches round {r.index} (kept by the next edit): {items}")
    return lines


def exaggerated_detail(e: Exaggerated) -> str:
    """``observed oversized hookah, similarity 0.812`` or ``excess 0.300, source ...``."""
    parts = []
    for key in ("observed", "similarity", "excess", "source"):
        v = getattr(e, key)
        if v is not None:
            parts.append(f"{key} {v:.3f}" if isinstance(v, float) else f"{key} {v}")
    return ", ".join(parts)


def caire_scores_text(r: Round) -> str:
    """``Iran 2 · Turkey 4`` (empty without CAIRE)."""
    if not r.caire:
        return ""
    return " \u00b7 ".join(f"{s.label} {s.score}" for s in r.caire.labels)


def caire_text(r: Round) -> str:
    """A round's CAIRE scores in one line: labels and 1-5 scores, the linked entity, and
    the note when the image reads more as another culture; empty without CAIRE."""
    if not r.caire:
        return ""
    where = r.caire.mode
    if r.caire.entity:
        where += f", linked to {r.caire.entity['name']}"
    note = f"; {r.caire_note}" if r.caire_note else ""
    return f"{caire_scores_text(r)} ({where}){note}"


def languages_text(r: Round) -> str:
    """SoS (and FAITH with language scores) per prompt language: ``en -0.156 · fr -0.409
    (FAITH 0.612)``; the languages followed when there is no bank."""
    if r.sos is None and not r.languages:
        return ""

    def one(lang: str, sos: float | None, faith: float | None = None) -> str:
        text = lang if sos is None else f"{lang} {sos:+.3f}"
        return text if faith is None else f"{text} (FAITH {faith:.3f})"

    parts = [one("en", r.sos)] + [
        one(k, v.sos, v.scores.faith if v.scores else None) for k, v in r.languages.items()
    ]
    return " \u00b7 ".join(parts)


def faith_text(x: float | None) -> str:
    return shown(x)


def quality_text(s: Scores) -> str:
    """``quality 0.700`` (``, CLIP-IQA 0.610`` with a local profile): each quality reading
    of the catalog that was read; empty when none was."""
    read = [(m, s.value(m)) for m in quality_names()]
    return ", ".join(f"{label(m)} {with_error(v, s.stderr(m))}" for m, v in read if v is not None)


def round_caption(run: Run, r: Round) -> str:
    """``✓ round 1: accepted, FAITH 0.712, quality 0.700 (best)``."""
    mark = {"accepted": "\u2713", "rejected": "\u2717"}.get(r.decision, "\u25cf")
    hand = " by hand" if r.by_hand else ""
    best = " (best)" if r.index == run.best_round else ""
    quality = quality_text(r.best.scores)
    quality = f", {quality}" if quality else ""
    s = r.best.scores
    return (
        f"{mark} round {r.index}: {r.decision}{hand}, "
        f"FAITH {with_error(s.faith, s.stderr('faith'))}{quality}{best}"
    )


def gallery(run: Run, run_dir: str | Path) -> list[tuple[str, str]]:
    """Every round's chosen image (a path under ``run_dir``) with its caption."""
    return [(str(Path(run_dir) / r.best.image), round_caption(run, r)) for r in run.rounds]


def language_gallery(run: Run, run_dir: str | Path, k: int) -> list[tuple[str, str]]:
    """Round ``k``'s image in each extra prompt language, captioned with SoS and FAITH."""
    items = []
    for lang, entry in run.rounds[k].languages.items():
        caption = f"round {k}, {lang}" + ("" if entry.sos is None else f": SoS {entry.sos:+.3f}")
        if entry.scores and entry.scores.faith is not None:
            caption += f", FAITH {entry.scores.faith:.3f}"
        items.append((str(Path(run_dir) / entry.image), caption))
    return items


def before_after(run: Run, run_dir: str | Path, k: int) -> tuple[Any, str]:
    """(parent image, this round's chosen image) of round ``k``; round 0 has no parent and
    is shown alone (the same image on both sides); a localized edit's parent with its
    boxes drawn on it."""
    r = run.rounds[k]
    run_dir = Path(run_dir)
    here = str(run_dir / r.best.image)
    if r.parent is None:
        return here, here
    before = str(run_dir / run.rounds[r.parent].best.image)
    return (regions_overlay(before, r.regions) if r.regions else before), here


# a box's colour by what it holds: red around what is wrong, green where a missing item goes
REGION_COLOURS = {"hallucinated": (230, 40, 40), "exaggerated": (240, 150, 0),
                  "missing": (30, 170, 60), "by hand": (40, 110, 230)}  # fmt: skip


def regions_overlay(path: str | Path, regions: Any) -> Any:
    """The image at ``path`` with a localized edit's boxes drawn on it (a PIL image)."""
    from PIL import Image, ImageDraw

    from refine.backends.regions import pixels

    with Image.open(path) as im:
        out = im.convert("RGB")
    draw = ImageDraw.Draw(out)
    width = max(2, min(out.size) // 120)
    for reg in regions:
        left, top, right, bottom = pixels(reg.box, out.size)
        colour = REGION_COLOURS.get(reg.kind or reg.source, (255, 255, 255))
        draw.rectangle([left, top, right - 1, bottom - 1], outline=colour, width=width)
    return out


def drift_text(r: Round) -> float | str:
    """The rounds table's drift: the value, and for a localized edit the drift inside and
    outside its boxes beside it."""
    d = r.best.drift
    value = drift_value(r)
    if value is None:
        return MISSING
    if d is None or (d.inside is None and d.outside is None):
        return round(value, 3)
    inside = MISSING if d.inside is None else f"{d.inside:.3f}"
    outside = MISSING if d.outside is None else f"{d.outside:.3f}"
    return f"{value:.3f} (in {inside}, out {outside})"


def progress_line(run: Run | None) -> str:
    """How far a run is: ``1 of 5 editing rounds · best FAITH 0.712 · 14 model calls ·
    9,310 tokens in, 1,204 out (14 API calls) · 23 s``; empty before round 0 is saved."""
    if run is None or not run.rounds:
        return ""
    done = len(run.rounds) - 1 + len(run.refused)  # a refused round was asked for too
    refused = f" ({len(run.refused)} refused by the model)" if run.refused else ""
    parts = [f"{done} of {run.spec.rounds} editing rounds{refused}"]
    if run.branched_from:  # a roll-back names where it comes from
        parts.insert(0, parent_text(run))
    best = run.best()
    if best is not None and best.best.scores.faith is not None:
        s = best.best.scores
        faith = with_error(s.faith, s.stderr("faith"))
        parts.append(f"best FAITH {faith} (target {run.spec.target:g})")
    parts.append(f"{run.model_calls} model calls")
    if run.usage:
        parts.append(tokens_text(run.usage))
    parts.append(f"{run.elapsed_s:.0f} s")
    if run.status != "running" and run.stop_reason:
        parts.append(f"stopped: {run.stop_reason}")
    last = run.rounds[-1]
    if last.by_hand:  # decided after the loop stopped: the line follows the decision
        parts.append(f"then round {last.index} {last.decision} by hand")
    return " \u00b7 ".join(parts)


def parent_text(run: Run) -> str:
    """``a new run from round 1 of RUN: 3 further round(s), with the run's own settings``
    (or ``with these changes: seed 43 (the run had 42)``) for a roll-back, else empty (a
    record written before the further rounds and changes were kept: only where from)."""
    came = run.branched_from
    if not came:
        return ""
    parent = Path(str(came.get("run", ""))).name
    text = f"a new run from round {came.get('round', 0)} of {parent}"
    further, changes = came.get("further"), came.get("changes")
    if not isinstance(further, int) or not isinstance(changes, dict):
        return text
    said = "; ".join(
        f"{n} {pair[0]} (the run had {pair[1]})"
        for n, pair in changes.items()
        if isinstance(pair, list) and len(pair) == 2
    )
    with_what = f"these changes: {said}" if said else "the run's own settings"
    return f"{text}: {further} further round(s), with {with_what}"


def references_lines(run: Run) -> list[str]:
    """Each change of the references a person made (when, from which round, what), and
    the best round's FAITH both ways: against their references and against the pack."""
    lines = [
        f"references changed by hand from round {c.round} ({c.source}, {c.at}): {c.describe()}"
        for c in run.reference_changes
    ]
    best = run.best()
    if lines and best is not None and best.best.against_pack is not None:
        mine, pack = best.best.scores.faith, best.best.against_pack.get("faith")
        lines.append(
            f"FAITH of the best round ({best.index}): {shown(mine, '.3f')} against your "
            f"references, {shown(pack, '.3f')} against the pack"
        )
    return lines


def branches_text(branches: list[tuple[str, int]]) -> str:
    """``continued from round 1 in RUN-from-r1`` for each run rolled back from this one."""
    return "; ".join(f"continued from round {k} in {name}" for name, k in branches)


def summary_lines(run: Run, run_dir: str | Path) -> list[str]:
    """The command line's summary of a finished run."""
    # FAITH read from sampled answers is shown with its standard error (0.712 ± 0.031)
    sampled = any(r.best.scores.stderr("faith") is not None for r in run.rounds)
    wide = 13 if sampled else 6
    lines = [
        f"\nrun {run.id}: {run.status}, stopped by {run.stop_reason}",
        f"{'round':>5} {'decision':9} {'FAITH':>{wide}} {'qual.':>6} {'ALIGN':>6} {'HAL':>6} "
        f"{'EXAG':>6}  image",
    ]
    for r in run.rounds:
        s = r.best.scores
        exag, quality = (shown(v, "6.3f", 6) for v in (s.exag, s.quality))
        faith = f"{with_error(s.faith, s.stderr('faith')):>{wide}}"
        mark = " *" if r.index == run.best_round else ""
        lines.append(
            f"{r.index:>5} {r.decision:9} {faith} {quality} {s.align:6.3f} {s.hal:6.3f} {exag}  "
            f"{r.best.image}{mark}"
        )
    if run.rounds:
        variant = scores_made_by(run.rounds[0].best.scores)
        lines.append(f"best round: {run.best_round} (*); EXAG: {variant}")
        lines.append(f"kept rounds: {figures_text(tracking.forgetting(run))}")
        for r in run.rounds:  # what a round undid, kept or not
            undone = tracking.lost_fixes(r.tracked)
            if undone:
                verb = "undid" if r.decision in tracking.KEPT else "would have undone"
                lines.append(f"round {r.index} ({r.decision}) {verb}: {tracking.fix_words(undone)}")
    for x in run.refused:  # asked for, nothing made: the next round edited the same image
        lines.append(x.describe())
    lines.extend(references_lines(run))
    for r in run.rounds:
        if r.caire:
            note = f"  <- {r.caire_note}" if r.caire_note else ""
            scores = caire_scores_text(r).replace(" \u00b7 ", ", ")
            lines.append(f"CAIRE round {r.index} ({r.caire.mode}): {scores}{note}")
    for r in run.rounds:
        if r.languages or r.sos is not None:
            lines.append(f"languages round {r.index}: {sos_line(r)}")
    lines.extend(near_lines(run))
    if run.usage:
        lines.append(f"API usage: {tokens_text(run.usage)}")
    lines.append(f"files: {run_dir}; HTML report: refine report {run_dir}")
    return lines


def sos_line(r: Round) -> str:
    """``en SoS -0.156 FAITH 0.700 · fr round_01_fr.png SoS -0.409 FAITH 0.612``."""

    def sos(v: float | None) -> str:
        return "" if v is None else f" SoS {v:+.3f}"

    def faith(v: float | None) -> str:
        return "" if v is None else f" FAITH {v:.3f}"

    parts = [f"en{sos(r.sos)}{faith(r.best.scores.faith)}"]
    parts += [
        f"{lang} {e.image}{sos(e.sos)}{faith(e.scores.faith if e.scores else None)}"
        for lang, e in r.languages.items()
    ]
    return " \u00b7 ".join(parts)


# the table's headers with the catalog as it is when this module loads (see table_headers)
TABLE_HEADERS = table_headers()


def figures_text(figures: dict[str, tracking.Forgetting]) -> str:
    """``2 of 8 fixes forgotten (setting 2 of 2); 0 of 4 removed items came back`` over the
    kept rounds."""
    t = tracking.totals(figures)
    where = [f"{d} {f.forgotten} of {f.fixed}" for d, f in figures.items() if f.forgotten]
    back = [f"{d} {f.came_back} of {f.removed}" for d, f in figures.items() if f.came_back]
    text = f"{t.forgotten} of {t.fixed} fix(es) forgotten"
    text += f" ({', '.join(where)})" if where else ""
    text += f"; {t.came_back} of {t.removed} removed item(s) came back"
    return text + (f" ({', '.join(back)})" if back else "")
