"""Typed records of the loop, validated on load and round-tripped as JSON (pydantic)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

from metrics.ahead import TAU_RANGE
from metrics.baselines import TifaAnswer
from metrics.catalog import CATALOG, VARIANTS, known
from metrics.descriptors import DIMENSIONS, normalise_phrases
from metrics.judge import SAMPLED, Reading


def option(
    default: Any = ...,
    help: str = "",
    *,
    flag: str | None = None,
    surfaces: tuple[str, ...] = ("cli",),
    given: str = "value",
    default_factory: Any = None,
    **bounds: Any,
) -> Any:
    """A field a front shows (a task's Plan's, a command's plan's): its help, its flag
    (default ``--the-name``), how it is given (``value``, ``list``: names separated by
    commas, ``repeat``: once per item, ``path``) and its bounds (``ge``, ``le``, ``gt``,
    ``min_length`` ...)."""
    extra = {"surfaces": surfaces, "given": given}
    if flag:
        extra["flag"] = flag
    if default_factory is not None:
        return Field(
            default_factory=default_factory, description=help, json_schema_extra=extra, **bounds
        )
    return Field(default, description=help, json_schema_extra=extra, **bounds)


def _unset_left_out(data: Any, *names: str) -> Any:
    """A record's document without the fields ``names`` where they hold nothing (None, an
    empty list or mapping, 0): a record from before those fields is written byte for byte,
    and a toolkit that does not know them still reads one that does not use them."""
    if isinstance(data, dict):
        for name in names:
            if not data.get(name):
                data.pop(name, None)
    return data


Descriptors = dict[str, list[str]]


def clean_descriptor_set(value: dict[str, Any]) -> Descriptors:
    """Phrases stripped and de-duplicated; only the five dimensions are allowed."""
    if not isinstance(value, dict):
        raise ValueError("descriptors must be an object of {dimension: [phrases]}")
    unknown = sorted(set(value) - set(DIMENSIONS))
    if unknown:
        raise ValueError(f"unknown dimension(s) {unknown}; dimensions are {', '.join(DIMENSIONS)}")
    out: Descriptors = {}
    for d in DIMENSIONS:
        phrases = value.get(d, [])
        if not isinstance(phrases, list) or not all(isinstance(p, str) for p in phrases):
            raise ValueError(f"descriptors.{d} must be a list of strings")
        out[d] = normalise_phrases(phrases)
    return out


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


def plain_file_name(value: str | None) -> str | None:
    """An image name inside a run folder: no folders, no hidden or parent names."""
    if value is None:
        return value
    if not value or "/" in value or "\\" in value or value.startswith(".") or "\x00" in value:
        raise ValueError(f"{value!r} is not a file name inside the run folder")
    return value


class ReferencePack(_Record):
    activity: str
    country: str
    descriptors: Descriptors
    stereotypes: list[str] = Field(default_factory=list)
    source: str = ""
    reference_images: list[str] = Field(default_factory=list)
    # descriptor -> its style tag, traditional, modern or neutral (AHEaD's proposers')
    styles: dict[str, str] = Field(default_factory=dict)

    @field_validator("descriptors", mode="before")
    @classmethod
    def _clean(cls, v: Any) -> Descriptors:
        return clean_descriptor_set(v)


class Scores(_Record):
    """An image's scores: one value per catalog metric name (``metrics.catalog``; None:
    not computed, the reason in ``notes``), the variant that made a value where a metric
    has several (``metrics.catalog.VARIANTS``), and how the judge was read for it.

    Records written before this layout (one field per metric, the variant in words) open
    into the same names (:func:`_from_fields`)."""

    values: dict[str, float | None]
    variants: dict[str, str] = Field(default_factory=dict)
    readings: dict[str, Reading] = Field(default_factory=dict)
    notes: dict[str, str] = Field(default_factory=dict)  # why a value is missing
    per_dimension: dict[str, dict[str, float]] = Field(default_factory=dict)
    tau: float | None = None  # the match threshold ALIGN and HAL were scored with
    # exag:ita: how many real photos the stereotypes' baseline is the mean of (None: EXAG
    # was not measured against photos)
    photos: int | None = None
    # how quality's 0-10 ratings were read (None: not measured)
    quality_reading: QualityReading | None = None
    # TIFA's questions about the generation prompt and the judge's answers (None: TIFA was
    # not asked for): why ``tifa`` and ``soft_tifa`` are what they are
    tifa: list[TifaAnswer] | None = None

    @model_validator(mode="before")
    @classmethod
    def _earlier_layout(cls, data: Any) -> Any:
        return _from_fields(data) if isinstance(data, dict) and "values" not in data else data

    @model_validator(mode="after")
    def _in_the_catalog(self) -> Scores:
        for field, names in (
            ("values", self.values),
            ("variants", self.variants),
            ("readings", self.readings),
            ("notes", self.notes),
        ):
            unknown = sorted(n for n in names if not known(n))
            if unknown:
                raise ValueError(f"scores.{field}: {unknown} are no metrics of the catalog")
        for name, value in self.values.items():
            if value is not None and not math.isfinite(value):
                raise ValueError(f"scores.values.{name} is {value}, not a number")
        for name, made in self.variants.items():
            if made not in VARIANTS or VARIANTS[made].metric != name:
                raise ValueError(f"scores.variants.{name}: {made!r} is no variant of {name}")
        return self

    def value(self, name: str) -> float | None:
        """The value of the catalog metric ``name`` (None: not computed or not asked)."""
        return self.values.get(name)

    def stderr(self, name: str) -> float | None:
        """The standard error of the value of ``name`` where it was read from sampled
        answers (FAITH, EXAG, quality, ...); None where it was read otherwise
        (log-probabilities: the model's own probabilities, read once) or not recorded."""
        if name == "quality":
            q = self.quality_reading
            return None if q is None or not q.method.startswith(SAMPLED) else q.stderr
        reading = self.readings.get(name)
        return reading.stderr if reading is not None and reading.method == SAMPLED else None

    def made_by(self) -> str:
        """How EXAG (and FAITH, where not by AHEaD's formula) were made, in words: the
        variants' names and formulas, and the judge's reading when it sampled."""
        from metrics.catalog import made_by

        reading = self.readings.get("exag")
        mode, stderr = (reading.mode, reading.stderr) if reading else (None, None)
        words = made_by(self.variants.get("exag"), self.notes.get("exag"), mode, stderr)
        if self.photos:
            words += f", against {self.photos} real photo{'s' if self.photos != 1 else ''}"
        faith = self.variants.get("faith")
        if faith not in (None, "faith:ahead"):
            words += f"; FAITH: {made_by(faith)}"
        return words

    # the values the loop decides by
    @property
    def align(self) -> float:
        return self.values["align"]

    @property
    def hal(self) -> float:
        return self.values["hal"]

    @property
    def exag(self) -> float | None:
        return self.values.get("exag")

    @property
    def faith(self) -> float | None:
        return self.values.get("faith")

    @property
    def quality(self) -> float | None:
        return self.values.get("quality")


# the variants of records written before the names, by the words they began with
_EARLIER_VARIANTS = {
    "judge-rating": "exag:judge-rubric",
    "reference-yes": "exag:ita",
}


def variant_name(said: str | None, metric: str = "exag") -> str | None:
    """The name of the variant of ``metric`` that ``said`` names: itself when it is a name,
    else the name of the words a record written before the names began with (None: no
    variant, as for "not computed: ...")."""
    if said is None:
        return None
    head = said.partition(";")[0]
    if head in VARIANTS and VARIANTS[head].metric == metric:
        return head
    for words, name in _EARLIER_VARIANTS.items():
        if head.startswith(words) and VARIANTS[name].metric == metric:
            return name
    return None


def _from_fields(data: dict[str, Any]) -> dict[str, Any]:
    """A record of the earlier layout (a field per metric; ``exag_variant`` in words or by
    name, ``faith_variant``, ``exag_note``, ``judge_mode``, ``exag_stderr``) in this one:
    every value under its catalog name, the variants by name, the judge's reading."""
    data = dict(data)
    # a field named after a catalog metric held its value
    values = {k: data.pop(k) for k in list(data) if k in CATALOG}
    said = data.pop("exag_variant", None)
    faith_variant = data.pop("faith_variant", None)
    note = data.pop("exag_note", None)
    mode, stderr = data.pop("judge_mode", None), data.pop("exag_stderr", None)
    variants: dict[str, str] = {}
    notes: dict[str, str] = {}
    if isinstance(said, str):
        head, _, rest = said.partition(";")
        if (name := variant_name(head)) is not None:
            variants["exag"] = name
        elif head.startswith("not computed: "):
            note = note or head.removeprefix("not computed: ").strip()
        if "without EXAG" in rest:
            faith_variant = faith_variant or "faith:no-exag"
    if values.get("faith") is not None:
        exag_used = values.get("exag") is not None
        variants["faith"] = faith_variant or ("faith:ahead" if exag_used else "faith:no-exag")
    if note:
        notes["exag"] = note
    readings = {}
    if mode is not None and "exag" in variants:
        readings["exag"] = Reading.parse(mode, stderr)
    return {**data, "values": values, "variants": variants, "readings": readings, "notes": notes}


class QualityReading(_Record):
    """How ``quality`` was read: the judge's expected 0-10 ratings, how it read them."""

    naturalness: float
    artifacts: float
    judge: str
    method: str  # "logprobs" or "sampled k=N" (either rating sampled)
    # of quality: 0 by log-probabilities (read once), the samples' when sampled
    stderr: float | None = Field(None, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _logprobs_read_once(self) -> QualityReading:
        if self.method == "logprobs":  # a record written before: null
            if self.stderr not in (None, 0.0):
                raise ValueError(
                    f"quality read by log-probabilities has no sampling error, got {self.stderr}"
                )
            self.stderr = 0.0
        return self


Scores.model_rebuild()


class Match(_Record):
    """A descriptor and its closest counterpart: a reference phrase and its best predicted
    match (aligned or missing), or a predicted phrase and its best reference (hallucinated)."""

    dimension: str
    phrase: str
    best_match: str | None = None
    similarity: float | None = None


class Exaggerated(_Record):
    """A stereotype candidate seen in an image: matched to an observed phrase (judge-rating
    EXAG, ``observed`` and ``similarity``) or above its reference-image baseline
    (reference-yes EXAG, ``excess`` and ``source``)."""

    candidate: str
    observed: str | None = None
    similarity: float | None = None
    excess: float | None = None
    source: str | None = None
    # the reference descriptor closest to the candidate among objects, attire and setting:
    # what an edit may put in its place (see refine.loop.instructions)
    replacement: str | None = None
    replacement_dimension: str | None = None
    replacement_similarity: float | None = None


class Feedback(_Record):
    aligned: list[Match] = Field(default_factory=list)
    missing: list[Match] = Field(default_factory=list)
    hallucinated: list[Match] = Field(default_factory=list)
    exaggerated: list[Exaggerated] = Field(default_factory=list)


class Drift(_Record):
    embedding_cosine: float
    ssim: float
    embedder: str
    # a localized edit's drift (refine.loop.localize): inside its boxes, 1 - the cosine of
    # the crops' embeddings (averaged over the boxes); outside, 1 - SSIM over the windows
    # wholly outside them (None: no such window)
    inside: float | None = None
    outside: float | None = None

    @property
    def value(self) -> float:
        """The catalog's ``drift`` (:func:`metrics.drift.drift_of`)."""
        from metrics.drift import drift_of

        return drift_of(self.embedding_cosine)


class Candidate(_Record):
    seed: int
    image: str
    observed: Descriptors

    @field_validator("image")
    @classmethod
    def _plain(cls, v: str) -> str:
        return plain_file_name(v)

    scores: Scores
    feedback: Feedback
    drift: Drift | None = None
    # once a person changed the run's references: ALIGN, HAL and FAITH of the same
    # observations against the pack's (refine.loop.aims), beside ``scores``, the
    # creative's; absent while the run aims at the pack
    against_pack: dict[str, float | None] | None = None

    @model_serializer(mode="wrap")
    def _written(self, handler: Any) -> Any:
        return _unset_left_out(handler(self), "against_pack")


class LabelScore(_Record):
    label: str
    score: int  # argmax of the judge's probabilities of "1".."5"
    expected: float
    probabilities: list[float]
    stderr: float | None = None  # of ``expected``, with a sampled judge
    # CAIRE App. B.1's log-likelihood scoring (--loglik): the label's negative
    # log-likelihood after the image and its knowledge, after the prompt alone (the base
    # rate), and debiased; lower is more relevant
    nll: float | None = None
    base_nll: float | None = None
    debiased: float | None = None


class CaireScore(_Record):
    """CAIRE relevance of one image: 1-5 per culture label, and what grounded it."""

    mode: str  # "kb" or "kb-free"
    labels: list[LabelScore]
    judge: str
    judge_mode: str | None = None  # "logprobs" or "sampled k=N"
    kb: str | None = None
    embedder: str | None = None
    ranking: str | None = None
    entity: dict[str, Any] | None = None  # the KB entity whose text the judge saw
    candidates: list[dict[str, Any]] = Field(default_factory=list)  # the best few, ranked
    knowledge: str | None = None  # the text the judge saw
    image: str | None = None
    # the log-likelihood scoring's settings and its most relevant label (None: not asked)
    loglik: dict[str, Any] | None = None

    def score_of(self, label: str) -> LabelScore:
        for s in self.labels:
            if s.label.casefold() == label.casefold():
                return s
        raise KeyError(label)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CaireScore:
        return cls.model_validate(d)


class LanguageImage(_Record):
    """A round's image in one extra prompt language: the translated prompt (round 0) or
    the parent image it was edited from, its SoS against the run's bank, and with
    language scores its FAITH and what is missing or hallucinated."""

    image: str
    prompt: str | None = None
    parent_image: str | None = None
    sos: float | None = None

    @field_validator("image", "parent_image")
    @classmethod
    def _plain(cls, v: str | None) -> str | None:
        return plain_file_name(v)

    scores: Scores | None = None
    missing: list[str] = Field(default_factory=list)
    hallucinated: list[str] = Field(default_factory=list)


class Expectation(_Record):
    """A cultural expectation of a prompt: a checkable statement, explicit (the prompt says
    it) or implicit (people of the culture take it for granted), and why."""

    statement: str = Field(min_length=1, max_length=300)
    kind: Literal["explicit", "implicit"]
    reason: str = Field("", max_length=500)


class ExpectationSet(_Record):
    """A prompt's expectations as built (and perhaps edited): an expectations file."""

    prompt: str
    country: str
    expectations: list[Expectation]
    source: str = ""


class ExpectationCheck(_Record):
    statement: str
    kind: Literal["explicit", "implicit"]
    p_yes: float  # the judge's yes-probability that the image shows the statement
    met: bool  # p_yes > 0.5


class ExpectationScore(_Record):
    """One image's expectations: each checked, and the met share per kind."""

    checks: list[ExpectationCheck]
    explicit_met: float | None = None
    implicit_met: float | None = None
    judge: str = ""
    judge_mode: str | None = None


# "stopped": the round a stop cut short, kept with the candidates finished by then (it is
# never a parent or the best; a person may still accept one of them by hand)
Decision = Literal["initial", "accepted", "rejected", "stopped"]
# who wrote a round's text: the run's prompt (round 0), the template, the language model
# (from the planned changes), a person reviewing it in the app ("person"), or the user's
# own instruction given up front ("user")
InstructionSource = Literal[
    "prompt", "template", "language model", "person", "user", "ahead template"
]


# by-hand regions: at most this many a round, each at least this share of the image
MAX_REGIONS, MIN_REGION_AREA = 8, 0.01


class Region(_Record):
    """A box a localized edit is restricted to, [x0, y0, x1, y1] as fractions of the
    image's width and height: one the observer drew (``source`` "observer") around an item
    that is wrong (hallucinated or exaggerated) or where a missing one belongs, or one a
    person gave (``source`` "by hand": ``--edit-box``, a review's boxes, or a region drawn
    in the app, kept as a ``mask``), which names no item or kind."""

    item: str | None = None
    kind: Literal["hallucinated", "exaggerated", "missing"] | None = None
    box: list[float] = Field(min_length=4, max_length=4)
    source: Literal["observer", "by hand"] = "observer"
    # a region drawn with a brush: its mask, a PNG in the run's folder (one channel, the
    # image's size, white over the region), its bounding box in ``box``
    mask: str | None = None

    @field_validator("mask")
    @classmethod
    def _mask_file(cls, v: str | None) -> str | None:
        return None if v is None else plain_file_name(v)

    @model_serializer(mode="wrap")
    def _written(self, handler: Any) -> Any:
        return _unset_left_out(handler(self), "mask")

    @model_validator(mode="after")
    def _named(self) -> Region:
        if self.source == "observer" and (self.item is None or self.kind is None):
            raise ValueError("an observer's region names its item and kind")
        return self

    @field_validator("box")
    @classmethod
    def _ordered(cls, v: list[float]) -> list[float]:
        if not all(0.0 <= x <= 1.0 for x in v) or v[0] >= v[2] or v[1] >= v[3]:
            raise ValueError(f"a box is [x0, y0, x1, y1] in [0, 1] with x0 < x1, y0 < y1: {v}")
        return v


# a descriptor or stereotype candidate a person gives: one printable line, at most this long
MAX_DESCRIPTOR = 120


def person_phrase(value: Any) -> str:
    """A descriptor or stereotype candidate a person typed: stripped, one printable line
    of at most :data:`MAX_DESCRIPTOR` characters; a ValueError says what is wrong."""
    if not isinstance(value, str):
        raise ValueError("a descriptor is text")
    text = value.strip()
    if not text:
        raise ValueError("a descriptor is not empty")
    if len(text) > MAX_DESCRIPTOR:
        raise ValueError(f"a descriptor is at most {MAX_DESCRIPTOR} characters, got {len(text)}")
    if not text.isprintable():
        raise ValueError("a descriptor is one line of printable text")
    return text


class Descriptor(_Record):
    """A reference descriptor a person removes or adds, with its dimension."""

    dimension: Literal["setting", "objects", "attire", "interaction", "spatial"]
    phrase: str

    @field_validator("phrase", mode="before")
    @classmethod
    def _phrase(cls, v: Any) -> str:
        return person_phrase(v)


class ReferenceEdit(_Record):
    """What a person changes in a run's references: reference descriptors not wanted here
    (``removed``) and their own (``added``), and stereotype candidates likewise."""

    removed: list[Descriptor] = Field(default_factory=list, max_length=64)
    added: list[Descriptor] = Field(default_factory=list, max_length=64)
    stereotypes_removed: list[str] = Field(default_factory=list, max_length=64)
    stereotypes_added: list[str] = Field(default_factory=list, max_length=64)

    @field_validator("stereotypes_removed", "stereotypes_added", mode="before")
    @classmethod
    def _phrases(cls, v: Any) -> list[str]:
        if not isinstance(v, list):
            raise ValueError("a list of stereotype candidates")
        return [person_phrase(x) for x in v]

    def empty(self) -> bool:
        return not (
            self.removed or self.added or self.stereotypes_removed or self.stereotypes_added
        )


class ReferenceChange(ReferenceEdit):
    """A change of the run's references by a person, in effect from round ``round`` on
    (its instruction is the first written against them), made at ``at`` (local time)."""

    round: int = Field(ge=1)
    at: str
    source: Literal["review file", "app"] = "review file"

    def describe(self) -> str:
        """``-objects: carpet; +objects: samovar; -stereotype: hookah``"""
        parts = [f"-{d.dimension}: {d.phrase}" for d in self.removed]
        parts += [f"+{d.dimension}: {d.phrase}" for d in self.added]
        parts += [f"-stereotype: {x}" for x in self.stereotypes_removed]
        parts += [f"+stereotype: {x}" for x in self.stereotypes_added]
        return "; ".join(parts)


class ReferencePhoto(_Record):
    """A real photo a reference-guided round's request carried: its file, its mean cosine
    to the descriptors the round adds (the image embedder's), and where it came from
    (the photo set's origin and the photo's details: address, licence, author)."""

    file: str
    similarity: float
    origin: str = ""
    attribution: dict[str, Any] = Field(default_factory=dict)


class PlannedChange(_Record):
    """One change an instruction was built from (see refine.loop.instructions)."""

    kind: Literal["add", "remove", "replace", "tone down", "other"]
    dimension: str | None = None
    item: str
    reference: str | None = None
    similarity: float | None = None

    def phrase(self) -> str:
        """The change with its verb: "add X", "tone down Y", "replace Z with W"."""
        return f"{self.kind} {self.item}" + (f" with {self.reference}" if self.reference else "")


# a reference descriptor's states across rounds, and a hallucinated or exaggerated item's
# (refine.loop.tracking)
DESCRIPTOR_STATES = ("became aligned", "stayed aligned", "aligned", "lost", "still missing",
                     "missing")  # fmt: skip
ITEM_STATES = ("new", "kept", "came back", "removed")
TrackedState = Literal[
    "became aligned", "stayed aligned", "aligned", "lost", "still missing", "missing",
    "new", "kept", "came back", "removed",
]  # fmt: skip


class Tracked(_Record):
    """One reference descriptor, hallucinated phrase or exaggerated stereotype of a round's
    chosen image against the kept rounds before it (see refine.loop.tracking): aligned,
    missing, became aligned, stayed aligned, lost or still missing (a descriptor); new,
    kept, removed or came back (an item). ``fixed_in``: for a lost descriptor or an item
    that came back, the round that had fixed or removed it (a fix undone)."""

    kind: Literal["descriptor", "hallucinated", "exaggerated"]
    dimension: str
    item: str
    state: TrackedState
    fixed_in: int | None = None


class PastFix(_Record):
    """One change an accepted round made, remembered across runs (refine.loop.memory): a
    reference descriptor that became aligned (``fixed``) or an item removed (``removed``),
    the round's instruction (or rewritten prompt: ``move``), the model that made the image
    and the FAITH gain over the round it beat. Words and figures only, no image."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    country: str = Field(min_length=1, max_length=200)
    activity: str = Field(min_length=1, max_length=300)
    dimension: str = Field(min_length=1, max_length=40)
    descriptor: str = Field(min_length=1, max_length=300)
    kind: Literal["fixed", "removed"]
    instruction: str = Field(min_length=1, max_length=4000)
    move: Literal["edit", "regenerate"] = "edit"
    editor: str = Field("", max_length=300)
    faith_gain: float | None = Field(None, ge=-1.0, le=1.0)
    run: str = Field("", max_length=300)
    round: int = Field(0, ge=0, le=1000)

    @field_validator("country", "activity", "dimension", "descriptor", "editor", "run")
    @classmethod
    def _one_line(cls, v: str) -> str:
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in v):
            raise ValueError("holds a control character (a line break, a tab, an escape)")
        return v

    @field_validator("instruction")
    @classmethod
    def _text(cls, v: str) -> str:
        if any((ord(ch) < 32 and ch not in "\n\t") or ord(ch) == 127 for ch in v):
            raise ValueError("holds a control character")
        return v


class Round(_Record):
    index: int
    parent: int | None
    # generate: round 0; edit: the parent edited; regenerate: new images from a rewritten
    # prompt (the parent's feedback in it)
    kind: Literal["generate", "edit", "regenerate"]
    text: str  # the prompt of round 0, the editing instruction or the rewritten prompt
    # why this round edited or regenerated (the strategy, or auto's rule and its figures)
    move_reason: str | None = None
    # the real photos the round's request carried beside the image (reference-guided)
    reference_photos: list[ReferencePhoto] = Field(default_factory=list)
    # a localized edit's boxes (the edit restricted to them), and why there are none
    regions: list[Region] = Field(default_factory=list)
    regions_note: str | None = None
    instruction_source: InstructionSource = "template"
    # the language model that wrote the instruction, why the template wrote it instead (a
    # writer that failed or is off), and the changes it was built from
    instruction_model: str | None = None
    instruction_note: str | None = None
    changes: list[PlannedChange] = Field(default_factory=list)
    candidates: list[Candidate]
    chosen: int  # index into candidates
    decision: Decision
    reason: str
    by_hand: bool = False  # the decision was made by the user, not by the scores
    timings: dict[str, float] = Field(default_factory=dict)
    # candidates left out because their model calls failed ("candidate 1 (seed 43): ...")
    failures: list[str] = Field(default_factory=list)
    # how the round's models worked around a limit (a batch halved for lack of GPU memory)
    notes: list[str] = Field(default_factory=list)
    # CAIRE relevance of the chosen image when the run names culture labels, and the
    # line it adds to the next edit
    caire: CaireScore | None = None
    caire_note: str | None = None
    # SoS of the chosen image against the run's bank (its prompt language: English), and
    # the same round in each extra prompt language
    sos: float | None = None
    languages: dict[str, LanguageImage] = Field(default_factory=dict)
    # API token usage of the round per model (calls, prompt/output/total tokens)
    usage: dict[str, dict[str, int]] = Field(default_factory=dict)
    # the chosen image's cultural expectations, when the run has some
    expectations: ExpectationScore | None = None
    # each descriptor and item of the chosen image against the kept rounds before it
    tracked: list[Tracked] = Field(default_factory=list)
    # the past fixes the instruction writer was given as hints (--memory)
    hints: list[PastFix] = Field(default_factory=list)
    # the person's changes of references its scores are against (0: the pack's; the
    # scores of a round before a change are re-matched to it, refine.loop.aims)
    references: int = Field(0, ge=0)

    @model_serializer(mode="wrap")
    def _written(self, handler: Any) -> Any:
        return _unset_left_out(handler(self), "references")

    @property
    def best(self) -> Candidate:
        return self.candidates[self.chosen]


class RefusedRound(_Record):
    """An editing round whose every candidate the model refused (a safety block, a content
    filter): nothing was made, so it is no round of the run; the next round edits the same
    image again, with new seeds, and a person reviewing the instruction may rewrite it."""

    # a record read from a file is bounded: an editing round (1 or more) of a real parent,
    # and the few lines a round's candidates make (RunSpec's at most 64)
    round: int = Field(ge=1)  # the round it was to be (the next round gets the same number)
    parent: int = Field(ge=0)
    kind: Literal["edit", "regenerate"] = "edit"
    text: str  # the instruction (or the rewritten prompt) the model refused
    instruction_source: InstructionSource = "template"
    seeds: list[int] = Field(default_factory=list, max_length=64)
    failures: list[str] = Field(min_length=1, max_length=64)  # each candidate's refusal

    def why(self) -> str:
        """``every candidate (2) was refused by the editor: candidate 0 (seed 1042): ...``"""
        maker = "generator" if self.kind == "regenerate" else "editor"
        return f"every candidate ({len(self.failures)}) was refused by the {maker}: " + "; ".join(
            self.failures
        )

    def describe(self) -> str:
        return f"round {self.round} refused: {self.why()}"


# the profile a run, a task, a command or the app uses where none is named
DEFAULT_PROFILE = "gemini"
_RUN = {"surfaces": ["run", "batch"]}  # refine run's options and batch lines
# and the app's form: its box's ``label`` (in messages too; default: the name in words),
# the box's own words where they differ (``box``), and a line under it (``info``)
_ALL = {"surfaces": ["run", "batch", "app"]}


def by_hand_boxes(value: Any) -> list[list[float]]:
    """Boxes a person gave (``--edit-box x0,y0,x1,y1``, or a batch line's lists): each four
    fractions with x0 < x1 and y0 < y1, at least :data:`MIN_REGION_AREA` of the image, at
    most :data:`MAX_REGIONS` of them; a ValueError says which is not."""
    boxes = []
    for k, given in enumerate(value or []):
        text = given if isinstance(given, str) else ",".join(map(str, given))
        try:
            box = [float(v) for v in text.split(",")]
        except ValueError:
            raise ValueError(f"box {k + 1} is x0,y0,x1,y1 (four numbers), got {text!r}") from None
        if len(box) != 4 or not all(0.0 <= v <= 1.0 for v in box):
            raise ValueError(f"box {k + 1} is four fractions in [0, 1], got {text!r}")
        if box[0] >= box[2] or box[1] >= box[3]:
            raise ValueError(f"box {k + 1} needs x0 < x1 and y0 < y1, got {text!r}")
        if (box[2] - box[0]) * (box[3] - box[1]) < MIN_REGION_AREA:
            raise ValueError(f"box {k + 1} is under {MIN_REGION_AREA:.0%} of the image: {text!r}")
        boxes.append(box)
    if len(boxes) > MAX_REGIONS:
        raise ValueError(f"at most {MAX_REGIONS} boxes, got {len(boxes)}")
    return boxes


class RunSpec(_Record):
    # no setting takes NaN or infinity: refused as "should be a finite number" (NaN failed
    # each bound's comparison, and was refused as above the upper bound)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # ``flag``: how refine run names a field in its messages (default: --the-name)
    activity: str = Field(json_schema_extra={"flag": "ACTIVITY"})
    country: str
    profile: str = DEFAULT_PROFILE
    backends: dict[str, str] = Field(default_factory=dict, json_schema_extra={"flag": "--backend"})
    backend_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # the table of run settings: each field's type, bounds, default and help, and which
    # fronts show it ("run": refine run's options, "app": the app's form, "batch": a batch
    # line; see refine.settings.SETTINGS); the bounds are ones no caller can pass (the
    # app's operator limits stay below them)
    rounds: int = Field(
        5,
        ge=0,
        le=100,
        description="Editing rounds after round 0 (a round the image model refuses counts).",
        json_schema_extra=_ALL,
    )
    target: float = Field(
        0.7,
        ge=0.0,
        le=1.0,
        description="Stop at this FAITH.",
        json_schema_extra={
            **_ALL,
            "label": "target FAITH",
            "info": "stop at this FAITH (0 to 1, higher is better)",
        },
    )
    patience: int = Field(
        2,
        ge=1,
        description="Rejected (or refused) rounds in a row before stopping.",
        json_schema_extra=_RUN,
    )
    candidates: int = Field(
        2,
        ge=1,
        le=64,
        description="Edit candidates per round (best of N).",
        json_schema_extra=_ALL,
    )
    initial_candidates: int = Field(
        1,
        ge=1,
        le=64,
        description="Best of N seeds for round 0.",
        json_schema_extra={**_RUN, "flag": "--initial"},
    )
    seed: int = Field(42, description="Base seed.", json_schema_extra=_ALL)
    margin: float = Field(
        0.01, ge=0.0, description="Least FAITH gain to accept an edit.", json_schema_extra=_RUN
    )
    max_drift: float = Field(
        0.5,
        ge=0.0,
        le=2.0,
        description="Largest drift from the parent image (1 - cosine of their embeddings).",
        json_schema_extra={
            **_ALL,
            "label": "max drift",
            "info": "reject an edit that moves the image further than this from its parent "
            "(0: same picture, 2: opposite)",
        },
    )
    # a candidate whose quality is more than this below the best round's is rejected (1: off)
    max_quality_drop: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="Reject an edit whose quality (0-1, the judge's naturalness and artifacts "
        "ratings) falls more than this below the best round's; 1 turns the guard off.",
        json_schema_extra={
            **_ALL,
            "label": "max quality drop",
            "box": "max quality drop (1: off)",
            "info": "an edit that looks worse than the best round by more than this is rejected",
        },
    )
    edit_from: Literal["best", "original", "last"] = Field(
        "best",
        description="Edit the best round's image, the original, or the last round's (a chain "
        "of edits, each from the one before, kept whatever it scores).",
        json_schema_extra=_RUN,
    )
    # the match threshold on cosine similarity; None: the profile's (calibrated for its
    # observer), set when the run starts, so a record always holds the value used
    tau: float | None = Field(
        None,
        ge=TAU_RANGE[0],
        le=TAU_RANGE[1],
        description="Match threshold on cosine similarity (default: the profile's, for its "
        "observer).",
        json_schema_extra=_RUN,
    )
    max_changes: int = Field(5, ge=1)
    # how each round after the first fixes the image: edit it, generate new images from a
    # prompt rewritten from the feedback, or choose per round (refine.loop.policy.move)
    strategy: Literal["edit", "regenerate", "auto"] = Field(
        "edit",
        description="How a round fixes the image: edit it, regenerate (new images from a "
        "prompt rewritten from the feedback) or auto (regenerate when ALIGN is below the "
        "regenerate-below value or the setting or arrangement misses most, else edit).",
        json_schema_extra={
            **_ALL,
            "info": "edit the image; regenerate from a rewritten prompt; auto: regenerate "
            "when the scene itself is wrong",
        },
    )
    # an edit (or a regeneration) carries up to reference_count real photos of the activity
    # and country, the closest to what it adds (refine.loop.reference_photos)
    reference_guided: bool = Field(
        False,
        description="Give each edit up to reference-count real photos of the activity and "
        "country, the closest (by the image embedder) to what it adds; the editor must take "
        "reference images.",
        json_schema_extra=_RUN,
    )
    reference_count: int = Field(
        3,
        ge=1,
        le=16,
        description="With reference-guided edits: the most photos a request carries.",
        json_schema_extra=_RUN,
    )
    # each edit restricted to boxes the observer draws (refine.loop.localize)
    localize: bool = Field(
        False,
        description="Restrict each edit to boxes the observer draws around what is wrong "
        "and where what is missing belongs (an inpainting editor: a mask, the pixels outside "
        "pasted back; an API editor: the region in the instruction).",
        json_schema_extra=_RUN,
    )
    # each edit restricted to boxes a person gave (refine.loop.localize: by hand)
    edit_boxes: list[list[float]] = Field(
        default_factory=list,
        description=f"Restrict every edit to this box, x0,y0,x1,y1 as fractions of the "
        f"width and height from the top left (repeatable: at most {MAX_REGIONS}, each at "
        f"least {MIN_REGION_AREA:.0%} of the image); the observer draws none then.",
        json_schema_extra={**_RUN, "flag": "--edit-box", "given": "repeat"},
    )
    # what a person says at each round's pause, written in a file (refine.loop.review_file)
    review_file: str | None = Field(
        None,
        description="A JSON Lines file of what a person says at each editing round: a line "
        "an editing round with its round, and optionally its instruction, its boxes (each "
        "x0, y0, x1, y1), a mask (a PNG drawn over the region), its decision (accept, "
        "reject or stop) and a change of the references; read again before each round.",
        json_schema_extra={"surfaces": ["run"], "flag": "--review", "given": "path"},
    )
    max_drift_outside: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="With localized edits: reject a candidate whose drift outside its boxes "
        "(1 - SSIM there) is above this; 1: off.",
        json_schema_extra=_RUN,
    )
    regenerate_below: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="With the auto strategy: regenerate when the round's ALIGN is below this.",
        json_schema_extra=_RUN,
    )
    # who words the instruction from the planned changes: the profile's language model
    # (the template when it has none or its call fails), the template, or AHEaD's editing
    # template (Tab. 32) filled from the round's lists and the references
    writer: Literal["llm", "template", "ahead"] = Field(
        "llm",
        description="Who words the instruction: llm (the profile's language model; the "
        "template when it has none or the call fails), template, or ahead (AHEaD's Tab. 32 "
        "editing template filled from the round's lists, no model call).",
        json_schema_extra=_RUN,
    )
    # the instruction spares an observed item within this much below tau of a reference
    # (a near match), and replaces a hallucinated item by its closest missing reference
    # when that is at least replace_floor similar (see refine.loop.instructions)
    near_margin: float = Field(
        0.05,
        ge=0.0,
        le=0.5,
        description="An observed item this close below tau to a reference is a near match: "
        "the edit leaves it (and its reference) alone.",
        json_schema_extra=_RUN,
    )
    replace_floor: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="A hallucinated item is replaced by its closest missing reference when "
        "that is at least this similar (else removed).",
        json_schema_extra=_RUN,
    )
    max_per_dimension: int = Field(10, ge=1)
    budget_seconds: float | None = Field(
        None, gt=0, description="Wall-time budget in seconds.", json_schema_extra=_RUN
    )
    budget_calls: int | None = Field(
        None, gt=0, description="Model-call budget.", json_schema_extra=_RUN
    )
    # off by default until the loop benches show its effect (refine strategies reports the
    # fixes each strategy forgets)
    keep_fixes: int | None = Field(
        None,
        ge=0,
        description="Reject an edit that undoes more than N earlier fixes (a descriptor an "
        "earlier round made aligned, an item it removed) unless its FAITH gain passes the "
        "margin by the gain below; off by default.",
        json_schema_extra={
            **_ALL,
            "info": "reject an edit that undoes more than this many earlier fixes (empty: off; "
            "on a roll back, the run's own)",
        },
    )
    memory: bool = Field(
        False,
        description="Remember what accepted rounds fixed (a store per profile under the data "
        "folder; in the app, one per visitor) and give the instruction writer the best "
        "matching past fixes as hints.",
        json_schema_extra={
            **_ALL,
            "box": "remember what my accepted rounds fixed, and hint it to the instruction writer",
        },
    )
    # the store --memory reads and adds to (None: the profile's, under the data folder; a
    # bench gives its own)
    memory_store: str | None = None
    # hints only from other prompts' runs (a bench's: a prompt's cell made again, or
    # another strategy of the same prompt, gives it none)
    memory_other_prompts: bool = False
    keep_fixes_gain: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="The FAITH gain over the margin that lets an edit undo more earlier "
        "fixes than the limit above all the same.",
        json_schema_extra=_RUN,
    )
    # ``given``: what a front takes for a field that is no single value: ``list`` (names
    # separated by commas), ``path`` (a file or folder), ``repeat`` (an option given once per
    # item)
    instructions: dict[int, str] = Field(
        default_factory=dict,
        description="ROUND=TEXT: your own instruction for that round (repeatable).",
        json_schema_extra={**_RUN, "flag": "--instruction", "given": "repeat"},
    )
    prompt: str | None = None
    input_image: str | None = Field(
        None,
        description="Refine this image instead of generating.",
        json_schema_extra={**_RUN, "flag": "--image", "given": "path"},
    )
    # CAIRE per round: other culture labels to rate the image against (the country is
    # always rated first), a knowledge base folder (None: kb-free), retrieval depth
    caire_labels: list[str] = Field(
        default_factory=list,
        description='Rate each round 1-5 for the country and these cultures, e.g. "Turkey,India".',
        json_schema_extra={
            **_ALL,
            "given": "list",
            "label": "CAIRE cultures",
            "box": "CAIRE: other cultures to rate 1-5 (optional)",
            "placeholder": "Turkey, India",
        },
    )
    caire_kb: str | None = Field(
        None,
        description="Knowledge base for CAIRE (without it: kb-free).",
        json_schema_extra={
            **_ALL,
            "given": "path",
            "label": "CAIRE knowledge base",
            "box": "CAIRE knowledge base folder (optional)",
            "placeholder": "kb/",
        },
    )
    caire_top_k: int = Field(20, ge=1)
    # the metrics the papers compare against, recorded beside FAITH on every candidate (the
    # catalog's group "baseline"); the loop still decides on FAITH and quality
    baselines: list[str] = Field(
        default_factory=list,
        description="Baselines to record beside FAITH on every candidate, e.g. "
        '"clipscore,vqascore" (all: every one); the loop decides on FAITH and quality.',
        json_schema_extra={**_RUN, "given": "list", "placeholder": "clipscore, vqascore"},
    )
    # the round-0 prompt is also rendered in these languages, each followed round by round
    # with the same instructions; with an SoS bank every image gets its SoS
    prompt_languages: list[str] = Field(
        default_factory=list,
        description='Also follow the run in these prompt languages, e.g. "fr,ja" (translated).',
        json_schema_extra={
            **_ALL,
            "given": "list",
            "box": "other prompt languages (optional)",
            "placeholder": "fr, ja",
        },
    )
    sos_bank: str | None = Field(
        None,
        description="An SoS bank (refine sos bank): every round's images get SoS.",
        json_schema_extra={
            **_ALL,
            "given": "path",
            "label": "SoS bank",
            "box": "SoS bank folder (optional)",
            "placeholder": "banks/people-eating",
        },
    )
    # also observe and score (FAITH, ALIGN, HAL, EXAG) each language's image every round
    language_scores: bool = Field(
        False,
        description="Also observe and score FAITH in each prompt language.",
        json_schema_extra={
            **_ALL,
            "box": "also observe and score each language's image (FAITH per language)",
        },
    )
    # cultural expectations checked on each round's chosen image; missed ones are asked
    # for in the next edit
    expectations: list[Expectation] = Field(
        default_factory=list,
        description="An expectations file (refine expectations build): checked every round; "
        "missed ones are asked for in the next edit.",
        json_schema_extra={**_RUN, "given": "path"},
    )

    @field_validator("edit_boxes", mode="before")
    @classmethod
    def _boxes(cls, v: Any) -> list[list[float]]:
        return by_hand_boxes(v)

    @model_serializer(mode="wrap")
    def _written(self, handler: Any) -> Any:
        """The settings as written: ``edit_boxes`` and ``review_file`` only where given (a
        record from before those fields reads the same, and stays byte for byte)."""
        return _unset_left_out(handler(self), "edit_boxes", "review_file")

    @field_validator("baselines")
    @classmethod
    def _baselines(cls, v: list[str]) -> list[str]:
        from metrics.baselines import parse_baselines

        return list(parse_baselines(v))


# run.json's layout: 1, every run written before the field; 2, with the schema, the
# toolkit's version, and each local model's resolved commit in backend_info; 3, with
# ``refused`` rounds; 4, with a person's ``reference_changes``. A run is written at the
# lowest layout that holds it (2 unless a round was refused or its references changed), so
# that a toolkit of layout 2 still opens it; this one reads up to RUN_SCHEMA
RUN_SCHEMA = 4
WRITTEN_SCHEMA = 2  # a run without refused rounds
REFUSED_SCHEMA = 3
CHANGED_SCHEMA = 4  # 4: with a person's changes of the references


class Run(_Record):
    schema_version: int = WRITTEN_SCHEMA
    toolkit: str = ""  # the cultural-refine version that started it ("" before schema 2)
    id: str
    spec: RunSpec
    references: ReferencePack
    templates: dict[str, str] = Field(default_factory=dict)
    backend_ids: dict[str, str] = Field(default_factory=dict)
    # each backend's info(): id, device, dtype, revision (what it reports)
    backend_info: dict[str, dict[str, str]] = Field(default_factory=dict)
    # versions of the packages that decide the numbers (absent: not installed)
    packages: dict[str, str] = Field(default_factory=dict)
    # where spec.tau comes from ("given", or the profile's calibration and its source)
    tau_source: str = ""
    # Gemini token usage per model: calls, prompt_tokens, output_tokens, total_tokens
    usage: dict[str, dict[str, int]] = Field(default_factory=dict)
    # interrupted: Ctrl-C (or SIGINT) in the process driving it; --resume goes on from the
    # rounds done, as after a failure
    status: Literal["running", "finished", "failed", "interrupted"] = "running"
    rounds: list[Round] = Field(default_factory=list)
    best_round: int | None = None
    stop_reason: str | None = None
    error: str | None = None
    created: str = ""
    updated: str = ""
    model_calls: int = 0
    elapsed_s: float = 0.0
    # a run continued from a round of another run: {"run": dir, "round": k}
    branched_from: dict[str, Any] | None = None
    # editing rounds whose every candidate the model refused (written only when there are)
    refused: list[RefusedRound] = Field(default_factory=list)
    # a person's changes of the references mid-run (refine.loop.aims): each with the round
    # it starts at; ``references`` are then the changed ones, and ``pack_references`` the
    # pack's the run began with
    reference_changes: list[ReferenceChange] = Field(default_factory=list)
    pack_references: ReferencePack | None = None

    @model_serializer(mode="wrap")
    def _written(self, handler: Any) -> Any:
        """The record as written: ``refused`` only when a round was, and then at layout 3;
        the reference changes only when a person made one, and then at layout 4 (a run.json
        without them reads the same, and records from before the fields stay byte for
        byte)."""
        data = handler(self)
        if isinstance(data, dict):
            if data.get("refused"):  # a toolkit of layout 2 would refuse the field unnamed
                data["schema_version"] = max(int(data.get("schema_version") or 0), REFUSED_SCHEMA)
            else:
                data.pop("refused", None)
            if data.get("reference_changes"):
                data["schema_version"] = max(int(data.get("schema_version") or 0), CHANGED_SCHEMA)
            else:
                data.pop("reference_changes", None)
                data.pop("pack_references", None)
        return data

    def aims_changed(self) -> bool:
        """Whether a person changed the references the run aims at."""
        return self.pack_references is not None

    @model_validator(mode="before")
    @classmethod
    def _layout(cls, data: Any) -> Any:
        """A run.json newer than this toolkit's layout is refused, naming both."""
        if isinstance(data, dict):
            given = data.get("schema_version")
            if isinstance(given, int) and given > RUN_SCHEMA:
                raise ValueError(
                    f"run.json of layout version {given}, newer than this toolkit reads "
                    f"({RUN_SCHEMA}): upgrade cultural-refine"
                )
        return data

    @classmethod
    def read(cls, doc: dict[str, Any]) -> Run:
        """A run from its run.json's document: one without ``schema_version`` was written
        before the field, layout 1."""
        return cls.model_validate({"schema_version": 1, **doc} if isinstance(doc, dict) else doc)

    def best(self) -> Round | None:
        return None if self.best_round is None else self.rounds[self.best_round]

    def image_names(self, upto: int | None = None) -> list[str]:
        """Every image file the record names (rounds 0..``upto``, or all)."""
        rounds = self.rounds if upto is None else self.rounds[: upto + 1]
        return [c.image for r in rounds for c in r.candidates] + [
            e.image for r in rounds for e in r.languages.values()
        ]

    def file_names(self, upto: int | None = None) -> list[str]:
        """Every file of the run's folder the record names: its images and the masks of
        regions drawn by hand (rounds 0..``upto``, or all)."""
        rounds = self.rounds if upto is None else self.rounds[: upto + 1]
        return self.image_names(upto) + [g.mask for r in rounds for g in r.regions if g.mask]
