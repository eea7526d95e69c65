"""A recipe table never compares a value with a paper's figure made another way: EXAG's
(and FAITH's) variant and CUBE's quality source are named in the cell, prompts of
different ways are split into a row each (never blanked, never averaged together); the
observer's and judge's model ids, the judge's reading and tau are checked against the
paper's as the recipe states them; the paper's figure and a difference go beside a cell
made the paper's way alone, and elsewhere the figure is set apart, headed by what
differs."""

from __future__ import annotations

import pytest

from refine.harness.recipe_tables import metrics_table
from refine.harness.recipes import load_recipe
from refine.present.report.recipe import csv_rows, latex_table, write_recipe_table

GEMINI = "gemini:gemini-nano-banana-2.1"  # run in place of the paper's Gemini 2.5 Flash Image
SDXL = "diffusers:stabilityai/stable-diffusion-xl-base-1.0"


def _prompt(
    country: str, variant: str, exag: float, faith: float, made: dict | None = None
) -> dict:
    """A bench cell of two images; ``made``: its scorer, tau and judge's reading (default:
    ahead-table1's, the paper's way)."""
    made = made or _paper_way("ahead-table1")
    read = {"by": made["judge"], "read": made["read"]}
    images = [
        {"align": 0.5, "hal": 0.2, "exag": exag + d, "faith": faith + d, "exag_variant": variant,
         "judged": {"exag": read, "faith": read}}
        for d in (-0.01, 0.01)
    ]  # fmt: skip
    scorer = {"observer": made["observer"], "judge": made["judge"]}
    return {"generator": GEMINI, "country": country, "activity": "x", "images": images,
            "tau": made["tau"], "scorer": scorer}  # fmt: skip


def _paper_way(name: str) -> dict:
    return load_recipe(name).table.paper_way("faith")


def test_mixed_exag_variants_are_split_and_only_the_papers_way_sits_beside_its_figure(tmp_path):
    recipe = load_recipe("ahead-table1")
    cells = [
        _prompt("USA", "exag:ita", 0.2, 0.6),
        _prompt("USA", "exag:ita", 0.4, 0.7),
        _prompt("USA", "exag:mllm", 0.8, 0.3),
    ]
    table = metrics_table(recipe, cells, [GEMINI])
    labels = [r.label for r in table.rows]
    assert labels == [f"{GEMINI} · GN", f"{GEMINI} · GN [exag:ita]", f"{GEMINI} · GN [exag:mllm]"]
    whole, ita, mllm = labels
    # the row of all prompts: ALIGN over the 3, EXAG and FAITH said to be split
    assert table.cells[(whole, "align")].value == pytest.approx(0.5)
    assert table.cells[(whole, "align")].paper == 0.4  # GN's ALIGN in the paper
    for m in ("exag", "faith"):
        c = table.cells[(whole, m)]
        assert c.value is None and c.paper is None
        assert c.note == "EXAG variants differ (exag:ita; exag:mllm): a row per EXAG variant below"
    # each way's row: its own prompts' mean; the paper's figure beside exag:ita's alone
    assert table.cells[(ita, "exag")].value == pytest.approx(0.3)
    assert table.cells[(ita, "exag")].n == 2 and table.cells[(ita, "exag")].way == "exag:ita"
    assert table.cells[(ita, "exag")].paper == 0.1 and table.cells[(ita, "faith")].paper == 0.61
    assert not table.cells[(ita, "exag")].paper_differs
    assert table.cells[(mllm, "exag")].value == pytest.approx(0.8)
    assert table.cells[(mllm, "faith")].value == pytest.approx(0.3)
    # exag:mllm's row: the paper's figure set apart, headed by what differs
    differs = "paper: EXAG variant exag:ita; here: EXAG variant exag:mllm"
    for m, figure in (("exag", 0.1), ("faith", 0.61)):
        assert table.cells[(mllm, m)].paper == figure
        assert table.cells[(mllm, m)].paper_differs == differs
    assert table.cells[(ita, "align")].value is None  # the row above holds it
    assert any(differs in n for n in table.notes)
    rows = {(r["row"], r["column"]): r for r in csv_rows(table)}
    assert rows[(mllm, "EXAG ↓")]["difference"] is None and rows[(mllm, "EXAG ↓")]["way"] == (
        "exag:mllm"
    )
    assert rows[(mllm, "EXAG ↓")]["paper"] == 0.1
    assert rows[(mllm, "EXAG ↓")]["paper_differs"] == differs
    assert rows[(ita, "EXAG ↓")]["difference"] == pytest.approx(0.3 - 0.1)
    assert rows[(ita, "EXAG ↓")]["paper_differs"] == ""
    assert "exag:ita" in latex_table(table).note and "dagger" in latex_table(table).note
    # the split table compiles where papers use it
    import shutil
    import subprocess

    written = write_recipe_table(tmp_path, table)
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (.ci/run installs texlive-latex-base)")
    tex = next(p for p in written if p.name == "table-ahead-table1.tex")
    made = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout[-2000:]
    assert (tmp_path / "table-ahead-table1.pdf").stat().st_size > 1000


