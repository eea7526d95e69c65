"""Profiles name one registered backend per role."""

from __future__ import annotations

import pytest

from refine.profiles import list_profiles, load_profile


def test_gemini_profile_names_registered_backends():
    assert "gemini" in list_profiles()
    p = load_profile("gemini")
    assert p.backend("generator") == "gemini:gemini-2.5-flash-image"
    assert p.backend("text_embedder") == "st:all-MiniLM-L6-v2"
    assert {"generator", "editor", "observer", "judge", "llm"} <= set(p.roles)
    assert "GEMINI_API_KEY" in p.description


def test_unknown_profile_lists_bundled():
    with pytest.raises(ValueError, match="unknown profile 'huge-gpu'.*gemini"):
        load_profile("huge-gpu")


def test_profile_file_errors(tmp_path):
    bad_role = tmp_path / "p.toml"
    bad_role.write_text('[roles]\npainter = "gemini:x"\n')
    with pytest.raises(ValueError, match="unknown role 'painter'"):
        load_profile(str(bad_role))
    bad_name = tmp_path / "q.toml"
    bad_name.write_text('[roles]\ngenerator = "dalle:3"\n')
    with pytest.raises(ValueError, match=r"roles.generator: unknown generator backend 'dalle:3'"):
        load_profile(str(bad_name))
    empty = tmp_path / "e.toml"
    empty.write_text('description = "x"\n')
    with pytest.raises(ValueError, match=r"\[roles\]"):
        load_profile(str(empty))
    broken = tmp_path / "b.toml"
    broken.write_text("[roles\n")
    with pytest.raises(ValueError, match="invalid TOML"):
        load_profile(str(broken))
