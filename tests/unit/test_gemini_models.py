"""The one list of Gemini models (assets/gemini_models.toml): every Gemini model a bundled
profile, recipe or default runs is in it and not past its shutdown; a recipe that
reproduces a paper's model that is shut down names the model it runs in its place."""

from __future__ import annotations

import re
import tomllib
from datetime import date

from refine.assets import assets_dir
from refine.backends.gemini import (
    DEFAULT_IMAGE_MODEL,
    DEFAULT_TEXT_MODEL,
    gemini_models,
    model_status,
)

MODEL = re.compile(r"(?:gemini:)?(gemini-[\w.\-]*\d[\w.\-]*)")  # a value that is a model id
TODAY = date.today().isoformat()  # (a model whose shutdown comes fails this test that day)


def named(value, where: str, out: dict[str, str]) -> None:
    """Every string in ``value`` that is a whole Gemini model id, with where it is."""
    if isinstance(value, dict):
        for k, v in value.items():
            if where.endswith("table") and k == "paper":
                for row in v:  # the paper's own model: a label, unless a row runs another
                    if row.get("runs_as"):
                        named(row["runs_as"], f"{where}.paper.runs_as", out)
                continue
            named(k, f"{where}.{k}", out)  # (a table's key: a generator's settings)
            named(v, f"{where}.{k}", out)
    elif isinstance(value, list):
        for v in value:
            named(v, where, out)
    elif isinstance(value, str):
        match = MODEL.fullmatch(value)
        if match:
            out.setdefault(match.group(1), where)


def bundled() -> dict[str, str]:
    out: dict[str, str] = {}
    for kind in ("profiles", "recipes"):
        for path in sorted((assets_dir() / kind).glob("*.toml")):
            named(tomllib.loads(path.read_text()), f"{kind}/{path.name}", out)
    for model in (DEFAULT_IMAGE_MODEL, DEFAULT_TEXT_MODEL):
        out.setdefault(model, "refine/backends/gemini.py")
    return out


def test_every_gemini_model_run_is_listed_and_not_shut_down():
    runs = bundled()
    assert {"gemini-3.8-flash", "gemini-nano-banana-2.1", "gemini-3.1-pro-preview"} <= set(runs)
    listed = gemini_models()
    unlisted = {m: where for m, where in runs.items() if m not in listed}
    assert not unlisted, f"not in assets/gemini_models.toml: {unlisted}"
    gone = {m: listed[m].words() for m in runs if listed[m].shut_down_by(TODAY)}
    assert not gone, f"run past their shutdown: {gone}"


def test_the_list_is_whole_and_each_date_has_its_source():
    for name, entry in gemini_models().items():
        assert entry.id == name and MODEL.fullmatch(name)
        assert entry.status in ("stable", "preview", "deprecated", "shut down"), name
        assert entry.source.startswith("https://"), name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry.read), name
        if entry.shutdown:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry.shutdown), name
        if entry.status == "shut down":
            assert entry.shutdown and entry.replacement, name
        replacement = gemini_models().get(entry.replacement)
        if replacement is not None:  # (one not listed is not one this toolkit runs)
            assert not replacement.shut_down_by(TODAY), name
    # a date no official page confirms is not given as one
    nb2 = model_status("gemini:gemini-3.1-flash-image")
    assert nb2.shutdown == "" and "unconfirmed" in nb2.note and nb2.status == "deprecated"
    assert model_status("models/gemini-2.5-flash-image").words() == (
        "shut down on 2026-10-02 (https://ai.google.dev/gemini-api/docs/deprecations, read "
        "2026-12-06); use gemini-nano-banana-2.1"
    )
    assert model_status("gemini-9-unknown") is None


def test_a_paper_model_that_is_shut_down_is_run_as_another_and_said():
    """AHEaD Tab. 1's Gemini 2.5 Flash Image: the recipe runs Nano Banana 2.1 in its place,
    the paper's figures sit beside that row, and the table's notes say why."""
    from refine.harness.recipe_tables import _replaced
    from refine.harness.recipes import load_recipe

    shut = 0
    for path in sorted((assets_dir() / "recipes").glob("*.toml")):
        recipe = load_recipe(path)
        for row in recipe.table.paper:
            paper = model_status(row.generator or "")
            if paper is not None and paper.shut_down_by(TODAY):
                shut += 1
                assert row.runs_as, (path.name, row.row)
                assert row.runs_as in recipe.select.generators, path.name
    assert shut == 2  # the Global North and Global South rows of AHEaD Tab. 1

    class Table:
        notes: list[str] = []

    _replaced(Table, "Gemini 2.5 Flash Image", "gemini:gemini-2.5-flash-image", "gemini:x")
    _replaced(Table, "Gemini 2.5 Flash Image", "gemini:gemini-2.5-flash-image", "gemini:x")
    assert Table.notes == [
        "Gemini 2.5 Flash Image: the paper's model (gemini:gemini-2.5-flash-image) is shut "
        "down on 2026-10-02 (https://ai.google.dev/gemini-api/docs/deprecations, read "
        "2026-12-06); its figures are set beside gemini:x, which this recipe runs in its place"
    ]
