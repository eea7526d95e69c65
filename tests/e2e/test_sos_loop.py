"""Prompt languages and SoS in the loop (fake Gemini world, tiny SigLIP, a 2 x 2 bank)."""

from __future__ import annotations

import numpy as np
import pytest

from refine.backends import create
from refine.events import StageStarted
from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from tests.fakes.gemini_world import BLUE, GREEN, RED, build_activity_bank
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"


@pytest.fixture
def bank_dir(world, backends, options, siglip_path, tmp_path):
    """Iran and Turkey, prompted in English and French: the world draws French prompts blue,
    Turkey green and Iran red."""
    build_activity_bank(world, Refiner("gemini", backends, options).backends, tmp_path / "bank")
    world.translations.clear()
    return tmp_path / "bank"


@pytest.mark.slow
def test_every_round_in_every_language_with_sos(
    world, backends, options, siglip_path, bank_dir, tmp_path
):
    events = []
    refiner = Refiner("gemini", backends, options, on_event=events.append)
    run = begin(
        refiner,
        ACT,
        COUNTRY,
        out=tmp_path / "runs",
        rounds=1,
        candidates=2,
        target=1.0,
        max_drift=2.0,
        prompt_languages=["fr"],
        sos_bank=str(bank_dir),
    )
    store = RunStore(tmp_path / "runs" / run.id)
    r0, r1 = run.rounds
    # round 0 was rendered in French by the language model, and generated from that prompt
    assert r0.languages["fr"].prompt == f"[French] {r0.text}"
    # the bank asked for the same translation, so the answer came from the cache
    assert world.translations == []

    def colour(name):
        im = store.load_image(name)
        return im.getpixel((im.width // 2, im.height // 2))

    assert colour(r0.best.image) == RED and colour(r0.languages["fr"].image) == BLUE
    # round 1 applied the same instruction to the French image: the fix held in English only
    assert colour(r1.best.image) == GREEN and colour(r1.languages["fr"].image) == BLUE
    assert r1.languages["fr"].parent_image == r0.languages["fr"].image
    # SoS by hand from the bank's centroids and the same embedder
    embedder = create("image_embedder", f"siglip:{siglip_path}", shared=False, device="cpu")
    from metrics.sos import SosBank

    centroids = SosBank.load(bank_dir / "centroids.npz")

    def sos(name, lang):
        e = embedder.encode_images([store.load_image(name)]).numpy()[0]
        sem = centroids.semantic[centroids.cultures.index("Iran")]
        surf = centroids.surface[centroids.languages.index(lang)]
        return float(sem @ e / np.linalg.norm(sem) - surf @ e / np.linalg.norm(surf))

    assert r0.sos == pytest.approx(sos(r0.best.image, "en"), abs=1e-5)
    assert r0.languages["fr"].sos == pytest.approx(sos(r0.languages["fr"].image, "fr"), abs=1e-5)
    assert r1.sos == pytest.approx(sos(r1.best.image, "en"), abs=1e-5)
    # the blue French image sits on its language's look: surface leads more than in English
    assert r0.languages["fr"].sos < r0.sos
    assert StageStarted(round=1, stage="languages", n=1) in events
    saved = store.load()
    assert saved.rounds[1].languages == r1.languages and saved.rounds[0].sos == r0.sos
    # the HTML report shows each round in French with its SoS and the translated prompt
    import re

    from refine.present.report import write_report

    html = write_report(store.dir).read_text(encoding="utf-8")
    found = re.findall(r'<figure class="language" data-language="fr" data-sos="([-0-9.]+)">', html)
    assert [float(x) for x in found] == pytest.approx(
        [r0.languages["fr"].sos, r1.languages["fr"].sos], abs=1e-6
    )
    assert f"[French] {r0.text}" in html and f"English SoS {r0.sos:+.3f}" in html
    # rolled back to round 0, the French image comes along and round 1 edits it again
    branch = refiner.branch(store.dir, 0, rounds=1)
    assert branch.status == "finished" and len(branch.rounds) == 2
    assert (tmp_path / "runs" / branch.id / r0.languages["fr"].image).is_file()
    assert branch.rounds[1].languages["fr"].parent_image == r0.languages["fr"].image


def test_bad_language_settings_fail_before_any_call(world, backends, options, bank_dir, tmp_path):
    refiner = Refiner("gemini", backends, options)
    calls = len(world.log)
    with pytest.raises(ValueError, match="unknown language 'xx'"):
        begin(refiner, ACT, COUNTRY, out=tmp_path, prompt_languages=["xx"])
    with pytest.raises(ValueError, match="'en' is the run's own prompt language"):
        begin(refiner, ACT, COUNTRY, out=tmp_path, prompt_languages=["en"])
    with pytest.raises(ValueError, match=r"no images prompted in ja \(it has en, fr\)"):
        begin(refiner, ACT, COUNTRY, out=tmp_path, prompt_languages=["ja"], sos_bank=str(bank_dir))
    with pytest.raises(ValueError, match="has no culture 'India'"):
        begin(refiner, ACT, "India", out=tmp_path, sos_bank=str(bank_dir))
    assert len(world.log) == calls


def test_refine_run_with_languages(capsys, world, siglip_path, bank_dir, tmp_path):
    from tests.e2e.test_cli_run import run_args
    from tests.integration.test_caire_kb import run as cli

    base = run_args(tmp_path / "runs", 1, siglip_path)
    code, out, err = cli(capsys, *base, "--prompt-languages", "fr", "--sos-bank", bank_dir)
    assert code == 0, err
    line = [x for x in out.splitlines() if x.startswith("languages round 0: ")][0]
    assert "en SoS -" in line and "\u00b7 fr round_00_fr.png SoS -" in line
    assert "round 1: languages" in err
    code, _, err = cli(capsys, *base, "--prompt-languages", "xx")
    assert code == 2 and "unknown language 'xx'" in err and "Traceback" not in err
    code, _, err = cli(capsys, *base, "--sos-bank", tmp_path)
    assert code == 2 and "--sos-bank: " in err and "not an SoS bank" in err


def test_batch_lines_name_languages_and_a_bank(tmp_path, bank_dir):
    from refine.harness.tasks.batch.specs import BatchSpecError, read_specs

    specs = tmp_path / "specs.csv"
    specs.write_text(
        f'activity,country,prompt_languages,sos_bank\n{ACT},{COUNTRY},"fr, ja",{bank_dir.name}\n'
    )
    (entry,) = read_specs(specs)
    assert entry.spec.prompt_languages == ["fr", "ja"]
    assert entry.spec.sos_bank == str(bank_dir.resolve())
    specs.write_text(f"activity,country,sos_bank\n{ACT},{COUNTRY},nowhere\n")
    with pytest.raises(BatchSpecError, match="line 2: sos_bank: .*not an SoS bank"):
        read_specs(specs)


def test_language_scores_observe_and_score_each_language(world, backends, options, tmp_path):
    world.generate_for = {"[French]": BLUE}
    refiner = Refiner("gemini", backends, options)
    run = begin(
        refiner, ACT, COUNTRY, out=tmp_path, rounds=0, prompt_languages=["fr"], language_scores=True
    )
    store = RunStore(tmp_path / run.id)
    fr = run.rounds[0].languages["fr"]
    assert fr.sos is None  # no bank: no SoS, but scores
    # the same observation and scoring as any image gets
    _, scores, feedback, _ = refiner.assessor().assess(
        store.load_image(fr.image), run.references, run.spec.tau
    )
    assert fr.scores == scores
    assert fr.hallucinated == [h.phrase for h in feedback.hallucinated]
    assert "robots" in fr.hallucinated and fr.scores.faith < run.rounds[0].best.scores.faith
    from refine.present.report import write_report

    html = write_report(store.dir).read_text(encoding="utf-8")
    figure = html[html.index('<figure class="language" data-language="fr"') :]
    figure = figure[: figure.index("</figure>")]
    assert f"FAITH {fr.scores.faith:.3f}, ALIGN {fr.scores.align:.3f}" in figure
    assert '<span class="hallucinated">hallucinated: ' in figure and "robots" in figure
    with pytest.raises(ValueError, match="language scores need prompt languages"):
        begin(refiner, ACT, COUNTRY, out=tmp_path, rounds=0, language_scores=True)
