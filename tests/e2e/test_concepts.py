"""refine bench --concepts: CUBE-style cultural diversity of two stand-in generators (one
draws four cultures by seed, one always the same), every figure recomputed by hand from
the stored geo-tags, qualities and embeddings; a killed run goes on; bad files are named."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from refine.harness.cells import CellStore
from refine.harness.tasks.concepts.plan import ConceptPlan, load_concepts
from refine.harness.tasks.concepts.task import CONCEPT_CELLS, run_concepts
from refine.present.report.concepts import write_concepts_page
from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_world import BLUE, GEO, GREEN, GREY, RED, YES_LOGPROB

GENS = ["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"]
CYCLE = [RED, GREEN, BLUE, GREY]


def vendi_of(kernel):
    lam = np.linalg.eigvalsh(np.asarray(kernel, dtype=float) / len(kernel))
    lam = lam[lam > 1e-12]
    lam = lam / lam.sum()
    return math.exp(-(lam * np.log(lam)).sum())


@pytest.fixture
def concepts_file(tmp_path):
    path = tmp_path / "concepts.jsonl"
    lines = [
        {"prompt": "Image of traditional food", "concept": "cuisine", "artifacts": "jollof; kebab"},
        {"concept": "cuisine", "country": "Iran", "artifacts": ["sabzi polo", "tahdig"]},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


@pytest.fixture
def run(world, siglip_path, options, tmp_path, concepts_file):
    world.generate_by_seed = {"gemini-3.1-flash-image": CYCLE}
    world.generate_by_model = {"gemini-3-pro-image": GREEN}
    plan = ConceptPlan(
        generators=GENS,
        concepts=load_concepts(concepts_file),
        images_per_prompt=10,
        seed=0,
        backends={"image_embedder": f"siglip:{siglip_path}"},
    )
    out = tmp_path / "cube"
    return plan, out, run_concepts(plan, out, backend_options=options).summary


@pytest.mark.slow
def test_every_figure_by_hand(run, world):
    plan, out, summary = run
    cells = CellStore(out, CONCEPT_CELLS).records()
    assert len(cells) == 4
    for cell in cells:
        colours = [CYCLE[s % 4] if "flash" in cell["generator"] else GREEN for s in range(10)]
        assert [tuple(im["tag"]) for im in cell["images"]] == [GEO[c] for c in colours]
        quality = [math.exp(YES_LOGPROB[c]) for c in colours]
        assert [im["concept_quality"] for im in cell["images"]] == pytest.approx(quality, abs=1e-6)
        tags = [GEO[c] for c in colours]
        if cell["country"] is None:  # global: continents alike (weights 1, 0, 0)
            k = np.array([[float(a[0] == b[0]) for b in tags] for a in tags])
        else:  # within a country: the whole tag
            k = np.array([[float(a == b) for b in tags] for a in tags])
        ours = (vendi_of(k[:8, :8]) / 8 + vendi_of(k[8:, 8:]) / 2) / 2
        authors = (vendi_of(k[:8, :8]) / 8 + vendi_of(k[8:, 8:]) / 8) / 2
        assert cell["cube_diversity"] == pytest.approx(ours, abs=1e-6)
        assert cell["cube_diversity_authors"] == pytest.approx(authors, abs=1e-6)
        assert cell["tag_vendi"] == pytest.approx(vendi_of(k), abs=1e-6)
        assert cell["tag_qvendi"] == pytest.approx(np.mean(quality) * vendi_of(k), abs=1e-6)
        e = np.asarray(cell["embeddings"], dtype=float)
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        assert cell["vendi"] == pytest.approx(vendi_of(e @ e.T), abs=1e-4)
        assert cell["concept_qvendi"] == pytest.approx(np.mean(quality) * cell["vendi"], abs=1e-9)
    # the diverse generator is more diverse, on every figure
    flash, pro = (summary["generators"][g] for g in GENS)
    assert flash["cube_diversity"] > pro["cube_diversity"]
    assert pro["tag_vendi"] == pytest.approx(1.0)
    # the examples reached the geo-tagger
    assert any("sabzi polo, tahdig" in t for t in world.geotags)
    assert any('"Image of cuisine from Iran"' in t for t in world.geotags)
    # the page shows the same values
    html = write_concepts_page(out).read_text()
    for g in GENS:
        found = re.search(
            rf'data-generator="{re.escape(g)}" data-figure="cube_diversity" data-value="([0-9.]+)"',
            html,
        )
        assert float(found.group(1)) == pytest.approx(summary["generators"][g]["cube_diversity"])
    assert html.count("<figure>") == 40
    rows = (out / "concept_rows.csv").read_text().splitlines()
    assert len(rows) == 41 and "Europe,France,Croissant" in rows[3]


@pytest.mark.slow
def test_a_killed_run_goes_on(run, world, options):
    plan, out, summary = run
    path = out / "concepts.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:30])
    before = world.log.count("generate")
    again = run_concepts(plan, out, backend_options=options)
    assert world.log.count("generate") - before == 10
    assert again.summary["generators"] == summary["generators"]


@pytest.mark.slow
def test_concept_files_and_the_command_line(world, siglip_path, tmp_path, concepts_file):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"prompt": "Image of a dish"}\n{"concept": "dish"}\nnot json\n{"prompt": 3}\n'
        '{"prompt": "x", "colour": "red"}\n'
    )
    with pytest.raises(ValueError) as err:
        load_concepts(bad)
    lines = str(err.value).splitlines()
    assert len(lines) == 4
    assert "bad.jsonl:2: give a prompt (or a concept and a country)" in lines[0]
    assert "bad.jsonl:3: not JSON" in lines[1] and "prompt must be text" in lines[2]
    assert "unknown field 'colour'" in lines[3]
    # a CUBE-CSpace export: one artifact a row, grouped per (concept, country)
    cspace = tmp_path / "cspace.csv"
    cspace.write_text(
        "concept,country,artifact\ncuisine,Nigeria,Jollof rice\ncuisine,Nigeria,Suya\n"
        "cuisine,Japan,Sushi\n"
    )
    got = load_concepts(cspace)
    assert [(c.prompt, c.artifacts) for c in got] == [
        ("Image of cuisine from Nigeria", ("Jollof rice", "Suya")),
        ("Image of cuisine from Japan", ("Sushi",)),
    ]
    # the profile's generator draws
    world.generate_by_seed = {"gemini-3.1-flash-lite-image": CYCLE}
    args = ["concepts", "--concepts", str(concepts_file), "--images-per-prompt", "4"]
    args += ["--out", str(tmp_path / "c"), "--backend", f"image_embedder=siglip:{siglip_path}"]
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert "gemini:gemini-3.1-flash-lite-image" in done.stdout and "concepts.html" in done.stdout
    doc = json.loads((tmp_path / "c" / "results.json").read_text())
    assert doc["task"] == "concepts" and doc["csv"] == "concept_rows.csv"
    assert len(doc["summary"]["concepts"]) == 2 and doc["config"]["weights"] == [1.0, 0.0, 0.0]
    old = cli("bench", *args[1:])  # the form before: the same command, said
    assert old.returncode == 0 and "0 of 2 cell(s) to do" in old.stderr, old.stderr
    assert old.stderr.startswith("refine bench --concepts is now refine concepts")
    no = cli("bench", "--concepts", str(concepts_file), "--countries", "Iran")
    assert no.returncode == 2 and "No such option: --countries" in no.stderr
    no = cli("concepts", "--concepts", str(concepts_file), "--cube-weights", "1,1,0", "--out",
             str(tmp_path / "d"))  # fmt: skip
    assert no.returncode == 2 and "--cube-weights: weights must sum to 1" in no.stderr
    no = cli("concepts", "--concepts", str(bad), "--out", str(tmp_path / "d"))
    assert no.returncode == 2 and "--concepts: " in no.stderr and "bad.jsonl:2" in no.stderr
    no = cli("concepts", "--concepts", str(concepts_file), "--images-per-prompt", "1", "--out",
             str(tmp_path / "d"))  # fmt: skip
    assert no.returncode == 2 and "--images-per-prompt '1'" in no.stderr


@pytest.mark.slow
def test_rescored_under_other_kernel_weights_with_no_model_call(run, world, tmp_path):
    """refine rescore --cube-weights: the stored tags, qualities and embeddings under
    another kernel, one folder each; the stand-in hears nothing."""
    from refine.harness.tasks.concepts.summary import concept_stats

    plan, out, _ = run
    asked = len(world.log)
    new = tmp_path / "re"
    done = cli("rescore", str(out), "--out", str(new), "--cube-weights", "0,1,0",
               "--cube-weights", "0.5,0.5,0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(world.log) == asked
    src = {
        tuple(c["key"] for _ in [0]) + (c["generator"],): c
        for c in CellStore(out, CONCEPT_CELLS).records()
    }
    for name, weights in (
        ("weights-0-1-0", (0.0, 1.0, 0.0)),
        ("weights-0.5-0.5-0", (0.5, 0.5, 0.0)),
    ):
        cells = CellStore(new / name, CONCEPT_CELLS).records()
        assert len(cells) == 4
        for c in cells:
            was = src[(c["key"], c["generator"])]
            tags = [tuple(im["tag"]) for im in was["images"]]
            quality = [im["concept_quality"] for im in was["images"]]
            want = concept_stats(tags, was["embeddings"], quality, was["country"] is not None,
                                 weights)  # fmt: skip
            assert c["weights"] == list(weights)
            for f in ("cube_diversity", "cube_cd", "tag_vendi", "tag_qvendi"):
                assert c[f] == pytest.approx(want[f], abs=1e-12), f
            assert c["rescored"]["model_calls"] == 0
        doc = json.loads((new / name / "results.json").read_text())
        assert doc["task"] == "concepts" and doc["config"]["weights"] == list(weights)
    bad = cli("rescore", str(out), "--out", str(new / "x"))
    assert bad.returncode == 2 and "give --cube-weights" in bad.stderr


@pytest.mark.slow
def test_a_folder_written_before_the_cube_figures_had_names_of_their_own_still_opens(
    run, world, tmp_path
):
    """Cells that named CUBE's quality-weighted Vendi ``qvendi`` and its quality
    ``quality`` (the bench's figures' names) are read under ``concept_qvendi`` and
    ``concept_quality``, and rescored from with no model call."""
    import shutil

    _, out, _ = run
    old = tmp_path / "old"
    shutil.copytree(out, old)
    lines = (old / "concepts.jsonl").read_text().replace('"concept_qvendi"', '"qvendi"')
    (old / "concepts.jsonl").write_text(lines.replace('"concept_quality"', '"quality"'))
    assert '"concept_quality"' not in (old / "concepts.jsonl").read_text()
    was = {c["generator"] + c["key"]: c for c in CellStore(out, CONCEPT_CELLS).records()}
    for cell in CellStore(old, CONCEPT_CELLS).cells():
        new = was[cell.inputs["generator"] + cell.inputs["key"]]
        assert cell.outputs["concept_qvendi"] == new["concept_qvendi"]
        assert "qvendi" not in cell.outputs and "quality" not in cell.outputs
        assert [im["concept_quality"] for im in cell.images] == [
            im["concept_quality"] for im in new["images"]
        ]
    asked = len(world.log)
    done = cli("rescore", str(old), "--out", str(tmp_path / "re"), "--cube-weights", "0,1,0")
    assert done.returncode == 0, done.stderr
    assert len(world.log) == asked
    again = CellStore(tmp_path / "re", CONCEPT_CELLS).records()
    assert len(again) == 4 and all("concept_quality" in im for c in again for im in c["images"])


@pytest.mark.slow
def test_hps_v2_quality_and_the_within_culture_case(
    world, siglip_path, options, tmp_path, concepts_file
):
    """Quality from HPS v2 (a tiny open_clip in its file layout, --baseline-model), as
    CUBE rates it: each image's letterboxed cosine with its prompt, at 0 or more; CUBE
    App. K within a culture: the artifacts' VS-bar(0, 0, 1) over the images the judge
    finds faithful; without HPS v2 at hand the judge rates quality and the run says why."""
    import open_clip
    import torch
    from PIL import Image

    from refine.evaluate.baseline_models import letterbox
    from tests.fakes.tiny_models import build_tiny_open_clip

    build_tiny_open_clip(tmp_path / "oc")
    torch.manual_seed(5)
    model = open_clip.create_model("tiny-clip-test").eval()
    ckpt = tmp_path / "HPS_v2_compressed.pt"
    torch.save({"state_dict": model.state_dict()}, ckpt)
    world.generate_by_seed = {"gemini-3.1-flash-image": CYCLE}
    world.generate_by_model = {"gemini-3-pro-image": GREEN}
    plan = ConceptPlan(
        generators=GENS,
        concepts=load_concepts(concepts_file),
        images_per_prompt=10,
        seed=0,
        backends={"image_embedder": f"siglip:{siglip_path}"},
        quality="auto",
        baseline_models=(f"hpsv2=clip:tiny-clip-test/{ckpt}",),
    )
    out = tmp_path / "hps"
    results = run_concepts(plan, out, backend_options=options)
    assert results.config["quality"].startswith("hpsv2 (tiny-clip-test/")
    _, _, preprocess = open_clip.create_model_and_transforms("tiny-clip-test")
    tokenizer = open_clip.get_tokenizer("tiny-clip-test")
    size = preprocess.transforms[0].size
    size = size if isinstance(size, int) else size[0]
    for cell in CellStore(out, CONCEPT_CELLS).records():
        assert cell["quality_by"] == results.config["quality"]
        ims = [Image.open(out / im["file"]).convert("RGB") for im in cell["images"]]
        with torch.inference_mode():
            img = model.encode_image(torch.stack([preprocess(letterbox(im, size)) for im in ims]))
            txt = model.encode_text(tokenizer([cell["prompt"]]))
        img = torch.nn.functional.normalize(img, dim=-1)
        txt = torch.nn.functional.normalize(txt, dim=-1)
        want = [max(0.0, v) for v in (img @ txt.T)[:, 0].tolist()]
        assert [im["concept_quality"] for im in cell["images"]] == pytest.approx(want, abs=1e-5)
        colours = [CYCLE[s % 4] if "flash" in cell["generator"] else GREEN for s in range(10)]
        if cell["country"] is None:
            assert cell["cube_within"] is None and "faithful" not in cell["images"][0]
            continue
        p = [math.exp(YES_LOGPROB[c]) for c in colours]
        assert [im["faithful_p"] for im in cell["images"]] == pytest.approx(p, abs=1e-6)
        # per batch of 8 seeds, the faithful images' artifact Vendi over their number,
        # the batches weighted by the images each kept
        parts = []
        for start in (0, 8):
            kept = [
                GEO[c]
                for c, x in zip(colours[start : start + 8], p[start : start + 8], strict=True)
                if x >= 0.5
            ]
            if kept:
                k = np.array([[float(a[2] == b[2]) for b in kept] for a in kept])
                parts.append((vendi_of(k) / len(kept), len(kept)))
        if not parts:
            assert cell["cube_within"] is None
            continue
        want_within = sum(v * n for v, n in parts) / sum(n for _, n in parts)
        assert cell["cube_within"] == pytest.approx(want_within, abs=1e-9)
    # without HPS v2 at hand: the judge, and why
    judged = run_concepts(
        ConceptPlan(**{**plan.__dict__, "baseline_models": ()}),
        tmp_path / "j",
        backend_options=options,
    )
    assert (
        judged.config["quality"].startswith("judge (")
        and "not downloaded" in judged.config["quality_why"]
    )
