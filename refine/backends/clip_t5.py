"""CLIP-FlanT5 (Lin et al., 2024), VQAScore's own model, as a judge that answers VQAScore's
question: ``clip-t5:zhiqiulin/clip-flant5-xxl`` (or ``-xl``, or a local folder of that
layout). The AHEaD paper's EXAG(ITA) scores images against stereotype candidates with it
(Tab. 9), and CulturalFrames' VQAScore is it.

The authors' package, t2v-metrics, cannot be installed beside this project: its releases
that carry CLIP-FlanT5 (up to 1.2) pin transformers 4.49 and torch 2.5.1, and its 3.x
releases no longer ship the model. So the checkpoint is loaded here with transformers, as
its layout is: a FlanT5 encoder-decoder (``T5ForConditionalGeneration``'s weights) with
``mm_projector`` (two linear layers around a GELU) mapping the patch features of a CLIP
vision tower (``mm_vision_tower`` in its config, CLIP ViT-L/14-336, loaded from its own
repository; the second-to-last layer, without the class token) into the encoder's input,
where the prompt's ``<image>`` stands. As t2v-metrics asks and reads it:

* the prompt is its chat form, ``"{SYSTEM} USER: <image>\\n{question} ASSISTANT: "``, each
  text piece around the image tokenized on its own (each ending in ``</s>``);
* the image is padded to a square with the processor's mean colour, then processed;
* the score is exp(-mean cross-entropy) of the answer ``"Yes"`` as the decoder's target
  (its tokens, ``</s>`` included).

It gives VQAScore and yes-probabilities and no ratings: as the judge of a bench or a
rescore (``--backend judge=clip-t5:...``), the baselines and readings that need a rating
(the MLLM-as-a-judge rows, EXAG(MLLM), quality) are refused or said missing by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from metrics.vqascore import VqaAnswer, vqa_question
from refine.backends.loading import load_or_explain, pick_dtype, torch_dtype_name

if TYPE_CHECKING:
    from PIL import Image

# t2v-metrics' chat form of a question for CLIP-FlanT5 (its "t5_chat" conversation style)
SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. The assistant "
    "gives helpful, detailed, and polite answers to the user's questions."
)
IMAGE = "<image>"
ANSWER = "Yes"
TOKENIZERS = {"xxl": "google/flan-t5-xxl", "xl": "google/flan-t5-xl"}  # the checkpoints'


def chat_prompt(question: str) -> str:
    """The text CLIP-FlanT5 is given for ``question`` (``<image>`` where the image goes)."""
    return f"{SYSTEM} USER: {IMAGE}\n{question} ASSISTANT: "


class ClipT5Judge:
    """VQAScore from a CLIP-FlanT5 checkpoint. ``tokenizer``: where its tokenizer is (the
    checkpoint's own folder where it holds one, else FlanT5's of its size);
    ``vision_tower``: in place of the config's ``mm_vision_tower``."""

    prefix = "clip-t5"
    method = "logprobs"  # read from the model's probabilities, never sampled

    def __init__(
        self,
        model: str,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 8,
        revision: str | None = None,
        tokenizer: str | None = None,
        vision_tower: str | None = None,
    ) -> None:
        if not model:
            raise ValueError("a clip-t5: judge needs a model id or a local path")
        from refine.backends.device import pick_device

        self.model_name = model
        self.id = f"clip-t5:{model}"
        self.device = pick_device(device)
        self.dtype_name = dtype
        self.batch_size = max(1, int(batch_size))
        self.revision = revision
        self.tokenizer_name = tokenizer
        self.vision_name = vision_tower
        self.model: Any = None

    def load(self) -> None:
        if self.model is not None:
            return
        import transformers
        from transformers import (
            AutoTokenizer,
            CLIPImageProcessor,
            CLIPVisionModel,
            T5Config,
            T5ForConditionalGeneration,
        )

        name, revision = self.model_name, self.revision
        dtype = self._dtype()
        config = load_or_explain(name, lambda: T5Config.from_pretrained(name, revision=revision))
        for key in ("mm_hidden_size", "mm_vision_tower"):
            if not hasattr(config, key):
                raise ValueError(
                    f"{name} is no CLIP-FlanT5 checkpoint (its config has no {key}); "
                    "clip-t5: loads zhiqiulin/clip-flant5-xxl and its layout"
                )
        kind = getattr(config, "mm_projector_type", "mlp2x_gelu")
        if kind != "mlp2x_gelu":
            raise ValueError(f"{name}: a projector of type {kind!r}; clip-t5: reads mlp2x_gelu")

        class ClipT5(T5ForConditionalGeneration):
            """FlanT5 with the projector of the image features (its weights' names)."""

            def __init__(self, cfg: Any) -> None:
                import torch.nn as nn

                super().__init__(cfg)
                self.mm_projector = nn.Sequential(
                    nn.Linear(cfg.mm_hidden_size, cfg.d_model),
                    nn.GELU(),
                    nn.Linear(cfg.d_model, cfg.d_model),
                )

        model = load_or_explain(
            name,
            lambda: ClipT5.from_pretrained(name, config=config, revision=revision, dtype=dtype),
        )
        tower = self.vision_name or config.mm_vision_tower
        vision = load_or_explain(tower, lambda: CLIPVisionModel.from_pretrained(tower, dtype=dtype))
        # the PIL processor, as transformers 4.49's CLIPImageProcessor that t2v-metrics
        # used (transformers 5's default is torchvision's: pixels up to 0.015 apart)
        pil = getattr(transformers, "CLIPImageProcessorPil", CLIPImageProcessor)
        self.processor = load_or_explain(tower, lambda: pil.from_pretrained(tower))
        source = self.tokenizer_name or self._own_tokenizer(name, config)
        # t2v-metrics asked transformers 4.49 for the sentencepiece tokenizer; transformers 5
        # has one T5 tokenizer (the tokenizers library's), named in info()
        self.tokenizer = load_or_explain(source, lambda: AutoTokenizer.from_pretrained(source))
        # t2v-metrics' loader resizes the vocabulary to the tokenizer's (FlanT5: 32128 rows
        # to 32100), so the answer's softmax runs over the tokenizer's tokens alone
        model.resize_token_embeddings(len(self.tokenizer))
        self._own_vision(name, vision)
        self.select_layer = int(getattr(config, "mm_vision_select_layer", -2))
        self.vision = vision.to(self.device).eval()
        self.model = model.to(self.device).eval()

    def _dtype(self) -> Any:
        """The dtype asked, else t2v-metrics' bfloat16 on a GPU that has it (float16
        overflows in T5's feed-forward layers: float32 on one without), float32 else."""
        import torch

        if self.dtype_name:
            return pick_dtype(self.device, self.dtype_name)
        if str(self.device).startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32

    def _own_tokenizer(self, name: str, config: Any) -> str:
        """The checkpoint's folder where it holds a tokenizer, else FlanT5's of its size."""
        from pathlib import Path

        folder = Path(name)
        own = ("tokenizer.json", "spiece.model")
        if folder.is_dir() and any((folder / f).is_file() for f in own):
            return name
        size = "xxl" if self.model_name.rstrip("/").endswith("xxl") else "xl"
        return TOKENIZERS[size]

    def _own_vision(self, name: str, vision: Any) -> None:
        """The checkpoint's own vision-tower weights where it carries them (its
        ``vision_tower.vision_tower.*``), over those of the tower's repository."""
        import json
        from pathlib import Path

        from safetensors import safe_open

        folder = Path(name)
        if not folder.is_dir():
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(name, revision=self.revision,
                                            allow_patterns=["*.json"]))  # fmt: skip
        index = folder / "model.safetensors.index.json"
        files = (
            sorted(set(json.loads(index.read_text())["weight_map"].values()))
            if index.is_file()
            else ["model.safetensors"]
        )
        prefix = "vision_tower.vision_tower."
        found: dict[str, Any] = {}
        for file in files:
            if not (folder / file).is_file():
                continue
            with safe_open(str(folder / file), "pt") as f:
                for key in f.keys():
                    if key.startswith(prefix):
                        found[key[len(prefix) :]] = f.get_tensor(key)
        if found:
            vision.load_state_dict(found, strict=False)
        self.own_vision = bool(found)

    def info(self) -> dict[str, str]:
        self.load()
        return {
            "id": self.id,
            "device": str(self.device),
            "dtype": torch_dtype_name(self.model.dtype),
            "revision": self.revision or "",
            "tokenizer": type(self.tokenizer).__name__,
            "vision_weights": "the checkpoint's" if self.own_vision else "the tower's repository",
        }

    def vqa_score(self, images: Sequence[Image.Image], texts: Sequence[str]) -> list[VqaAnswer]:
        """VQAScore of each (image, text): the question about the text in double quotes."""
        probs = self._yes(images, [vqa_question(t) for t in texts])
        return [VqaAnswer(t, p) for t, p in zip(texts, probs, strict=True)]

    def yes_probability(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[float]:
        """P("Yes") / (P("Yes") + P("No")) at the first answer position, for each question
        asked as VQAScore asks (what a judge's yes-probability is)."""
        return self._yes(images, [f"{q} Please answer yes or no." for q in questions], True)

    def _yes(
        self, images: Sequence[Image.Image], questions: Sequence[str], renorm: bool = False
    ) -> list[float]:
        if len(images) != len(questions):
            raise ValueError(f"{len(images)} images for {len(questions)} questions")
        stray = [q for q in questions if IMAGE in q]
        if stray:
            raise ValueError(f"a text holds {IMAGE!r}, where the image goes: {stray[0][:80]!r}")
        self.load()
        out: list[float] = []
        for at in range(0, len(images), self.batch_size):
            part = slice(at, at + self.batch_size)
            out += self._batch(images[part], questions[part], renorm)
        return out

    def _batch(
        self, images: Sequence[Image.Image], questions: Sequence[str], renorm: bool = False
    ) -> list[float]:
        import torch

        features = self._image_features(images)  # [batch, patches, d_model]
        embed = self.model.get_input_embeddings()
        rows = []
        for feats, question in zip(features, questions, strict=True):
            before, after = chat_prompt(question).split(IMAGE)
            pieces = [self._ids(before), None, self._ids(after)]
            rows.append(torch.cat([feats if p is None else embed(p) for p in pieces], dim=0))
        longest = max(r.shape[0] for r in rows)
        width = rows[0].shape[1]
        inputs = torch.zeros(len(rows), longest, width, dtype=rows[0].dtype, device=self.device)
        mask = torch.zeros(len(rows), longest, dtype=torch.long, device=self.device)
        for k, r in enumerate(rows):  # padded on the right, masked
            inputs[k, : r.shape[0]] = r
            mask[k, : r.shape[0]] = 1
        labels = self._ids(ANSWER).unsqueeze(0).repeat(len(rows), 1)
        with torch.no_grad():
            logits = self.model(inputs_embeds=inputs, attention_mask=mask, labels=labels).logits
        if renorm:  # the first answer position, over "Yes" and "No"
            yes, no = self._ids(ANSWER)[0], self._ids("No")[0]
            pair = logits[:, 0, torch.stack([yes, no])].float()
            return torch.softmax(pair, dim=-1)[:, 0].cpu().tolist()
        loss = torch.nn.functional.cross_entropy(
            logits.float().transpose(1, 2), labels, reduction="none"
        ).mean(dim=1)
        return (-loss).exp().cpu().tolist()

    def _ids(self, text: str) -> Any:
        """A text piece's token ids as t2v-metrics makes them (``</s>`` at its end)."""
        import torch

        ids = self.tokenizer(text).input_ids
        return torch.tensor(ids, dtype=torch.long, device=self.device)

    def _image_features(self, images: Sequence[Image.Image]) -> Any:
        """The projected patch features of the images, padded to squares first."""
        import torch
        from PIL import Image as PILImage

        fill = tuple(int(255 * m) for m in self.processor.image_mean)
        squares = []
        for im in images:
            im = im.convert("RGB")
            side = max(im.size)
            square = PILImage.new("RGB", (side, side), fill)
            square.paste(im, ((side - im.width) // 2, (side - im.height) // 2))
            squares.append(square)
        pixels = self.processor(images=squares, return_tensors="pt")["pixel_values"]
        pixels = pixels.to(self.device, self.vision.dtype)
        with torch.no_grad():
            hidden = self.vision(pixels, output_hidden_states=True).hidden_states
            patches = hidden[self.select_layer][:, 1:]
            return self.model.mm_projector(patches.to(self.model.dtype))
