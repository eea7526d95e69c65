"""A small scripted world behind the fake Gemini server, for end-to-end loop tests.

Images are solid colours. The world says what the observer sees in each colour, how the
judge rates its exaggeration, what generating gives, and what an edit turns a colour into
(per seed parity). Every answer goes through the real google-genai client and backends.

The judge states its odds in its log-probabilities; asked for a sampled answer (a model
without log-probabilities), it draws one from those same odds, by the request's seed
(``seed_draw``) or, where it ignores the seed, from the world's own generator.
"""

from __future__ import annotations

import base64
import io
import json
import math
import random
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.gemini_server import image_answer, png_bytes, text_answer

RED, GREEN, BLUE, GREY = (200, 30, 30), (30, 160, 60), (40, 40, 200), (128, 128, 128)
# the steps between RED and GREEN: an editor that improves the scene step by step turns
# RED into AMBER, AMBER into OLIVE and OLIVE into GREEN (see ``STEPWISE``)
AMBER, OLIVE = (210, 130, 40), (110, 150, 50)
# an editor that forgets: RED's scene with one descriptor fixed (the Persian rug), then
# that fix lost while three others are made and two hallucinations removed
# (``FORGETFUL``, refine.loop.tracking's tests)
RUG, FORGOT = (205, 40, 30), (195, 30, 45)

# Observations chosen against the Iran "people eating food at home" references of the pack
SEEN = {
    RED: {
        "setting": ["modern restaurant with neon lights"],
        "objects": ["oversized hookah", "Large rice platter", "hamburgers"],
        "attire": ["turbans and robes"],
        "interaction": ["Engaging in conversation"],
        "spatial": [],
    },
    GREEN: {
        "setting": ["Persian rug on floor", "Floor cushions (poshti)"],
        "objects": ["Large rice platter", "Estekan tea glasses", "Basket of flatbreads"],
        "attire": ["Casual modern attire", "Women wearing simple headscarves"],
        "interaction": ["Sharing communal dishes", "Engaging in conversation"],
        "spatial": ["People seated on floor", "Around a sofreh"],
    },
    BLUE: {
        "setting": ["spaceship interior"],
        "objects": ["robots", "laser guns"],
        "attire": ["astronaut suits"],
        "interaction": ["fighting aliens"],
        "spatial": ["floating in zero gravity"],
    },
    GREY: {d: [] for d in ("setting", "objects", "attire", "interaction", "spatial")},
    AMBER: {
        "setting": ["modern restaurant with neon lights"],
        "objects": ["Large rice platter", "Estekan tea glasses"],
        "attire": ["Casual modern attire"],
        "interaction": ["Sharing communal dishes"],
        "spatial": [],
    },
    OLIVE: {
        "setting": ["Persian rug on floor"],
        "objects": ["Large rice platter", "Estekan tea glasses", "Basket of flatbreads"],
        "attire": ["Casual modern attire", "Women wearing simple headscarves"],
        "interaction": ["Sharing communal dishes", "Engaging in conversation"],
        "spatial": ["People seated on floor"],
    },
    RUG: {
        "setting": ["modern restaurant with neon lights", "Persian rug on floor"],
        "objects": ["oversized hookah", "Large rice platter", "hamburgers"],
        "attire": ["turbans and robes"],
        "interaction": ["Engaging in conversation"],
        "spatial": [],
    },
    FORGOT: {
        "setting": ["modern restaurant with neon lights"],
        "objects": ["oversized hookah", "Large rice platter", "Estekan tea glasses"],
        "attire": ["Casual modern attire"],
        "interaction": ["Engaging in conversation", "Sharing communal dishes"],
        "spatial": [],
    },
}
# RED -> RUG -> FORGOT, whatever the seed
FORGETFUL = {RED: (RUG, RUG), RUG: (FORGOT, FORGOT), FORGOT: (FORGOT, FORGOT)}
# even seeds step toward GREEN, odd seeds go wrong (BLUE)
STEPWISE = {RED: (AMBER, BLUE), AMBER: (OLIVE, BLUE), OLIVE: (GREEN, BLUE), GREEN: (GREEN, BLUE)}
# expected judge rating (log-probabilities over "1".."5") per colour
RATING = {RED: 4, GREEN: 1, BLUE: 2, GREY: 1, AMBER: 3, OLIVE: 2, RUG: 4, FORGOT: 4}
# CAIRE: the judge's peak rating per colour and culture label (1 for labels not named)
CULTURE = {
    RED: {"Iran": 2, "Turkey": 4, "India": 1},
    GREEN: {"Iran": 5, "Turkey": 2, "India": 1},
    BLUE: {"Iran": 1, "Turkey": 1, "India": 3},
    GREY: {},
    AMBER: {"Iran": 3, "Turkey": 3},
    OLIVE: {"Iran": 4, "Turkey": 2},
    RUG: {"Iran": 2, "Turkey": 4},
    FORGOT: {"Iran": 3, "Turkey": 3},
}
# CUBE geo-tags (continent, country, artifact) the observer gives per colour
GEO = {
    RED: ("Asia", "Turkey", "Hookah"),
    GREEN: ("Asia", "Iran", "Sabzi polo"),
    BLUE: ("Europe", "France", "Croissant"),
    GREY: ("Africa", "Nigeria", "Jollof rice"),
    AMBER: ("Asia", "Iran", "Kebab"),
    OLIVE: ("Asia", "Iran", "Tahdig"),
    RUG: ("Asia", "Iran", "Carpet"),
    FORGOT: ("Asia", "Iran", "Tea"),
}
# the judge's peak 0-10 quality rating per colour (naturalness and artifacts alike)
QUALITY = {RED: 7, GREEN: 8, BLUE: 6, GREY: 5, AMBER: 7, OLIVE: 8, RUG: 7, FORGOT: 7}
QUALITY_PROMPT = "perceptual quality of an AI-generated"
# log P("Yes") to any "Does this image show <stereotype>?" question, per colour
YES_LOGPROB = {
    RED: math.log(0.9),
    GREEN: math.log(0.3),
    BLUE: math.log(0.2),
    GREY: math.log(0.4),
    AMBER: math.log(0.7),
    OLIVE: math.log(0.5),
    RUG: math.log(0.9),
    FORGOT: math.log(0.9),
}


