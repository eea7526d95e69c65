"""A missing package names the extra that brings it; an installed package that fails to
import shows its own error."""

from __future__ import annotations

import sys

import pytest

from refine.backends.imports import require


def test_a_missing_package_names_its_extra():
    with pytest.raises(ImportError) as err:
        require("refine_absent_pkg.sub", "absent-pkg", "refine tune", "local")
    assert str(err.value) == (
        "refine tune needs the package 'absent-pkg' (the cultural-refine[local] extra: "
        "pip install '.[local]' in a clone)"
    )


def test_a_package_that_fails_to_import_shows_its_own_error(tmp_path, monkeypatch):
    package = tmp_path / "refine_broken_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("import refine_missing_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as err:
        require("refine_broken_pkg", "broken", "refine tune", "local")
    assert err.value.name == "refine_missing_dependency_xyz"
    assert "cultural-refine[" not in str(err.value)
    sys.modules.pop("refine_broken_pkg", None)


def test_refine_tune_names_a_missing_extra_before_importing_any(monkeypatch):
    """Where peft is missing, refine tune says so without importing torch first (an
    install without the extra waited 1.5 s for torch's import to hear it)."""
    import importlib.util

    from refine.train import tune

    imported = []

    def recorded(module, package, purpose, extra=None):
        imported.append(module)
        return require(module, package, purpose, extra)

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "peft" else find_spec(name)
    )
    monkeypatch.setattr(tune, "require", recorded)
    monkeypatch.setitem(sys.modules, "peft", None)  # an import of it fails as if missing
    with pytest.raises(ImportError, match=r"needs the package 'peft' \(the cultural-refine\[local"):
        tune.need_training()
    assert imported == ["peft"]
