"""The catalog's ``differs`` entries (the docs' metrics page is made from them) are true of
the code: every function, option, prompt file and checkpoint an entry names exists, and
the claims about formulas are checked against the code that computes them."""

from __future__ import annotations

import importlib
import re
from importlib.resources import files

import numpy as np
import pytest
import torch

from metrics.catalog import CATALOG, CUBE

ENTRIES = {m.name: m for m in (*CATALOG.values(), *CUBE)}


class _Fixed:
    """A text embedder of fixed unit vectors: similarities exact in float32."""

    id = "fixed"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def encode(self, phrases):
        return torch.tensor([self.vectors[p] for p in phrases], dtype=torch.float32)


def _names(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def test_every_function_prompt_file_and_option_an_entry_names_exists():
    checked = 0
    for name, m in ENTRIES.items():
        for said in _names(m.differs):
            if re.fullmatch(r"(metrics|refine)(\.[a-z_0-9]+)+", said):
                module, _, attr = said.rpartition(".")
                assert hasattr(importlib.import_module(module), attr), (name, said)
                checked += 1
        for path in re.findall(r"assets/prompts/[\w.]+", m.differs):
            assert (files("refine") / path).is_file(), (name, path)
            checked += 1
        if m.checkpoint:
            from refine.evaluate.baseline_models import CHECKPOINTS

            # the repository (and file) the loader fetches, as the docs name it
            assert m.checkpoint.split(" (")[0].startswith(CHECKPOINTS[name].repo), name
            checked += 1
    assert checked >= 9  # 2 functions, 2 prompt files, 5 checkpoints


def test_align_and_hal_at_a_similarity_exactly_tau():
    """ALIGN counts a reference aligned above tau, HAL a prediction hallucinated at or
    below it (the paper's and this toolkit's; AHEaD's code: >= and <)."""
    from metrics.ahead import score_images

    assert "`> tau`" in CATALOG["align"].differs and "`<= tau`" in CATALOG["hal"].differs
    half = [0.5, 0.5, 0.5, 0.5]  # cosine with [1, 0, 0, 0]: exactly 0.5
    emb = _Fixed({"ref": [1.0, 0, 0, 0], "pred": half})
    refs = {"objects": ["ref"]}
    (got,) = score_images(refs, [{"objects": ["pred"]}], emb, tau=0.5)
    assert got.align == 0.0 and got.hal == 1.0
    (got,) = score_images(refs, [{"objects": ["pred"]}], _Fixed(emb.vectors), tau=0.4999)
    assert got.align == 1.0 and got.hal == 0.0


def test_ddiv_is_the_mean_of_each_dimensions_normalised_entropy():
    from metrics.ahead import descriptor_diversity, normalised_entropy, score_images

    assert "`metrics.ahead.descriptor_diversity`" in CATALOG["ddiv"].differs
    vec = {
        "a": [1.0, 0, 0, 0], "b": [0, 1.0, 0, 0], "c": [0, 0, 1.0, 0], "d": [0, 0, 0, 1.0],
    }  # fmt: skip
    refs = {"objects": ["a", "b", "c"], "attire": ["d"]}
    shown = [{"objects": ["a"], "attire": ["d"]}, {"objects": ["a", "b"], "attire": ["d"]}]
    singles = score_images(refs, shown, _Fixed(vec), tau=0.5)
    per = descriptor_diversity(
        {"objects": ["a", "b", "c"], "attire": ["d"], "setting": [], "interaction": [],
         "spatial": []},
        singles,
    )  # fmt: skip
    assert per["objects"] == pytest.approx(normalised_entropy([2, 1, 0]))
    assert per["attire"] == 0.0  # one reference: no entropy
    literal = normalised_entropy([2, 1, 0, 2])  # Eq. 6 read literally: one over all of D_ref
    assert np.mean(list(per.values())) != pytest.approx(literal)  # the difference it says


def test_exag_takes_each_images_largest_excess_never_below_the_authors_code():
    from metrics.ahead import exaggeration

    assert "takes the largest per image" in CATALOG["exag"].differs
    scores = [[0.3, 0.1], [0.0, 0.2]]
    got = exaggeration(scores, [0.0, 0.0])
    assert got.per_image == pytest.approx([0.3, 0.2]) and got.value == pytest.approx(0.25)
    theirs = np.clip(np.asarray(scores), 0, None).mean(axis=0).mean()  # per candidate first
    assert theirs <= got.value


def test_faith_without_exag_is_the_mean_of_align_and_one_minus_hal():
    from metrics.ahead import faith
    from refine.records import VARIANTS

    assert {"exag:ita", "exag:mllm", "faith:no-exag"} <= set(VARIANTS)
    value, variant = faith(0.6, 0.2, None)
    assert value == pytest.approx(0.7) and variant == "faith:no-exag"


def test_sos_centroids_are_pooled_over_the_generators_by_default():
    import inspect

    from refine.cli import sos_cmd
    from refine.evaluate import sos

    assert "Centroids are pooled over the banks" in CATALOG["sos"].differs
    default = [
        p.default
        for f in vars(sos).values()
        if inspect.isfunction(f) and f.__module__ == sos.__name__
        for n, p in inspect.signature(f).parameters.items()
        if n == "centroids"
    ]
    assert default == ["pooled"]
    assert "per-generator" in inspect.getsource(sos_cmd)


def test_caires_debiased_log_likelihood_is_app_b1s():
    from metrics.caire import debiased_nll

    assert "refine caire score --loglik" in CATALOG["caire"].differs
    # L' = L - lambda x max(base, floor)
    assert debiased_nll(5.0, 2.0, 0.5, 1.0) == pytest.approx(5.0 - 0.5 * 2.0)
    assert debiased_nll(5.0, 0.2, 0.5, 1.0) == pytest.approx(5.0 - 0.5 * 1.0)


def test_clipscore_is_hessels_scale_and_clipscore100_forty_times_it():
    from metrics.baselines import clipscore

    assert clipscore(0.3) == pytest.approx(0.75) and clipscore(-0.2) == 0.0
    assert "x 40" in CATALOG["clipscore100"].differs
    # torchmetrics' 100 x max(cos, 0) is 40 x this toolkit's CLIPScore, for every cosine
    for cos in (-0.4, 0.0, 0.12, 0.3, 0.97):
        assert 100 * max(cos, 0.0) == pytest.approx(40 * clipscore(cos))


def test_vqascores_question_is_the_one_the_entry_quotes():
    from metrics.vqascore import VQA_QUESTION, YES_CASINGS, vqa_question, yes_mass

    assert f"'{VQA_QUESTION}'" in CATALOG["vqascore"].differs
    # t2v_metrics' template: the text in double quotes; its answer "Yes" alone
    assert (
        vqa_question("a tea glass")
        == 'Does this figure show "a tea glass"? Please answer yes or no.'
    )
    assert YES_CASINGS == ("Yes",)
    got = yes_mass({" Yes": np.log(0.5), "yes": np.log(0.2), "No": np.log(0.3)})
    assert got == pytest.approx(0.5)


def test_caire_probe_gives_a_tie_the_lower_rating():
    from metrics.baselines import caire_probe

    assert "A tie goes to the lower rating" in CATALOG["caire_probe"].differs
    assert caire_probe([0.1, 0.3, 0.3, 0.2, 0.0]) == 2
