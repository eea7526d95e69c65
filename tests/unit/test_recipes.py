"""Recipes as data: every bundled recipe loads and its paper rows name its own columns; a
broken recipe is refused naming the field; a metrics table's cells by hand on made-up
cells (groups, intervals, the paper's figures, EXAG variants kept apart, concepts under
CUBE's kernels); its LaTeX bolds the best within each model's block."""

from __future__ import annotations

import math
from importlib.resources import files

import pytest

from metrics.stats import mean_interval
from refine.harness.recipe_tables import metrics_table
from refine.harness.recipes import LABEL_COLUMNS, bundled, load_recipe, recipes_dir
from refine.present.report.recipe import csv_rows, latex_table


def test_every_bundled_recipe_loads_with_its_papers_figures():
    names = bundled()
    assert {"ahead-table1", "ahead-table2", "ahead-table5", "cube-table5", "sos-table2"} <= set(
        names
    )
    for name in names:
        r = load_recipe(name)
        assert r.name == name and r.table.paper, name
        keys = {m.metric for m in r.table.metrics}
        for p in r.table.paper:
            allowed = keys | {"GS", "GN", "All"} | set(r.table.correlations) | set(LABEL_COLUMNS)
            allowed |= set(r.table.questions) | set(r.table.group_order)
            assert set(p.values) <= allowed, (name, p.row)
    t1 = load_recipe("ahead-table1")
    assert t1.select.images_per_prompt == 10 and t1.select.seed == 42
    gemini = [p for p in t1.table.paper if p.row == "Gemini 2.5 Flash Image"]
    assert {p.group: p.values["faith"] for p in gemini} == {
        "Global North": 0.61,
        "Global South": 0.57,
    }
    assert load_recipe("ahead-table2").needs_ratings
    assert not t1.needs_ratings


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (('kind = "metrics"', 'kind = "tables"'), "table.kind"),
        (('metric = "hal"', 'metric = "align"'), "a metric is given twice"),
        (("values = { align = 0.31", "values = { alignment = 0.31"), "'alignment' is neither"),
        (('name = "ahead-table1"', 'name = "Ahead Table"'), "name: String should match"),
    ],
)
def test_a_broken_recipe_names_its_problem(tmp_path, change, says):
    text = (recipes_dir() / "ahead-table1.toml").read_text()
    assert change[0] in text
    path = tmp_path / "r.toml"
    path.write_text(text.replace(change[0], change[1], 1))
    with pytest.raises(ValueError) as err:
        load_recipe(path)
    assert says in str(err.value) and str(path) in str(err.value)


def _cell(generator, country, faith, align, variant="exag:mllm", ddiv=0.5):
    """A bench cell scored with AHEaD's models, tau and reading (the paper's way)."""
    paper = load_recipe("ahead-table1").table.paper_way("faith")
    read = {"by": paper["judge"], "read": paper["read"]}
    return {
        "generator": generator,
        "country": country,
        "ddiv": ddiv,
        "tau": paper["tau"],
        "scorer": {"observer": paper["observer"], "judge": paper["judge"]},
        "images": [
            {"faith": f, "align": a, "hal": 1 - a, "exag": 0.1, "exag_variant": variant,
             "judged": {"exag": read, "faith": read}}
            for f, a in zip(faith, align, strict=True)
        ],
    }  # fmt: skip


