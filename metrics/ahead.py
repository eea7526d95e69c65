"""AHEaD: alignment, hallucination, exaggeration and diversity of cultural descriptors.

Conventions (seed paper "Culture in Action", Sec. 3.2 and A.3):

* Similarity of two descriptors is the cosine of their L2-normalised text embeddings
  (all-MiniLM-L6-v2 by default). Every phrase is embedded once per embedder
  (:class:`metrics.text_embedding.PhraseEmbeddingCache`); all similarity matrices of a
  call are computed in one batched product on the embedder's device.
* A reference descriptor is **aligned** iff its best similarity to the predicted
  descriptors of the same dimension is ``> tau``; otherwise it is **missing**.
* A predicted descriptor (after de-duplication) is **hallucinated** iff its best
  similarity to the reference descriptors of the same dimension is ``<= tau``;
  otherwise it is **supported**.
* ALIGN of a dimension = aligned / references; HAL = hallucinated / predictions. A
  dimension with references but no predictions has ALIGN 0 and HAL 0. The reported
  value is the mean over the dimensions whose reference list is non-empty; predictions
  in a dimension without references are listed in the feedback as ``unscored`` and do
  not enter HAL.
* Single-image mode scores each image on its own; multi-image mode pools (and
  de-duplicates) the predictions of all images per dimension.
* EXAG (per image, ``exag:ita``, Eq. 3-4) = the largest positive excess of a stereotype
  candidate's ITA score (VQAScore) over its baseline (mean score over real photos of the
  activity in the country); the reported value is the mean over images. Without photos,
  ``exag:mllm`` (Tab. 31): the judge's expected 1-5 rating, (E[r] - 1) / 4.
  FAITH = mean(ALIGN, 1 - HAL, 1 - EXAG).
* DDIV = normalised entropy of how often each reference descriptor is aligned across
  N >= 2 images, per dimension (0 when nothing is aligned or the dimension has a single
  reference), averaged over dimensions. SDIV = pooled ALIGN - mean single-image ALIGN.
* tau defaults to 0.52; :func:`calibrate_tau` returns the q-th quantile (default 0.75)
  of the best-match similarities of reference descriptors on real images.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from metrics.computed import Computed
from metrics.descriptors import DIMENSIONS, normalise_descriptor_map, normalise_phrases
from metrics.judge import SAMPLED, Reading
from metrics.text_embedding import PhraseEmbeddingCache, TextEmbedder, default_cache

if TYPE_CHECKING:
    import torch

DEFAULT_TAU = 0.52

ALIGNED, MISSING = "aligned", "missing"
SUPPORTED, HALLUCINATED, UNSCORED = "supported", "hallucinated", "unscored"

DescriptorMap = Mapping[str, Sequence[str]]


@dataclass
class DescriptorMatch:
    """One descriptor's verdict: its best counterpart on the other side and how close it is."""

    dimension: str
    phrase: str
    status: str
    best_match: str | None
    similarity: float | None


@dataclass
class DimensionScore:
    align: float | None
    hal: float | None
    n_references: int
    n_predictions: int


class _MatchTable:
    """Best matches of every (item, dimension) group of one call, kept as arrays.

    Per-descriptor feedback is built from it only when a score's feedback is read.
    """

    def __init__(self, groups, ref_lists, pred_lists, ref_best, ref_arg, pred_best, pred_arg, tau):
        self.groups = groups  # [(item, dimension)]
        self.ref_lists = ref_lists
        self.pred_lists = pred_lists
        self.ref_best, self.ref_arg = ref_best, ref_arg
        self.pred_best, self.pred_arg = pred_best, pred_arg
        self.tau = tau

    def references(self, g: int) -> list[DescriptorMatch]:
        dim, refs, preds = self.groups[g][1], self.ref_lists[g], self.pred_lists[g]
        best, arg = self.ref_best[g].tolist(), self.ref_arg[g].tolist()
        out = []
        for k, phrase in enumerate(refs):
            found = arg[k] >= 0
            status = ALIGNED if found and best[k] > self.tau else MISSING
            match, sim = (preds[arg[k]], best[k]) if found else (None, None)
            out.append(DescriptorMatch(dim, phrase, status, match, sim))
        return out

    def predictions(self, g: int) -> list[DescriptorMatch]:
        dim, refs, preds = self.groups[g][1], self.ref_lists[g], self.pred_lists[g]
        best, arg = self.pred_best[g].tolist(), self.pred_arg[g].tolist()
        return [
            DescriptorMatch(
                dim,
                phrase,
                HALLUCINATED if best[k] <= self.tau else SUPPORTED,
                refs[arg[k]],
                best[k],
            )
            for k, phrase in enumerate(preds)
        ]