def _decode(data: str) -> bytes:
    data = data + "=" * (-len(data) % 4)
    return (
        base64.urlsafe_b64decode(data) if ("-" in data or "_" in data) else base64.b64decode(data)
    )


def _colour(part: dict) -> tuple[int, int, int]:
    from PIL import Image

    inline = part.get("inlineData") or part.get("inline_data")
    with Image.open(io.BytesIO(_decode(inline["data"]))) as im:
        return im.convert("RGB").getpixel((im.width // 2, im.height // 2))


def _depth(part: dict) -> int:
    """How many edits made an image: its top-left pixel's blue value when that pixel differs
    from the centre (only images edited in a world with ``degrade_after``)."""
    from PIL import Image

    inline = part.get("inlineData") or part.get("inline_data")
    with Image.open(io.BytesIO(_decode(inline["data"]))) as im:
        rgb = im.convert("RGB")
        corner, centre = rgb.getpixel((0, 0)), rgb.getpixel((im.width // 2, im.height // 2))
    return 0 if corner == centre else corner[2]


def _marked(colour, size, depth: int) -> bytes:
    """A solid image whose top-left pixel says how many edits made it."""
    from PIL import Image

    im = Image.new("RGB", size, colour)
    im.putpixel((0, 0), (0, 0, depth))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def quality_logprobs(peak: int, odds: dict | None = None) -> dict[str, float]:
    """The first-token log-probabilities of a quality rating: digits "0".."9" as Gemini's
    tokenizer writes them (10 is "1" then "0"); ``odds`` as ``rating_logprobs``'."""
    return _logprobs(peak, range(10), odds)


def _logprobs(peak: int, values: range, odds: dict | None) -> dict[str, float]:
    """A judge's log-probabilities of the answers ``values`` around its ``peak``: by
    default the peak at -0.1 and every other answer at -4 - its distance (a sure judge,
    0.97-0.98 on the peak); with ``odds`` (offset from the peak -> probability, e.g.
    {0: 0.75, -1: 0.25}) only those answers, an offset outside ``values`` taken the other
    way round."""
    if odds is None:
        return {str(k): -0.1 if k == peak else -4.0 - abs(k - peak) for k in values}
    out: dict[str, float] = {}
    for offset, p in odds.items():
        v = peak + offset if peak + offset in values else peak - offset
        out[str(v)] = math.log(math.exp(out.get(str(v), -math.inf)) + p)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def seed_draw(seed: int) -> float:
    """The uniform draw behind the answer of a model that follows the request's seed: a
    generator seeded by it, so one seed draws alike for every prompt and image."""
    return random.Random(seed).random()


def drawn(probabilities: dict[str, float], u: float) -> str:
    """The answer at ``u`` of the distribution these log-probabilities state (normalised),
    answers in their own order: the inverse of its distribution function."""
    z = sum(math.exp(v) for v in probabilities.values())
    total = 0.0
    for answer, lp in probabilities.items():
        total += math.exp(lp) / z
        if u < total:
            return answer
    return answer


def _nearest(c) -> tuple[int, int, int]:
    return min(SEEN, key=lambda k: sum((a - b) ** 2 for a, b in zip(k, c, strict=True)))


# the reference-building prompts, by a phrase each holds
REFS_PROMPTS = {
    "Describe what a faithful": "propose",
    "reviewing visual descriptors": "refine",
    "exaggerate cultural stereotypes": "stereotypes",
    "take for granted in such a scene": "expectations",
}
NOWRUZ_REFS = {
    "propose": {
        "setting": ["Home decorated for spring", "Haft-sin table by a window"],
        "objects": ["Sabzeh sprouts", "Goldfish bowl", "Painted eggs"],
        "attire": ["New spring clothes"],
        "interaction": ["Family greeting elders"],
        "spatial": ["Family gathered around the haft-sin"],
    },
    "refine": {
        "setting": ["Haft-sin table by a window"],
        "objects": ["Sabzeh sprouts", "Goldfish bowl", "Painted eggs"],
        "attire": ["New spring clothes"],
        "interaction": ["Family greeting elders"],
        "spatial": ["Family gathered around the haft-sin"],
    },
    "stereotypes": {"stereotypes": ["flying carpets", "desert backdrop"]},
    "expectations": {
        "explicit": [
            {"statement": "A family is together at home", "reason": "the prompt says so"},
            {"statement": "People are celebrating Nowruz", "reason": "the prompt says so"},
        ],
        "implicit": [
            {"statement": "A haft-sin table is set", "reason": "every Nowruz home has one"},
            {"statement": "A goldfish bowl stands on the table", "reason": "part of haft-sin"},
            {"statement": "People wear new spring clothes.", "reason": "new clothes for spring"},
        ],
    },
}
# the judge's yes-probability of each expectation statement per colour
EXPECT_P = {
    RED: {
        "A family": 0.8,
        "celebrating Nowruz": 0.3,
        "haft-sin": 0.1,
        "goldfish": 0.2,
        "spring clothes": 0.6,
    },
    GREEN: {
        "A family": 0.9,
        "celebrating Nowruz": 0.85,
        "haft-sin": 0.7,
        "goldfish": 0.45,
        "spring clothes": 0.75,
    },
    BLUE: {},
    GREY: {},
    AMBER: {},
    OLIVE: {},
    RUG: {},
    FORGOT: {},
}

# TIFA: the questions the language model writes about any prompt, and the judge's
# P("Yes") of each per colour (by a word of the question)
TIFA_MARK = "You write the questions of TIFA"
TIFA_QUESTIONS = [
    {"element": "people", "category": "human", "question": "Are there people in the image"},
    {"element": "eating", "category": "activity", "question": "Are the people eating?"},
    {"element": "at home", "category": "location", "question": "Is the scene inside a home?"},
    {"element": "food", "category": "food", "question": "Is there food?"},
]
TIFA_P = {  # by the element each question checks
    RED: {"people": 0.9, "eating": 0.4, "at home": 0.2, "food": 0.7},
    GREEN: {"people": 0.95, "eating": 0.8, "at home": 0.6, "food": 0.3},
    BLUE: {"people": 0.1, "eating": 0.1, "at home": 0.3, "food": 0.2},
    GREY: {"people": 0.5, "eating": 0.5, "at home": 0.5, "food": 0.5},
    AMBER: {"people": 0.9, "eating": 0.6, "at home": 0.3, "food": 0.6},
    OLIVE: {"people": 0.9, "eating": 0.7, "at home": 0.5, "food": 0.5},
    RUG: {"people": 0.9, "eating": 0.4, "at home": 0.3, "food": 0.7},
    FORGOT: {"people": 0.9, "eating": 0.6, "at home": 0.2, "food": 0.7},
}


def tifa_p(colour, question: str) -> float | None:
    """The judge's P("Yes") of a TIFA question for an image of ``colour`` (None: no TIFA
    question)."""
    for q in TIFA_QUESTIONS:
        if q["question"].rstrip("?") in question:
            return TIFA_P[colour][q["element"]]
    return None


_BUSY = threading.Lock()
WRITER_PROMPT = "You write editing instructions for an image editing model"
REWRITE_PROMPT = "You rewrite a text-to-image prompt"  # the regenerate move's writer
GROUND_PROMPT = "An edit will change only some regions of it"  # a localized edit's boxes
# the boxes the world's observer draws: around what is in the image, where a missing item goes
WRONG_BOX, MISSING_BOX = [0.1, 0.1, 0.45, 0.5], [0.55, 0.5, 0.9, 0.95]


@dataclass
class World:
    generate: tuple[int, int, int] = RED
    # colour -> (colour for even seeds, colour for odd seeds)
    edits: dict = field(default_factory=lambda: {RED: (GREEN, BLUE), GREEN: (GREEN, BLUE)})
    # an image model's name -> its own edits, in place of ``edits`` (editors to compare)
    edits_by_model: dict = field(default_factory=dict)
    size: tuple[int, int] = (64, 48)
    log: list[str] = field(default_factory=list)
    fail_on: str | None = None  # a kind of request to answer with HTTP 500
    # a kind of request ("edit", "observe", "judge", "sampled") -> the finish reason its
    # answers end with, with no content (a block, or an empty answer)
    bare: dict = field(default_factory=dict)
    # the seeds whose answers are so (-1: a request without one); None: every request
    bare_seeds: set | None = None
    bare_models: set | None = None  # the models whose answers are so; None: every model
    bare_words: str | None = None  # only requests whose text holds these words are so
    edit_delay_s: float = 0.0  # a slow editor, to kill a process mid-round
    # a threading.Event every edit waits for (at most a minute): a run held mid-round until
    # a test has seen what it waits for, whatever the machine's pace
    edit_gate: Any = None
    fail_edit_of: tuple[int, int, int] | None = None  # edits of this colour answer HTTP 500
    fail_edit_seeds: set = field(default_factory=set)  # edits with these seeds answer 500
    delay_s: float = 0.0  # added to every answer: an API's latency
    delay_by_kind: dict = field(default_factory=dict)  # per kind ("generate", ...), over delay_s
    busy: list = field(default_factory=lambda: [0, 0])  # requests in flight now, at most
    prompts: list[str] = field(default_factory=list)  # the judge's rating prompts, in order
    questions: list[str] = field(default_factory=list)  # the judge's VQAScore questions
    by_model: list = field(default_factory=list)  # (kind, model) of every request, in order
    # a judge model's name -> what it adds to its "score is N" ratings (clipped to 1-5):
    # two judges that read the same images differently
    judge_shift_by_model: dict = field(default_factory=dict)
    # a prompt containing one of these texts generates that colour (first match wins)
    generate_for: dict = field(default_factory=dict)
    # an image model's name -> the colour it always draws (two generators to compare)
    generate_by_model: dict = field(default_factory=dict)
    # an image model's name -> colours it draws by seed (seed % len): diverse generators
    generate_by_seed: dict = field(default_factory=dict)
    geotags: list[str] = field(default_factory=list)  # the geo-tagging prompts asked
    ahead_observed: list[str] = field(default_factory=list)  # AHEaD's observer prompts
    translations: list[str] = field(default_factory=list)  # the prompts asked to translate
    # answer log-probability requests with HTTP 400 "Logprobs is not enabled", as many
    # current models do; sampled judge requests are answered per seed (see below)
    no_logprobs: bool = False
    # answer a "score is <num>" rating (AHEaD Tab. 31) with the digit alone, its
    # log-probabilities at the first position: a model that does not follow the format
    bare_digit: bool = False
    # the judge's odds around its peak ratings (``_logprobs``): None for a sure judge; its
    # log-probabilities state them, and its sampled answers are drawn from them
    odds: dict | None = None
    # a judge that ignores the seed (and the temperature) a sampled answer is asked with,
    # as a model that fixes its sampling may: each answer is drawn from this world's own
    # generator, where one that follows the seed draws by it (``seed_draw``)
    ignores_seed: bool = False
    draws: Any = field(default_factory=lambda: __import__("random").Random(0))
    # a judge that ignores the seed whose draws are keyed by what it is asked: the picture,
    # the prompt, the seed and how often it was asked so before. Two runs that ask the same
    # things meet the same draws, whatever else one of them asks in between (fresh answers
    # from other seeds), so that two decision rules' costs compare run by run; unpaired,
    # the draws go to the answers in the order they are asked
    paired: bool = False
    asked_so: dict = field(default_factory=dict)
    # answers to the reference-building prompts (refine refs build, the app's Build button)
    refs: dict = field(default_factory=lambda: dict(NOWRUZ_REFS))
    refs_asked: list[str] = field(default_factory=list)
    expectations_asked: list[str] = field(default_factory=list)  # statements judged
    tifa_asked: list[str] = field(default_factory=list)  # the prompts TIFA questions are for
    tifa_answered: list[str] = field(default_factory=list)  # the TIFA questions judged
    # the instruction writer's prompts, and an HTTP status to refuse them with
    written: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)  # the prompt rewriter's requests
    generated: list[str] = field(default_factory=list)  # each text-to-image request's prompt
    edited: list[str] = field(default_factory=list)  # each edit request's instruction
    edit_images: list = field(default_factory=list)  # each edit request's images (bytes)
    grounded: list[str] = field(default_factory=list)  # the grounding calls' prompts
    skip_box: set = field(default_factory=set)  # items the observer draws no box for
    refuse_writer: int | None = None
    # images made by this many edits or more look broken: the judge rates their quality 1 of
    # 10 (edited images then carry their edit count in their top-left pixel)
    degrade_after: int | None = None
    quality_asked: list[int] = field(default_factory=list)  # the peak quality of each ask
    # (kind, n): from the n-th request of that kind on, every request is answered with a
    # spent daily quota (a 429 as the API words it, a RetryInfo delay included)
    daily_spent_from: tuple[str, int] | None = None
    # kind -> 429s (per-minute quota, RetryInfo ``retry_delay``) for its next requests
    minute_429: dict = field(default_factory=dict)
    retry_delay: str = "1s"
    arrived: list = field(default_factory=list)  # (time.monotonic(), kind) of each request
    refused_at: list = field(default_factory=list)  # when each 429 was answered
    # (kind, n): the first request of that kind is answered at once, every later one is
    # held until n - 1 of them are held together (given up after ``hold_give_up_s``, and
    # answered at once from then on): calls that should go out together reach n - 1
    # however loaded the machine, calls sent one at a time never do
    hold_after_first: tuple[str, int] | None = None
    # and the first is answered only once this holds (polled; given up on the same way):
    # the state the client must be in while that first answer is awaited
    first_held_until: Any = None
    hold_give_up_s: float = 30.0
    # every request is held until this many are held together (given up the same way):
    # requests that go out together reach it, requests sent one after another never do;
    # only this world's requests count (an earlier test's may still be in flight)
    hold_together: int = 0
    held_peak: int = 0  # the most later requests of that kind held at once
    _held: list = field(default_factory=lambda: [0, 0, False])  # seen, held now, given up
    _hold: threading.Condition = field(default_factory=threading.Condition)

    def _hold_all(self) -> None:
        with self._hold:
            if self._held[2]:
                return
            self._held[1] += 1
            self.held_peak = max(self.held_peak, self._held[1])
            self._hold.notify_all()
            if not self._hold.wait_for(
                lambda: self.held_peak >= self.hold_together or self._held[2],
                timeout=self.hold_give_up_s,
            ):
                self._held[2] = True
                self._hold.notify_all()
            self._held[1] -= 1

    def _hold_if_asked(self, kind: str) -> None:
        if self.hold_after_first is None or kind != self.hold_after_first[0]:
            return
        n = self.hold_after_first[1]
        with self._hold:
            self._held[0] += 1
            first = self._held[0] == 1
        if first and self.first_held_until is not None:
            import time

            give_up = time.monotonic() + self.hold_give_up_s
            while not self.first_held_until():
                if time.monotonic() > give_up:
                    with self._hold:
                        self._held[2] = True
                    break
                time.sleep(0.01)
        with self._hold:
            if first or self._held[2]:
                return
            self._held[1] += 1
            self.held_peak = max(self.held_peak, self._held[1])
            self._hold.notify_all()
            if not self._hold.wait_for(
                lambda: self.held_peak >= n - 1 or self._held[2], timeout=self.hold_give_up_s
            ):
                self._held[2] = True
                self._hold.notify_all()
            self._held[1] -= 1

    def __call__(self, path: str, body: dict):
        with _BUSY:
            self.busy[0] += 1
            self.busy[1] = max(self.busy)
        try:
            return self._answer(path, body)
        finally:
            with _BUSY:
                self.busy[0] -= 1

    def _answer(self, path: str, body: dict):
        parts = body["contents"][0]["parts"]
        config = body.get("generationConfig", {})
        images = [p for p in parts if "inlineData" in p or "inline_data" in p]
        text = " ".join(p.get("text", "") for p in parts)
        modalities = config.get("responseModalities") or config.get("response_modalities") or []
        if "IMAGE" in modalities:
            kind = "edit" if images else "generate"
        elif config.get("responseLogprobs") or config.get("response_logprobs"):
            kind = "judge"
        elif "answer" in ((config.get("responseJsonSchema") or {}).get("properties") or {}):
            kind = "sampled"
        else:
            kind = "observe"
        self.log.append(kind)
        model = path.rsplit("/", 1)[-1].split(":")[0]
        self.by_model.append((kind, model))
        import time

        self.arrived.append((time.monotonic(), kind))
        if self.hold_together:  # (before a refusal: requests sent together are refused so)
            self._hold_all()
        refused = self._quota(kind, model)
        if refused is not None:
            self.refused_at.append(time.monotonic())
            return refused
        self._hold_if_asked(kind)
        delay = self.delay_by_kind.get(kind, self.delay_s)
        if delay:
            import time

            time.sleep(delay)
        if kind == self.fail_on:
            return 500, {"error": {"code": 500, "message": "injected", "status": "INTERNAL"}}
        if (
            kind in self.bare
            and (self.bare_seeds is None or int(config.get("seed", -1)) in self.bare_seeds)
            and (self.bare_models is None or model in self.bare_models)
            and (self.bare_words is None or self.bare_words in text)
        ):
            from tests.fakes.gemini_server import bare_answer

            return 200, bare_answer(self.bare[kind])
        if kind == "observe" and WRITER_PROMPT in text:
            return self._write(text)
        if kind == "observe" and REWRITE_PROMPT in text:
            return self._rewrite(text)
        if kind == "observe" and GROUND_PROMPT in text:
            return self._ground(text)
        if kind == "observe" and TIFA_MARK in text:
            self.tifa_asked.append(re.search(r'Text: "(.+?)"\n', text).group(1))
            return 200, text_answer(json.dumps({"questions": TIFA_QUESTIONS}))
        for marker, key in REFS_PROMPTS.items():
            if kind == "observe" and marker in text:
                self.refs_asked.append(key)
                return 200, text_answer(json.dumps(self.refs[key]))
        if kind == "generate":
            self.generated.append(text)
            model = path.rsplit("/", 1)[-1].split(":")[0]
            colour = self.generate_by_model.get(model)
            if model in self.generate_by_seed:
                cycle = self.generate_by_seed[model]
                colour = cycle[int(config.get("seed", 0)) % len(cycle)]
            colour = colour or next(
                (c for key, c in self.generate_for.items() if key in text), None
            )
            return 200, image_answer(png_bytes(colour or self.generate, self.size))
        asked = re.search(r"prompt into (\w+)\. .*?Prompt: (.+?)\n", text, re.S)
        if asked:  # a translation: "[French] the prompt"
            self.translations.append(asked.group(2))
            answer = {"translation": f"[{asked.group(1)}] {asked.group(2)}"}
            return 200, text_answer(json.dumps(answer))
        colour = _nearest(_colour(images[0]))
        if kind == "edit" and (
            colour == self.fail_edit_of or int(config.get("seed", -1)) in self.fail_edit_seeds
        ):
            return 500, {"error": {"code": 500, "message": "injected", "status": "INTERNAL"}}
        if kind == "edit":
            self.edited.append(text)
            self.edit_images.append(
                [_decode((p.get("inlineData") or p.get("inline_data"))["data"]) for p in images]
            )
            if self.edit_gate is not None:
                self.edit_gate.wait(timeout=60)
            if self.edit_delay_s:
                import time

                time.sleep(self.edit_delay_s)
            seed = int(config.get("seed", 0))
            edits = self.edits_by_model.get(path.rsplit("/", 1)[-1].split(":")[0], self.edits)
            new = edits.get(colour, (colour, colour))[seed % 2]
            if self.degrade_after is not None:
                depth = _depth(images[0]) + 1
                return 200, image_answer(_marked(new, self.size, depth))
            return 200, image_answer(png_bytes(new, self.size))
        if kind in ("judge", "sampled") and QUALITY_PROMPT in text:
            return self._quality(kind, images[0], colour, config)
        if kind == "judge" and self.no_logprobs:
            model = path.rsplit("/", 1)[-1].split(":")[0]
            message = f"Logprobs is not enabled for models/{model}"
            return 400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
        if kind == "sampled":  # drawn from what the log-probabilities below state
            u = self._draw(config, f"{colour}|{text}")
            if (p := tifa_p(colour, text)) is not None:
                self.tifa_answered.append(text.split("?")[0].strip() + "?")
                answer = "Yes" if u < p else "No"
            elif 'answer "Yes" or "No"' in text or VQA_ASK in text:
                if VQA_ASK in text:
                    self.questions.append(text)
                answer = "Yes" if u < math.exp(YES_LOGPROB[colour]) else "No"
            elif MLLM_FORMAT in text:  # AHEaD Tab. 31's format
                self.prompts.append(text)
                answer = f"score is {drawn(self._rating(path, colour, text), u)}"
            else:
                answer = drawn(self._rating(path, colour, text), u)
            return 200, text_answer(json.dumps({"answer": answer}))
        if kind == "judge" and "Does this image show the following:" in text:
            statement = text.split("the following:", 1)[1]
            p = next((v for k, v in EXPECT_P[colour].items() if k in statement), 0.5)
            self.expectations_asked.append(statement.split("?")[0].strip())
            yes = math.log(p)
            return 200, text_answer("Yes", logprobs={"Yes": yes, "No": math.log1p(-p)})
        if kind == "judge" and (p := tifa_p(colour, text)) is not None:
            self.tifa_answered.append(text.split("?")[0].strip() + "?")
            return 200, text_answer("Yes", logprobs={"Yes": math.log(p), "No": math.log1p(-p)})
        if kind == "judge" and ('answer "Yes" or "No"' in text or VQA_ASK in text):
            if VQA_ASK in text:
                self.questions.append(text)
            yes = YES_LOGPROB[colour]
            return 200, text_answer("Yes", logprobs={"Yes": yes, "No": math.log1p(-math.exp(yes))})
        if kind == "judge" and MLLM_FORMAT in text:  # "score is 4", read at the digit
            self.prompts.append(text)
            digits = self._rating(path, colour, text)
            peak = int(max(digits, key=digits.get))
            if self.bare_digit:
                return 200, text_answer(str(peak), logprobs=digits)
            positions = [("score", {"score": -0.01}), ("is", {"is": -0.01}), (str(peak), digits)]
            return 200, text_answer(f"score is {peak}", positions=positions)
        if kind == "judge":
            self.prompts.append(text)
            logprobs = self._rating(path, colour, text)
            return 200, text_answer(max(logprobs, key=logprobs.get), logprobs=logprobs)
        if kind == "observe" and "Tag the image with the closest continent" in text:
            self.geotags.append(text)
            continent, country, artifact = GEO[colour]
            answer = {"continent": continent, "country": country, "artifact": artifact}
            return 200, text_answer(json.dumps(answer))
        if AHEAD_OBSERVER in text:  # AHEaD's prompts: one dimension a request
            self.ahead_observed.append(text)
            dim = next(d for h, d in AHEAD_HEADINGS.items() if f"\n\n{h}" in text)
            listed = [{"token": p, "style": "neutral"} for p in SEEN[colour][dim]]
            return 200, text_answer(json.dumps({"descriptors": listed}))
        assert "annotating a photograph" in text, text[:200]
        return 200, text_answer(json.dumps(SEEN[colour]))

    def _quota(self, kind: str, model: str):
        """A 429 for this request, where the world's quotas say so (else None)."""
        from tests.fakes.gemini_server import PER_DAY, quota_answer

        if self.daily_spent_from is not None and kind == self.daily_spent_from[0]:
            seen = sum(1 for k in self.log if k == kind)
            if seen >= self.daily_spent_from[1]:
                self.daily_spent_from = ("*", 0)  # every request from now on
        if self.daily_spent_from == ("*", 0):
            return quota_answer(model, PER_DAY, "250", "23s")
        if self.minute_429.get(kind, 0) > 0:
            self.minute_429[kind] -= 1
            return quota_answer(model, retry_delay=self.retry_delay)
        return None

    def _draw(self, config: dict, asked: str) -> float:
        """The uniform draw of a sampled answer: by the request's seed, or from this
        world's generator where the judge ignores it (``paired``: by ``asked``, what it
        is asked, the seed and how often both were asked so before)."""
        seed = int(config.get("seed", 0))
        if self.ignores_seed and self.paired:
            with _BUSY:
                n = self.asked_so[asked, seed] = self.asked_so.get((asked, seed), 0) + 1
            return random.Random(f"{asked}|{seed}|{n}").random()
        if self.ignores_seed:
            with _BUSY:
                return self.draws.random()
        return seed_draw(seed)

    def _rating(self, path: str, colour, text: str) -> dict[str, float]:
        """The judge's log-probabilities of "1".."5" for this image and prompt: its peak,
        shifted by the model's ``judge_shift_by_model``, at this world's odds."""
        shift = self.judge_shift_by_model.get(path.rsplit("/", 1)[-1].split(":")[0], 0)
        peak = min(5, max(1, self._peak(colour, text) + shift))
        return _logprobs(peak, range(1, 6), self.odds)

    def _quality(self, kind: str, image: dict, colour, config: dict):
        """A quality rating: the colour's, or 1 for an image of ``degrade_after`` edits."""
        peak = QUALITY[colour]
        if self.degrade_after is not None and _depth(image) >= self.degrade_after:
            peak = 1
        self.quality_asked.append(peak)
        logprobs = quality_logprobs(peak, self.odds)
        if kind == "sampled":
            answer = drawn(logprobs, self._draw(config, f"quality|{colour}|{peak}"))
            return 200, text_answer(json.dumps({"answer": answer}))
        if self.no_logprobs:
            return 400, {"error": {"code": 400, "message": "Logprobs is not enabled"}}
        return 200, text_answer(str(peak), logprobs=logprobs)

    def _write(self, text: str):
        """The instruction writer: one sentence naming each planned change it was given."""
        self.written.append(text)
        if self.refuse_writer:
            code = self.refuse_writer
            return code, {"error": {"code": code, "message": "refused", "status": "UNAVAILABLE"}}
        items = []
        for line in text.splitlines():
            if line.startswith("- "):
                parts = line[2:].split("; ")
                swap = next((p[5:] for p in parts if p.startswith("with ")), None)
                items.append(f"{parts[0]} {parts[2]}" + (f" (with {swap})" if swap else ""))
        answer = "Edit this photo: " + ", ".join(items) + "."
        return 200, text_answer(json.dumps({"instruction": answer}))

    def _ground(self, text: str):
        """The grounding call: a box for each listed item (one it skips: ``skip_box``)."""
        self.grounded.append(text)
        boxes = []
        for m in re.finditer(r"^- (.+) \((missing|in the image)\)$", text, re.M):
            if m.group(1) in self.skip_box:
                continue
            box = MISSING_BOX if m.group(2) == "missing" else WRONG_BOX
            boxes.append({"item": m.group(1), "box": box})
        return 200, text_answer(json.dumps({"boxes": boxes}))

    def _rewrite(self, text: str):
        """The prompt rewriter: "Rewritten scene:" and what it was asked to show."""
        self.rewritten.append(text)
        show = re.search(r"- missing, to show: (.+)\n", text)
        answer = "Rewritten scene: " + (show.group(1) if show else "as it should be")
        return 200, text_answer(json.dumps({"prompt": answer}))

    @staticmethod
    def _peak(colour, text: str) -> int:
        """The rating the judge gives: CAIRE's per culture label, else exaggeration's."""
        label = re.search(r"align with the culture of (.+?)\.\n", text)
        return CULTURE[colour].get(label.group(1), 1) if label else RATING[colour]


# AHEaD's observer prompts (Tab. 22-27): how they begin, and each dimension's heading
AHEAD_OBSERVER = "As an expert on cross-cultural visual representation"
AHEAD_HEADINGS = {
    "Setting & Background Prompt": "setting",
    "Objects Prompt": "objects",
    "Attire Prompt": "attire",
    "Interaction & Gesture Prompt": "interaction",
    "Spatial Arrangement Prompt": "spatial",
}
VQA_ASK = "Please answer yes or no."  # VQAScore's question ends so
MLLM_FORMAT = "score is <num>"  # AHEaD Tab. 31's answer format


def sampled_rating(peak: int, seed: int, odds: dict | None = None) -> int:
    """A sampled judge's answer for a peak rating, by a seed it follows."""
    return int(drawn(_logprobs(peak, range(1, 6), odds), seed_draw(seed)))


def rating_distribution(peak: int, odds: dict | None = None) -> list[float]:
    """The probabilities of "1".."5" the world's judge answers for a peak rating."""
    lp = _logprobs(peak, range(1, 6), odds)
    z = sum(math.exp(v) for v in lp.values())
    return [math.exp(lp[str(k)]) / z if str(k) in lp else 0.0 for k in range(1, 6)]


def expected_exag(colour) -> float:
    """EXAG of the judge-rating variant for a colour: (E[rating] - 1) / 4."""
    peak = RATING[colour]
    lp = {k: -0.1 if k == peak else -4.0 - abs(k - peak) for k in range(1, 6)}
    z = sum(math.exp(v) for v in lp.values())
    return (sum(k * math.exp(v) / z for k, v in lp.items()) - 1) / 4


def build_activity_bank(world: World, backends, out):
    """A 2 x 2 SoS bank of "people eating food at home" (Iran, Turkey; en, fr) made through
    the fake server: the world draws French prompts blue, Turkey green and Iran red."""
    from refine.harness.tasks.sos.bank import build_bank

    world.generate_for = {"[French]": BLUE, "in Turkey": GREEN}
    build_bank(
        out,
        "people eating food at home",
        ["Iran", "Turkey"],
        ["en", "fr"],
        backends.get("generator"),
        backends.get("image_embedder"),
        llm=backends.get("llm"),
    )
    return out