def test_a_metrics_table_by_hand():
    recipe = load_recipe("ahead-table1")
    # the model run in place of the paper's Gemini 2.5 Flash Image, which is shut down
    g1, g2 = "gemini:gemini-nano-banana-2.1", "diffusers:x"
    ita = "exag:ita"  # the paper's variant: g1's figures sit beside the paper's
    cells = [
        _cell(g1, "USA", [0.6, 0.8], [0.2, 0.4], variant=ita),
        _cell(g1, "France", [0.5, 0.5], [0.3, 0.3], variant=ita, ddiv=0.7),
        _cell(g1, "Iran", [0.2, 0.4], [0.1, 0.1], variant=ita),
        _cell(g1, "India", [0.3, 0.3], [0.2, 0.2], variant=ita),
        _cell(g2, "USA", [0.9], [0.5]),
        _cell(g2, "Iran", [0.1], [0.0], variant="exag:ita"),
        _cell(g2, "India", [0.2], [0.1]),
    ]
    table = metrics_table(recipe, cells, [g1, g2])
    assert [r.label for r in table.rows] == [
        f"{g1} · GN",
        f"{g1} · GS",
        f"{g2} · GN",
        f"{g2} · GS",
        f"{g2} · GS [exag:ita]",
        f"{g2} · GS [exag:mllm]",
    ]
    c = table.cells[(f"{g1} · GN", "faith")]
    # per prompt first (0.7 and 0.5), then over prompts, with the bootstrap's interval
    assert c.value == pytest.approx(0.6) and c.n == 2
    assert c.interval == mean_interval([0.7, 0.5], 0)
    assert c.paper == 0.61  # Gemini 2.5 Flash Image, GN
    assert [n for n in table.notes if "in its place" in n] == [
        "Gemini 2.5 Flash Image: the paper's model (gemini:gemini-2.5-flash-image) is shut "
        "down on 2026-10-02 (https://ai.google.dev/gemini-api/docs/deprecations, read "
        f"2026-12-06); its figures are set beside {g1}, which this recipe runs in its place"
    ]
    assert table.cells[(f"{g1} · GS", "faith")].paper == 0.57
    assert table.cells[(f"{g1} · GN", "ddiv")].value == pytest.approx(0.6)
    assert table.cells[(f"{g1} · GN", "ddiv")].paper is None  # the paper has none: 1 image
    assert table.cells[(f"{g2} · GN", "faith")].paper is None  # not a model of the paper
    # two EXAG variants in a group: FAITH and EXAG are not averaged over them, but split
    # into a row per variant
    mixed = table.cells[(f"{g2} · GS", "faith")]
    assert mixed.value is None and "exag:ita; exag:mllm" in mixed.note
    assert table.cells[(f"{g2} · GS", "align")].value == pytest.approx(0.05)
    assert table.cells[(f"{g2} · GS [exag:ita]", "faith")].value == pytest.approx(0.1)
    assert table.cells[(f"{g2} · GS [exag:mllm]", "faith")].value == pytest.approx(0.2)
    rows = csv_rows(table)
    first = next(r for r in rows if r["row"] == f"{g1} · GN" and r["column"] == "FAITH ↑")
    assert first["difference"] == pytest.approx(0.6 - 0.61)
    tex = latex_table(table).fragment()
    # best within each model's block: g1's GN FAITH (0.6 > 0.35), the lower HAL
    gn = next(
        line for line in tex.splitlines() if line.startswith(r"gemini:gemini-nano") and "GN" in line
    )
    assert r"\textbf{0.60}" in gn and r"\textbf{0.70}" in gn  # FAITH, HAL = 1 - 0.3
    assert tex.count(r"\midrule") == 2  # under the header, between the two models


def test_concepts_under_cubes_kernels():
    recipe = load_recipe("cube-table5")
    sdxl, other = "diffusers:stabilityai/stable-diffusion-xl-base-1.0", "gemini:x"
    kernel = "continent (1, 0, 0)"
    hps = "hpsv2 (xswu/HPSv2)"  # CD with HPS v2's quality, as CUBE's
    cells = [
        {"generator": sdxl, "concept": "cuisine", "cd_kernels": {kernel: 0.1}, "quality_by": hps},
        {"generator": sdxl, "concept": "cuisine", "cd_kernels": {kernel: 0.3}, "quality_by": hps},
        {"generator": other, "concept": "cuisine", "cd_kernels": {kernel: 0.4}, "quality_by": hps},
    ]
    table = metrics_table(recipe, cells, [sdxl, other])
    assert [r.label for r in table.rows] == [f"{sdxl} · cuisine", f"{other} · cuisine"]
    c = table.cells[(f"{sdxl} · cuisine", f"cd:{kernel}")]
    assert c.value == pytest.approx(0.2) and c.paper == 0.04  # SDXL, Cuisine (any case)
    assert table.cells[(f"{sdxl} · cuisine", "cd:uniform (1/3, 1/3, 1/3)")].value is None
    # cells that do not record their quality's source: the figure apart, and said
    unknown = [{k: v for k, v in c.items() if k != "quality_by"} for c in cells]
    table = metrics_table(recipe, unknown, [sdxl, other])
    c = table.cells[(f"{sdxl} · cuisine", f"cd:{kernel}")]
    assert c.paper == 0.04 and c.paper_differs == (
        "paper: quality source hpsv2; here: quality source not recorded"
    )
    assert any(c.paper_differs in n for n in table.notes)


