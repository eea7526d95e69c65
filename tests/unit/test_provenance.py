"""Which weights a model name meant: the commit a hub name and revision resolve to in the
cache (nothing asked online), a cached snapshot's folder read as its repository and
commit, a local folder named as having none, and the licence a cached card gives."""

from __future__ import annotations

import pytest

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A hub cache holding org/tiny at SHA (refs/main), its card giving a licence."""
    import huggingface_hub.constants as constants

    root = tmp_path / "hub"
    repo = root / "models--org--tiny"
    snap = repo / "snapshots" / SHA
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (snap / "README.md").write_text("---\nlicense: apache-2.0\n---\n# tiny\n")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(SHA)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return snap


def test_a_hub_name_resolves_to_its_cached_commit(cache, tmp_path):
    from refine.backends.provenance import (
        NO_REVISION,
        from_snapshot_path,
        hub_commit,
        hub_license,
        weights_of,
    )

    assert hub_commit("org/tiny") == SHA == hub_commit("org/tiny", "main")
    assert hub_commit("org/tiny", "v2", online=False) == NO_REVISION  # no such ref cached
    assert hub_commit("org/other") == NO_REVISION  # offline: not asked, not guessed
    assert hub_commit("org/tiny", "f" * 40) == "f" * 40  # a commit is its own answer
    assert hub_commit(str(cache)) == SHA  # a snapshot's folder names its commit
    assert from_snapshot_path(cache) == ("org/tiny", SHA)
    (tmp_path / "mine").mkdir()
    assert hub_commit(str(tmp_path / "mine")) == NO_REVISION
    assert hub_license("org/tiny", SHA) == "apache-2.0"
    assert hub_license("org/other") is None
    assert weights_of({"commit": SHA}) == SHA
    assert weights_of({"model_version": "gemini-3-pro-image-preview"}) == (
        "gemini-3-pro-image-preview"
    )
    assert weights_of({"revision": ""}) == NO_REVISION


def test_a_backends_record_names_the_commit_its_weights_came_from(cache):
    from refine.backends.selection import described

    class Local:
        id = "siglip:org/tiny"

        def info(self):
            return {"id": self.id, "device": "cpu", "revision": ""}

    class Api:
        id = "gemini:gemini-3-pro-image"

        def info(self):
            return {"id": self.id, "model_version": "gemini-3-pro-image-preview"}

    assert described(Local(), "x")["commit"] == SHA

    class Pinned(Local):
        id = "siglip:org/tiny@main"  # the revision an id pins, as ids name one

    assert described(Pinned(), "x")["commit"] == SHA
    assert "commit" not in described(Api(), "x")
    from refine.harness.made_with import maker_models, merge_models

    class Maker:
        generators = {"local": Local(), "api": Api()}

    assert maker_models(Maker()) == {
        "siglip:org/tiny": SHA,
        "gemini:gemini-3-pro-image": "gemini-3-pro-image-preview",
    }
    two = merge_models([{"m": "v1"}, {"m": "v2"}, {"m": "v1"}])
    assert two == {"m": "v1, v2"}  # workers answered from two versions: both named
    # a rerun that saw no answer does not undo what an earlier run recorded
    assert merge_models([{"m": "v1"}, {"m": "no_revision_available"}]) == {"m": "v1"}
    assert merge_models([{"m": "no_revision_available"}]) == {"m": "no_revision_available"}
