"""Recipes, protocols, batch lines and rating files from outside have bounds on every
number and every nesting: a number that would allocate without end, NaN, or a value
nested thousands deep is one line naming the file, never a RecursionError or a run."""

from __future__ import annotations

import json

import pytest

from refine.harness.recipes import load_recipe
from refine.harness.tasks.batch.specs import _rows
from refine.human.protocols import load_protocol
from refine.io.files import json_value


def test_a_recipe_with_an_impossible_number_nan_or_deep_nesting_is_one_line(tmp_path):
    from importlib.resources import files

    good = (files("refine") / "assets" / "recipes" / "ahead-table1.toml").read_text()
    assert "[select]" in good
    path = tmp_path / "r.toml"
    for change, said in (
        ("images_per_prompt = 9223372036854775807", "images_per_prompt"),
        ("cube_weights = [nan, 0.0, 0.0]", "cube_weights"),
        ("seed = -1", "seed"),
        ("tau = 7.5", "tau"),
        ("cube_weights = [1.0, 0.0]", "cube_weights"),
        ("cube_weights = [1.0, -2.0, 0.0]", "cube_weights"),
    ):
        key = change.split(" = ")[0]
        kept = "\n".join(x for x in good.splitlines() if not x.startswith(f"{key} ="))
        path.write_text(kept.replace("[select]", f"[select]\n{change}", 1))
        with pytest.raises(ValueError, match=f"{path}: select.{said}"):
            load_recipe(path)
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ValueError, match="nested too deeply"):
        load_recipe(path)
    path.write_text("x = 1\n" * 200_000)
    with pytest.raises(ValueError, match="not a settings file"):
        load_recipe(path)


def test_a_protocol_with_an_impossible_count_is_refused(tmp_path):
    from importlib.resources import files

    good = (files("refine") / "assets" / "protocols" / "quick.toml").read_text()
    path = tmp_path / "p.toml"
    path.write_text(good + "\nraters_per_image = 99999999999\n")
    with pytest.raises(ValueError, match="raters_per_image"):
        load_protocol(path)
    for table, change in (
        ("flag", "failed_checks = 99999999999"),
        ("repeats", "tolerance = 1e300"),
    ):
        path.write_text(good + f"\n[{table}]\n{change}\n")
        with pytest.raises(ValueError, match=f"{table}.{change.split(' = ')[0]}"):
            load_protocol(path)


def test_json_lines_from_outside_refuse_nan_and_deep_nesting():
    for text in ("[" * 100_000 + "]" * 100_000, '{"a": NaN}', "Infinity", '{"a": -Infinity}'):
        with pytest.raises(json.JSONDecodeError):
            json_value(text)
    assert json_value('{"a": [1, 2.5]}') == {"a": [1, 2.5]}


def test_a_batch_line_nested_too_deeply_is_a_bad_line(tmp_path):
    path = tmp_path / "b.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    rows = _rows(path, '{"activity": "x", "country": "Iran"}\n' + deep + "\n")
    assert isinstance(rows[0][1], dict)
    assert "line 2: not JSON (nested too deeply)" in str(rows[1][1])