def _concept(quality_by: str, cd: float) -> dict:
    kernels = {"continent (1, 0, 0)": cd, "country (0, 1, 0)": cd + 0.1}
    return {"generator": SDXL, "concept": "Cuisine", "quality_by": quality_by,
            "cd_kernels": kernels}  # fmt: skip


def test_cube_cd_scored_with_the_judges_quality_is_not_set_beside_tab5():
    recipe = load_recipe("cube-table5")
    judged = [_concept("judge (gemini:x): HPS v2 is not downloaded", 0.3)]
    table = metrics_table(recipe, judged, [SDXL])
    (row,) = table.rows
    c = table.cells[(row.label, "cd:continent (1, 0, 0)")]
    assert c.value == pytest.approx(0.3) and c.way == "judge" and c.paper == 0.04
    assert c.paper_differs == "paper: quality source hpsv2; here: quality source judge"
    assert any(c.paper_differs in n for n in table.notes)
    # with HPS v2, as the paper: beside its figure (SDXL, Cuisine: 0.04)
    table = metrics_table(recipe, [_concept("hpsv2 (local)", 0.05)], [SDXL])
    c = table.cells[(table.rows[0].label, "cd:continent (1, 0, 0)")]
    assert c.way == "hpsv2" and c.paper == 0.04 and not c.paper_differs and not table.notes
    # both in one bench: a row per source
    table = metrics_table(recipe, [*judged, _concept("hpsv2 (local)", 0.05)], [SDXL])
    assert [r.label.rsplit(" ", 1)[-1] for r in table.rows[1:]] == ["[hpsv2]", "[judge]"]


def test_an_agreement_row_per_variant_finds_a_group_that_names_its_one_variant_plainly():
    """FAITH by exag:ita in the Global North (photos) and exag:mllm in the South: the rows
    of all images are `faith [exag:ita]` and `faith [exag:mllm]`, while each region, scored
    one way, names its row plainly; each region's figure lands in its variant's row, and
    the paper's figure beside exag:ita's alone."""
    import types

    from refine.harness.recipe_tables import RecipeTable, _agreement_rows, _paper

    recipe = load_recipe("ahead-table2")
    (faith,) = [m for m in recipe.table.metrics if m.metric == "faith"]

    def row(r, variant):
        return {"gt_faith": {"spearman": r, "spearman_p": 0.01, "n": 20, "variant": variant}}

    whole = types.SimpleNamespace(
        table={"faith [exag:ita]": row(0.5, "exag:ita"), "faith [exag:mllm]": row(0.2, "exag:mllm")}
    )
    parts = {
        "Global South": {"faith": row(0.2, "exag:mllm")},
        "Global North": {"faith": row(0.5, "exag:ita")},
    }
    rows, cells = [], {}
    _agreement_rows(recipe, [faith], whole, parts, rows, cells)
    ita, mllm = (r.label for r in rows)
    assert cells[(ita, "Global North")].value == 0.5 and cells[(ita, "Global South")].value is None
    assert (
        cells[(mllm, "Global South")].value == 0.2 and cells[(mllm, "Global North")].value is None
    )
    assert (
        cells[(mllm, "Global South")].p == 0.01 and cells[(mllm, "Global South")].way == "exag:mllm"
    )
    table = RecipeTable(recipe, "agreement", rows, [(g, g, "", "max") for g in parts], cells)
    for c in cells.values():  # made by the paper's models (the variant aside)
        c.made = {**_paper_way("ahead-table2"), "answers": None}
    _paper(table)
    assert cells[(ita, "Global North")].paper is not None
    assert not cells[(ita, "Global North")].paper_differs
    assert cells[(mllm, "Global South")].paper == 0.46
    assert "here: EXAG variant exag:mllm" in cells[(mllm, "Global South")].paper_differs


# what the gemini profile scores with: one model observes and judges, the judge sampled
SAMPLED = {"observer": "gemini:gemini-3.8-flash", "judge": "gemini:gemini-3.8-flash",
           "read": "sampled k=3", "tau": 0.52}  # fmt: skip


