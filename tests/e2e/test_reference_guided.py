"""Reference-guided edits in the stand-in world: the edit request carries the image and
the k real photos closest to what the edit adds, by this test's own SigLIP computation;
the round records them with their attribution; an editor that takes none, or a run
without photos, is refused in one line."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from refine import settings
from refine.evaluate.photo_sets import add_given
from refine.loop.reference_photos import added, check
from tests.e2e.test_loop import ACT, COUNTRY, refiner
from tests.fakes.gemini_world import RED


def photos(folder, n=5):
    """``n`` distinct real-photo stand-ins (noise of different seeds and tints)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(n):
        rng = np.random.default_rng(k)
        pixels = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
        pixels[..., k % 3] = 200  # a tint each
        path = folder / f"photo-{k}.png"
        Image.fromarray(pixels).save(path)
        out.append(path)
    return out


def own_ranking(siglip_path, files, texts):
    """The photos by mean cosine to the texts, computed here with transformers directly."""
    from transformers import AutoModel, AutoProcessor

    model = AutoModel.from_pretrained(siglip_path).eval()
    proc = AutoProcessor.from_pretrained(siglip_path)
    ims = [Image.open(f).convert("RGB") for f in files]
    with torch.no_grad():
        a = model.get_image_features(
            pixel_values=proc(images=ims, return_tensors="pt")["pixel_values"]
        )
        t = proc(text=texts, padding="max_length", return_tensors="pt")
        b = model.get_text_features(input_ids=t["input_ids"])
    a = a if hasattr(a, "dim") else a.pooler_output
    b = b if hasattr(b, "dim") else b.pooler_output
    a = torch.nn.functional.normalize(a.float(), dim=-1)
    b = torch.nn.functional.normalize(b.float(), dim=-1)
    mean = (a @ b.T).mean(dim=1).tolist()
    return sorted(zip([str(f) for f in files], mean, strict=True), key=lambda x: -x[1])


@pytest.mark.slow
def test_a_reference_guided_edit_carries_the_closest_photos(
    world, backends, options, siglip_path, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "data"))
    made = add_given(ACT, COUNTRY, photos(tmp_path / "given"))
    spec, refs = settings.load({
        "activity": ACT, "country": COUNTRY, "rounds": 1, "candidates": 1, "target": 0.99,
        "max_drift": 2.0, "writer": "template", "reference_guided": True,
        "reference_count": 2,
    })  # fmt: skip
    # the set as the references' photos (the process's reference source keeps the data
    # folder it was first made with, before this test's)
    refs = refs.model_copy(update={"reference_images": list(made.files)})
    run = refiner(backends, options).start(spec, refs, tmp_path / "runs")
    r1 = run.rounds[1]
    texts = added(r1.changes)
    assert texts  # the round adds something: its photos are ranked against it
    ranked = own_ranking(siglip_path, made.files, texts)
    mine = dict(ranked)
    # the record: the two closest, their cosines, where they came from. fp32 matrix
    # products differ across CPUs and thread counts at about 1e-7: each cosine is compared
    # at 1e-5, and a photo counts as among the two closest when it is within that of the
    # second's (a near tie may fall either way on another machine)
    assert len(r1.reference_photos) == 2
    for p in r1.reference_photos:
        assert p.similarity == pytest.approx(mine[p.file], abs=1e-5)
        assert mine[p.file] >= ranked[1][1] - 1e-5
        assert p.origin == "given" and p.attribution["sha256"]
    assert r1.reference_photos[0].similarity >= r1.reference_photos[1].similarity
    want = [(p.file, p.similarity) for p in r1.reference_photos]
    # the request: the image edited first, then those photos, in that order
    (sent,) = world.edit_images
    assert len(sent) == 3
    first = Image.open(io.BytesIO(sent[0])).convert("RGB")
    assert first.getpixel((first.width // 2, first.height // 2)) == RED
    # each photo as JPEG (quality 90: lossy, so each is told by its nearest file)
    files = [np.asarray(Image.open(f).convert("RGB"), dtype=float) for f, _ in want]
    for k, got in enumerate(sent[1:]):
        decoded = Image.open(io.BytesIO(got))
        assert decoded.format == "JPEG"
        a = np.asarray(decoded.convert("RGB"), dtype=float)
        apart = [float(np.abs(a - b).mean()) if a.shape == b.shape else 1e9 for b in files]
        assert min(range(len(files)), key=apart.__getitem__) == k, apart
    assert "real photos of the scene, for reference only" in world.edited[0]
    from refine.present.report.run import render_run

    page = render_run(tmp_path / "runs" / run.id)
    assert "2 real photo(s) sent with the request" in page
    assert f"{want[0][1]:.3f} to what it adds" in page
    # a run not reference-guided sends the image alone
    world.edit_images.clear()
    plain = spec.model_copy(update={"reference_guided": False})
    done = refiner(backends, options).start(plain, refs, tmp_path / "runs")
    assert [len(x) for x in world.edit_images] == [1] and done.rounds[1].reference_photos == []


class _Backends:
    def __init__(self, **takes):
        self.names = {r: f"x:{r}" for r in takes}
        self.made = {r: type("B", (), {"reference_images": n})() for r, n in takes.items()}

    def get(self, role):
        return self.made[role]


def test_what_cannot_take_photos_is_refused_in_one_line():
    refs = settings.load({"activity": ACT, "country": COUNTRY})[1]
    refs = refs.model_copy(update={"reference_images": ["a.png"]})

    def spec(**kw):
        return settings.load({"activity": ACT, "country": COUNTRY, "reference_guided": True,
                              **kw})[0]  # fmt: skip

    with pytest.raises(ValueError, match=r"^--reference-guided: the editor x:editor takes no "
                       r"reference images; editors that do: gemini:"):  # fmt: skip
        check(spec(), _Backends(editor=0, generator=3), refs)
    check(spec(), _Backends(editor=3, generator=0), refs)  # edits only: the generator's none
    with pytest.raises(ValueError, match="the generator x:generator takes no reference"):
        check(spec(strategy="auto"), _Backends(editor=3, generator=0), refs)
    check(spec(strategy="regenerate"), _Backends(editor=0, generator=3), refs)
    with pytest.raises(ValueError, match=f"no real photos of {ACT} in {COUNTRY}"):
        check(spec(), _Backends(editor=3), refs.model_copy(update={"reference_images": []}))
    # not asked for: nothing is checked
    check(spec(reference_guided=False), _Backends(editor=0), refs)
