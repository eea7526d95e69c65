"""transformers backends: vision-language observers and judges, and causal language models.

``hf:<hub id or local path>`` names any chat model with a chat template:

* an image-text-to-text model (Qwen3-VL, Qwen3.5, Qwen2.5-VL, InternVL3-hf, LLaVA, ...) can
  observe (list the descriptors in an image), judge (answer-token probabilities) and answer
  JSON prompts;
* a text-only causal LM (Qwen3, Qwen2.5-Instruct, ...) answers JSON prompts (``llm`` role).

Models that think before they answer (Qwen3.5, Qwen3) are asked not to (their chat
templates' ``enable_thinking=False``) unless ``thinking=True``: the judge reads the first
answer token, and a thinking model's first token opens its reasoning instead.

Generation is greedy (temperature 0) unless a temperature is given. Judge scores come from
one forward pass: the logits at the last prompt position, restricted to the answer tokens
("Yes"/"No" or "1".."5") and normalised with a softmax, as in VQAScore. Batches are padded
on the left so that the last position is the next token of every prompt.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from refine.backends.device import LazyDevice
from refine.backends.hf_judging import RATINGS, YES_NO, HFJudging
from refine.backends.imports import require
from refine.backends.loading import (
    load_or_explain,
    oom_guard,
    pick_dtype,
    serialised_load,
    torch_dtype_name,
)
from refine.backends.structured import (
    InvalidModelOutput,
    StyledDescriptors,
    ahead_descriptors,
    ask_with_repair,
    check_observer_prompts,
    clean_descriptors,
    descriptor_schema,
    observation_prompt,
)
from refine.usage import spend

if TYPE_CHECKING:
    from PIL import Image
    from pydantic import BaseModel

log = logging.getLogger(__name__)
T = TypeVar("T", bound="BaseModel")

__all__ = ["RATINGS", "YES_NO", "HFJudge", "HFLanguageModel", "HFModel", "HFObserver"]

# (model, revision, device, dtype) -> (model, processor, is_vision): the observer, judge and
# llm backends of one model share one copy of its weights
_LOADED: dict[tuple[str, str | None, str, str], tuple[Any, Any, bool]] = {}


class HFModel(HFJudging):
    """A transformers chat model; one instance serves the observer, judge and llm roles."""

    role = "llm"
    device = LazyDevice()

    def __init__(
        self,
        model: str,
        device: str | None = None,
        dtype: str | None = None,
        revision: str | None = None,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        max_repairs: int = 2,
        batch_size: int = 8,
        max_image_side: int | None = 1024,
        thinking: bool = False,
        prompts: str = "toolkit",
    ) -> None:
        if not model:
            raise ValueError("an hf: backend needs a model id or a local path")
        if batch_size < 1 or max_new_tokens < 1 or max_repairs < 0 or temperature < 0:
            raise ValueError(
                "hf: batch_size and max_new_tokens must be >= 1, max_repairs and temperature >= 0"
            )
        self.model_name = model
        self.device = device
        self.dtype_name = dtype
        self.revision = revision
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.max_repairs = max_repairs
        self.batch_size = batch_size
        self.cut: list[bool] = []  # per answer of the last generate_texts: cut short
        self.max_image_side = max_image_side
        self.thinking = bool(thinking)
        # an observer's prompts: the toolkit's, or AHEaD's per dimension (Tab. 22-27)
        self.prompts = check_observer_prompts(prompts)
        self.model: Any = None
        self.processor: Any = None  # the processor of a VLM, or the tokenizer of a text model
        self.is_vision = False
        self.truncated = False  # the last answer hit max_new_tokens

    # -- loading -----------------------------------------------------------------------

    @property
    def id(self) -> str:
        rev = f"@{self.revision}" if self.revision else ""
        return f"hf:{self.model_name}{rev}"

    def info(self) -> dict[str, str]:
        self.load()
        return {
            "id": self.id,
            "architecture": type(self.model).__name__,
            "dtype": torch_dtype_name(self.model.dtype),
            "device": str(self.device),
            "revision": self.revision or "",
        }

    @serialised_load(lambda self: self.model is not None)
    def load(self) -> HFModel:
        if self.model is not None:
            return self
        transformers = require("transformers", "transformers", "the hf: backends")
        dtype = pick_dtype(self.device, self.dtype_name)
        name, rev = self.model_name, self.revision
        key = (name, rev, str(self.device), torch_dtype_name(dtype))
        if key in _LOADED:
            self.model, self.processor, self.is_vision = _LOADED[key]
            return self
        config = load_or_explain(
            name, lambda: transformers.AutoConfig.from_pretrained(name, revision=rev)
        )
        self.is_vision = getattr(config, "vision_config", None) is not None
        log.info("loading %s (%s) on %s", name, dtype, self.device)
        if self.is_vision:
            loader = transformers.AutoModelForImageTextToText
            processor_loader = transformers.AutoProcessor
        else:
            loader = transformers.AutoModelForCausalLM
            processor_loader = transformers.AutoTokenizer
        model = load_or_explain(
            name, lambda: loader.from_pretrained(name, revision=rev, dtype=dtype)
        )
        processor = load_or_explain(
            name, lambda: processor_loader.from_pretrained(name, revision=rev)
        )
        tokenizer = self._tokenizer(processor)
        if getattr(tokenizer, "chat_template", None) is None and not getattr(
            processor, "chat_template", None
        ):
            raise ValueError(
                f"{name} has no chat template; use an instruct/chat model "
                "(for example Qwen/Qwen3-VL-8B-Instruct)"
            )
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.model = model.to(self.device).eval()
        self.processor = processor
        _LOADED[key] = (self.model, self.processor, self.is_vision)
        return self

    @staticmethod
    def _tokenizer(processor: Any) -> Any:
        return getattr(processor, "tokenizer", processor)

    def _require_vision(self, what: str) -> None:
        self.load()
        if not self.is_vision:
            raise ValueError(
                f"{self.model_name} is a text-only model and cannot {what}; use a vision-language "
                "model such as hf:Qwen/Qwen3-VL-8B-Instruct"
            )

    # -- prompts -----------------------------------------------------------------------

    def _prepare_image(self, image: Image.Image) -> Image.Image:
        image = image.convert("RGB")
        side = self.max_image_side
        if side and max(image.size) > side:
            image = image.copy()
            image.thumbnail((side, side))
        return image

    def _chat_text(self, text: str, with_image: bool) -> str:
        content: Any
        if self.is_vision:
            content = [{"type": "image"}] if with_image else []
            content = [*content, {"type": "text", "text": text}]
        else:
            content = text
        messages = [{"role": "user", "content": content}]
        # enable_thinking is read by the templates of models that think (Qwen3, Qwen3.5)
        # and ignored by the others
        return self.processor.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, enable_thinking=self.thinking
        )

    def _encode(
        self, texts: Sequence[str], images: Sequence[Image.Image] | None, answer: str = ""
    ) -> Any:
        """The chats of ``texts`` (about ``images``) with the answer begun by ``answer``."""
        chats = [self._chat_text(t, images is not None) + answer for t in texts]
        kwargs: dict[str, Any] = {"padding": True, "return_tensors": "pt"}
        if images is not None:
            kwargs["images"] = [self._prepare_image(im) for im in images]
        if self.is_vision:
            batch = self.processor(text=chats, **kwargs)
        else:
            batch = self.processor(chats, add_special_tokens=False, **kwargs)
        return batch.to(self.device)

    # -- generation --------------------------------------------------------------------

    def generate_text(self, prompt: str, image: Image.Image | None = None) -> str:
        """The model's answer to ``prompt`` (about ``image`` when given)."""
        answers, cut = self._generate([prompt], None if image is None else [image])
        self.truncated = cut[0]
        return answers[0]

    def generate_texts(
        self, prompts: Sequence[str], images: Sequence[Image.Image] | None = None
    ) -> list[str]:
        """The answers to several prompts (each about its image) in batches of
        ``batch_size`` (left-padded: one generate call per batch)."""
        if images is not None and len(images) != len(prompts):
            raise ValueError(f"{len(images)} images but {len(prompts)} prompts")
        answers: list[str] = []
        self.cut = []
        for start in range(0, len(prompts), self.batch_size):
            part = list(prompts[start : start + self.batch_size])
            pics = None if images is None else list(images[start : start + self.batch_size])
            got, cut = self._generate(part, pics)
            answers += got
            self.cut += cut
        return answers

    def _generate(
        self, prompts: list[str], images: list[Image.Image] | None, temperature: float | None = None
    ) -> tuple[list[str], list[bool]]:
        import torch

        self.load()
        if images is not None:
            self._require_vision("look at images")
        batch = self._encode(prompts, images)
        tokenizer = self._tokenizer(self.processor)
        options: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "pad_token_id": tokenizer.pad_token_id,
        }
        heat = self.temperature if temperature is None else temperature
        if heat > 0:
            options.update(do_sample=True, temperature=heat)
        else:
            options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        spend(self.model_name, len(prompts))
        with torch.inference_mode():
            out = oom_guard(self.model_name, lambda: self.model.generate(**batch, **options))
        new_tokens = out[:, batch["input_ids"].shape[1] :]
        full = new_tokens.shape[1] >= self.max_new_tokens
        cut = [bool(full and not (row == tokenizer.eos_token_id).any()) for row in new_tokens]
        if any(cut):
            log.warning("%s: answer cut at max_new_tokens=%d", self.id, self.max_new_tokens)
        texts = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return [t.strip() for t in texts], cut

    def _ask(self, ask: Any, prompt: str, schema: type[T], cut: bool = False) -> T:
        """A structured answer, repaired when invalid; ``cut``: the first answer, asked
        before, was cut at max_new_tokens (the error then says so)."""
        self.truncated = cut
        try:
            return ask_with_repair(ask, prompt, schema, self.id, self.max_repairs)
        except InvalidModelOutput as err:
            if self.truncated or cut:
                raise InvalidModelOutput(
                    err.model,
                    f"{err.error}; the answer was cut at max_new_tokens={self.max_new_tokens}: "
                    "raise the backend option max_new_tokens",
                    err.raw,
                    err.attempts,
                ) from None
            raise

    def complete_json(self, prompt: str, schema: type[T], temperature: float | None = None) -> T:
        """``temperature``: this request's (AHEaD's proposers 0.2, refiner 0.1), else the
        backend's own."""

        def ask(p: str) -> str:
            answers, cut = self._generate([p], None, temperature)
            self.truncated = cut[0]
            return answers[0]

        return self._ask(ask, prompt, schema)

    def describe(
        self, image: Image.Image, dimensions: Sequence[str], max_per_dimension: int = 10
    ) -> dict[str, list[str]]:
        self._require_vision("observe images")
        if self.prompts == "ahead":
            return ahead_descriptors(
                lambda p: self._ask(lambda q: self.generate_text(q, image), p, StyledDescriptors),
                dimensions,
                max_per_dimension,
            )
        schema = descriptor_schema(dimensions, max_per_dimension)
        prompt = observation_prompt(dimensions, max_per_dimension)
        answer = self._ask(lambda p: self.generate_text(p, image), prompt, schema)
        return clean_descriptors(answer, dimensions, max_per_dimension)

    def ask_json(self, image: Image.Image, prompt: str, schema: type[T]) -> T:
        """An answer about ``image`` validated against ``schema`` (a geo-tag, say)."""
        self._require_vision("look at images")
        return self._ask(lambda p: self.generate_text(p, image), prompt, schema)

    def describe_many(
        self, images: Sequence[Image.Image], dimensions: Sequence[str], max_per_dimension: int = 10
    ) -> list[dict[str, list[str]]]:
        """:meth:`describe` for several images: their first answers in batched generate
        calls; an answer that needs repairing is repaired on its own. With AHEaD's prompts,
        each image's five requests one after the other (:meth:`describe`)."""
        self._require_vision("observe images")
        if self.prompts == "ahead":
            return [self.describe(im, dimensions, max_per_dimension) for im in images]
        schema = descriptor_schema(dimensions, max_per_dimension)
        prompt = observation_prompt(dimensions, max_per_dimension)
        firsts = self.generate_texts([prompt] * len(images), images)
        cuts = list(self.cut)
        out = []
        for image, first, cut in zip(images, firsts, cuts, strict=True):
            pending = [first]

            def ask(p: str, image: Image.Image = image, pending: list[str] = pending) -> str:
                if pending:
                    return pending.pop()
                return self.generate_text(p, image)

            answer = self._ask(ask, prompt, schema, cut)
            out.append(clean_descriptors(answer, dimensions, max_per_dimension))
        return out


class HFObserver(HFModel):
    role = "observer"


class HFJudge(HFModel):
    role = "judge"


class HFLanguageModel(HFModel):
    role = "llm"
