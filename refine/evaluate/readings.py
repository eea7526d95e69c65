"""What the metric catalog's ``compute`` functions read, by name, for a batch of images:
each reading is taken once per batch from the run's backends, and a reading the backends
cannot give says why (:class:`NotRead`), which the scores record as the metric's note.

Readings taken here: ``images`` (the pictures), ``values`` (each image's values computed
before, by catalog name), ``value_readings`` (how each of those was read from the judge,
:class:`metrics.judge.Reading` with its error, by catalog name; none for a value known
before, as a rescore's), ``image_embeddings`` (the image embedder's L2-normalised rows),
``antonym_embeddings`` (its text embeddings of :data:`metrics.quality.GOOD` and
:data:`metrics.quality.BAD`), ``logit_scale`` (a contrastive embedder's softmax
temperature; only CLIP has one).

Readings the assessor gives, from the model calls it makes once for the scores and the
feedback together (:class:`refine.evaluate.assess.Assessor`): ``matching`` (each image's
observed descriptors matched to the references, :class:`metrics.ahead.AheadScore`),
``exaggeration_answers`` (the judge's answers about the stereotype candidates,
:class:`metrics.ahead.ExagAnswer`, None without candidates), ``quality_ratings`` (the
judge's expected 0-10 ratings of naturalness and artifacts), ``vqa_answers`` (the judge's
VQAScore of each image for the generation prompt, :class:`metrics.vqascore.VqaAnswer`, None
where it was not asked for), ``judge_ratings`` (the judge baselines' expected 1-5 ratings
by name, :class:`metrics.baselines.JudgeRating`, None where none was asked for),
``tifa_answers`` (the judge's answers to TIFA's questions about the generation prompt,
:class:`metrics.baselines.TifaAnswer`, None where TIFA was not asked for),
``clip_prompts`` (the generation prompt of each image where CLIPScore was asked for, else
None), from which ``clip_prompt_embeddings`` are read: the image embedder's text embedding
of each, where the embedder is a CLIP; ``model_readings`` (the cosine of each image and its
generation prompt, and the logit scale, on the checkpoint of each baseline asked for that
has one, :class:`refine.evaluate.baseline_models.ModelReading`, None where none is).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from metrics.quality import BAD, GOOD
from refine.backends.registry import ROLES, is_remote

if TYPE_CHECKING:
    from PIL import Image

    from refine.backends.selection import Backends


class NotRead(Exception):
    """A reading these backends cannot give; the message says why."""


class Readings:
    """The readings of one batch of images, each taken on first use."""

    def __init__(
        self,
        backends: Backends,
        images: Sequence[Image.Image],
        values: Sequence[dict[str, float | None]],
        given: dict[str, Sequence[Any]] | None = None,
        failed: dict[str, str] | None = None,
        value_readings: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        """``values``: each image's values, filled in as they are computed; ``given``:
        readings already taken, one per image; ``failed``: readings that could not be
        taken, and why; ``value_readings``: how each value was read (its judge reading
        and error, None for none), filled in beside ``values``."""
        self.backends, self.images, self.values = backends, list(images), list(values)
        self.value_readings = (
            list(value_readings) if value_readings is not None else [{} for _ in self.images]
        )
        self._got: dict[str, Any] = {}
        for name, got in (given or {}).items():
            if len(got) != len(self.images):
                raise ValueError(f"reading {name}: {len(got)} for {len(self.images)} images")
            self._got[name] = list(got)
        self._failed: dict[str, str] = dict(failed or {})

    def get(self, name: str) -> Any:
        """The reading ``name``; :class:`NotRead` when these backends cannot give it."""
        if name in self._failed:
            raise NotRead(self._failed[name])
        if name not in self._got:
            try:
                reader = READERS[name]
            except KeyError:
                if name in GIVEN:
                    raise NotRead(f"the assessor took no {name.replace('_', ' ')}") from None
                known = ", ".join((*READERS, *GIVEN))
                raise KeyError(f"no reading named {name!r} (readings: {known})") from None
            try:
                self._got[name] = reader(self)
            except NotRead as err:
                self._failed[name] = str(err)
                raise
        return self._got[name]

    def check(self, needs: Sequence[str]) -> None:
        """:class:`NotRead` unless the backends meet ``needs``: each backend role it names
        is configured, and a ``local judge`` is no API model (a local quality reading, such
        as a CLIP's, is taken with local profiles only: an API profile does not load a
        local model for it)."""
        for need in needs:
            if need in ROLES and not self.backends.names.get(need):
                raise NotRead(f"the profile has no {need.replace('_', ' ')}")
            judge = self.backends.names.get("judge", "")
            if need == "local judge" and judge and is_remote("judge", judge):
                raise NotRead(f"the judge {judge} is an API model: read with local profiles")

    def embedder(self) -> Any:
        if not self.backends.names.get("image_embedder"):
            raise NotRead("the profile has no image embedder")
        return self.backends.get("image_embedder")


def _image_embeddings(r: Readings) -> Any:
    r.embedder()
    with r.backends.using("image_embedder") as embedder:
        return embedder.encode_images(r.images).cpu().numpy()


def _antonym_embeddings(r: Readings) -> Any:
    r.embedder()
    with r.backends.using("image_embedder") as embedder:
        return embedder.encode_texts([GOOD, BAD]).cpu().numpy()


def _logit_scale(r: Readings) -> float:
    embedder = r.embedder()
    scale = getattr(embedder, "logit_scale", None)
    if not callable(scale):
        who = r.backends.names.get("image_embedder", "")
        raise NotRead(f"the image embedder {who} has no softmax logit scale (not a CLIP)")
    with r.backends.using("image_embedder") as held:
        return float(held.logit_scale())


def _clip_prompt_embeddings(r: Readings) -> Any:
    prompts = r.get("clip_prompts")
    if any(p is None for p in prompts):
        raise NotRead("not asked for (--baselines)")
    embedder = r.embedder()
    if not callable(getattr(embedder, "logit_scale", None)):
        who = r.backends.names.get("image_embedder", "")
        raise NotRead(
            f"CLIPScore needs a CLIP image embedder (clip:ARCH/TAG or hfclip:ID); {who} is "
            "not one (--backend image_embedder=clip:ViT-B-32/openai)"
        )
    distinct = list(dict.fromkeys(prompts))
    with r.backends.using("image_embedder") as held:
        rows = held.encode_texts(distinct).cpu().numpy()
    return rows[[distinct.index(p) for p in prompts]]


READERS: dict[str, Callable[[Readings], Any]] = {
    "images": lambda r: r.images,
    "values": lambda r: r.values,
    "value_readings": lambda r: r.value_readings,
    "image_embeddings": _image_embeddings,
    "antonym_embeddings": _antonym_embeddings,
    "logit_scale": _logit_scale,
    "clip_prompt_embeddings": _clip_prompt_embeddings,
}
# the readings the assessor gives (:class:`Readings`' ``given``)
GIVEN = (
    "matching",
    "exaggeration_answers",
    "quality_ratings",
    "vqa_answers",
    "judge_ratings",
    "tifa_answers",
    "clip_prompts",
    "model_readings",
)
# the readings that depend on the image alone (and the run's models): a metric reading
# only these is cached per image
PER_IMAGE = frozenset({"images", "image_embeddings", "antonym_embeddings", "logit_scale"})
