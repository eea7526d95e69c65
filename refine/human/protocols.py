"""Rating-study protocols as data: what the Rate view asks, of whom, and how answers are
checked (one TOML file each; the bundled ones in ``assets/protocols/``, worded as their
papers word them, or a user's own file).

A protocol holds:

* ``questions``, in order, each with its ``kind``: ``single`` (one option: a Likert
  scale, 0/0.5/1, yes/maybe/no, a forced choice), ``multiple`` (checkboxes), ``marks``
  (the words of the prompt, to mark those an answer is about) or ``text``; its
  ``options`` (each a value, the label shown and, for a scale, its ``score``), or
  ``options_from`` the item (``expectations``, ``cultures``: the SoS forced choice among
  the prompt's culture, its language's and three others); ``show_if`` (shown only when an
  earlier answer is one of some values); ``reason_if`` (the answers that need a written
  reason), ``comment_if`` (those that allow an optional comment), ``reason`` (``required``
  or ``optional`` for any answer);
* ``raters_per_image`` and, with ``every_country``, per country of the raters;
* ``qualify``: the profile fields of which one must name the image's country, for each
  rule (``[["born", "raised"]]``: born or raised there);
* ``attention``: a check after every ``every`` images, an image that says what to answer
  (``answers``: question id -> the value asked for);
* ``repeats``: how many rated images come back at the end, and the ``tolerance`` of a
  repeated score;
* ``flag``: how many failed checks and inconsistent repeats a rater may have before being
  flagged (``refine agree --exclude-flagged`` leaves flagged raters out).

Nothing about a question is in code: :meth:`Protocol.check` validates any protocol's
answers, and the Rate view draws any protocol's questions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from refine.human.countries import same_country

PROFILE_COUNTRIES = ("born", "raised", "residence", "nationality")
AGE_BANDS = ("18-24", "25-34", "35-44", "45-54", "55-64", "65+")
MAX_TEXT = 1000  # characters of a reason, comment or description
# a question's placeholders (filled with the item's values where a question is shown), in
# the words a message names them by
PLACEHOLDERS = {
    "{activity}": "the activity",
    "{country}": "the country",
    "{prompt}": "the prompt",
    "{rater_country}": "your country",
}


def words(text: str) -> str:
    """A question's text for a message: its placeholders in words, never ``{activity}``."""
    for key, value in PLACEHOLDERS.items():
        text = text.replace(key, value)
    return text


class _Strict(BaseModel):
    # NaN and infinity are no setting's value (a NaN weight compared as nothing)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Option(_Strict):
    value: str
    label: str = ""  # shown; the value when empty
    score: float | None = None  # the number agreement reads (None: a nominal answer)

    def shown(self) -> str:
        return self.label or self.value


class Condition(_Strict):
    """Shown only when the answer to ``question`` is one of ``one_of``."""

    question: str
    one_of: list[str]


class Question(_Strict):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    text: str
    rubric: str = ""  # the anchors or criteria, shown under the question
    kind: Literal["single", "multiple", "marks", "text"] = "single"
    options: list[Option] = Field(default_factory=list)
    options_from: Literal["expectations", "cultures"] | None = None
    required: bool = True
    required_if: Condition | None = None  # required only when this holds
    show_if: Condition | None = None
    reason: Literal["none", "optional", "required"] = "none"
    reason_if: list[str] = Field(default_factory=list)  # answers that need a reason
    comment_if: list[str] = Field(default_factory=list)  # answers that allow a comment
    reason_label: str = "Why? (in a sentence)"

    @model_validator(mode="after")
    def _options(self) -> Question:
        if self.kind in ("single", "multiple") and not self.options and not self.options_from:
            raise ValueError(f"question {self.id!r}: give its options or options_from")
        values = [o.value for o in self.options]
        if len(set(values)) != len(values):
            raise ValueError(f"question {self.id!r}: an option is given twice")
        stray = [v for v in (*self.reason_if, *self.comment_if) if values and v not in values]
        if stray:
            raise ValueError(f"question {self.id!r}: {stray[0]!r} is not one of its options")
        return self

    def scored(self) -> bool:
        """Whether its answers are numbers agreement can correlate."""
        return (
            self.kind == "single"
            and bool(self.options)
            and all(o.score is not None for o in self.options)
        )

    def score(self, value: str) -> float | None:
        for o in self.options:
            if o.value == value:
                return o.score
        return None


class Qualify(_Strict):
    # each rule: one of these profile fields must name the image's country
    country: list[list[Literal["born", "raised", "residence", "nationality"]]] = Field(
        default_factory=list
    )
    text: str = ""  # who qualifies, in words, shown before the first image


