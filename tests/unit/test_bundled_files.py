"""Profiles, recipes and study protocols are found the same way: a bundled name, or a
.toml file by path, and a wrong name is said the same way for each."""

from __future__ import annotations

import pytest

from refine.assets import bundled_names, bundled_or_file
from refine.harness.recipes import load_recipe
from refine.human.protocols import BUNDLED, load_protocol
from refine.profiles import load_profile


def test_one_way_to_find_a_bundled_file_or_a_path(tmp_path):
    assert set(bundled_names("protocol")) == set(BUNDLED)
    path, where = bundled_or_file("ahead", "protocol")
    assert path.name == "ahead.toml" and where == "protocol ahead"
    own = tmp_path / "mine.toml"
    own.write_text(load_profile("gemini").path.read_text())
    assert bundled_or_file(own, "profile") == (own, str(own))
    assert load_profile(str(own)).path == own
    for kind, load in (("profile", load_profile), ("recipe", load_recipe),
                       ("protocol", load_protocol)):  # fmt: skip
        with pytest.raises(
            ValueError, match=rf"unknown {kind} 'nope' \(bundled: .+; or a {kind} file"
        ):
            load("nope")
    with pytest.raises(ValueError, match="did you mean 'ahead-table1'"):
        load_recipe("ahead-tabel1")
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(ValueError, match="unknown recipe"):  # a file, but no .toml
        load_recipe(tmp_path / "x.txt")
