"""CAIRE knowledge bases on a tiny random SigLIP: build from a folder, add from JSONL,
retrieval and re-ranking against hand-computed cosines, loading, repair, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image, ImageDraw

from refine.backends import create
from refine.cli import main
from refine.evaluate.caire.kb import KBError, KnowledgeBase, read_source
from refine.evaluate.caire.scorer import CaireScorer
from tests.fakes.tiny_models import build_tiny_siglip

# the module's SigLIP embedder and its knowledge bases (3 s to set up)
pytestmark = pytest.mark.slow

RED, BLUE, GREEN = (200, 30, 30), (40, 40, 200), (30, 160, 60)
TEA_TEXT = "Tea in Iran is served in small glasses called estekan. " * 20


def draw(bg, k: int, fg=(250, 220, 0)) -> Image.Image:
    im = Image.new("RGB", (64, 64), bg)
    ImageDraw.Draw(im).ellipse((8 + 4 * k, 8 + 3 * k, 40 + 4 * k, 40 + 3 * k), fill=fg)
    return im


def folder_source(root):
    """tea: three red pictures with a text; rice: three blue ones, name from the folder."""
    src = root / "src"
    for ident, colour in (("tea", RED), ("rice", BLUE)):
        (src / ident).mkdir(parents=True)
        for k in range(3):
            draw(colour, k).save(src / ident / f"{k}.png")
    (src / "tea" / "entity.json").write_text(json.dumps({"name": "tea", "gloss": "a drink"}))
    (src / "tea" / "text.txt").write_text(TEA_TEXT)
    return src


def jsonl_source(root, src):
    """carpet: three green pictures; tea gets one new picture; rice's first again (known)."""
    more = root / "more"
    more.mkdir()
    for k in range(3):
        draw(GREEN, k, fg=(0, 0, 0)).save(more / f"carpet{k}.png")
    draw(RED, 4).save(more / "tea4.png")
    rows = [
        {
            "id": "carpet",
            "name": "carpet",
            "text": "Hand-knotted carpets.",
            "images": [f"carpet{k}.png" for k in range(3)],
        },
        {"id": "tea", "name": "tea", "images": ["tea4.png"]},
        {"id": "rice", "name": "rice", "images": [str(src / "rice" / "0.png")]},
    ]
    path = more / "entities.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


@pytest.fixture(scope="module")
def embedder(siglip_path):
    return create("image_embedder", f"siglip:{siglip_path}", shared=False, device="cpu")


def test_build_info_and_incremental_add(capsys, tmp_path, siglip_path, embedder):
    src = folder_source(tmp_path)
    kb_dir = tmp_path / "kb"
    args = ("caire", "kb", "build", src, "--out", kb_dir, "--embedder", f"siglip:{siglip_path}")
    code, out, err = run(capsys, *args, "--device", "cpu", "--chunk", "1")
    assert code == 0, err
    assert "embedded 1/2 entities" in err and "embedded 2/2 entities" in err
    assert "2 entities added" in out and "6 images embedded" in out
    code, out, _ = run(capsys, "caire", "kb", "info", kb_dir, "--json")
    info = json.loads(out)
    assert (info["entities"], info["images"], info["with_text"]) == (2, 6, 1)
    assert info["embedder"] == f"siglip:{siglip_path}" and info["dimension"] == 32
    # adding: a new entity, a new picture of a known one, a picture already there
    more = jsonl_source(tmp_path, src)
    code, out, err = run(
        capsys,
        "caire",
        "kb",
        "build",
        more,
        "--out",
        kb_dir,
        "--embedder",
        f"siglip:{siglip_path}",
        "--device",
        "cpu",
        "--json",
    )
    assert code == 0, err
    added = json.loads(out)["added"]
    assert added == {"entities_added": 1, "entities_extended": 1, "images_added": 4, "skipped": 1}
    kb = KnowledgeBase.load(kb_dir)
    assert [e["name"] for e in kb.entities] == ["rice", "tea", "carpet"]
    assert [e["images"] for e in kb.entities] == [3, 4, 3]
    assert isinstance(kb.names, np.memmap)  # loading maps the arrays, it does not read them
    assert kb.text(1) == TEA_TEXT.strip() and kb.text(0) == ""
    cut = kb.text(1, 60)
    assert cut.endswith(" ...") and len(cut) <= 64 and TEA_TEXT.startswith(cut[:-4])
    # the same as embedding everything at once
    once = KnowledgeBase.open_or_create(tmp_path / "once", embedder.id)
    once.add(read_source(src) + read_source(more), embedder)

    def by_hash(k):
        vectors = k.index.reconstruct_n(0, k.index.ntotal)
        return {img["sha1"]: vectors[n] for n, img in enumerate(k.images)}

    a, b = by_hash(kb), by_hash(once)
    assert a.keys() == b.keys() and len(a) == 10
    for key in a:
        np.testing.assert_allclose(a[key], b[key], atol=1e-6)
    np.testing.assert_allclose(np.asarray(kb.names), np.asarray(once.names), atol=1e-6)
    # names are embedded with the embedder's text tower
    np.testing.assert_allclose(
        np.asarray(kb.names), embedder.encode_texts(["rice", "tea", "carpet"]).numpy(), atol=1e-5
    )


