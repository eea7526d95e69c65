"""SoS banks on tiny models: a tiny random Stable Diffusion generates from the native-speaker
person prompts, a tiny SigLIP embeds; 3 cultures x 3 languages. Build, resume after a failure,
hand-computed centroids and scores, the report."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from refine.backends import create
from refine.evaluate.sos import Bank, BankError, analyse
from refine.harness.tasks.sos.bank import build_bank
from refine.harness.tasks.sos.prompts import person_prompts
from refine.present.report.sos import write_sos_report
from tests.fakes.tiny_models import build_tiny_sd

CULTURES = ["Japanese", "Nigerian", "Mexican"]
LANGUAGES = ["en", "fr", "ja"]


class Counting:
    """A generator that counts its calls and can fail after some."""

    def __init__(self, inner, fail_after: int | None = None, refuse: str = "") -> None:
        self.inner, self.fail_after, self.calls = inner, fail_after, []
        self.refuse = refuse  # a prompt holding these words is refused (a safety block)

    @property
    def id(self):
        return self.inner.id

    def generate(self, prompt, seeds):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise RuntimeError("the GPU fell over")
        if self.refuse and self.refuse in prompt:
            from refine.backends.loading import Refused

            raise Refused("the model's safety filters refused it")
        self.calls.append(prompt)
        return self.inner.generate(prompt, seeds)


@pytest.fixture(scope="module")
def models(tmp_path_factory, siglip_path):
    root = tmp_path_factory.mktemp("sos-tiny")
    sd = build_tiny_sd(root, 4)
    opts = {"device": "cpu", "steps": 2, "width": 32, "height": 32}
    generator = create("generator", f"diffusers:{sd}", shared=False, **opts)
    embedder = create("image_embedder", f"siglip:{siglip_path}", shared=False, device="cpu")
    return generator, embedder, sd


def test_person_prompts_come_from_the_native_speaker_table():
    prompts = person_prompts()
    assert len(prompts[("Japanese", "fr")]) == 9
    assert prompts[("Japanese", "fr")][0] == "Une photo d'une personne japonaise"
    assert prompts[("Japanese", "en")][0] == "A photo of a Japanese person"
    assert len(prompts[("Japanese", "en")]) == 9  # English once, not once per language
    # one culture spelt two ways by the authors ("Hondurans" in German alone): one culture,
    # its 9 English prompts naming it as spelt; 171 cultures, every one in 14 languages
    assert len({c for c, _ in prompts}) == 171 and len(prompts) == 171 * 14
    assert len(prompts[("Honduran", "de")]) == 9 and len(prompts[("Honduran", "en")]) == 9
    assert all(" Honduran " in p for p in prompts[("Honduran", "en")])


@pytest.mark.slow
def test_build_resume_scores_and_report(models, tmp_path):
    generator, embedder, _ = models
    out = tmp_path / "bank"
    # the generator fails in the fifth cell, after its first prompt was saved
    failing = Counting(generator, fail_after=9)
    progress = []
    with pytest.raises(RuntimeError, match="fell over"):
        build_bank(
            out,
            "person",
            CULTURES,
            LANGUAGES,
            failing,
            embedder,
            prompts_per_cell=2,
            images_per_prompt=1,
            on_progress=lambda d, t, w: progress.append((d, t, w)),
        )
    assert [p[:2] for p in progress] == [(1, 9), (2, 9), (3, 9), (4, 9)]
    half = Bank(out)
    assert len(half.done()) == 4
    # the combined files hold the finished cells even though the build failed
    assert np.load(out / "embeddings.npy").shape == (8, 32)
    # and so does the results record, with the cells left to do
    record = json.loads((out / "results.json").read_text())
    assert record["task"] == "sos-bank" and record["config"]["concept"] == "person"
    assert record["summary"]["done"] == 4 and record["summary"]["images"] == 8
    assert [c["done"] for c in record["cells"]].count(False) == 5
    rows = list(csv.DictReader((out / "bank_cells.csv").open()))
    assert [r["images"] for r in rows if r["done"] == "True"] == ["2"] * 4
    assert {r["images"] for r in rows if r["done"] == "False"} <= {""}  # none yet: blank
    assert half.centroids().cultures == ["Japanese", "Nigerian"]
    kept = {k: (out / c["embeddings"]).read_bytes() for k, c in half.cells.items() if c["done"]}
    # going on: finished cells are kept, the half-done cell reuses its saved image (a cell
    # refused on its own is test_cli_bank_and_report's)
    again = Counting(generator)
    bank = build_bank(
        out, "person", CULTURES, LANGUAGES, again, embedder, prompts_per_cell=2, images_per_prompt=1
    )
    assert len(again.calls) == 9 * 2 - 9  # 5 cells x 2 prompts, less the one saved
    assert len(bank.done()) == 9
    for key, data in kept.items():
        assert (out / bank.cells[key]["embeddings"]).read_bytes() == data
    # a different setting is refused
    with pytest.raises(BankError, match="images_per_prompt=1"):
        build_bank(
            out,
            "person",
            CULTURES,
            LANGUAGES,
            generator,
            embedder,
            prompts_per_cell=2,
            images_per_prompt=2,
        )
    # the same bank built in one go is the same bank (same seeds, same images)
    once = build_bank(
        tmp_path / "once", "person", CULTURES, LANGUAGES, generator, embedder, prompts_per_cell=2
    )
    e1, c1, l1, _ = bank.data()
    e2, c2, l2, _ = once.data()
    order1 = sorted(range(len(c1)), key=lambda i: (c1[i], l1[i], i))
    order2 = sorted(range(len(c2)), key=lambda i: (c2[i], l2[i], i))
    np.testing.assert_allclose(e1[order1], e2[order2], atol=1e-5)

    # centroids and SoS by hand
    e, cultures, languages, images = bank.data()
    assert e.shape == (18, 32) and len(images) == 18
    unit = e / np.linalg.norm(e, axis=1, keepdims=True)
    sem = {c: unit[[i for i in range(18) if cultures[i] == c]].mean(0) for c in CULTURES}
    surf = {g: unit[[i for i in range(18) if languages[i] == g]].mean(0) for g in LANGUAGES}

    def cos(a, b):
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    hand = np.array(
        [cos(sem[cultures[i]], unit[i]) - cos(surf[languages[i]], unit[i]) for i in range(18)]
    )
    centroids = bank.centroids()
    np.testing.assert_allclose(
        centroids.semantic[centroids.cultures.index("Mexican")], sem["Mexican"], atol=1e-6
    )
    np.testing.assert_allclose(
        centroids.surface[centroids.languages.index("ja")], surf["ja"], atol=1e-6
    )
    result = analyse(out)
    # one generator: its model-language pairs are the languages; strong when the median
    # of the language's images is at or below the 25th percentile of those medians
    medians = {
        g: float(np.median(hand[[i for i in range(18) if languages[i] == g]])) for g in LANGUAGES
    }
    q25 = float(np.percentile(list(medians.values()), 25))
    assert result["percentile_25"] == pytest.approx(q25, abs=1e-6)
    strong = {g for g, m in medians.items() if m <= q25}
    assert (
        strong
        and {m["language"] for m in result["model_languages"] if m["strongly_surface_led"]}
        == strong
    )
    for p in result["pairs"]:
        idx = [
            i for i in range(18) if cultures[i] == p["culture"] and languages[i] == p["language"]
        ]
        assert p["n"] == 2
        assert p["sos"] == pytest.approx(hand[idx].mean(), abs=1e-6)
        assert p["median"] == pytest.approx(np.median(hand[idx]), abs=1e-6)
        assert p["strongly_surface_led"] == (p["language"] in strong)
    assert len(result["pairs"]) == 9
    assert result["share_strongly_surface_led"] == pytest.approx(len(strong) / 3)
    for lang in LANGUAGES:
        means = [p["sos"] for p in result["pairs"] if p["language"] == lang]
        assert result["by_language"][lang]["mean"] == pytest.approx(np.mean(means), abs=1e-9)
    # the heatmap's columns: languages by mean SoS, the most surface-led first
    lang_means = [result["by_language"][g]["mean"] for g in result["languages"]]
    assert lang_means == sorted(lang_means) and list(result["by_language"]) == result["languages"]
    assert result["centroids"] == "pooled" and result["generators"] == [
        bank.manifest["settings"]["generator"]
    ]
    _pooled_over_generators(out, tmp_path, e, cultures, languages)
    # embeddings.npy / labels.csv serve `refine metrics sos` as they are
    assert np.load(out / "embeddings.npy").shape == (18, 32)
    assert (out / "labels.csv").read_text().splitlines()[0] == "culture,language"

    # the report
    path, _ = write_sos_report(out, top=3)
    html = path.read_text(encoding="utf-8")
    cells = re.findall(
        r'id="w-cell-\d+-\d+" class="cell" data-culture="(\w+)" data-language="(\w+)" '
        r'data-sos="([-0-9.]+)"',
        html,
    )
    assert len(cells) == 9
    by_pair = {(p["culture"], p["language"]): p["sos"] for p in result["pairs"]}
    for c, g, v in cells:
        assert float(v) == pytest.approx(by_pair[(c, g)], abs=1e-6)
    worst = sorted(result["pairs"], key=lambda p: p["median"])[:3]
    assert "model-language pairs" in html
    sections = re.findall(r'<section class="led" data-culture="(\w+)" data-language="(\w+)"', html)
    assert sections == [(p["culture"], p["language"]) for p in worst]
    assert html.count('<img src="data:image/png;base64,') == 6  # 3 pairs x 2 images
    assert f"{result['share_strongly_surface_led']:.1%}" in html
    assert "<script" not in html and len(re.findall(r'id="w-pair-\d+" class="pair"', html)) == 9


def _pooled_over_generators(out, tmp_path, e, cultures, languages):
    """A second generator's bank (this one's, its embeddings moved): the centroids pooled
    over both banks' images, or each bank's own, by hand."""
    import shutil

    other = tmp_path / "other"
    shutil.copytree(out, other)
    manifest = json.loads((other / "bank.json").read_text())
    manifest["settings"]["generator"] = "diffusers:another"
    (other / "bank.json").write_text(json.dumps(manifest))
    rng = np.random.default_rng(0)
    for cell in manifest["cells"].values():
        if cell["done"]:
            x = np.load(other / cell["embeddings"])
            x = x + rng.normal(scale=0.5, size=x.shape).astype(x.dtype)
            np.save(other / cell["embeddings"], x)
    e2, c2, l2, _ = Bank(other).data()
    allv = np.concatenate([e, e2])
    unit = allv / np.linalg.norm(allv, axis=1, keepdims=True)
    cs, ls = cultures + c2, languages + l2
    sem = {c: unit[[i for i in range(len(cs)) if cs[i] == c]].mean(0) for c in set(cs)}
    surf = {g: unit[[i for i in range(len(ls)) if ls[i] == g]].mean(0) for g in set(ls)}

    def cos(a, b):
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    hand = [cos(sem[cs[i]], unit[i]) - cos(surf[ls[i]], unit[i]) for i in range(len(cs))]
    both = analyse([out, other])
    assert both["generators"][1] == "diffusers:another" and both["images"] == 36
    assert len(both["model_languages"]) == 6 and len(both["pairs"]) == 18
    for m in both["model_languages"]:
        start = 0 if m["generator"] != "diffusers:another" else 18
        idx = [start + i for i in range(18) if ls[start + i] == m["language"]]
        assert m["median"] == pytest.approx(float(np.median([hand[i] for i in idx])), abs=1e-6)
    medians = [m["median"] for m in both["model_languages"]]
    assert both["percentile_25"] == pytest.approx(float(np.percentile(medians, 25)), abs=1e-9)
    own = analyse([out, other], centroids="per-generator")
    alone = analyse(out)
    first = [p for p in own["pairs"] if p["generator"] != "diffusers:another"]
    assert [p["sos"] for p in first] == pytest.approx([p["sos"] for p in alone["pairs"]], abs=1e-9)
    assert both["pairs"][0]["sos"] != pytest.approx(alone["pairs"][0]["sos"], abs=1e-9)
    path, _ = write_sos_report([out, other], tmp_path / "both.html", top=2)
    html = path.read_text()
    assert html.count('class="chart-figure heatmap"') == 2 and "pooled over the images of 2" in html


@pytest.mark.slow
def test_cli_bank_and_report(capsys, models, siglip_path, tmp_path, monkeypatch):
    from tests.integration.test_caire_kb import run

    _, _, sd = models
    out = tmp_path / "bank"
    args = (
        "sos",
        "bank",
        "--cultures",
        "Japanese,Nigerian",
        "--languages",
        "en,fr",
        "--concept",
        "person",
        "--out",
        out,
        "--prompts-per-cell",
        "1",
        "--backend",
        f"generator=diffusers:{sd}",
        "--backend",
        f"image_embedder=siglip:{siglip_path}",
    )
    # the generator refuses one cell's prompt: the command names it in one line, exit 1, the
    # other cells made; the same command makes only that cell
    from refine.backends.diffusers_backends import DiffusersGenerator
    from refine.backends.loading import Refused

    made = DiffusersGenerator.generate

    def refusing(self, prompt, *rest, **kw):
        if "nigériane" in prompt:
            raise Refused("the model's safety filters refused it")
        return made(self, prompt, *rest, **kw)

    monkeypatch.setattr(DiffusersGenerator, "generate", refusing)
    code, stdout, err = run(capsys, *args)
    assert code == 1 and "Traceback" not in err, err
    assert "failed: Nigerian x fr: " in err and "safety filters refused it" in err, err
    monkeypatch.setattr(DiffusersGenerator, "generate", made)
    code, stdout, err = run(capsys, *args)
    assert code == 0, err
    assert "cell 4/4: Nigerian x fr (1 images)" in err and "4/4 cells, 4 images" in stdout
    code, stdout, err = run(capsys, *args)  # nothing left to do
    assert code == 0 and "cell " not in err
    code, stdout, _ = run(capsys, "sos", "report", out, "--json")
    doc = json.loads(stdout)
    assert doc["images"] == 4 and len(doc["pairs"]) == 4 and (out / "report.html").is_file()
    code, _, err = run(
        capsys,
        "sos",
        "bank",
        "--cultures",
        "Japan",
        "--languages",
        "en,xx",
        "--out",
        tmp_path / "b2",
    )
    assert code == 2 and "culture 'Japan' has no person prompts" in err
    assert "did you mean Japanese" in err and "unknown language 'xx'" in err
    # a cell the prompt file lacks (a culture with no German prompts, say) is refused as
    # the bank is planned, before any image is made (a KeyError hours in, before)
    from refine.harness.tasks.sos import prompts as grid

    lacking = {k: v for k, v in person_prompts().items() if k != ("Nigerian", "de")}
    monkeypatch.setattr(grid, "person_prompts", lambda: lacking)
    code, _, err = run(capsys, "sos", "bank", "--cultures", "Japanese,Nigerian",
                       "--languages", "en,de", "--out", tmp_path / "b3")  # fmt: skip
    assert code == 2 and "no person prompts for Nigerian x de: leave" in err, err
    assert not (tmp_path / "b3").exists()
    code, _, err = run(capsys, "sos", "report", tmp_path)
    assert code == 2 and "not an SoS bank" in err


@pytest.mark.slow
def test_caption_classifiers_beside_sos(capsys, models, tmp_path):
    """SoS Sec. 4.2's caption classifiers: for each image, the CLIPScore (2.5 x max(cos, 0))
    of "A photo of a {c} person" with the prompt's culture and with its language's; the
    higher is the label, compared with SoS's sign. CLIPScore on the bank's tiny CLIP (its
    kept embeddings), mCLIP on a tiny AltCLIP loaded from its files (the images embedded
    anew); every label and agreement recomputed here from the models' own embeddings."""
    from PIL import Image

    from metrics.baselines import clipscore
    from tests.fakes.tiny_models import build_tiny_altclip, build_tiny_hf_clip
    from tests.integration.test_caire_kb import run

    generator, _, _ = models
    captions = [f"A photo of a {c} person" for c in (*CULTURES, "US-american", "French")]
    clip = lean_toward(build_tiny_hf_clip(tmp_path / "clip", seed=3), captions)
    alt = lean_toward(build_tiny_altclip(tmp_path / "alt", seed=4), captions)
    embedder = create("image_embedder", f"hfclip:{clip}", shared=False, device="cpu")
    out = tmp_path / "bank"
    build_bank(out, "person", CULTURES, LANGUAGES, generator, embedder, prompts_per_cell=2)
    result = analyse(out, ("clipscore", "mclip"), {"mclip": f"hfclip:{alt}"})
    got = result["caption_classifiers"]
    assert got["surface_cultures"]["en"]["identity"] == "US-american"
    e, cultures, languages, images = Bank(out).data()
    sos = {
        img: v for p in result["pairs"] for img, v in zip(p["images"], p["image_sos"], strict=True)
    }
    reference = [("semantic" if sos[i] > 0 else "surface") for i in images]
    assert got["sos_labels"] == reference
    surface = {"en": "US-american", "fr": "French", "ja": "Japanese"}
    alt_embedder = create("image_embedder", f"hfclip:{alt}", shared=False, device="cpu")
    for name, model, rows in (
        ("clipscore", embedder, e),
        ("mclip", alt_embedder, None),
    ):
        c = got["classifiers"][name]
        if rows is None:
            pictures = []
            for i in images:
                with Image.open(out / i) as im:
                    pictures.append(im.convert("RGB"))
            rows = model.encode_images(pictures).numpy()
        want = []
        for k, (culture, lang) in enumerate(zip(cultures, languages, strict=True)):
            if surface[lang] == culture:  # Japanese prompted in Japanese: no tendency
                want.append(None)
                continue
            t = model.encode_texts(
                [f"A photo of a {culture} person", f"A photo of a {surface[lang]} person"]
            ).numpy()
            sem, sur = (clipscore(float(rows[k] @ t[j])) for j in (0, 1))
            if abs(sem - sur) < 1e-5:  # fp32 embeddings of other batch sizes may tip a tie
                want.append(c["labels"][k])
                continue
            want.append("semantic" if sem > sur else "surface")
        assert c["labels"] == want, name
        both = [(w, r) for w, r in zip(want, reference, strict=True) if w]
        assert c["n"] == len(both) == len(images) - 2  # the two Japanese images in ja
        assert c["accuracy"] == pytest.approx(sum(w == r for w, r in both) / len(both))
        called = [r for w, r in both if w == "surface"]
        if called:
            assert c["precision_surface"] == pytest.approx(called.count("surface") / len(called))
        fr = [
            (w, r) for w, r, la in zip(want, reference, languages, strict=True) if w and la == "fr"
        ]
        assert c["by_language"]["fr"]["n"] == len(fr) == 6
    assert got["classifiers"]["mclip"]["model"] == f"hfclip:{alt}"
    # on the command line, with the page's table; a SigLIP is no CLIP, a bad name is refused
    code, stdout, err = run(
        capsys,
        "sos",
        "report",
        out,
        "--classifiers",
        "all",
        "--caption-model",
        f"mclip=hfclip:{alt}",
    )
    assert code == 0, err
    acc = got["classifiers"]["clipscore"]["accuracy"]
    assert f"clipscore (hfclip:{clip}) agrees with SoS on {acc:.1%} of 16 images" in stdout
    page = (out / "report.html").read_text()
    assert 'data-classifier="mclip" data-language="all"' in page
    code, _, err = run(capsys, "sos", "report", out, "--classifiers", "clip")
    assert code == 2 and "no caption classifier 'clip'" in err
    code, _, err = run(
        capsys,
        "sos",
        "report",
        out,
        "--classifiers",
        "mclip",
        "--caption-model",
        f"mclip=siglip:{tmp_path}",
    )
    assert code == 2 and "is not a CLIP" in err