class Attention(_Strict):
    every: int = Field(0, ge=0, le=100_000)  # one check after every N images (0: none)
    text: str = ""  # drawn on the check's image
    answers: dict[str, str] = Field(default_factory=dict)  # question id -> value asked for


class Repeats(_Strict):
    count: int = Field(0, ge=0, le=100_000)  # rated images shown again at the end
    tolerance: float = Field(1.0, ge=0, le=1e6)  # a repeated score farther than this: inconsistent


class Flag(_Strict):
    failed_checks: int = Field(0, ge=0, le=100_000)  # flagged above this many failed checks
    inconsistent: int = Field(1, ge=0, le=100_000)  # ... or above this many inconsistent repeats


class Protocol(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    title: str
    source: str = ""  # the paper and section it follows
    instructions: str = ""
    questions: list[Question]
    # how many raters rate each image (None: every rater rates every image)
    raters_per_image: int | None = Field(None, ge=1, le=1_000)
    every_country: bool = False  # raters_per_image raters of every rater country
    rater_country: Literal["born", "raised", "residence", "nationality"] = "raised"
    qualify: Qualify = Field(default_factory=Qualify)
    attention: Attention = Field(default_factory=Attention)
    repeats: Repeats = Field(default_factory=Repeats)
    flag: Flag = Field(default_factory=Flag)

    @model_validator(mode="after")
    def _references(self) -> Protocol:
        ids = [q.id for q in self.questions]
        if not ids:
            raise ValueError("a protocol asks at least one question")
        if len(set(ids)) != len(ids):
            raise ValueError("a question id is given twice")
        for k, q in enumerate(self.questions):
            for c in (q.show_if, q.required_if):
                if c is not None and c.question not in ids[:k]:
                    raise ValueError(
                        f"question {q.id!r}: a condition names {c.question!r}, which is not "
                        "a question before it"
                    )
        for qid, value in self.attention.answers.items():
            q = self.question(qid)
            if q is None or (q.options and value not in [o.value for o in q.options]):
                raise ValueError(f"attention: {qid}={value!r} is not an answer of the protocol")
        if self.attention.every and not self.attention.answers:
            raise ValueError("attention: say the answers a check asks for")
        return self

    def question(self, qid: str) -> Question | None:
        return next((q for q in self.questions if q.id == qid), None)

    def shown(self, answers: dict[str, Any]) -> list[Question]:
        """The questions shown given the answers so far (conditions on earlier ones)."""
        out = []
        for q in self.questions:
            c = q.show_if
            if c is None or _as_values(answers.get(c.question)) & set(c.one_of):
                out.append(q)
        return out

    def check(
        self,
        answers: dict[str, Any],
        reasons: dict[str, Any] | None = None,
        options: dict[str, list[str]] | None = None,
        prompt: str = "",
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The answers and reasons as kept, or a ValueError naming the first problem:
        a shown question left unanswered, an answer that is not one of its options (those
        of the item for ``options_from``, in ``options``), a reason required and not
        given, a text over :data:`MAX_TEXT` characters. Answers to questions that are not
        shown are dropped."""
        reasons = dict(reasons or {})
        options = dict(options or {})
        unknown = sorted(set(answers) - {q.id for q in self.questions})
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not a question of the {self.name} protocol")
        kept: dict[str, Any] = {}
        why: dict[str, str] = {}
        for q in self.shown(answers):
            value = answers.get(q.id)
            allowed = [o.value for o in q.options] or list(options.get(q.id, []))
            if q.options_from and not allowed:
                continue  # the item gives no choices (an image without expectations)
            if q.kind == "single":
                value = None if value in (None, "") else str(value)
                if value is not None and value not in allowed:
                    raise ValueError(
                        f"{words(q.text)}: {value!r} is not one of {', '.join(allowed)}"
                    )
            elif q.kind in ("multiple", "marks"):
                value = [str(v) for v in (value or [])]
                if q.kind == "marks":
                    allowed = prompt_words(prompt)
                stray = [v for v in value if v not in allowed]
                if stray:
                    raise ValueError(f"{words(q.text)}: {stray[0]!r} is not among the choices")
                value = value or None
            else:
                value = " ".join(str(value or "").split()) or None
                if value and len(value) > MAX_TEXT:
                    raise ValueError(f"{words(q.text)}: at most {MAX_TEXT} characters")
            if value is None:
                c = q.required_if
                needed = (
                    q.required
                    if c is None
                    else bool(_as_values(answers.get(c.question)) & set(c.one_of))
                )
                if needed:
                    raise ValueError(f"answer: {words(q.text)}")
                continue
            kept[q.id] = value
            reason = " ".join(str(reasons.get(q.id) or "").split())
            if len(reason) > MAX_TEXT:
                raise ValueError(f"{q.reason_label}: at most {MAX_TEXT} characters")
            needs = q.reason == "required" or bool(_as_values(value) & set(q.reason_if))
            if needs and not reason:
                raise ValueError(f"{q.reason_label} (needed for your answer to: {words(q.text)})")
            allows = needs or q.reason == "optional" or _as_values(value) & set(q.comment_if)
            if reason and allows:
                why[q.id] = reason
        return kept, why

    def scores(self, answers: dict[str, Any]) -> dict[str, float]:
        """The answers agreement reads, by question id: each scored question's score."""
        out = {}
        for q in self.questions:
            if q.scored() and q.id in answers:
                s = q.score(str(answers[q.id]))
                if s is not None:
                    out[q.id] = s
        return out

    def qualifies(self, profile: RaterProfile, country: str | None) -> tuple[bool, str]:
        """Whether a rater qualifies to rate an image of ``country``, and why not."""
        if not self.qualify.country or country is None:
            return True, ""
        have = {f: getattr(profile, f) for f in PROFILE_COUNTRIES}
        for rule in self.qualify.country:
            if not any(same_country(have[f], country) for f in rule):
                words = " or ".join(_FIELD_WORDS[f] for f in rule)
                return False, f"this study asks for raters {words} {country}"
        return True, ""


_FIELD_WORDS = {
    "born": "born in",
    "raised": "raised (their first 18 years) in",
    "residence": "living in",
    "nationality": "nationals of",
}


class RaterProfile(_Strict):
    """Who a rater is, given once per set before the first image, with their consent."""

    born: str = Field(min_length=1, max_length=80)  # country of birth
    raised: str = Field(min_length=1, max_length=80)  # where they lived their first 18 years
    residence: str = Field(min_length=1, max_length=80)  # where they live now
    nationality: str = Field(min_length=1, max_length=80)
    languages: list[str] = Field(min_length=1, max_length=12)
    age_band: Literal["18-24", "25-34", "35-44", "45-54", "55-64", "65+"]
    consent: Literal[True]

    @model_validator(mode="before")
    @classmethod
    def _clean(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for f in PROFILE_COUNTRIES:
                if isinstance(data.get(f), str):
                    data[f] = " ".join(data[f].split())
            langs = data.get("languages")
            if isinstance(langs, str):
                langs = re.split(r"[,;]", langs)
            if isinstance(langs, list):
                data["languages"] = [" ".join(str(x).split())[:40] for x in langs if str(x).strip()]
        return data

    @classmethod
    def parse(cls, data: dict[str, Any]) -> RaterProfile:
        """A profile from a form's values; a ValueError names the first field to fix."""
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(x) for x in first["loc"]) or "profile"
            if field == "consent":
                raise ValueError("give your consent to take part before rating") from None
            words = {"raised": "the country you lived in for your first 18 years"}
            raise ValueError(f"profile: {words.get(field, field)}: {first['msg']}") from None


def _as_values(value: Any) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, list | tuple | set):
        return {str(v) for v in value}
    return {str(value)}


def prompt_words(prompt: str) -> list[str]:
    """The words of a prompt a rater may mark (each once, in order)."""
    return list(dict.fromkeys(re.findall(r"[\w'-]+", prompt)))


def _bundled() -> tuple[str, ...]:
    """The bundled protocols (``assets/protocols/*.toml``), the quick questions first."""
    from refine.assets import bundled_names

    return tuple(sorted(bundled_names("protocol"), key=lambda n: (n != "quick", n)))


BUNDLED = _bundled()  # scanned as profiles and recipes are: a new file is a new protocol


def load_protocol(name_or_path: str | Path) -> Protocol:
    """A bundled protocol by name, or a protocol file; a ValueError says what is wrong. A
    file with ``base = "NAME"`` is the bundled protocol NAME with the file's own top-level
    keys and tables in place of its (``ahead-origin``: AHEaD with the broader rule)."""
    text, where = _protocol_text(name_or_path)
    from refine.io.files import toml_model

    def based(data: dict) -> dict:
        base = data.pop("base", None)
        if base is None:
            return data
        if base not in BUNDLED or not isinstance(base, str):
            raise ValueError(f"{where}: base: {base!r} is not one of {', '.join(BUNDLED)}")
        import tomllib

        theirs = tomllib.loads(_protocol_text(base)[0])
        if "base" in theirs:  # one level: a base of a base would lose the first's keys
            raise ValueError(f"{where}: base: {base!r} is itself based on another; name that one")
        return {**theirs, **data}

    return toml_model(text, where, Protocol, prepare=based)


def _protocol_text(name_or_path: str | Path) -> tuple[str, str]:
    from refine.assets import bundled_or_file

    path, where = bundled_or_file(name_or_path, "protocol")
    return path.read_text(encoding="utf-8"), where
