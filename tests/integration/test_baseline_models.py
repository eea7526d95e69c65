"""The baselines scored on checkpoints of their own (PickScore, HPS v2): each loads a tiny
checkpoint written in the layout of the real one and gives the authors' formula computed
here from the model itself; the checkpoints are named, replaced and fetched."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from PIL import Image

from metrics.baselines import (
    caire_probe,
    caire_probe_of,
    cure,
    cure_of,
    hpsv2_of,
    pickscore,
    pickscore_of,
)
from refine.evaluate.baseline_models import (
    CHECKPOINTS,
    checkpoint,
    model_readings,
    parse_baseline_models,
    texts,
)

PROMPT = "A photorealistic photo of people eating food at home in Iran."
COLOURS = ((200, 100, 0), (20, 40, 220), (90, 200, 60))


def images():
    # the size of the tiny models' crop: no resizing between the toolkit and the test
    return [Image.new("RGB", (32, 32), c) for c in COLOURS]


def test_pickscore_by_hand():
    assert pickscore(0.25, 100.0) == pytest.approx(25.0)
    assert pickscore(-0.1, 50.0) == pytest.approx(-5.0)  # not clamped: the authors' logit


def test_checkpoints_are_named_or_replaced(tmp_path):
    assert CHECKPOINTS["pickscore"].repo == "yuvalkirstain/PickScore_v1"
    assert CHECKPOINTS["pickscore"].processor == "laion/CLIP-ViT-H-14-laion2B-s32B-b79K"
    assert CHECKPOINTS["hpsv2"].describe() == "xswu/HPSv2/HPS_v2_compressed.pt"
    from metrics.catalog import CATALOG

    for name, ck in CHECKPOINTS.items():  # the docs name the checkpoint the code loads
        assert ck.repo in CATALOG[name].checkpoint
    got = parse_baseline_models(["hpsv2=v2.1", f"pickscore={tmp_path}"])
    assert got["hpsv2"].file == "HPS_v2.1_compressed.pt" and got["hpsv2"].arch == "ViT-H-14"
    assert got["pickscore"].path == str(tmp_path.resolve())
    other = parse_baseline_models(["pickscore=me/my-pick", "hpsv2=me/hps/v3.pt"])
    assert other["pickscore"].repo == "me/my-pick" and other["hpsv2"].file == "v3.pt"
    own = parse_baseline_models([f"hpsv2=clip:tiny/{tmp_path}/w.pt"])["hpsv2"]
    assert (own.arch, own.path) == ("tiny", f"{tmp_path}/w.pt")
    assert checkpoint("hpsv2").file == "HPS_v2_compressed.pt"  # none given: its own
    for bad, said in (
        ("pickscore", "use NAME=WHERE"),
        ("vqascore=x/y", "no baseline with a checkpoint of its own"),
        ("pickscore=nowhere", r"no local path and no hub checkpoint \(owner/name\)"),
        ("hpsv2=clip:ViT-H-14", "use clip:ARCH/PATH"),
    ):
        with pytest.raises(ValueError, match=said):
            parse_baseline_models([bad])
    assert model_readings(["clipscore"], images(), PROMPT) == [None] * 3


@pytest.mark.slow
def test_pickscore_on_a_checkpoint_in_its_layout(tmp_path):
    """PickScore v1's layout: a transformers CLIPModel whose folder holds no processor,
    the processor another checkpoint's; the score is the logit scale times the cosine."""
    from transformers import CLIPModel, CLIPProcessor

    from tests.fakes.tiny_models import build_tiny_hf_clip

    folder = build_tiny_hf_clip(tmp_path, seed=3, processor_apart=True)
    processor_dir = tmp_path / "tiny-hf-clip-processor"
    assert not (folder / "preprocessor_config.json").exists()
    ck = replace(CHECKPOINTS["pickscore"], path=str(folder), processor=str(processor_dir))
    got = pickscore_of(model_readings(["pickscore"], images(), PROMPT, {"pickscore": ck}, "cpu"))
    model = CLIPModel.from_pretrained(folder).eval()
    processor = CLIPProcessor.from_pretrained(processor_dir)
    with torch.inference_mode():
        pixels = processor(images=images(), return_tensors="pt")["pixel_values"]
        text = processor(text=[PROMPT], padding=True, truncation=True, return_tensors="pt")
        img = model.get_image_features(pixel_values=pixels)
        txt = model.get_text_features(**text)
    img = torch.nn.functional.normalize(getattr(img, "pooler_output", img), dim=-1)
    txt = torch.nn.functional.normalize(getattr(txt, "pooler_output", txt), dim=-1)
    want = (model.logit_scale.exp() * (img @ txt.T)[:, 0]).tolist()
    # fp32 over 16-d projections, times a scale near 14: equal to 1e-4 on any CPU
    assert [c.value for c in got] == pytest.approx(want, abs=1e-4)
    assert len({round(v, 6) for v in want}) == 3  # three images, three scores
    # a folder holding a processor of its own is read with it (no other repository asked)
    whole = build_tiny_hf_clip(tmp_path / "whole", seed=3)
    own = pickscore_of(
        model_readings(
            ["pickscore"], images(), PROMPT, parse_baseline_models([f"pickscore={whole}"]), "cpu"
        )
    )
    assert [c.value for c in own] == pytest.approx(want, abs=1e-4)


