"""MkDocs hooks: the pages made from the code at every build, so that they cannot drift
from it (``mkdocs.yml`` names this file under ``hooks``).

* ``cli/``: one page per command of the ``refine`` command line, holding exactly what its
  ``--help`` prints (from the typer app), and an index of them, each in the navigation;
* ``metrics.md``: the page's own text, with one entry per metric of
  :mod:`metrics.catalog` (label, direction, range, what it needs, what it means, where it
  is defined and how this toolkit differs) and per variant, where the page says
  ``<!-- catalog -->``;
* ``benchmarks.md``: a row of its recipes table for every bundled recipe the page has no
  row of its own for (its paper and source, title and what it runs, from the recipe file),
  where the page says ``<!-- recipes -->``, so that a new recipe is one file;
* ``readme.md``: the repository's README, its links into ``docs/`` made relative to the
  site, so that the strict build checks them too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CATALOG_MARK = "<!-- catalog -->"
RECIPES_MARK = "<!-- recipes -->"


def commands() -> list[tuple[tuple[str, ...], Any]]:
    """Every command of the ``refine`` command line that runs something: (its words after
    ``refine``, the click command), in the order ``--help`` lists them."""

    from refine.cli import command

    found: list[tuple[tuple[str, ...], Any]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if hasattr(command, "list_commands"):  # a group (typer's own click)
            context = command.context_class(command, info_name="refine")
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                if sub is not None and not sub.hidden:
                    walk(sub, (*path, name))
        else:
            found.append((path, command))

    walk(command(), ())  # the tasks' commands made from their specs included
    return found


def page_name(path: tuple[str, ...]) -> str:
    """The CLI page of a command: ``cli/refs-build.md``."""
    return "cli/" + "-".join(path) + ".md"


def help_text(path: tuple[str, ...], command: Any) -> str:
    """What ``refine PATH --help`` prints, at a fixed width."""
    name = "refine " + " ".join(path)
    context = command.context_class(
        command, info_name=name, terminal_width=100, max_content_width=100
    )
    return command.get_help(context)


def cli_page(path: tuple[str, ...], command: Any) -> str:
    first = (command.help or "").strip().split("\n\n")[0].replace("\n", " ")
    return (
        f"# refine {' '.join(path)}\n\n{first}\n\n"
        "What `--help` prints (this page is made from the command line itself):\n\n"
        f"```text\n{help_text(path, command)}\n```\n\n[All commands](index.md)\n"
    )


def cli_index(found: list[tuple[tuple[str, ...], Any]]) -> str:
    lines = [
        "# Command line reference",
        "",
        "Every command of `refine`, each on a page made from the command line itself at "
        "every build of these docs, so that it says what `--help` says. How the commands "
        "fit together is told on the other pages: [getting started](../getting-started.md), "
        "[refining images](../refining.md), [benchmarks](../benchmarks.md).",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for path, command in found:
        first = (command.help or "").strip().split("\n\n")[0].replace("\n", " ")
        first = first.split(". ")[0].rstrip(".").replace("|", "\\|")
        link = page_name(path).removeprefix("cli/")
        lines.append(f"| [`refine {' '.join(path)}`]({link}) | {first} |")
    return "\n".join(lines) + "\n"


def metric_entry(m: Any, anchor: str, how: str) -> list[str]:
    """One metric's entry on the metrics page."""
    return [
        f"### {m.label} (`{m.name}`) {{ #{anchor} }}",
        "",
        f"{m.help}",
        "",
        f"- **Direction:** {m.better} is better ({m.arrow})",
        f"- **Range:** {m.span}",
        f"- **Level:** per {m.level}; {how}; group `{m.group}`",
        f"- **Needs:** {', '.join(m.needs) or 'nothing but the images'}",
        *([f"- **Checkpoint:** {m.checkpoint}"] if getattr(m, "checkpoint", "") else []),
        f"- **Defined in:** {m.source}",
        f"- **Differences:** {m.differs}",
        "",
    ]


