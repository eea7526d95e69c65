"""The judge's readings of a transformers vision-language model (a mixin of
:class:`refine.backends.hf_models.HFModel`): answer-token probabilities from one forward
pass, the logits at the last prompt position (left-padded batches, so that it is the next
token of every prompt). Yes/no and 1-5 answers are restricted to the answer tokens and
normalised with a softmax; VQAScore reads P("Yes") over the whole vocabulary; a rating in
a set format ("score is 3") is read after the model's answer is begun with the format."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from metrics.quality import rating_distribution
from metrics.vqascore import YES_CASINGS, VqaAnswer, vqa_question
from refine.backends.loading import oom_guard
from refine.backends.rating import Rating
from refine.usage import spend

if TYPE_CHECKING:
    from PIL import Image

YES_NO = ("Yes", "No")
RATINGS = ("1", "2", "3", "4", "5")


class HFJudging:
    """Judging for a model that has ``model``, ``processor``, ``model_name``, ``device``,
    ``batch_size``, ``_tokenizer(processor)``, ``_encode(texts, images, answer)`` and
    ``_require_vision(what)``."""

    model: Any
    processor: Any
    model_name: str
    batch_size: int
    device: Any

    def _tokenizer(self, processor: Any) -> Any:
        raise NotImplementedError

    def _encode(self, texts: Sequence[str], images: Any, answer: str = "") -> Any:
        raise NotImplementedError

    def _require_vision(self, what: str) -> None:
        raise NotImplementedError

    def answer_token_ids(self, answers: Sequence[str]) -> list[int]:
        """The single token id of each answer; an answer that is not one token is an error."""
        tokenizer = self._tokenizer(self.processor)
        ids = []
        for answer in answers:
            tokens = tokenizer.encode(answer, add_special_tokens=False)
            if len(tokens) != 1:
                raise ValueError(
                    f"{self.model_name}: the answer {answer!r} is {len(tokens)} tokens, not one; "
                    "this model's tokenizer cannot be used as a judge"
                )
            ids.append(tokens[0])
        return ids

    def _next_logits(
        self, images: Sequence[Image.Image], texts: Sequence[str], answer: str = ""
    ) -> Iterator[Any]:
        """The next-token logits (float32, one row per pair) after each (image, text)'s
        chat with the answer begun by ``answer``, a batch of ``batch_size`` at a time."""
        import torch

        self._require_vision("judge images")
        if len(images) != len(texts):
            raise ValueError(f"{len(images)} images but {len(texts)} questions")
        for start in range(0, len(texts), self.batch_size):
            batch = self._encode(
                texts[start : start + self.batch_size],
                images[start : start + self.batch_size],
                answer,
            )
            spend(self.model_name, len(texts[start : start + self.batch_size]))
            with torch.inference_mode():
                logits = oom_guard(self.model_name, lambda b=batch: self.model(**b).logits)
            yield logits[:, -1, :].float()

    def _softmax_over(
        self, images: Sequence[Image.Image], texts: Sequence[str], answers: Sequence[str],
        answer: str = "",
    ) -> list[list[float]]:  # fmt: skip
        """For each pair: softmax of the next-token logits over the ``answers`` tokens."""

        self._require_vision("judge images")  # loads the model
        return self._softmax_ids(images, texts, self.answer_token_ids(answers), answer)

    def _softmax_ids(
        self, images: Sequence[Image.Image], texts: Sequence[str], token_ids: Sequence[int],
        answer: str = "",
    ) -> list[list[float]]:  # fmt: skip
        """For each pair: softmax of the next-token logits over ``token_ids``."""
        import torch

        ids = torch.tensor(list(token_ids), device=self.device)
        out: list[list[float]] = []
        for last in self._next_logits(images, texts, answer):
            out.extend(torch.softmax(last.index_select(1, ids), dim=-1).cpu().tolist())
        return out

    def answer_distribution(
        self, images: Sequence[Image.Image], texts: Sequence[str], answers: Sequence[str]
    ) -> list[list[float]]:
        """For each (image, text): softmax of the next-token logits over ``answers``."""
        return self._softmax_over(images, texts, answers)

    def yes_probability(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[float]:
        texts = [f'{q} Please answer "Yes" or "No".' for q in questions]
        return [p[0] for p in self.answer_distribution(images, texts, YES_NO)]

    def rate(self, images: Sequence[Image.Image], prompts: Sequence[str]) -> list[Rating]:
        return [Rating(tuple(p)) for p in self.answer_distribution(images, prompts, RATINGS)]

    def rate_scale(
        self, images: Sequence[Image.Image], prompts: Sequence[str], low: int, high: int
    ) -> list[Rating]:
        """A ``low``..``high`` rating per (image, prompt) from the first answer token,
        renormalised over the rating tokens. When the tokenizer writes 10 as "1" then "0",
        the probability of "1" is split by P("0" | "1"), read from a second pass with the
        answer begun by "1" (see :func:`metrics.quality.rating_distribution`)."""
        import math

        self._require_vision("judge images")
        tokenizer = self._tokenizer(self.processor)
        values = [str(v) for v in range(low, high + 1)]
        single = [v for v in values if len(tokenizer.encode(v, add_special_tokens=False)) == 1]
        split = [v for v in values if v not in single]
        if split not in ([], ["10"]) or (split and "1" not in single):
            raise ValueError(
                f"{self.model_name}: the ratings {split} are not one token each; this "
                "model's tokenizer cannot rate on this scale"
            )
        dists = self.answer_distribution(images, prompts, single)
        tens: list[float | None] = [None] * len(images)
        if split:
            tens = list(self.next_token_probability(images, prompts, "1", "0"))
        out = []
        for dist, ten in zip(dists, tens, strict=True):
            lp = {v: math.log(p) for v, p in zip(single, dist, strict=True) if p > 0}
            out.append(Rating(tuple(rating_distribution(lp, low, high, ten)), low=low))
        return out

    def vqa_score(self, images: Sequence[Image.Image], texts: Sequence[str]) -> list[VqaAnswer]:
        """VQAScore of each (image, text), read exactly: P("Yes") over the whole vocabulary
        at the first answer position for VQAScore's question (the token "Yes", as
        t2v_metrics reads it)."""
        import torch

        self._require_vision("judge images")  # loads the model
        tokenizer = self._tokenizer(self.processor)
        ids = sorted(
            {
                t[0]
                for word in YES_CASINGS
                if len(t := tokenizer.encode(word, add_special_tokens=False)) == 1
            }
        )
        if not ids:
            raise ValueError(f"{self.model_name}: no casing of 'Yes' is one token")
        questions = [vqa_question(t) for t in texts]
        out: list[float] = []
        for last in self._next_logits(images, questions):
            out.extend(torch.softmax(last, dim=-1)[:, ids].sum(dim=-1).cpu().tolist())
        return [VqaAnswer(t, p) for t, p in zip(texts, out, strict=True)]

    def rate_prefixed(
        self, images: Sequence[Image.Image], prompts: Sequence[str], prefix: str
    ) -> list[Rating]:
        """A 1-5 rating per (image, prompt) whose answer format is ``prefix`` then the digit
        ("score is 3", AHEaD Tab. 31): the answer is begun with ``prefix`` and the digit's
        distribution read at the next position (softmax over the five digit tokens)."""
        self._require_vision("judge images")  # loads the model
        begun, ids = self._digits_after(prefix)
        return [Rating(tuple(p)) for p in self._softmax_ids(images, prompts, ids, begun)]

    def _digits_after(self, prefix: str) -> tuple[str, list[int]]:
        """How this tokenizer writes "score is 4": the answer to begin with (``prefix``
        with its space where the space is a token of its own, as in Qwen's, Llama 3's and
        GPT-4o's tokenizers; without it where the digit carries its space, " 4") and the
        token of each digit after it."""
        tokenizer = self._tokenizer(self.processor)
        base = prefix.rstrip()
        head = tokenizer.encode(base, add_special_tokens=False)
        tails = []
        for d in RATINGS:
            full = tokenizer.encode(f"{base} {d}", add_special_tokens=False)
            if full[: len(head)] != head:
                break
            tails.append(full[len(head) :])
        if len(tails) == len(RATINGS):
            if all(len(t) == 1 for t in tails):
                return base, [t[0] for t in tails]
            if all(len(t) == 2 for t in tails) and len({t[0] for t in tails}) == 1:
                return base + tokenizer.decode([tails[0][0]]), [t[1] for t in tails]
        return prefix, self.answer_token_ids(RATINGS)

    def next_token_probability(
        self, images: Sequence[Image.Image], texts: Sequence[str], answer: str, token: str
    ) -> list[float]:
        """P(``token`` next | the answer begun by ``answer``) for each (image, text), over
        the whole vocabulary."""
        import torch

        self._require_vision("judge images")  # loads the model
        (token_id,) = self.answer_token_ids([token])
        out: list[float] = []
        for last in self._next_logits(images, texts, answer):
            out.extend(torch.softmax(last, dim=-1)[:, token_id].cpu().tolist())
        return out

    def completion_nll(
        self,
        images: Sequence[Image.Image | None],
        texts: Sequence[str],
        answer: str,
        completions: Sequence[str],
    ) -> list[float]:
        """-log P(completion | the chat of (image, text), its answer begun by ``answer``)
        for each pair, the sum over the completion's tokens (CAIRE App. B.1's L); an image
        of None: the text alone (the base rate's empty context). One pair at a time, so
        that the completion's tokens are the last ones of an unpadded sequence."""
        import torch

        if not (len(images) == len(texts) == len(completions)):
            raise ValueError("one image (or None), text and completion each")
        self._require_vision("score completions")  # loads the model
        out = []
        for image, text, completion in zip(images, texts, completions, strict=True):
            shown = None if image is None else [image]
            head = self._encode([text], shown, answer)["input_ids"][0]
            whole = self._encode([text], shown, answer + completion)
            ids = whole["input_ids"][0]
            n = head.shape[0]
            if ids.shape[0] <= n or not torch.equal(ids[:n], head):
                raise ValueError(
                    f"{self.model_name}: the completion {completion!r} does not extend the "
                    "prompt's tokens; its log-likelihood cannot be read apart"
                )
            spend(self.model_name)
            with torch.inference_mode():
                logits = oom_guard(self.model_name, lambda b=whole: self.model(**b).logits)[0]
            logp = torch.log_softmax(logits[n - 1 : -1].float(), dim=-1)
            picked = logp.gather(1, ids[n:].unsqueeze(1)).squeeze(1)
            out.append(float(-picked.sum()))
        return out