@pytest.mark.slow
def test_hpsv2_on_a_checkpoint_in_its_layout(tmp_path):
    """HPS v2's layout: open_clip weights under "state_dict" in a .pt file, loaded into
    the architecture; the score is the cosine of the normalised embeddings."""
    import open_clip

    from tests.fakes.tiny_models import build_tiny_open_clip

    build_tiny_open_clip(tmp_path)  # registers the tiny architecture
    torch.manual_seed(5)
    model = open_clip.create_model("tiny-clip-test").eval()
    ckpt = tmp_path / "HPS_v2_compressed.pt"
    torch.save({"state_dict": model.state_dict()}, ckpt)
    given = parse_baseline_models([f"hpsv2=clip:tiny-clip-test/{ckpt}"])
    got = hpsv2_of(model_readings(["hpsv2"], images(), PROMPT, given, "cpu"))
    _, _, preprocess = open_clip.create_model_and_transforms("tiny-clip-test")
    tokenizer = open_clip.get_tokenizer("tiny-clip-test")
    with torch.inference_mode():
        img = model.encode_image(torch.stack([preprocess(im) for im in images()]))
        txt = model.encode_text(tokenizer([PROMPT]))
    img = torch.nn.functional.normalize(img, dim=-1)
    txt = torch.nn.functional.normalize(txt, dim=-1)
    assert [c.value for c in got] == pytest.approx((img @ txt.T)[:, 0].tolist(), abs=1e-5)


def test_cure_and_the_caire_probe_by_hand():
    assert cure([0.2, 0.4]) == pytest.approx(0.3)
    assert caire_probe([0.1, 0.3, 0.2, 0.25, -0.1]) == 2  # "Minimally relevant" is closest
    assert caire_probe([0.3, 0.3, 0.1, 0.0, 0.0]) == 1  # a tie: the lower rating
    with pytest.raises(ValueError, match="needs 5 cosines"):
        caire_probe([0.1])
    assert texts("cure", PROMPT, "people eating", "Iran") == [
        "An image of people eating",
        "An image from Iran",
    ]
    assert texts("caire_probe", PROMPT, "x", "Iran")[0] == "This image is Not relevant to Iran"
    assert texts("caire_probe", PROMPT, "x", "Iran")[4] == "This image is Highly relevant to Iran"


def _cosines(model, processor, texts_, siglip):
    with torch.inference_mode():
        pixels = processor(images=images(), return_tensors="pt")["pixel_values"]
        pad = {"padding": "max_length"} if siglip else {"padding": True}
        text = processor(text=texts_, truncation=True, return_tensors="pt", **pad)
        img = model.get_image_features(pixel_values=pixels)
        kw = {"input_ids": text["input_ids"]}
        if not siglip:
            kw["attention_mask"] = text["attention_mask"]
        txt = model.get_text_features(**kw)
    img = torch.nn.functional.normalize(getattr(img, "pooler_output", img), dim=-1)
    txt = torch.nn.functional.normalize(getattr(txt, "pooler_output", txt), dim=-1)
    return img @ txt.T


