"""The structure check `./dev test` runs before the tests: ``python tools/check_structure.py``.

It reads the packages ``refine``, ``metrics`` and ``ui`` and the scripts of ``benchmarks``
as text (nothing is imported) and fails on:

* an import circle between files, function-level imports and imports under
  ``if TYPE_CHECKING:`` included (a circle is a set of files each reaching the others
  through imports; an import for annotations only still ties the two files' designs
  together, as the import graph shows it);
* a class over 400 lines, a function over 150 lines;
* a file under ``refine/harness/tasks/`` over 250 lines: a task is a spec, read in
  one sitting, its plan, cells and summary in files of their own;
* an import across a layer's wall (:data:`WALLS`): the pages of ``refine/present`` read
  a task's results record, never the task's code;
* more than 12 flat modules in ``refine/`` (``refine/*.py`` besides ``__init__.py``);
* ``refine/cli`` over 3,000 lines: the command line is options and printing, its work
  done below it (a command's options are a plan's fields, its lines
  :mod:`refine.present.terminal`'s).

Today's known exceptions are listed in :data:`KNOWN`, each with the issue part that removes
it. The list only shrinks: an exception that no longer applies fails the check too, until
it is taken out, and a flat-module count below the one listed must be lowered to it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("refine", "metrics", "ui", "benchmarks")
MAX_CLASS, MAX_FUNCTION, MAX_FLAT, MAX_TASK, MAX_CLI = 400, 150, 12, 250, 3000
TASKS = "refine/harness/tasks"
# module prefix -> the module prefixes it may not import
WALLS = {"refine.present": ("refine.harness.tasks",)}

# each known exception, by name, with what removes it
KNOWN: dict[str, str] = {}


@dataclass(frozen=True)
class Problem:
    name: str  # stable: what KNOWN lists
    detail: str  # sizes and members, for the message


def modules(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every Python file of ``packages`` under ``root``."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _target(name: str, known: dict[str, Path]) -> str | None:
    """The internal module an import of ``name`` loads (its longest known prefix)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The internal modules ``module`` imports anywhere in its file (functions included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            # "from pkg import sub" loads pkg.sub when sub is a module
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for name in names:
            target = _target(name, known)
            if target is not None and target != module:
                found.add(target)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        # iterative depth-first search: deep import chains need no recursion limit
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def sizes(path: Path, root: Path) -> list[Problem]:
    """Classes over MAX_CLASS lines and functions over MAX_FUNCTION lines in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    rel = path.relative_to(root).as_posix()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            limit = MAX_CLASS if isinstance(node, ast.ClassDef) else MAX_FUNCTION
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            if lines > limit:
                out.append(Problem(f"{kind} {rel}:{node.name}", f"{lines} lines (at most {limit})"))
    return out


def problems(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> list[Problem]:
    """Every structure problem of the tree at ``root``, known or not."""
    known = modules(root, packages)
    graph = {m: imports(m, p, known) for m, p in known.items()}
    out = []
    for component in circles(graph):
        files = [known[m].relative_to(root).as_posix() for m in component]
        out.append(Problem("import circle: " + " ".join(files), f"{len(files)} files"))
    for path in known.values():
        out += sizes(path, root)
    for module, targets in sorted(graph.items()):
        for wall, banned in WALLS.items():
            if module == wall or module.startswith(wall + "."):
                for target in sorted(targets):
                    if any(target == b or target.startswith(b + ".") for b in banned):
                        where = known[module].relative_to(root).as_posix()
                        out.append(Problem(f"import across a wall: {where} -> {target}", wall))
    for path in sorted((root / TASKS).rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_TASK:
            rel = path.relative_to(root).as_posix()
            out.append(Problem(f"task file {rel}", f"{lines} lines (at most {MAX_TASK})"))
    if "refine" in packages:
        cli = sum(
            len(f.read_text(encoding="utf-8").splitlines())
            for f in (root / "refine" / "cli").rglob("*.py")
        )
        if cli > MAX_CLI:
            out.append(Problem(f"refine/cli: {cli} lines", f"at most {MAX_CLI}"))
        flat = [p for p in (root / "refine").glob("*.py") if p.name != "__init__.py"]
        if len(flat) > MAX_FLAT:
            out.append(Problem(f"flat modules in refine/: {len(flat)}", f"at most {MAX_FLAT}"))
    return out


def check(found: list[Problem], known: dict[str, str]) -> list[str]:
    """The failures: problems not listed, and listed exceptions that no longer apply."""
    names = {p.name for p in found}
    failures = [f"{p.name} ({p.detail})" for p in found if p.name not in known]
    for name, remover in known.items():
        if name not in names:
            failures.append(
                f"known exception no longer applies, take it out of KNOWN: {name} ({remover})"
            )
    return failures


def main() -> int:
    found = problems()
    failures = check(found, KNOWN)
    listed = sum(p.name in KNOWN for p in found)
    if failures:
        print("structure check failed:", file=sys.stderr)
        for line in failures:
            print(f"  {line}", file=sys.stderr)
        print(
            "  (split the class or function, break the circle by moving what both sides "
            "need, or fold modules into a package; see tools/check_structure.py)",
            file=sys.stderr,
        )
        return 1
    print(f"structure check passed ({listed} known exception(s) left)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
