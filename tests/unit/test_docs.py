"""The documentation site builds strictly (a broken link fails it), every command of the
command line has its page made from the command line itself, every catalog metric its
entry with where it is defined and how it differs, and the README stays one screen long
and points into the site."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import docs_hooks  # noqa: E402

sys.path.remove(str(ROOT / "tools"))

pytestmark = pytest.mark.slow  # mkdocs builds in processes of their own


def build(config: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The site, built once (a build takes about 3 CPU-s) from a copy of the docs whose
    training page links to a page that does not exist: the strict build writes every page,
    then fails on its warnings (:func:`test_a_broken_link_fails_the_build`: that link's
    alone, so the docs as they are build cleanly); the built site and the build."""
    root = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copytree(ROOT / "tools", root / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copy(ROOT / "README.md", root / "README.md")
    page = root / "docs" / "training.md"
    page.write_text(page.read_text() + "\nSee [the missing page](nowhere.md).\n")
    return root / "site", build(root / "mkdocs.yml", root / "site")


@pytest.fixture(scope="module")
def site(built) -> Path:
    return built[0]


def test_every_command_has_its_page_saying_what_its_help_says(site):
    found = docs_hooks.commands()
    assert len(found) >= 25 and (("run",) in dict(found)) and (("refs", "build") in dict(found))
    index = (site / "cli" / "index.html").read_text()
    home = (site / "index.html").read_text()  # the site's navigation lists every command
    navigation = re.findall(
        r'href="cli/([^"]+)/" class="md-nav__link">\s*<span[^>]*>\s*([^<]+?)\s*<', home
    )
    for path, command in found:
        assert ("-".join(path), "refine " + " ".join(path)) in navigation, path
        page = site / "cli" / "-".join(path) / "index.html"
        assert page.is_file(), path
        text = html.unescape(page.read_text())
        for param in command.params:
            if not getattr(param, "hidden", False):
                for flag in [o for o in param.opts if o.startswith("--")]:
                    assert flag in text, (path, flag)
        assert f'href="{"-".join(path)}/"' in index, path
    # the page is what --help prints
    run = dict(found)[("run",)]
    help_text = docs_hooks.help_text(("run",), run)
    page = (site / "cli" / "run" / "index.html").read_text()
    plain = html.unescape(re.sub(r"<[^>]+>", "", page))  # tags out, then entities
    assert all(line.strip() in plain for line in help_text.splitlines() if line.strip())


def test_every_metric_has_its_entry_with_source_and_differences(site):
    from metrics.catalog import CUBE, VARIANTS, metric, names

    page = (site / "metrics" / "index.html").read_text()
    plain = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())
    for name in names():
        m = metric(name)
        assert f'id="{name}"' in page, name
        assert m.source and m.differs, name
        for said in (m.help, m.source, m.span):
            assert " ".join(said.replace("`", "").split()) in plain, (name, said)
    for m in CUBE:  # a concepts run's figures
        assert f'id="cube-{m.name}"' in page, m.name
        assert m.source and m.differs, m.name
        assert " ".join(m.source.replace("`", "").split()) in plain, m.name
    for v in VARIANTS:
        assert v in plain


def test_a_broken_link_fails_the_build(built):
    """The strict build fails, with one warning: the broken link's (any other would be the
    docs' own, which the build would fail on without it)."""
    _, done = built
    assert done.returncode != 0
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and "nowhere.md" in warnings[0], done.stderr[-3000:]
    assert "Aborted with 1 warnings in strict mode" in done.stdout + done.stderr


def test_the_readme_is_one_screen_and_links_into_the_site():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 12_000
    links = re.findall(r"\]\(([^)]+)\)", readme)
    assert len(links) >= 10
    for link in links:
        if link.startswith("http"):
            continue
        assert link.startswith("docs/"), link
        path = link.split("#")[0]  # the strict build checks the anchor
        generated = path in ("docs/cli/index.md",)  # made by the build
        assert generated or (ROOT / path).is_file(), link
    assert "./dev refine app" in readme and "./dev test" in readme


def test_the_docs_tables_list_every_bundled_profile_recipe_and_protocol():
    """The tables of profiles, recipes and protocols in the docs are checked against what is
    bundled (assets/*/NAME.toml, scanned as the command line scans them): a new profile or
    protocol with no row fails here; a new recipe gets its row from its own file at every
    build (tools/docs_hooks.recipe_rows), in the recipes table."""
    import re

    from refine.assets import bundled_names

    docs = Path(__file__).resolve().parents[2] / "docs"
    for kind, page in (("profile", "profiles.md"), ("recipe", "benchmarks.md"),
                       ("protocol", "human-studies.md")):  # fmt: skip
        # as the build shows the page: a recipe with no row of the page's own gets one
        shown = docs_hooks.page_markdown((docs / page).read_text(), page)
        rows = set(re.findall(r"^\| `([a-z0-9-]+)` \|", shown, re.M))
        names = set(bundled_names(kind))
        assert names <= rows, (kind, sorted(names - rows))


def test_a_new_recipe_gets_a_row_from_its_own_file(tmp_path, monkeypatch):
    from refine.harness import recipes

    mine = tmp_path / "recipes"
    mine.mkdir()
    bundled = recipes.recipes_dir() / "ahead-table1.toml"
    text = bundled.read_text().replace('name = "ahead-table1"', 'name = "my-table"')
    (mine / "my-table.toml").write_text(text.replace('caption = "', 'caption = "Mine | ', 1))
    monkeypatch.setattr(recipes, "recipes_dir", lambda: mine)
    monkeypatch.setattr(recipes, "bundled", lambda: ["ahead-table1", "my-table"])
    page = (Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md").read_text()
    shown = docs_hooks.page_markdown(page, "benchmarks.md")
    (row,) = [x for x in shown.splitlines() if x.startswith("| `my-table` |")]
    cells = row.split(" | ")
    assert cells[1].startswith("AHEaD (Culture in Action") and cells[1].endswith(
        "Table 1 (Sec. 5.1)"
    )
    # the first sentence of what it runs (not cut at "Sec. 3"), and the table's caption
    assert cells[2].startswith("Every CULTIVate activity of the 16 countries (Sec. 3: Global")
    assert cells[2].endswith("10 images per prompt at seeds 42 to 51")
    assert cells[3].startswith("Mine \\| T2I models consistently generate more faithful")
    # in the table: the row follows the table's last row, the mark gone
    at = shown.splitlines().index(row)
    assert (
        shown.splitlines()[at - 1].startswith("| `cube-table5` |")
        and "<!-- recipes -->" not in shown
    )