def test_cure_on_a_siglip_checkpoint(siglip_path):
    """CuRe on a checkpoint of SigLIP's layout: the mean cosine of the image and its two
    texts, computed here from the model itself."""
    from transformers import AutoModel, AutoProcessor

    given = parse_baseline_models([f"cure={siglip_path}"])
    assert given["cure"].kind == "siglip"
    got = cure_of(model_readings(["cure"], images(), PROMPT, given, "cpu", "people eating", "Iran"))
    said = texts("cure", PROMPT, "people eating", "Iran")
    model = AutoModel.from_pretrained(siglip_path).eval()
    cos = _cosines(model, AutoProcessor.from_pretrained(siglip_path), said, True)
    assert [c.value for c in got] == pytest.approx(cos.mean(dim=1).tolist(), abs=1e-5)


def test_the_caire_probe_on_a_clip_checkpoint(tmp_path):
    """CAIRE's Baseline 1 on a CLIP ViT-B/32 layout: the rating of the most similar of
    the five probes, computed here from the model itself."""
    from transformers import CLIPModel, CLIPProcessor

    from tests.fakes.tiny_models import build_tiny_hf_clip

    folder = build_tiny_hf_clip(tmp_path, seed=7)
    given = parse_baseline_models([f"caire_probe={folder}"])
    readings = model_readings(["caire_probe"], images(), PROMPT, given, "cpu", "x", "Iran")
    got = caire_probe_of(readings)
    said = texts("caire_probe", PROMPT, "x", "Iran")
    cos = _cosines(CLIPModel.from_pretrained(folder).eval(), CLIPProcessor.from_pretrained(folder),
                   said, False)  # fmt: skip
    assert [c.value for c in got] == [float(1 + int(row.argmax())) for row in cos]
    for r, row in zip(readings, cos.tolist(), strict=True):
        assert list(r["caire_probe"].cosines) == pytest.approx(row, abs=1e-5)


def test_hpsv2_pads_a_wide_image_as_its_authors_do(tmp_path):
    """HPS v2's code resizes the longest side and pads the other with black (no crop): a
    wide image scores as that square, computed here with torchvision."""
    import open_clip
    import torchvision.transforms.functional as F
    from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD

    from tests.fakes.tiny_models import build_tiny_open_clip

    build_tiny_open_clip(tmp_path)
    torch.manual_seed(6)
    model = open_clip.create_model("tiny-clip-test").eval()
    ckpt = tmp_path / "HPS_v2_compressed.pt"
    torch.save({"state_dict": model.state_dict()}, ckpt)
    given = parse_baseline_models([f"hpsv2=clip:tiny-clip-test/{ckpt}"])
    wide = Image.new("RGB", (64, 20), (200, 30, 30))
    wide.paste((20, 200, 40), (40, 0, 64, 20))  # a green right end a crop would cut off
    (got,) = hpsv2_of(model_readings(["hpsv2"], [wide], PROMPT, given, "cpu"))
    small = F.resize(wide, [10, 32], interpolation=F.InterpolationMode.BICUBIC)  # (h, w)
    square = F.pad(small, [0, 11, 0, 11], fill=0)  # 32 - 10 = 22: 11 above, 11 below
    pixels = F.normalize(F.to_tensor(square), OPENAI_DATASET_MEAN, OPENAI_DATASET_STD)
    tokenizer = open_clip.get_tokenizer("tiny-clip-test")
    with torch.inference_mode():
        img = torch.nn.functional.normalize(model.encode_image(pixels[None]), dim=-1)
        txt = torch.nn.functional.normalize(model.encode_text(tokenizer([PROMPT])), dim=-1)
    assert got.value == pytest.approx(float(img @ txt.T), abs=1e-5)
    _, _, crop = open_clip.create_model_and_transforms("tiny-clip-test")
    with torch.inference_mode():
        cropped = torch.nn.functional.normalize(model.encode_image(crop(wide)[None]), dim=-1)
    assert got.value != pytest.approx(float(cropped @ txt.T), abs=1e-5)  # not the crop's