class AheadScore:
    """ALIGN/HAL of one image (single mode) or of a pool of images (multi mode).

    ``references`` lists every reference descriptor as aligned or missing with its best
    predicted match; ``predictions`` lists every prediction as supported, hallucinated or
    unscored (its dimension has no references) with its best reference match.
    """

    def __init__(
        self,
        align: float,
        hal: float,
        per_dimension: dict[str, DimensionScore],
        tau: float,
        table: _MatchTable | None = None,
        group_of: dict[str, int] | None = None,
        unscored: dict[str, list[str]] | None = None,
    ) -> None:
        self.align = align
        self.hal = hal
        self.per_dimension = per_dimension
        self.tau = tau
        self._table = table
        self._group_of = group_of or {}
        self._unscored = unscored or {}
        self._refs: list[DescriptorMatch] | None = None
        self._preds: list[DescriptorMatch] | None = None

    def __repr__(self) -> str:
        return f"AheadScore(align={self.align:.4f}, hal={self.hal:.4f}, tau={self.tau})"

    @property
    def references(self) -> list[DescriptorMatch]:
        if self._refs is None:
            self._refs = [
                m
                for dim in DIMENSIONS
                if dim in self._group_of
                for m in self._table.references(self._group_of[dim])
            ]
        return self._refs

    @property
    def predictions(self) -> list[DescriptorMatch]:
        if self._preds is None:
            out: list[DescriptorMatch] = []
            for dim in DIMENSIONS:
                if dim in self._group_of:
                    out.extend(self._table.predictions(self._group_of[dim]))
                else:
                    out.extend(
                        DescriptorMatch(dim, p, UNSCORED, None, None)
                        for p in self._unscored.get(dim, [])
                    )
            self._preds = out
        return self._preds

    def aligned_mask(self, dimension: str) -> np.ndarray:
        """Which references of ``dimension`` are aligned, in reference order (no feedback built)."""
        g = self._group_of.get(dimension)
        if g is None:
            return np.zeros(0, dtype=bool)
        n = len(self._table.ref_lists[g])
        return self._table.ref_best[g, :n] > self.tau

    @property
    def missing(self) -> list[DescriptorMatch]:
        return [m for m in self.references if m.status == MISSING]

    @property
    def aligned(self) -> list[DescriptorMatch]:
        return [m for m in self.references if m.status == ALIGNED]

    @property
    def hallucinated(self) -> list[DescriptorMatch]:
        return [m for m in self.predictions if m.status == HALLUCINATED]

    def feedback(self) -> dict[str, Any]:
        return {
            "references": [asdict(m) for m in self.references],
            "predictions": [asdict(m) for m in self.predictions],
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "align": self.align,
            "hal": self.hal,
            "per_dimension": {d: asdict(s) for d, s in self.per_dimension.items()},
        }


@dataclass
class ExagScore:
    """EXAG over N images and C stereotype candidates."""

    value: float
    per_image: list[float]
    candidates: list[str]
    excess: list[list[float]]  # [N][C]: score - baseline (may be negative)
    baseline: list[float]

    def exaggerated(self, image: int) -> list[tuple[str, float]]:
        """Candidates of one image with a positive excess, largest first."""
        row = self.excess[image]
        ranked = sorted(
            ((c, e) for c, e in zip(self.candidates, row, strict=True) if e > 0),
            key=lambda item: -item[1],
        )
        return ranked

    def exaggerated_overall(self) -> list[tuple[str, float]]:
        """Candidates ranked by their mean positive excess over images."""
        if not self.excess:
            return []
        mean_pos = np.clip(np.asarray(self.excess), 0.0, None).mean(axis=0)
        ranked = sorted(zip(self.candidates, mean_pos.tolist(), strict=True), key=lambda x: -x[1])
        return [(c, e) for c, e in ranked if e > 0]


@dataclass
class MultiImageScore:
    pooled: AheadScore
    images: list[AheadScore]
    ddiv: float | None
    sdiv: float | None
    ddiv_per_dimension: dict[str, float] = field(default_factory=dict)
    sdiv_per_dimension: dict[str, float] = field(default_factory=dict)


# ----------------------------------------------------------------------------- kernel