def test_aheads_observer_prompts_ask_once_per_dimension():
    """AHEaD's observer (Tab. 22-27): one request a dimension, its system prompt and the
    dimension's; the answers' tokens cleaned and cut to the most asked for."""
    from refine.backends.structured import StyledDescriptors, ahead_descriptors

    asked = []

    def ask_one(prompt):
        asked.append(prompt)
        tokens = [" Floor  cushions ", "floor cushions", "rug", "lamp"]
        return StyledDescriptors.model_validate(
            {"descriptors": [{"token": t, "style": "traditional"} for t in tokens]}
        )

    dims = ["setting", "objects", "attire", "interaction", "spatial"]
    got = ahead_descriptors(ask_one, dims, 2)
    assert got == {d: ["Floor cushions", "rug"] for d in dims}
    assert len(asked) == 5
    assert all(p.startswith("As an expert on cross-cultural visual representation") for p in asked)
    heads = ["Setting & Background Prompt", "Objects Prompt", "Attire Prompt",
             "Interaction & Gesture Prompt", "Spatial Arrangement Prompt"]  # fmt: skip
    from refine.assets import prompt_template

    system = prompt_template("ahead_observe_system").strip()
    for p, h, d in zip(asked, heads, dims, strict=True):
        # the paper's words alone: Tab. 22, then the dimension's table, nothing added
        assert p == f"{system}\n\n{prompt_template(f'ahead_observe_{d}').strip()}"
        assert f"\n\n{h}\nGoal:" in p and "List what is visible" not in p
    assert asked[1].endswith("EXCLUDE: animals, clothing, architecture, actions, background décor.")


def test_a_recipes_baselines_are_its_own_unless_chosen():
    from refine.harness.recipe_run import plan_of

    recipe = load_recipe("ahead-table2")
    own = plan_of(recipe, limit=2, profile="gemini", backends={}, tau=None, baselines=None)
    assert own.baselines == tuple(recipe.select.baselines) and "pickscore" in own.baselines
    assert own.observer_prompts == "ahead" and len(own.prompts) == 2
    chosen = plan_of(recipe, limit=1, profile="gemini", baselines=("vqascore",))
    assert chosen.baselines == ("vqascore",)
    # --baselines none: asked, and empty (None is what was not asked)
    assert plan_of(recipe, limit=1, profile="gemini", baselines=()).baselines == ()
    # a recipe that lists none: the bench's default
    plain = plan_of(load_recipe("ahead-table1"), limit=1, profile="gemini", backends={})
    assert plain.baselines == ("clipscore",)


MINIMAL = """
name = "mini"
title = "t"
paper = "p"
source = "s"
task = "bench"
[table]
caption = "c"
label = "tab:mini"
metrics = [{ metric = "faith" }]
"""


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (('metric = "faith"', 'metric = "fiath"'), "no metric 'fiath' in a bench recipe"),
        (('task = "bench"', 'task = "sos"'), "a sos recipe makes a table of kind labels"),
    ],
)
def test_a_recipes_metrics_and_kind_fit_its_task(tmp_path, change, says):
    assert load_recipe_text(tmp_path, MINIMAL).name == "mini"
    with pytest.raises(ValueError, match=says):
        load_recipe_text(tmp_path, MINIMAL.replace(change[0], change[1], 1))


def load_recipe_text(tmp_path, text):
    path = tmp_path / "r.toml"
    path.write_text(text)
    return load_recipe(path)


AGREEMENT = (
    MINIMAL.replace(
        'task = "bench"',
        'task = "bench"\n[select]\n[[select.backbones]]\n'
        'label = "B"\nobserver = "hf:x"\njudge = "hf:x"',
    )  # fmt: skip
    .replace('caption = "c"', 'kind = "agreement"\nquestion = "gt_faith"\ncaption = "c"')
    .replace(
        'metrics = [{ metric = "faith" }]',
        'backbone_metrics = ["faith"]\nmetrics = [{ metric = "faith" }]',
    )  # fmt: skip
)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (('kind = "agreement"', 'kind = "metrics"'), "only a bench recipe's agreement table"),
        (('backbone_metrics = ["faith"]', "backbone_metrics = []"), "name the rows they get"),
        (
            ('backbone_metrics = ["faith"]', 'backbone_metrics = ["align"]'),
            "'align' is not among the table's metrics",
        ),  # fmt: skip
        (
            ('judge = "hf:x"', 'judge = "hf:x"\nrejudge = ["clipscore"]'),
            "rejudge 'clipscore' is no baseline the judge reads",
        ),  # fmt: skip
        (('label = "B"', 'label = "../B"'), "label"),
    ],
)
def test_a_recipes_backbones_are_checked(tmp_path, change, says):
    ok = load_recipe_text(tmp_path, AGREEMENT)
    assert [(b.label, b.rejudge) for b in ok.select.backbones] == [("B", ["judge_align"])]
    bad = AGREEMENT.replace(change[0], change[1], 1)
    assert bad != AGREEMENT
    with pytest.raises(ValueError, match=says):
        load_recipe_text(tmp_path, bad)
    paper = AGREEMENT + '[[table.paper]]\nrow = "C"\nmetric = "faith"\nbackbone = "C"\n'
    with pytest.raises(ValueError, match="no backbone 'C' in select"):
        load_recipe_text(tmp_path, paper)