def test_a_checkpoint_the_formula_cannot_use_is_refused():
    cure = parse_baseline_models(["cure=google/siglip2-base-patch16-224"])["cure"]
    assert (cure.kind, cure.repo) == ("siglip", "google/siglip2-base-patch16-224")
    with pytest.raises(ValueError, match="a SigLIP has no such scale"):
        parse_baseline_models(["pickscore=siglip:google/siglip2-base-patch16-224"])


@pytest.mark.slow
def test_agree_computes_clipscore_for_the_generation_prompt_where_none_is_stored(world, tmp_path):
    """A ratings row without a prompt: CLIPScore for the generation prompt of its activity
    and country; an image whose CLIPScore is stored (a bench's) keeps it."""
    from metrics.baselines import clipscore
    from refine.backends import create
    from refine.harness.tasks.score.missing import score_missing
    from refine.human.ratings import Rating
    from refine.human.stored import StoredMetrics
    from refine.io.files import file_sha256
    from tests.fakes.tiny_models import build_tiny_hf_clip

    folder = build_tiny_hf_clip(tmp_path / "m", seed=2)
    files = []
    for k, c in enumerate(COLOURS[:2]):
        files.append(tmp_path / f"im{k}.png")
        Image.new("RGB", (32, 32), c).save(files[-1])
    found = StoredMetrics()
    found.add(files[1], "people eating food at home", "Iran", {"clipscore": 1.25})
    rows = [
        Rating(f, file_sha256(f), "a", {"faithfulness": 3.0}, None, "people eating food at home",
               "Iran")
        for f in files
    ]  # fmt: skip
    backends = {"image_embedder": f"hfclip:{folder}"}
    options = {"image_embedder": {"device": "cpu"}}
    score_missing(rows, found, ["clipscore"], tmp_path / "scored", "gemini", backends, options)
    clip = create("image_embedder", f"hfclip:{folder}", shared=False, device="cpu")
    cos = float((clip.encode_images([Image.open(files[0])]) * clip.encode_texts([PROMPT])).sum())
    assert found.find(rows[0])[0]["clipscore"] == pytest.approx(clipscore(cos), abs=1e-5)
    assert found.find(rows[1])[0]["clipscore"] == 1.25


def test_imagereward_on_a_checkpoint_in_its_layout(tmp_path):
    """ImageReward.pt's layout loaded into transformers' BLIP: the reward is the authors'
    MLP of the text encoder's first token, standardised, computed here from the modules
    the weights came from."""
    import torchvision.transforms.functional as F
    from transformers import BertTokenizer

    from metrics.baselines import imagereward_of
    from refine.backends.image_reward import CLIP_MEAN, CLIP_STD, REWARD_MEAN, REWARD_STD
    from tests.fakes.tiny_models import build_tiny_image_reward

    folder, (vision, text, head) = build_tiny_image_reward(tmp_path / "ir", seed=4)
    given = parse_baseline_models([f"imagereward={folder}"])
    wide = Image.new("RGB", (48, 32), (200, 30, 30))
    shown = [*images(), wide]
    got = imagereward_of(model_readings(["imagereward"], shown, PROMPT, given, "cpu"))
    tok = BertTokenizer(str(folder / "vocab.txt"))
    tok.add_special_tokens({"bos_token": "[DEC]"})
    tok.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
    ids = tok(PROMPT, padding="max_length", truncation=True, max_length=35, return_tensors="pt")
    assert int(ids["attention_mask"].sum()) < 35 and tok.unk_token_id not in ids["input_ids"][0]
    want = []
    with torch.inference_mode():
        for im in shown:
            im = F.center_crop(
                F.resize(im, 32, interpolation=F.InterpolationMode.BICUBIC), [32, 32]
            )
            pixels = F.normalize(F.to_tensor(im), CLIP_MEAN, CLIP_STD)[None]
            embeds = vision(pixel_values=pixels).last_hidden_state
            first = text(
                input_ids=ids["input_ids"], attention_mask=ids["attention_mask"],
                encoder_hidden_states=embeds,
                encoder_attention_mask=torch.ones(embeds.shape[:-1], dtype=torch.long),
            ).last_hidden_state[:, 0, :]  # fmt: skip
            want.append(float((head(first)[0, 0] - REWARD_MEAN) / REWARD_STD))
    # fp32 through a 1024-wide head, batched there and one by one here: equal to 1e-5 of
    # the value on any CPU (the values are tens)
    assert [c.value for c in got] == pytest.approx(want, rel=1e-5)
    assert len({round(v, 3) for v in want}) == len(want)  # the images score differently
    bad = tmp_path / "empty"
    bad.mkdir()
    with pytest.raises(ValueError, match="no ImageReward.pt"):
        model_readings(["imagereward"], images(), PROMPT,
                       parse_baseline_models([f"imagereward={bad}"]), "cpu")  # fmt: skip