def lean_toward(folder, texts):
    """A tiny CLIP whose images all lean toward the mean of ``texts``' embeddings (its
    vision tower's last layer norm biased that way and its spread quartered), so that the
    captions' cosines are positive and CLIPScore's clamp leaves them apart, as a trained
    CLIP's are for pictures of people; saved in place."""
    import torch
    from transformers import AutoModel

    embedder = create("image_embedder", f"hfclip:{folder}", shared=False, device="cpu")
    d = embedder.encode_texts(texts).mean(0)
    model = AutoModel.from_pretrained(folder)
    w = model.visual_projection.weight.detach()
    norm = model.vision_model.post_layernorm
    with torch.no_grad():
        norm.bias.copy_(torch.linalg.pinv(w) @ (d / d.norm() * 0.5 * w.norm()))
        norm.weight.mul_(0.25)
    model.save_pretrained(folder)
    return folder


SOS_RECIPE = """
name = "sos-small"
title = "SoS labels against people's"
paper = "SoS"
source = "Table 2"
task = "sos"
[select]
cultures = ["Japanese", "Nigerian", "Mexican"]
languages = ["en", "fr", "ja"]
prompts_per_cell = 2
seed = 42
[table]
kind = "labels"
caption = "SoS labels"
label = "tab:sos-small"
protocol = "sos"
question = "culture"
metrics = [{ metric = "sos", header = "SoS score" }, { metric = "clipscore", header = "CLIPScore" }]
[[table.paper]]
row = "SoS score"
metric = "sos"
values = { accuracy = 0.740 }
"""