def test_a_recipes_generator_settings_are_the_papers_and_checked(tmp_path):
    """CulturalFrames A.1.4's steps, guidance and 1024 px and CUBE Tab. 13's negative
    prompt reach the plan of the generators they name; a --generator of the command
    line's own draws with its own; a setting for a generator the recipe does not draw
    with, or out of bounds, is one line."""
    from refine.harness.recipe_run import plan_of

    recipe = load_recipe("culturalframes-fig6-cultivate")
    plan = plan_of(recipe, limit=2, profile="gemini", backends={}, tau=None, baselines=None)
    assert plan.generator_settings == {
        "diffusers:black-forest-labs/FLUX.1-dev":
            {"steps": 50, "guidance": 3.5, "width": 1024, "height": 1024},
        "diffusers:stabilityai/stable-diffusion-3.5-large":
            {"steps": 40, "guidance": 4.5, "width": 1024, "height": 1024},
    }  # fmt: skip
    mine = plan_of(recipe, generators=["diffusers:x"], limit=2, profile="gemini")
    assert mine.generator_settings == {}
    # AHEaD footnote 3: Qwen-Image as Qwen-Image-Lightning, in every AHEaD recipe
    light = "diffusers:Qwen/Qwen-Image+lora=lightx2v/Qwen-Image-Lightning/"
    for name in ("ahead-table1", "ahead-table2", "ahead-table5"):
        s = load_recipe(name).select
        (qwen,) = [g for g in s.generators if "Qwen-Image" in g]
        assert qwen.startswith(light) and "8steps" in qwen
        got = s.generator_settings[qwen]
        assert got.steps == 8 and got.scheduler["shift_terminal"] is None
        assert got.scheduler["base_shift"] == pytest.approx(math.log(3))
    cube = load_recipe("cube-table5").select.generator_settings
    sdxl, playground = cube.values()  # CUBE's two open models with named weights
    assert sdxl.negative_prompt.startswith("multiple items, blurry, painting, cartoon")
    assert playground.negative_prompt == sdxl.negative_prompt
    assert (playground.steps, playground.guidance) == (50, 3.0)
    recipes = files("refine") / "assets" / "recipes"
    good = (recipes / "culturalframes-fig6-cultivate.toml").read_text()
    path = tmp_path / "r.toml"
    for change, said in (
        ("guidance = 3.5", "guidance = 500.0"),
        ('"diffusers:black-forest-labs/FLUX.1-dev"]', '"diffusers:other"]'),
    ):
        path.write_text(good.replace(change, said, 1))
        with pytest.raises(ValueError, match="generator_settings"):
            load_recipe(path)


def test_a_recipes_settings_win_over_a_profiles_generator_options():
    """A generator named by a profile (`cpu`: sd-turbo at 4 steps, 512 px) given a
    recipe's settings: the recipe's win, the profile's others stay; an unknown setting is
    one line."""
    from refine.harness.generators import make_generator

    class Scorer:
        def named(self, role, name, **options):
            return role, name, options

    role, name, options = make_generator(Scorer(), "cpu", {"steps": 8, "true_cfg": 1.0})
    assert (role, name) == ("generator", "diffusers:stabilityai/sd-turbo")
    assert options == {"guidance": 0.0, "height": 512, "width": 512, "steps": 8, "true_cfg": 1.0}
    with pytest.raises(ValueError, match="no setting 'sampler'"):
        make_generator(Scorer(), "cpu", {"sampler": "euler"})
    with pytest.raises(ValueError, match="diffusers: generators only"):  # an API model
        make_generator(Scorer(), "gemini:gemini-3.1-flash-image", {"negative_prompt": "x"})
