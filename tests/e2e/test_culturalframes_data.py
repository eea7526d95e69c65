"""`refine data fetch culturalframes` against a stand-in Hub serving a dataset of
CulturalFrames' layout (parquet shards of id, prompt, image, country and model, and the
annotations JSON): the images, prompts and ratings land in the data directory, a cut
download is resumed, a second fetch downloads nothing, a file that is not the Hub's record
is refused, and `refine agree` on the ratings gives Krippendorff's alpha and the pooled
human-human Spearman as a hand computation from the annotation file does."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import pytest

from refine.cli import main
from refine.evaluate.culturalframes_data import ANNOTATIONS, REPO, REVISION
from tests.fakes.gemini_world import AMBER, BLUE, GREEN, GREY, OLIVE, RED
from tests.fakes.hub_server import FakeHub

# (id, country as published, parquet model, annotation model_name, colour)
IMAGES = [
    ("a1_flux", "India", "Flux.1-Dev", "flux", RED),
    ("a1_SD35", "India", "SD-3.5-Large", "SD35", GREEN),
    ("a2_flux", "India", "Flux.1-Dev", "flux", BLUE),
    ("b1_flux", "South_Africa", "Flux.1-Dev", "flux", GREY),
    ("b1_SD35", "South_Africa", "SD-3.5-Large", "SD35", AMBER),
    ("b2_SD35", "South_Africa", "SD-3.5-Large", "SD35", OLIVE),
    ("c1_flux", "Japan", "Flux.1-Dev", "flux", RED),
    ("c2_flux", "Japan", "Flux.1-Dev", "flux", GREEN),  # no annotation
]
# per annotated image: (alignment, quality, overall) for each of its raters
SCORES = {
    "a1_flux": [(1.0, 1.0, 5.0), (1.0, 0.5, 4.0), (0.5, 0.5, 4.0)],
    "a1_SD35": [(0.5, 0.0, 2.0), (0.0, 0.5, 1.0), (0.5, 0.0, 2.0)],
    "a2_flux": [(1.0, 1.0, 4.0), (0.5, 1.0, 5.0)],
    "b1_flux": [(0.0, 0.0, 1.0), (0.5, 0.5, 2.0), (0.0, 0.0, 2.0), (0.0, 0.5, 1.0)],
    "b1_SD35": [(1.0, 0.5, 3.0), (0.5, 0.5, 3.0), (1.0, 1.0, 4.0)],
    "b2_SD35": [(0.5, 0.5, 3.0), (1.0, 0.5, 2.0), (0.5, 0.0, 3.0)],
    "c1_flux": [(0.5, 1.0, 3.0), (0.5, 0.5, 4.0), (1.0, 1.0, 4.0)],
}


@pytest.fixture(autouse=True)
def online(monkeypatch):
    """The stand-in Hub is asked (the suite's processes are offline to the real one), and
    its annotations file is the one the fetch knows as published (tests/fakes' own)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    PUBLISHED.clear()
    PUBLISHED.append(monkeypatch)


PUBLISHED: list = []  # the test's monkeypatch, for dataset() to pin its annotations


def png(colour, kind="PNG") -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (24, 16), colour).save(out, format=kind)
    return out.getvalue()


def annotation(score, k):
    align, quality, overall = score
    return {
        "stereotype": {"is_stereotypical": k == 2, "comments": ""},
        "demographic_data": {"age": "30", "sex": "Female", "nationality": "India"},
        "prompt_alignment": {"score": align, "missing_explicit": align < 1,
                             "missing_implicit": False, "selected_words": "", "comments":
                             "no chai" if align < 1 else ""},
        "image_quality": {"score": quality, "artifacts": False, "unnatural": False},
        "overall_score": overall,
        "feedback": "fine",
    }  # fmt: skip


def dataset(root):
    """The stand-in repository: two shards and the annotations (one image without any, one
    annotated image not in the shards, one annotation of a score outside the scale)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("id", pa.string()), ("prompt", pa.string()), ("image", image),
                        ("country", pa.string()), ("model", pa.string())])  # fmt: skip
    (root / "data").mkdir(parents=True)
    for n, part in enumerate((IMAGES[:4], IMAGES[4:])):
        rows = {
            "id": [i for i, *_ in part],
            "prompt": [f"a family greeting elders in {c}" for _, c, *_ in part],
            "image": [{"bytes": png(rgb, "JPEG" if i == "a2_flux" else "PNG"), "path": None}
                      for i, _, _, _, rgb in part],
            "country": [c for _, c, *_ in part],
            "model": [m for _, _, m, _, _ in part],
        }  # fmt: skip
        pq.write_table(pa.table(rows, schema=schema), root / f"data/train-0000{n}-of-00002.parquet")
    doc = []
    for i, country, _, name, _ in IMAGES:
        if i in SCORES:
            given = [annotation(s, k) for k, s in enumerate(SCORES[i])]
            doc.append({"id": i, "prompt": "p", "country": country, "category": "greetings",
                        "model_name": name, "human_annotations": given})  # fmt: skip
    # as published elsewhere: flags as 1/0, the marked words as one text
    doc[1]["human_annotations"][0]["prompt_alignment"] |= {
        "missing_explicit": 1,
        "missing_implicit": 0,
        "selected_words": "greeting, elders",
    }
    # an annotation of c2_flux that names another model than its image's: left out, named
    lone = [annotation((1.0, 1.0, 5.0), 0)]
    doc.append({"id": "c2_flux", "prompt": "p", "country": "Japan", "category": "family",
                "model_name": "SD35", "human_annotations": lone})  # fmt: skip
    doc.append({"id": "z9_flux", "prompt": "p", "country": "India", "category": "family",
                "model_name": "flux", "human_annotations": lone})  # fmt: skip
    doc[0]["human_annotations"].append({**annotation((1.0, 1.0, 5.0), 0), "overall_score": 7})
    (root / ANNOTATIONS).write_text(json.dumps(doc))
    (root / "README.md").write_text("---\nlicense: unknown\n---\n")
    from refine.evaluate import culturalframes_data

    sha = hashlib.sha256((root / ANNOTATIONS).read_bytes()).hexdigest()
    PUBLISHED[0].setattr(culturalframes_data, "ANNOTATIONS_SHA256", sha)
    return root


def fetch(hub, data, *more):
    with pytest.raises(SystemExit) as done:
        main(["data", "fetch", "culturalframes", "--from", hub.url, "--data-dir", str(data),
              "--json", *more])  # fmt: skip
    return done.value.code


@pytest.mark.slow
def test_the_images_prompts_and_ratings_land_and_agree_reads_them(tmp_path, capsys):
    from scipy.stats import spearmanr

    from metrics.stats import krippendorff_alpha

    root = dataset(tmp_path / "repo")
    data = tmp_path / "data"
    # the first shard's download is cut half-way: huggingface_hub resumes it
    with FakeHub(
        {}, datasets={REPO: (REVISION, root)}, cut={"data/train-00000-of-00002.parquet"}
    ) as hub:
        assert fetch(hub, data) in (0, None)
        doc = json.loads(capsys.readouterr().out)
        gets = [r for r in hub.requests if r.startswith("GET /datasets/")]
        assert len(gets) == 4  # two shards, the annotations, and the cut shard's rest
        assert fetch(hub, data) in (0, None)  # a second fetch downloads nothing
        assert [r for r in hub.requests if r.startswith("GET /datasets/")] == gets
        capsys.readouterr()
    folder = data / "culturalframes"
    assert doc["images"] == 8 and doc["images_without_ratings"] == 1
    assert doc["annotations_without_image"] == 1
    assert doc["ratings"] == sum(len(v) for v in SCORES.values())  # the 7 is left out
    assert len(doc["skipped"]) == 2 and "overall_score is 7" in " ".join(doc["skipped"])
    assert any("annotated as Japan / SD-3.5-Large, its image is Japan / Flux.1-Dev" in x
               for x in doc["skipped"])  # fmt: skip
    rated = [json.loads(x) for x in (folder / "ratings.jsonl").read_text().splitlines()]
    (first,) = [r for r in rated if r["rater"] == "a1_SD35#1"]
    assert first["answers"]["missing"] == ["explicit"]
    assert first["answers"]["missing_words"] == ["greeting", "elders"]
    prompts = [json.loads(x) for x in (folder / "prompts.jsonl").read_text().splitlines()]
    by_id = {p["id"]: p for p in prompts}
    assert by_id["b1_flux"]["country"] == "South Africa"
    assert by_id["a2_flux"]["image"] == "images/Flux.1-Dev/a2_flux.jpg"
    assert (folder / by_id["a1_SD35"]["image"]).read_bytes() == png(GREEN)
    source = json.loads((folder / "source.json").read_text())
    assert source["revision"] == REVISION and "no licence" in source["notice"]
    assert set(source["files"]) == {ANNOTATIONS, "data/train-00000-of-00002.parquet",
                                    "data/train-00001-of-00002.parquet"}  # fmt: skip

    out = tmp_path / "agree"
    with pytest.raises(SystemExit) as done:
        main(["agree", "--ratings", str(folder / "ratings.jsonl"), "--out", str(out),
              "--metrics", "none"])  # fmt: skip
    assert done.value.code == 0
    said = capsys.readouterr().out
    got = json.loads((out / "agree.json").read_text())
    # by hand, from the annotation file: alpha over images x ratings (interval level)
    for q, at in (("alignment", 0), ("quality", 1), ("overall", 2)):
        units = [[s[at] for s in scores] for scores in SCORES.values()]
        assert got["alpha"][q] == pytest.approx(krippendorff_alpha(units, "interval"), abs=1e-9)
        # each rating against the others' mean on its image, pooled over all ratings
        pairs = [(s[at], (sum(o[at] for o in v) - s[at]) / (len(v) - 1))
                 for v in SCORES.values() for s in v]  # fmt: skip
        want = spearmanr([p[0] for p in pairs], [p[1] for p in pairs]).statistic
        assert got["ceiling"][q]["spearman"] == pytest.approx(want, abs=1e-9)
        assert got["ceiling"][q]["way"] == "pooled over ratings"
    assert "pooled over 21 ratings (no rater rated two images)" in said
    assert "7 images, 21 raters: " in said and "and 9 more (agree.json names them)" in said


def test_a_file_that_is_not_the_hubs_record_is_refused_and_removed(tmp_path, capsys):
    """A shard that differs from the Hub's record is refused and removed (the next fetch
    downloads it again); a mirror that serves other annotations, its own listing agreeing
    with them, is refused by the published sha256."""
    root = dataset(tmp_path / "repo")
    data = tmp_path / "data"
    with FakeHub({}, datasets={REPO: (REVISION, root)}) as hub:
        assert fetch(hub, data) in (0, None)
        capsys.readouterr()
        shard = data / "culturalframes/hub/data/train-00001-of-00002.parquet"
        shard.write_bytes(shard.read_bytes()[:-10] + b"0123456789")
        with pytest.raises(SystemExit) as done:
            main(["data", "fetch", "culturalframes", "--from", hub.url, "--data-dir",
                  str(data)])  # fmt: skip
        assert done.value.code == 2
        err = capsys.readouterr().err
        assert "train-00001-of-00002.parquet" in err and "not the file the Hub records" in err
        assert not shard.exists()
        # a hostile mirror: other annotations, listed as its own
        doc = json.loads((root / ANNOTATIONS).read_text())
        doc[0]["human_annotations"][0]["overall_score"] = 1.0
        (root / ANNOTATIONS).write_text(json.dumps(doc))
        (data / "culturalframes/hub" / ANNOTATIONS).unlink()
        with pytest.raises(SystemExit) as done:
            main(["data", "fetch", "culturalframes", "--from", hub.url, "--data-dir",
                  str(data)])  # fmt: skip
        assert done.value.code == 2
    err = capsys.readouterr().err
    assert ANNOTATIONS in err and "not the file the Hub records" in err
    assert not (data / "culturalframes/hub" / ANNOTATIONS).exists()


def test_an_unknown_country_and_an_unreachable_hub_get_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        main(["data", "fetch", "culturalframes", "--countries", "Atlantis", "--data-dir",
              str(tmp_path)])  # fmt: skip
    assert done.value.code == 2
    assert "no country 'Atlantis'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(["data", "fetch", "culturalframes", "--from", "http://127.0.0.1:9", "--data-dir",
              str(tmp_path)])  # fmt: skip
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "http://127.0.0.1:9 cannot be reached" in err and "--from URL" in err


def test_the_recipes_human_row_is_the_pooled_figure_with_its_note(tmp_path, capsys):
    """culturalframes-fig6's Human row on the fetched ratings: the pooled Spearman, the
    number of ratings behind it, the paper's 0.38 and 0.42 beside it, and a note saying
    how it was computed."""
    from refine.harness.recipe_tables import agreement_table
    from refine.harness.recipes import load_recipe
    from refine.human.groups import POOLED, ceiling
    from refine.human.ratings import load_ratings
    from refine.human.stored import stored_metrics

    root = dataset(tmp_path / "repo")
    with FakeHub({}, datasets={REPO: (REVISION, root)}) as hub:
        assert fetch(hub, tmp_path / "data") in (0, None)
    rated = load_ratings(tmp_path / "data/culturalframes/ratings.jsonl")
    table = agreement_table(load_recipe("culturalframes-fig6"), rated, stored_metrics([]))
    answers: dict = {}
    for r in rated:
        for q, v in r.answers.items():
            answers.setdefault(r.image, {}).setdefault(q, {})[r.rater] = v
    top = ceiling(answers)
    for q in ("alignment", "quality", "overall"):
        cell = table.cells[("Human", q)]
        assert cell.value == pytest.approx(top[q]["pooled"]["spearman"], abs=1e-12)
        assert cell.way == POOLED and cell.n == 21
    assert table.cells[("Human", "alignment")].paper == 0.38
    assert table.cells[("Human", "overall")].paper == 0.42
    assert any("pooled over all ratings" in n for n in table.notes)


@pytest.mark.slow
def test_the_fig6_recipe_scores_the_datasets_own_images_against_its_ratings(
    world, siglip_path, tmp_path, monkeypatch, capsys
):
    """culturalframes-fig6 on the fetched dataset: nothing generated; each image scored for
    its own prompt (the judge asked about that prompt, once an image and baseline); each
    cell the Spearman of the stored scores with the raters' mean answer; a run stopped and
    started again scores nothing twice; without the data, one line says to fetch it."""
    from scipy.stats import spearmanr

    from tests.e2e.test_cli_run import cli

    data = tmp_path / "data"
    monkeypatch.setenv("REFINE_DATA_DIR", str(data))
    out = tmp_path / "fig6"
    args = ["bench", "--recipe", "culturalframes-fig6", "--out", str(out), "--baselines",
            "vqascore,vie_sc,vie_overall",
            "--backend", f"image_embedder=siglip:{siglip_path}"]  # fmt: skip
    missing = cli(*args)
    assert missing.returncode == 2 and "refine data fetch culturalframes" in missing.stderr
    with FakeHub({}, datasets={REPO: (REVISION, dataset(tmp_path / "repo"))}) as hub:
        assert fetch(hub, data) in (0, None)
    capsys.readouterr()
    dry = cli(*args, "--dry-run", "--limit", "1")
    assert "3 images of 3 countries (India, Japan, South Africa)" in dry.stdout
    world.log.clear()
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert "generate" not in world.log  # nothing drawn
    # VQAScore's question about each image's own prompt, once an image
    assert sorted(q.strip() for q in world.questions) == sorted(
        f'Does this figure show "a family greeting elders in {c}"? Please answer yes or no.'
        for _, c, *_ in IMAGES
    )
    scores = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert len(scores) == 8 and not any(s["references"] for s in scores)
    table = {(r["row"], r["column"]): r
             for r in csv.DictReader((out / "table-culturalframes-fig6.csv").open())}  # fmt: skip
    by_image = {s["image"]: s["values"] for s in scores}
    ratings = [
        json.loads(x) for x in (data / "culturalframes/ratings.jsonl").read_text().splitlines()
    ]
    for q in ("alignment", "overall"):
        mean: dict = {}
        for r in ratings:
            mean.setdefault(r["image"], []).append(float(r["answers"][q]))
        rated = sorted(mean)
        for metric, header in (("vqascore", "VQAScore"), ("vie_overall", "VIEScore")):
            x = [by_image[i][metric] for i in rated]
            y = [sum(mean[i]) / len(mean[i]) for i in rated]
            assert len(set(x)) > 2  # the images' scores differ
            want = spearmanr(x, y).statistic
            assert float(table[(header, q)]["value"]) == pytest.approx(want, abs=1e-9)
    assert "0 of 8 images have references" in done.stdout
    calls = len(world.log)
    again = cli(*args)
    assert again.returncode == 0 and len(world.log) == calls  # all kept: no call
