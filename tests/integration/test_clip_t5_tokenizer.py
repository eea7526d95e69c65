"""CLIP-FlanT5's tokenizer: t2v-metrics reads FlanT5's SentencePiece model with the
SentencePiece library; transformers 5 has one T5 tokenizer, made from that model by its
converter (``refine/backends/clip_t5.py``). On the chat prompt of every bundled VQAScore
question (each stereotype candidate of the bundled pack, the text either side of the
image), the two give the same ids. FlanT5's own model is not at hand offline: a unigram
model trained here on those prompts stands in for it, so what is shown is the conversion
(its normalisation, spaces and end token) on these texts, not FlanT5's vocabulary."""

from __future__ import annotations

import pytest


@pytest.mark.slow  # a SentencePiece model trained, and 7,500 texts tokenized twice: ~1.7 s
def test_transformers_and_sentencepiece_tokenize_every_bundled_question_alike(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    from transformers import T5Tokenizer

    from metrics.vqascore import vqa_question
    from refine.backends.clip_t5 import IMAGE, chat_prompt
    from refine.evaluate.reference_source import catalog

    pack = catalog()[0]
    texts = sorted(
        {
            s
            for country in pack.countries.values()
            for entry in country["activities"].values()
            for s in entry.get("stereotypes") or []
        }
    )
    assert len(texts) > 100  # the bundled pack's stereotype candidates
    pieces = [p for t in texts for p in chat_prompt(vqa_question(t)).split(IMAGE)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(pieces), encoding="utf-8")
    # T5's layout: pad 0, end of text 1, unknown 2, no start token
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(tmp_path / "spiece"), vocab_size=300,
        model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        character_coverage=1.0, minloglevel=2,
    )  # fmt: skip
    model = tmp_path / "spiece.model"
    folder = tmp_path / "tokenizer"
    folder.mkdir()
    (folder / "spiece.model").write_bytes(model.read_bytes())
    slow = spm.SentencePieceProcessor(model_file=str(model))
    fast = T5Tokenizer.from_pretrained(str(folder), extra_ids=0)
    ids = fast(pieces).input_ids  # a batch: each text tokenized as alone
    want = [[*got, slow.eos_id()] for got in slow.encode(pieces)]
    differ = [p for p, a, b in zip(pieces, ids, want, strict=True) if a != b]
    assert not differ, differ[:3]
    assert fast("Yes").input_ids[-1] == 1  # the answer's end token, as t2v-metrics scores it