def test_a_bench_keeps_cells_scored_on_the_checkpoints_asked_for(world, tmp_path):
    """A bench whose PickScore is a local checkpoint: its cells say which, are kept (and
    summarised) when run again with it, and their images scored again with another."""
    from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
    from refine.harness.tasks.bench.task import run_bench
    from tests.conftest import loop_options
    from tests.fakes.tiny_models import build_tiny_hf_clip

    clip = build_tiny_hf_clip(tmp_path / "clip", seed=1)
    other = build_tiny_hf_clip(tmp_path / "other", seed=2)
    plan = BenchPlan(
        generators=["gemini:gemini-3.1-flash-image"],
        prompts=plan_prompts(["Iran"], ["people eating food at home"]),
        images_per_prompt=1,
        backends={"image_embedder": f"hfclip:{clip}"},
        baselines=("pickscore",),
        baseline_models=(f"pickscore={clip}",),
    )
    out = tmp_path / "b"
    first = run_bench(plan, out, backend_options=loop_options()).summary
    row = first["generators"]["gemini:gemini-3.1-flash-image"]
    assert row["prompts"] == 1 and row["pickscore"]["mean"] is not None
    made = world.log.count("generate")
    again = run_bench(plan, out, backend_options=loop_options()).summary
    assert world.log.count("generate") == made  # kept
    assert again["generators"]["gemini:gemini-3.1-flash-image"]["pickscore"] == row["pickscore"]
    plan.baseline_models = (f"pickscore={other}",)
    moved = run_bench(plan, out, backend_options=loop_options())
    # scored on another checkpoint: the kept image is scored again on it, not made again
    assert world.log.count("generate") == made
    (cell,) = moved.cells
    assert cell["baseline_models"]["pickscore"].endswith(str(other))
    now = moved.summary["generators"]["gemini:gemini-3.1-flash-image"]
    assert now["faith"] == row["faith"]
    assert now["pickscore"]["mean"] != pytest.approx(row["pickscore"]["mean"], rel=1e-3)


def test_a_hub_file_is_looked_up_once_per_process(monkeypatch, tmp_path):
    """Scoring batch after batch asks the hub (or its cache) for an open_clip file once."""
    import huggingface_hub

    from refine.evaluate import baseline_models

    asked = []

    def hf_hub_download(repo_id, filename, **kw):
        asked.append((repo_id, filename))
        return str(tmp_path / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setattr(baseline_models, "_FILES", {})
    ck = replace(CHECKPOINTS["hpsv2"], repo="me/hps-test")
    first = baseline_models.fetch_file(ck)
    assert baseline_models.fetch_file(ck) == first == str(tmp_path / "HPS_v2_compressed.pt")
    assert asked == [("me/hps-test", "HPS_v2_compressed.pt")]