@pytest.mark.slow
def test_the_sos_recipe_against_peoples_labels(models, tmp_path):
    """refine bench --recipe (an sos task) on a tiny SD and a tiny CLIP: a bank per
    generator, the centroids pooled, and the table of SoS's and CLIPScore's labels against
    people's majority pick (the sos protocol), every figure by hand; without ratings, the
    classifiers against SoS's own labels."""
    from metrics.sos import label_agreement, sos_label
    from refine.profiles import load_profile
    from tests.e2e.test_cli_run import cli
    from tests.fakes.tiny_models import build_tiny_hf_clip

    _, _, sd = models
    captions = [f"A photo of a {c} person" for c in (*CULTURES, "US-american", "French")]
    clip = lean_toward(build_tiny_hf_clip(tmp_path / "clip", seed=3), captions)
    profile = tmp_path / "tiny.toml"
    text = load_profile("gemini").path.read_text()
    text = text.replace(
        'generator = "gemini:gemini-3.1-flash-lite-image"', f'generator = "diffusers:{sd}"'
    )
    text = text.replace(
        'image_embedder = "clip:ViT-B-32/laion2b_s34b_b79k"', f'image_embedder = "hfclip:{clip}"'
    )
    text += '\n[options.generator]\ndevice = "cpu"\nsteps = 2\nwidth = 32\nheight = 32\n'
    profile.write_text(text)
    recipe = tmp_path / "sos.toml"
    recipe.write_text(SOS_RECIPE)
    out = tmp_path / "out"
    args = ["bench", "--recipe", str(recipe), "--profile", str(profile), "--out", str(out),
            "--generator", f"diffusers:{sd}"]  # fmt: skip
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert "missing: people's labels" in done.stdout
    (bank,) = (out / "banks").iterdir()
    from refine.harness.results import Results

    record = Results.read(out, "sos")  # the banks' analysis, a cell per bank
    assert [c["bank"] for c in record.cells] == [str(bank)]
    assert record.summary["pairs"] and (out / "sos.html").is_file()
    result = analyse([bank], ("clipscore",))
    # people: two raters a picture; the semantic culture for Japanese and Mexican images,
    # the language's for Nigerian ones, a tie (no majority) for those in French
    surface = {"en": "US-american", "fr": "French", "ja": "Japanese"}
    rows, human = [], {}
    for p in result["pairs"]:
        for img in p["images"]:
            path = str((bank / img).resolve())
            pick = surface[p["language"]] if p["culture"] == "Nigerian" else p["culture"]
            picks = (
                [pick, "Mexican" if pick != "Mexican" else "Japanese"]
                if p["language"] == "fr"
                else [pick, pick]
            )
            for rater, choice in zip(("a", "b"), picks, strict=True):
                rows.append({"image": path, "rater": rater, "protocol": "sos",
                             "answers": {"culture": choice}, "country": p["culture"],
                             "language": p["language"]})  # fmt: skip
            label = None
            if p["language"] != "fr":
                label = (
                    "semantic"
                    if pick == p["culture"]
                    else "surface"
                    if pick == surface[p["language"]]
                    else None
                )
            human[path] = label
    ratings = tmp_path / "r.jsonl"
    ratings.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = cli(*args, "--ratings", str(ratings))
    assert again.returncode == 0, again.stderr
    table = {
        (r["row"], r["column"]): r for r in csv.DictReader((out / "table-sos-small.csv").open())
    }
    order = [
        (p["language"], str((bank / i).resolve()), v)
        for p in result["pairs"]
        for i, v in zip(p["images"], p["image_sos"], strict=True)
    ]
    sos_labels = [sos_label(v) for _, _, v in order]
    people = [human[path] for _, path, _ in order]
    cap = result["caption_classifiers"]
    by_image = dict(zip(cap["images"], cap["classifiers"]["clipscore"]["labels"], strict=True))
    clip_labels = [by_image[i] for p in result["pairs"] for i in p["images"]]
    for name, labels in (("SoS score", sos_labels), ("CLIPScore", clip_labels)):
        for rows_kept, suffix in (
            (range(len(order)), ""),
            ([k for k, o in enumerate(order) if o[0] != "en"], " \\ en"),
        ):
            want = label_agreement([labels[k] for k in rows_kept], [people[k] for k in rows_kept])
            got = table[(name + suffix, "Acc")]
            assert int(got["n"]) == want["n"]
            assert (float(got["value"]) if got["value"] else None) == want["accuracy"]
            p_sur = table[(name + suffix, "P_sur")]["value"]
            assert (float(p_sur) if p_sur else None) == want["precision_surface"]
    assert float(table[("SoS score", "Acc")]["paper"]) == 0.740
    assert (out / "sos.html").is_file()