def _pad(rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Pad ragged index lists to a [B, max_len] array (-1 = empty) and their lengths."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max()) if len(rows) else 0
    out = np.full((len(rows), max(width, 1)), -1, dtype=np.int64)
    if lengths.sum():
        flat = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
        group = np.repeat(np.arange(len(rows)), lengths)
        offsets = np.cumsum(lengths) - lengths
        col = np.arange(flat.size) - np.repeat(offsets, lengths)
        out[group, col] = flat
    return out, lengths


def best_matches(
    matrix: torch.Tensor,
    ref_rows: Sequence[Sequence[int]],
    pred_rows: Sequence[Sequence[int]],
    chunk: int = 8192,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Best matches within each group of (reference rows, predicted rows) of ``matrix``.

    ``matrix`` holds L2-normalised embeddings. For B groups this computes the B
    similarity matrices in one batched product and returns, padded to the longest list:
    the best similarity of each reference over its group's predictions and that
    prediction's position, and the same for each prediction over the references.
    Missing counterparts give similarity ``-inf`` and position ``-1``.
    """
    import torch

    ref_idx, _ = _pad(ref_rows)
    pred_idx, _ = _pad(pred_rows)
    n = len(ref_rows)
    device = matrix.device
    ref_best = np.empty(ref_idx.shape, dtype=np.float32)
    ref_arg = np.empty(ref_idx.shape, dtype=np.int64)
    pred_best = np.empty(pred_idx.shape, dtype=np.float32)
    pred_arg = np.empty(pred_idx.shape, dtype=np.int64)
    with torch.no_grad():
        for start in range(0, n, chunk):
            stop = min(start + chunk, n)
            r = torch.as_tensor(ref_idx[start:stop], device=device)
            p = torch.as_tensor(pred_idx[start:stop], device=device)
            r_ok, p_ok = r >= 0, p >= 0
            er = matrix[r.clamp(min=0)]  # [b, R, d]
            ep = matrix[p.clamp(min=0)]  # [b, P, d]
            sim = torch.bmm(er, ep.transpose(1, 2))  # [b, R, P]
            valid = r_ok.unsqueeze(2) & p_ok.unsqueeze(1)
            sim = sim.masked_fill(~valid, float("-inf"))
            rb, ra = sim.max(dim=2)
            pb, pa = sim.max(dim=1)
            ra = ra.masked_fill(~torch.isfinite(rb), -1)
            pa = pa.masked_fill(~torch.isfinite(pb), -1)
            ref_best[start:stop] = rb.cpu().numpy()
            ref_arg[start:stop] = ra.cpu().numpy()
            pred_best[start:stop] = pb.cpu().numpy()
            pred_arg[start:stop] = pa.cpu().numpy()
    return ref_best, ref_arg, pred_best, pred_arg


# ----------------------------------------------------------------------------- scoring


def _normalised_refs(
    refs: DescriptorMap | Sequence[DescriptorMap], n_images: int
) -> list[dict[str, list[str]]]:
    if isinstance(refs, Mapping):
        shared = normalise_descriptor_map(refs)
        if not any(shared.values()):
            raise ValueError("the reference descriptor set is empty in every dimension")
        return [shared] * n_images
    if len(refs) != n_images:
        raise ValueError(f"got {len(refs)} reference sets for {n_images} images")
    out = []
    seen: dict[int, dict[str, list[str]]] = {}  # images of one activity share one map
    for i, r in enumerate(refs):
        norm = seen.get(id(r))
        if norm is None:
            norm = seen[id(r)] = normalise_descriptor_map(r)
            if not any(norm.values()):
                raise ValueError(f"reference set {i} is empty in every dimension")
        out.append(norm)
    return out


def _score_groups(
    refs_per_item: Sequence[dict[str, list[str]]],
    preds_per_item: Sequence[dict[str, list[str]]],
    embedder: TextEmbedder,
    tau: float,
    cache: PhraseEmbeddingCache,
) -> list[AheadScore]:
    """Score item i's predictions against item i's references (all items in one batch)."""
    # Every unique phrase of the call is encoded (or found in the cache) at once.
    phrases = list(
        dict.fromkeys(
            chain(
                chain.from_iterable(chain.from_iterable(r.values()) for r in refs_per_item),
                chain.from_iterable(chain.from_iterable(p.values()) for p in preds_per_item),
            )
        )
    )
    row_of = dict(zip(phrases, cache.lookup(embedder, phrases), strict=True)) if phrases else {}
    matrix = cache.matrix(embedder)

    groups: list[tuple[int, str]] = []
    ref_lists: list[list[str]] = []
    pred_lists: list[list[str]] = []
    for i, (ref, pred) in enumerate(zip(refs_per_item, preds_per_item, strict=True)):
        for dim in DIMENSIONS:
            if ref[dim]:
                groups.append((i, dim))
                ref_lists.append(ref[dim])
                pred_lists.append(pred[dim])

    n_groups = len(groups)
    align_g = hal_g = np.zeros(0)
    table = None
    if n_groups:
        ref_rows = [[row_of[p] for p in r] for r in ref_lists]
        pred_rows = [[row_of[p] for p in p_] for p_ in pred_lists]
        ref_best, ref_arg, pred_best, pred_arg = best_matches(matrix, ref_rows, pred_rows)
        table = _MatchTable(
            groups, ref_lists, pred_lists, ref_best, ref_arg, pred_best, pred_arg, tau
        )
        n_ref = np.fromiter(map(len, ref_lists), dtype=np.int64, count=n_groups)
        n_pred = np.fromiter(map(len, pred_lists), dtype=np.int64, count=n_groups)
        # padding holds -inf: never a hit; predictions beyond n_pred are masked out
        hits = (ref_best > tau).sum(axis=1)
        pred_valid = np.arange(pred_best.shape[1])[None, :] < n_pred[:, None]
        hals = ((pred_best <= tau) & pred_valid).sum(axis=1)
        align_g = (hits / n_ref).tolist()
        hal_g = np.divide(hals, n_pred, out=np.zeros(n_groups), where=n_pred > 0).tolist()

    results: list[AheadScore] = []
    g = 0
    for ref, pred in zip(refs_per_item, preds_per_item, strict=True):
        per_dim: dict[str, DimensionScore] = {}
        group_of: dict[str, int] = {}
        unscored: dict[str, list[str]] = {}
        a_sum = h_sum = 0.0
        n_dims = 0
        for dim in DIMENSIONS:
            if not ref[dim]:
                per_dim[dim] = DimensionScore(None, None, 0, len(pred[dim]))
                if pred[dim]:
                    unscored[dim] = pred[dim]
                continue
            a, h = align_g[g], hal_g[g]
            per_dim[dim] = DimensionScore(a, h, len(ref[dim]), len(pred[dim]))
            group_of[dim] = g
            a_sum += a
            h_sum += h
            n_dims += 1
            g += 1
        results.append(
            AheadScore(a_sum / n_dims, h_sum / n_dims, per_dim, tau, table, group_of, unscored)
        )
    return results


def score_images(
    refs: DescriptorMap | Sequence[DescriptorMap],
    preds: Sequence[DescriptorMap],
    embedder: TextEmbedder,
    tau: float = DEFAULT_TAU,
    cache: PhraseEmbeddingCache | None = None,
) -> list[AheadScore]:
    """Single-image mode: ALIGN, HAL and feedback for each image.

    ``refs`` is one descriptor map shared by all images or one map per image;
    ``preds`` holds the descriptors observed on each image.
    """
    check_tau(tau)
    refs_n = _normalised_refs(refs, len(preds))
    preds_n = [normalise_descriptor_map(p) for p in preds]
    return _score_groups(refs_n, preds_n, embedder, tau, _cache(cache))


def score_pooled(
    refs: DescriptorMap,
    preds: Sequence[DescriptorMap],
    embedder: TextEmbedder,
    tau: float = DEFAULT_TAU,
    cache: PhraseEmbeddingCache | None = None,
) -> MultiImageScore:
    """Multi-image mode: predictions pooled over images, plus DDIV and SDIV (N >= 2)."""
    check_tau(tau)
    if not isinstance(refs, Mapping):
        raise ValueError("multi-image mode needs one reference set shared by all images")
    if not preds:
        raise ValueError("multi-image mode needs at least one image's predictions")
    refs_n = _normalised_refs(refs, 1)
    preds_n = [normalise_descriptor_map(p) for p in preds]
    pooled = {d: normalise_phrases(chain.from_iterable(p[d] for p in preds_n)) for d in DIMENSIONS}
    scores = _score_groups(
        refs_n * (len(preds_n) + 1), [pooled, *preds_n], embedder, tau, _cache(cache)
    )
    pooled_score, singles = scores[0], scores[1:]
    ddiv = sdiv = None
    ddiv_dims: dict[str, float] = {}
    sdiv_dims: dict[str, float] = {}
    if len(singles) >= 2:
        ddiv_dims = descriptor_diversity(refs_n[0], singles)
        ddiv = sum(ddiv_dims.values()) / len(ddiv_dims)
        for dim, s in pooled_score.per_dimension.items():
            if s.align is None:
                continue
            mean_single = sum(x.per_dimension[dim].align for x in singles) / len(singles)
            sdiv_dims[dim] = s.align - mean_single
        sdiv = pooled_score.align - sum(x.align for x in singles) / len(singles)
    return MultiImageScore(pooled_score, singles, ddiv, sdiv, ddiv_dims, sdiv_dims)


def descriptor_diversity(
    refs: dict[str, list[str]], singles: Sequence[AheadScore]
) -> dict[str, float]:
    """DDIV per dimension from single-image verdicts over the same references."""
    out: dict[str, float] = {}
    for dim in DIMENSIONS:
        phrases = refs[dim]
        if not phrases:
            continue
        counts = np.zeros(len(phrases))
        for s in singles:
            counts += s.aligned_mask(dim)
        out[dim] = normalised_entropy(counts)
    return out


def normalised_entropy(counts: Sequence[float] | np.ndarray) -> float:
    """Entropy of ``counts / sum(counts)`` divided by ``log(len(counts))``.

    0 when the counts sum to 0 or there is a single category.
    """
    c = np.asarray(counts, dtype=float)
    total = c.sum()
    if c.size < 2 or total <= 0:
        return 0.0
    p = c[c > 0] / total
    return float(-(p * np.log(p)).sum() / math.log(c.size))


# ----------------------------------------------------------------------------- EXAG, FAITH


def exaggeration(
    scores: Sequence[Sequence[float]] | np.ndarray,
    baseline: Sequence[float] | np.ndarray,
    candidates: Sequence[str] | None = None,
) -> ExagScore:
    """EXAG from an [images x candidates] matrix of ITA scores and per-candidate baselines."""
    s = np.asarray(scores, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if s.ndim != 2:
        raise ValueError(f"scores must be an [images x candidates] matrix, got shape {s.shape}")
    if b.ndim != 1 or b.shape[0] != s.shape[1]:
        raise ValueError(
            f"baseline has {b.size} values but scores have {s.shape[1]} candidates per image"
        )
    if not (np.isfinite(s).all() and np.isfinite(b).all()):
        raise ValueError("scores and baseline must be finite numbers")
    names = (
        list(candidates) if candidates is not None else [f"candidate_{j}" for j in range(b.size)]
    )
    if len(names) != b.size:
        raise ValueError(f"{len(names)} candidate names for {b.size} candidates")
    excess = s - b[None, :]
    per_image = np.clip(excess, 0.0, None).max(axis=1) if b.size else np.zeros(s.shape[0])
    value = float(per_image.mean()) if per_image.size else 0.0
    return ExagScore(value, per_image.tolist(), names, excess.tolist(), b.tolist())


def ita_baseline(rows: Sequence[Sequence[float]]) -> list[float]:
    """EXAG(ITA)'s baseline: each stereotype candidate's mean image-text score over the
    real photos (one row per photo, one column per candidate; AHEaD Eq. 3)."""
    if not rows:
        raise ValueError("the baseline needs at least one real photo")
    return np.asarray(rows, dtype=float).mean(axis=0).tolist()


def ita_baseline_stderr(rows: Sequence[Sequence[float]]) -> list[float]:
    """The standard error of each candidate's :func:`ita_baseline`: the photos' errors
    (one row per photo) combined as a mean's."""
    if not rows:
        raise ValueError("the baseline needs at least one real photo")
    se = np.asarray(rows, dtype=float)
    return (np.sqrt((se**2).sum(axis=0)) / se.shape[0]).tolist()


# EXAG(ITA) read from sampled answers: a candidate's excess counts toward the value only
# where it is at least this many standard errors (a one-sided 97.7 % bound above 0). The
# paper's value, the largest positive excess, takes the largest of several noisy excesses:
# its noise can only push it up (the winner's curse). At zero true excess on 3 and 5
# candidates (5 photos, P(Yes) 0.3) it read 0.31 and 0.43 from the readings taken before;
# counted from 2 errors, with the readings refine.evaluate.assess.ita_answers takes, 0.012
# and 0.016, and a true 0.2 reads 0.17-0.18 (benchmarks/bench_decisions.py). With every error 0
# (log-probabilities) it is the paper's value exactly.
ITA_COUNTS_AT = 2.0
# a candidate's reading may stop before its most answers once its excess is below 0 by
# ITA_COUNTS_AT errors: more answers would not make it count. It never stops early for an
# excess above 0: a reading of 8 answers is far from normal, and one that stopped at 3
# errors above 0 counted noise (at zero true excess on 5 candidates EXAG read 0.04 so).


# a candidate is named exaggerated, and so turned into an edit instruction, where its
# excess over the photos is above 0 by this many errors (a one-sided 95 % bound). An image
# has several candidates, each a chance to name noise: at zero true excess on 3 and 5
# candidates (5 photos, P(Yes) 0.3, up to 48 answers a candidate), a one-sided 90 % bound
# named one in 31 % and 41 % of images, 95 % in 18 % and 22 %, and 2 errors (where it
# counts) in 7 % and 9 %; the candidate at a true excess of 0.2 was named in 89-90 %, 81-82 %
# and 67-71 % of them (300 images a cell, benchmarks/bench_decisions.py). At 95 %, the
# readings of refine.evaluate.assess.ita_answers (up to 64 answers) name it in 87-89 %, and
# some candidate at zero excess in 13-24 %.
ITA_NAMED_AT = 1.6448536269514722


def ita_counted(excess: np.ndarray, se: np.ndarray) -> np.ndarray:
    """EXAG(ITA) of each row of excesses (the last axis: the candidates) whose errors are
    ``se``: the largest excess that is positive and at least :data:`ITA_COUNTS_AT` errors,
    else 0 (the paper's largest positive excess where every error is 0)."""
    counts = (excess > 0) & (excess >= ITA_COUNTS_AT * se)
    if excess.shape[-1] == 0:
        return np.zeros(excess.shape[:-1])
    return np.where(counts, excess, 0.0).max(axis=-1)


def ita_decided(excess: float, se: float) -> bool:
    """Whether a candidate's excess over the photos, read with error ``se``, is beyond
    doubt: below 0 by :data:`ITA_COUNTS_AT` errors, so that more answers would not make it
    count toward EXAG(ITA)."""
    return excess < -ITA_COUNTS_AT * se


# draws of the readings' errors that EXAG(ITA)'s own is read from (the error of a 0.2
# excess read from eight answers a candidate, 0.10, comes out within 2 % of the normal
# error of the one candidate; fixed draws, so a reading's error is repeatable)
ITA_DRAWS = 4000


def ita_stderr(
    yes: Sequence[float],
    yes_stderr: Sequence[float],
    baseline: Sequence[float],
    baseline_stderr: Sequence[float],
) -> float | None:
    """The standard error of one image's EXAG(ITA) (:func:`ita_value`), whose VQAScores
    and photo means carry the standard errors given: the spread of the value when each
    excess is drawn around its reading with its error (the readings' errors are
    independent); where no draw counts, the spread of the nearest candidate's excess cut at
    0 (:func:`rectified_sd`), so that a sampled reading's error is never 0. None when the
    errors were not recorded; 0 when every reading is exact (log-probabilities)."""
    if not yes:
        return 0.0
    if len(yes_stderr) != len(yes) or len(baseline_stderr) != len(baseline):
        return None
    se = np.hypot(np.asarray(yes_stderr, float), np.asarray(baseline_stderr, float))
    if not se.any():
        return 0.0
    excess = np.asarray(yes, float) - np.asarray(baseline, float)
    noise = np.random.default_rng(0).standard_normal((ITA_DRAWS, excess.size))
    drawn = ita_counted(excess + noise * se, se)
    spread = float(drawn.std(ddof=1))
    if spread > 0:
        return spread
    # no draw counts (every excess far below its errors): the value is 0 by the readings,
    # and what is left uncertain is how far the truth may still rise above 0, the spread of
    # the nearest candidate's excess cut at 0 (a normal's, in closed form): small, never 0
    j = int(np.argmax(excess / np.where(se > 0, se, np.inf)))
    return rectified_sd(float(excess[j]), float(se[j]))


def rectified_sd(mu: float, sd: float) -> float:
    """The standard deviation of max(0, X), X normal with mean ``mu`` and deviation
    ``sd`` > 0."""
    z = mu / sd
    cdf, pdf = 0.5 * math.erfc(-z / math.sqrt(2)), math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    m1 = mu * cdf + sd * pdf
    m2 = (mu * mu + sd * sd) * cdf + mu * sd * pdf
    return math.sqrt(max(m2 - m1 * m1, 0.0)) or sd * pdf


def ita_value(
    yes: Sequence[float],
    yes_stderr: Sequence[float],
    baseline: Sequence[float],
    baseline_stderr: Sequence[float],
) -> float:
    """One image's EXAG(ITA) (AHEaD Eq. 3): the largest excess of a candidate's VQAScore
    over its mean on the photos. Where the readings carry errors (sampled answers), an
    excess counts only when it is at least :data:`ITA_COUNTS_AT` errors (:func:`ita_counted`);
    with none, the paper's value, exactly."""
    excess = np.asarray(yes, float) - np.asarray(baseline, float)
    if len(yes_stderr) != len(yes) or len(baseline_stderr) != len(baseline):
        se = np.zeros_like(excess)
    else:
        se = np.hypot(np.asarray(yes_stderr, float), np.asarray(baseline_stderr, float))
    if not se.any():
        return exaggeration([list(yes)], list(baseline)).value
    return float(ita_counted(excess, se))


def faithfulness(align: float, hal: float, exag: float) -> float:
    """FAITH = mean(ALIGN, 1 - HAL, 1 - EXAG); each a number in [0, 1]."""
    for name, value in (("ALIGN", align), ("HAL", hal), ("EXAG", exag)):
        ok = isinstance(value, numbers.Real) and math.isfinite(value)
        if not (ok and -1e-9 <= value <= 1 + 1e-9):
            raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return (align + (1.0 - hal) + (1.0 - exag)) / 3.0


def rubric_exag(rating: float, stderr: float | None = None) -> tuple[float, float | None]:
    """``exag:mllm`` (and ``exag:judge-rubric`` of earlier records): EXAG from the judge's
    expected 1-5 rating, (E[rating] - 1) / 4, with the standard error of a sampled rating
    carried through the same map."""
    if not (math.isfinite(rating) and 1.0 - 1e-9 <= rating <= 5.0 + 1e-9):
        raise ValueError(f"an expected 1-5 rating must lie in [1, 5], got {rating!r}")
    return (rating - 1.0) / 4.0, None if stderr is None else stderr / 4.0


@dataclass(frozen=True)
class ExagAnswer:
    """What the judge answered about one image, for the EXAG variant that reads it:
    ``exag:mllm`` (``exag:judge-rubric`` in earlier records) a 1-5 rating (its expectation,
    and the standard error when sampled); ``exag:ita`` the VQAScore per stereotype candidate
    and its mean over the ``photos`` real photos. ``mode``: how the judge was read
    (``logprobs``, ``sampled k=N``)."""

    variant: str
    mode: str | None = None
    rating: float | None = None
    rating_stderr: float | None = None
    yes: tuple[float, ...] = ()
    baseline: tuple[float, ...] = ()
    candidates: tuple[str, ...] = ()
    photos: int | None = None  # exag:ita: how many real photos the baseline is the mean of
    # exag:ita read from sampled answers: each VQAScore's standard error, and that of each
    # candidate's mean over the photos (0 where read by log-probabilities)
    yes_stderr: tuple[float, ...] = ()
    baseline_stderr: tuple[float, ...] = ()

    def exaggerated(self) -> list[tuple[str, float]]:
        """``exag:ita``'s candidates whose excess over the photos is more than their
        readings' noise can explain (its one-sided 95% lower bound above 0:
        :data:`ITA_NAMED_AT`; any positive excess where read by log-probabilities), largest
        first."""
        errors = zip(self.yes_stderr, self.baseline_stderr, strict=True)
        noise = [ITA_NAMED_AT * math.hypot(y, b) for y, b in errors] or [0.0] * len(self.yes)
        excess = [y - b for y, b in zip(self.yes, self.baseline, strict=True)]
        listed = [
            (c, e)
            for c, e, n in zip(self.candidates, excess, noise, strict=True)
            if e > 0 and e > n
        ]
        return sorted(listed, key=lambda item: -item[1])


def exag_of(exaggeration_answers: Sequence[ExagAnswer | None]) -> list[Computed]:
    """EXAG of each image from the judge's answers, by the variant they were asked for
    (:func:`rubric_exag`, or :func:`exaggeration` of the one image); none where the judge
    was not asked. The catalog's ``exag``."""
    out = []
    for a in exaggeration_answers:
        if a is None:
            out.append(Computed(None, note="no stereotype candidates"))
            continue
        if a.variant in ("exag:mllm", "exag:judge-rubric"):
            if a.rating is None:
                raise ValueError(f"{a.variant} reads a rating, and the answer has none")
            value, stderr = rubric_exag(a.rating, a.rating_stderr)
        elif a.variant == "exag:ita":
            exaggeration([a.yes], a.baseline, a.candidates)  # checks the answer's shape
            value = ita_value(a.yes, a.yes_stderr, a.baseline, a.baseline_stderr)
            stderr = ita_stderr(a.yes, a.yes_stderr, a.baseline, a.baseline_stderr)
        else:
            raise ValueError(f"no EXAG variant reads answers named {a.variant!r}")
        out.append(Computed(value, a.variant, Reading.parse(a.mode, stderr)))
    return out


def align_of(matching: Sequence[AheadScore]) -> list[float]:
    """ALIGN of each image from its descriptors matched to the references (the catalog's
    ``align``)."""
    return [s.align for s in matching]


def hal_of(matching: Sequence[AheadScore]) -> list[float]:
    """HAL of each image from its descriptors matched to the references (the catalog's
    ``hal``)."""
    return [s.hal for s in matching]


def faith_of(
    values: Sequence[Mapping[str, float | None]],
    value_readings: Sequence[Mapping[str, Reading | None]] | None = None,
) -> list[Computed]:
    """FAITH of each image from its ALIGN, HAL and EXAG computed before it, and the
    variant :func:`faith` chose (the catalog's ``faith``). Where EXAG was read from
    sampled answers (``value_readings``: how each value before it was read), FAITH carries
    its error: EXAG's over 3, as FAITH is the mean of three terms and ALIGN and HAL are
    not judge readings."""
    out = []
    for k, v in enumerate(values):
        align, hal = v.get("align"), v.get("hal")
        if align is None or hal is None:
            out.append(Computed(None, note="ALIGN and HAL are needed"))
            continue
        value, made = faith(align, hal, v.get("exag"))
        exag = (value_readings[k] if value_readings else {}).get("exag")
        reading = None
        if made == "faith:ahead" and exag is not None and exag.method == SAMPLED:
            stderr = None if exag.stderr is None else exag.stderr / 3.0
            reading = Reading(SAMPLED, exag.k, stderr)
        out.append(Computed(value, made, reading))
    return out


def faith(align: float, hal: float, exag: float | None) -> tuple[float, str]:
    """FAITH and the name of the variant that made it: ``faith:ahead`` (mean of ALIGN,
    1 - HAL and 1 - EXAG), or without EXAG ``faith:no-exag`` (mean of ALIGN and 1 - HAL)."""
    if exag is not None:
        return faithfulness(align, hal, exag), "faith:ahead"
    return (align + 1.0 - hal) / 2.0, "faith:no-exag"


# ----------------------------------------------------------------------------- helpers


def top_missing(score: AheadScore, k: int | None = None) -> list[DescriptorMatch]:
    """Missing references, the least covered first."""
    items = sorted(score.missing, key=lambda m: -math.inf if m.similarity is None else m.similarity)
    return items if k is None else items[:k]


def top_hallucinated(score: AheadScore, k: int | None = None) -> list[DescriptorMatch]:
    """Hallucinated predictions, the least supported first."""
    items = sorted(score.hallucinated, key=lambda m: m.similarity)
    return items if k is None else items[:k]


def calibrate_tau(
    refs: DescriptorMap | Sequence[DescriptorMap],
    observed_on_real_images: Sequence[DescriptorMap],
    embedder: TextEmbedder,
    q: float = 0.75,
    cache: PhraseEmbeddingCache | None = None,
) -> float:
    """The q-th quantile of best-match similarities of reference descriptors on real images.

    For every real image and every reference descriptor, the best cosine similarity to
    a descriptor observed on that image in the same dimension is collected; references
    of a dimension where nothing was observed are left out.
    """
    if not (isinstance(q, int | float) and math.isfinite(q) and 0.0 <= q <= 1.0):
        raise ValueError(f"q must be in [0, 1], got {q}")
    sims = best_match_similarities(refs, observed_on_real_images, embedder, cache)
    return float(np.quantile(np.asarray(sims), q))


def best_match_similarities(
    refs: DescriptorMap | Sequence[DescriptorMap],
    observed_on_real_images: Sequence[DescriptorMap],
    embedder: TextEmbedder,
    cache: PhraseEmbeddingCache | None = None,
) -> list[float]:
    """Every reference descriptor's best cosine similarity to a descriptor observed on
    each real image in the same dimension (what :func:`calibrate_tau` takes a quantile
    of); a ValueError when there is none."""
    scores = score_images(refs, observed_on_real_images, embedder, DEFAULT_TAU, cache)
    sims = [m.similarity for s in scores for m in s.references if m.similarity is not None]
    if not sims:
        raise ValueError("no reference descriptor has an observed counterpart on the real images")
    return sims


TAU_RANGE = (0.01, 0.99)  # the match thresholds accepted everywhere (CLI, app, profiles, runs)


def check_tau(tau: Any) -> float:
    """``tau`` as a float when it lies in TAU_RANGE; else a ValueError saying the range."""
    lo, hi = TAU_RANGE
    if isinstance(tau, bool) or not isinstance(tau, int | float) or not lo <= tau <= hi:
        raise ValueError(f"tau must be a cosine similarity from {lo} to {hi}, got {tau!r}")
    return float(tau)


def _cache(cache: PhraseEmbeddingCache | None) -> PhraseEmbeddingCache:
    return default_cache() if cache is None else cache