@pytest.mark.parametrize(
    "made, differs",
    [
        (SAMPLED, "paper: InternVL3-14B-hf, clip-flant5-xxl, by log-probabilities; here: "
         "gemini-3.8-flash, gemini-3.8-flash, sampled (3.0 answers a reading)"),
        ({"observer": "hf:Qwen/Qwen2.5-VL-7B-Instruct"}, "paper: InternVL3-14B-hf; here: "
         "Qwen2.5-VL-7B-Instruct"),
        ({"tau": 0.67}, "paper: tau 0.52; here: tau 0.67"),
    ],
)  # fmt: skip
def test_a_value_made_with_other_models_a_sampled_judge_or_another_tau_is_not_compared(
    made, differs
):
    """AHEaD Tab. 1 from a bench scored another way: each of its figures is kept, apart,
    headed by what differs, with no difference; the paper's way gives the figures and the
    differences (EXAG's judge and reading are FAITH's, ALIGN's have none)."""
    recipe = load_recipe("ahead-table1")
    paper = {**_paper_way("ahead-table1"), "read": "logprobs"}
    other = {**paper, **made}
    table = metrics_table(recipe, [_prompt("USA", "exag:ita", 0.2, 0.6, other)], [GEMINI])
    (row,) = [r.label for r in table.rows]
    rows = {r["column"]: r for r in csv_rows(table) if r["row"] == row}
    apart = ["ALIGN ↑", "FAITH ↑"] + (["EXAG ↓"] if "judge" in made else [])
    for column, figure in (("ALIGN ↑", 0.4), ("EXAG ↓", 0.1), ("FAITH ↑", 0.61)):
        assert rows[column]["paper"] == figure
        assert (rows[column]["difference"] is None) == (column in apart), column
        assert bool(rows[column]["paper_differs"]) == (column in apart), column
    assert rows["FAITH ↑"]["paper_differs"] == differs
    if "judge" not in made:  # EXAG needs no observer nor tau: made the paper's way
        assert rows["EXAG ↓"]["difference"] == pytest.approx(0.2 - 0.1)
    assert table.apart_figures() > 0 and any(differs in n for n in table.notes)
    # the paper's way: every figure beside its value, with its difference
    same = metrics_table(recipe, [_prompt("USA", "exag:ita", 0.2, 0.6, paper)], [GEMINI])
    rows = {r["column"]: r for r in csv_rows(same) if r["row"] == row}
    assert rows["FAITH ↑"]["difference"] == pytest.approx(0.6 - 0.61)
    assert rows["ALIGN ↑"]["difference"] == pytest.approx(0.5 - 0.4)
    assert same.apart_figures() == 0 and not same.notes[1:]  # only the stand-in's note


def test_what_made_a_value_follows_its_judges_and_variant():
    """ways.made: a rescore's kept EXAG is its source's judge's (a bench made before judges
    were recorded); VIEScore is its semantic score's and the quality reading's judges
    (several where a rescore read one again); an EXAG variant's row reads its own images
    alone; one model served by two backends is one model."""
    from refine.harness.ways import differs, made

    old = {"rescored": {"judge": ["gemini:a", "gemini:b"], "kept": ["exag", "quality"]},
           "scorer": {"observer": "gemini:a", "judge": "gemini:b"}, "tau": 0.5,
           "images": [{"exag": 0.1, "faith": 0.6, "exag_variant": "exag:ita"}]}  # fmt: skip
    got = made([old], "faith", "exag:ita")
    assert got["judge"] == "gemini:a" and got["read"] is None and got["observer"] == "gemini:a"
    vie = {"scorer": {"judge": "gemini:b"}, "images": [{"vie_overall": 0.4, "judged": {
        "vie_sc": {"by": "gemini:b", "read": "sampled k=4"},
        "quality": {"by": "gemini:a", "read": "logprobs"}}}]}  # fmt: skip
    got = made([vie], "vie_overall")
    assert got["judge"] == ["gemini:a", "gemini:b"] and got["read"] == ["logprobs", "sampled"]
    assert got["answers"] == 4
    assert "here: several: a or b" in differs(got, {"judge": "gemini:a"})
    by_j = {"exag": {"by": "j", "read": "logprobs"}}
    mixed = {"scorer": {"observer": "o", "judge": "j"}, "tau": 0.5,
             "images": [{"exag": 0.2, "exag_variant": "exag:mllm", "judged": by_j}]}  # fmt: skip
    assert made([old, mixed], "exag", "exag:ita")["judge"] == "gemini:a"  # mllm's cell apart
    assert made([old, mixed], "exag", "exag:mllm")["judge"] == "j"
    served = {"observer": "openai:OpenGVLab/InternVL3-14B", "tau": 0.52}
    assert differs(served, {"observer": "hf:OpenGVLab/InternVL3-14B-hf", "tau": 0.52}) == ""
    assert differs(served, {"observer": "hf:Qwen/Qwen2.5-VL-7B-Instruct"}) != ""