@pytest.fixture
def kb(tmp_path, embedder):
    src = folder_source(tmp_path)
    more = jsonl_source(tmp_path, src)
    built = KnowledgeBase.open_or_create(tmp_path / "kb", embedder.id)
    built.add(read_source(src) + read_source(more), embedder)
    return KnowledgeBase.load(tmp_path / "kb")


def test_retrieval_finds_the_matching_entity_and_reranks_by_name(kb, embedder):
    queries = [draw(RED, 6), draw(BLUE, 6), draw(GREEN, 6, fg=(0, 0, 0))]
    q = embedder.encode_images(queries).numpy()
    vectors = kb.index.reconstruct_n(0, kb.index.ntotal)
    hand = q @ vectors.T
    sims, rows = kb.search(q, 4)
    for n in range(3):
        assert rows[n].tolist() == np.argsort(-hand[n])[:4].tolist()
        np.testing.assert_allclose(sims[n], np.sort(hand[n])[::-1][:4], atol=1e-5)
    by_freq = CaireScorer(judge=None, kb=kb, embedder=embedder, top_k=4, ranking="frequency")
    linked = by_freq.link(queries)
    names = [kb.entities[hits[0].entity]["name"] for hits in linked]
    assert names == ["tea", "rice", "carpet"]  # the entity whose pictures match
    assert linked[0][0].hits == 4  # tea has four red pictures, all in the top 4
    # re-ranking by image-to-name similarity: the pooled entities in cosine order
    by_name = CaireScorer(judge=None, kb=kb, embedder=embedder, top_k=10, ranking="similarity")
    for query, hits in zip(q, by_name.link(queries), strict=True):
        cos = {e: float(np.asarray(kb.names[e]) @ query) for e in range(3)}
        assert [h.entity for h in hits] == sorted(cos, key=lambda e: -cos[e])
        assert [h.score for h in hits] == pytest.approx([cos[h.entity] for h in hits], abs=1e-5)


def test_another_embedder_is_refused(kb, tmp_path):
    other = create(
        "image_embedder", f"siglip:{build_tiny_siglip(tmp_path)}", shared=False, device="cpu"
    )
    with pytest.raises(KBError, match="was built with the image embedder 'siglip:") as err:
        CaireScorer(judge=None, kb=kb, embedder=other)
    assert other.id in str(err.value) and "build a new KB" in str(err.value)
    with pytest.raises(KBError, match="was built with"):
        KnowledgeBase.open_or_create(kb.path, other.id)


def test_a_save_cut_short_is_read_safely_and_repaired(kb, embedder, tmp_path):
    import faiss

    # the index got one more vector and entities.jsonl one more line, but not the manifest
    index = faiss.read_index(str(kb.path / "images.faiss"))
    index.add(np.ones((1, 32), dtype=np.float32) / np.sqrt(32))
    faiss.write_index(index, str(kb.path / "images.faiss"))
    with open(kb.path / "entities.jsonl", "a") as fh:
        fh.write(json.dumps({"id": "ghost", "name": "ghost"}) + "\n")
    loaded = KnowledgeBase.load(kb.path)
    assert len(loaded.entities) == 3 and len(loaded.images) == 10
    _, rows = loaded.search(np.ones((1, 32), dtype=np.float32) / np.sqrt(32), 11)
    assert rows.max() < 10  # the stray vector is never returned
    again = KnowledgeBase.open_or_create(kb.path, embedder.id)
    assert again.index.ntotal == 10
    draw(BLUE, 7).save(tmp_path / "rice7.png")
    (tmp_path / "one.jsonl").write_text(
        json.dumps({"id": "rice", "name": "rice", "images": ["rice7.png"]}) + "\n"
    )
    again.add(read_source(tmp_path / "one.jsonl"), embedder)
    final = KnowledgeBase.load(kb.path)
    assert final.index.ntotal == len(final.images) == 11
    assert [e["name"] for e in final.entities] == ["rice", "tea", "carpet"]


def test_bad_sources_are_reported_together_and_nothing_is_made(capsys, tmp_path, siglip_path):
    draw(RED, 0).save(tmp_path / "a.png")
    (tmp_path / "notes.txt").write_text("x")
    rows = [
        {"id": "a", "name": "A", "images": ["a.png"]},
        {"id": "a", "name": "again", "images": ["a.png"]},
        {"id": "b", "name": "B", "images": ["missing.png"]},
        {"id": "c", "images": ["a.png"]},
        {"id": "d", "name": "D", "images": ["notes.txt"]},
        {"id": "e", "name": "E", "images": []},
    ]
    src = tmp_path / "bad.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n")
    code, _, err = run(
        capsys,
        "caire",
        "kb",
        "build",
        src,
        "--out",
        tmp_path / "kb",
        "--embedder",
        f"siglip:{siglip_path}",
    )
    assert code == 2
    for part in (
        "6 problem(s)",
        "line 4: 'name' is missing",
        "line 6: entity 'e' has no images",
        "line 7: invalid JSON",
        "the id 'a' is used twice",
        "missing.png not found",
        "notes.txt is not an image file",
    ):
        assert part in err, err
    assert not (tmp_path / "kb").exists()
    code, _, err = run(capsys, "caire", "kb", "info", tmp_path)
    assert code == 2 and "not a knowledge base" in err and "kb build" in err