def catalog_text() -> str:
    """One entry per catalog metric, per figure of a CUBE concepts run and per variant."""
    from metrics.catalog import CUBE, VARIANTS, computed, metric, names

    computed_names = {m.name for m in computed("image")}
    out = []
    for name in names():
        how = "computed by the assessor" if name in computed_names else "computed by its own code"
        out += metric_entry(metric(name), name, how)
    out += [
        "### CUBE concepts runs",
        "",
        "The figures of `refine bench --concepts` (one per concept and generator), under the "
        "names its results record and CSV use:",
        "",
    ]
    for m in CUBE:
        out += metric_entry(m, f"cube-{m.name}", "computed by the concepts task")
    out += [
        "### Variants",
        "",
        "| variant | what it computes | where it is defined |",
        "|---|---|---|",
    ]
    for v in VARIANTS.values():
        out.append(f"| `{v.name}` | {v.formula} | {v.source} |")
    return "\n".join(out) + "\n"


def first_sentence(text: str) -> str:
    """The first sentence of ``text``: up to a full stop before a capital, never after an
    abbreviation the papers use (Sec., Tab., Fig., Eq., App., e.g., i.e., al.)."""
    words = " ".join(text.split())
    for m in re.finditer(r"\.\s+(?=[A-Z])", words):
        before = words[: m.start()].rsplit(" ", 1)[-1].lstrip("(")
        if before not in ("Sec", "Tab", "Fig", "Eq", "App", "e.g", "i.e", "al", "vs"):
            return words[: m.start()]
    return words.rstrip(".")


def recipe_rows(markdown: str) -> str:
    """Rows of the recipes table for the bundled recipes ``markdown`` has no row for."""
    from refine.harness import recipes

    written = set(re.findall(r"^\| `([a-z0-9-]+)` \|", markdown, re.M))
    rows = []
    for name in recipes.bundled():
        if name in written:
            continue
        r = recipes.load_recipe(recipes.recipes_dir() / f"{name}.toml")
        cells = [f"`{name}`", f"{r.paper}, {r.source}", first_sentence(r.about), r.table.caption]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |\n")
    return "".join(rows)


def page_markdown(markdown: str, page: str) -> str:
    """A page's markdown as the build shows it (the made parts put in)."""
    if page == "metrics.md":
        if CATALOG_MARK not in markdown:
            raise ValueError(f"docs/metrics.md: the mark {CATALOG_MARK} is missing")
        return markdown.replace(CATALOG_MARK, catalog_text())
    if page == "benchmarks.md":
        if RECIPES_MARK + "\n" not in markdown:
            raise ValueError(f"docs/benchmarks.md: the mark {RECIPES_MARK} is missing")
        return markdown.replace(RECIPES_MARK + "\n", recipe_rows(markdown))
    return markdown


def readme_page() -> str:
    """The README, its links into docs/ made relative to the site."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.sub(r"\]\(docs/", "](", text)


def on_config(config: Any) -> Any:
    """The navigation's "CLI reference" entry as a section: the index, then every
    command's page (the pages exist only as the build makes them, so the navigation that
    lists them is made here too)."""
    nav = config.get("nav") or []
    for k, item in enumerate(nav):
        if isinstance(item, dict) and item.get("CLI reference") == "cli/index.md":
            pages = [{"refine " + " ".join(path): page_name(path)} for path, _ in commands()]
            nav[k] = {"CLI reference": [{"All commands": "cli/index.md"}, *pages]}
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    found = commands()
    for path, command in found:
        files.append(File.generated(config, page_name(path), content=cli_page(path, command)))
    files.append(File.generated(config, "cli/index.md", content=cli_index(found)))
    files.append(File.generated(config, "readme.md", content=readme_page()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return page_markdown(markdown, page.file.src_uri)
