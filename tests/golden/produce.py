"""Golden outputs: six jobs run through the CLI on the stand-in Gemini world (a single run,
a batch, a bench, a CUBE concepts run, an SoS bank with its report, an agree run), and
a comparison of two such trees that ignores only what differs from run to run (timings,
timestamps, the temporary folders' names).

``tools/make_golden.py`` writes them to ``tests/golden/data`` on purpose;
``tests/e2e/test_golden.py`` makes them again and compares.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.fakes.gemini_world import BLUE, GREEN, GREY, RED, World

DATA = Path(__file__).resolve().parent / "data"
JOBS = ("run", "batch", "bench", "concepts", "sos", "agree")
ACTS = ["people eating food at home", "wedding celebration"]
GENS = ["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"]
# How far a number may move with the machine. The numbers come from float32 models
# (similarities, embeddings, Vendi of their kernels) whose sums run in an order set by the
# CPU's vector width, the oneDNN kernel and the thread count: each carries a few units of
# float32's roundoff u = 2^-24 = 6.0e-8. Measured between one and four threads on an
# AVX512-BF16 CPU and the CPU that recorded the golden tree: at most 3.0e-7 (5u) for a
# number near 1 (a similarity of 1.0000002 against 0.99999994), 2e-8 for a Vendi. The bound
# is 1e-6 (about 17u, three times the spread), relative above 1; a real change of the
# computation, a 1e-5 nudge to the phrase embeddings, is found
# (test_a_slightly_changed_computation_is_found). A number an HTML page prints for people
# may also differ by one unit in its last place, when the value lies that close to a
# rounding boundary.
TOLERANCE = 1e-6
FIXED_TIME = 1767225600  # 2026-01-01 00:00:00 UTC

# keys whose values differ between two identical runs
VOLATILE_KEYS = {
    "elapsed_s",
    "timings",
    "packages",  # the versions installed where it ran: the environment, not the behaviour
    "toolkit",  # the same: the cultural-refine version that wrote a record
    "seconds",
    "started",
    "finished",
    "created",
    "updated",
    "elapsed",
    "elapsed_seconds",
    "time",
    "timestamp",
    "at",
    "duration",
    "wall_seconds",
}
# files that record who held a folder or when
VOLATILE_FILES = {".lock", "run.lock", ".usage.jsonl", "golden.json"}


def produce(
    dest: Path, server, siglip: Path, cli: Callable, jobs: set[str] | None = None
) -> dict[str, str]:
    """Run the six jobs (or those named in ``jobs``) into ``dest/JOB``, each in a fresh
    stand-in world served by ``server``; ``cli`` runs ``refine ARGS``. Returns each job's
    stdout. Cached model
    answers go to a new folder beside ``dest``, so no earlier answer saves a call; torch
    keeps its threads (the comparison's TOLERANCE holds across thread counts); the clock
    that names run folders reads one fixed time, so two runs in a batch are named alike
    whatever second they start in."""
    import os
    import tempfile
    import time
    from unittest import mock

    real = time.strftime

    def fixed(fmt: str, when=None) -> str:
        return real(fmt, time.gmtime(FIXED_TIME) if when is None else when)

    saved = os.environ.get("REFINE_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="golden-cache-") as cache:
        os.environ["REFINE_CACHE_DIR"] = cache
        try:
            with fresh_models(), mock.patch("time.strftime", fixed):
                return _produce(dest, server, siglip, cli, jobs)
        finally:
            if saved is None:
                os.environ.pop("REFINE_CACHE_DIR", None)
            else:
                os.environ["REFINE_CACHE_DIR"] = saved


@contextlib.contextmanager
def fresh_models():
    """Models and phrase embeddings of this production only: a phrase embedded earlier in
    this process, in a batch of other phrases, comes out about 1e-7 apart (padding)."""
    from unittest import mock

    from metrics.text_embedding import default_cache
    from refine.backends import registry

    default_cache().clear()
    with mock.patch.dict(registry._INSTANCES, clear=True):
        yield
    default_cache().clear()


JOBS = ("run", "batch", "bench", "concepts", "sos", "sos-report", "agree")
NEEDS = {"sos-report": "sos", "agree": "bench"}  # a job that reads another's folder


def _produce(
    dest: Path, server, siglip: Path, cli: Callable, jobs: set[str] | None
) -> dict[str, str]:
    if jobs is not None:
        unknown = sorted(set(jobs) - set(JOBS))
        if unknown:
            raise ValueError(f"unknown golden jobs {unknown} (the jobs: {', '.join(JOBS)})")
        for job_name, needed in NEEDS.items():
            if job_name in jobs and needed not in jobs:
                raise ValueError(f"the golden job {job_name} needs {needed} too")
    dest.mkdir(parents=True, exist_ok=True)
    inputs = dest / "inputs"
    inputs.mkdir(exist_ok=True)
    embedder = ["--backend", f"image_embedder=siglip:{siglip}"]
    out: dict[str, str] = {}

    def job(name: str, args: list, world: World | None = None) -> None:
        if jobs is not None and name not in jobs:
            return
        server.handler = world or World()
        try:
            done = cli(*args)
        finally:
            server.handler = None
        if done.returncode != 0:
            raise RuntimeError(f"golden {name}: refine {' '.join(map(str, args))}\n{done.stderr}")
        out[name] = done.stdout

    act, country = ACTS[0], "Iran"
    job(
        "run",
        ["run", act, "--country", country, "--rounds", "2", "--seed", "7"]
        + ["--target", "1.0", "--out", dest / "run", *embedder],
    )

    specs = inputs / "batch.jsonl"
    specs.write_text(
        "\n".join(
            json.dumps(x)
            for x in (
                {"activity": act, "country": country, "rounds": 1, "seed": 43, "candidates": 1},
                {"activity": act, "country": country, "rounds": 2, "seed": 7, "target": 1.0},
            )
        )
        + "\n"
    )
    job("batch", ["batch", specs, "--out", dest / "batch", *embedder])

    bench_world = World()
    bench_world.generate_by_seed = {"gemini-3.1-flash-image": [RED, GREEN, BLUE, GREY]}
    bench_world.generate_by_model = {"gemini-3-pro-image": GREEN}
    job("bench", bench_args(dest / "bench", embedder), bench_world)

    concepts = inputs / "concepts.jsonl"
    concepts.write_text(
        "\n".join(
            json.dumps(x)
            for x in (
                {
                    "prompt": "Image of traditional food",
                    "concept": "cuisine",
                    "artifacts": "jollof",
                },
                {"concept": "cuisine", "country": "Iran", "artifacts": ["sabzi polo", "tahdig"]},
            )
        )
        + "\n"
    )
    concepts_world = World()
    concepts_world.generate_by_seed = {"gemini-3.1-flash-image": [RED, GREEN, BLUE, GREY]}
    concepts_world.generate_by_model = {"gemini-3-pro-image": GREEN}
    job("concepts", concepts_args(dest / "concepts", concepts, embedder), concepts_world)

    sos_world = World()
    sos_world.generate_by_seed = {"gemini-3.1-flash-image": [RED, GREEN, BLUE, GREY]}
    job("sos", sos_args(dest / "sos", embedder), sos_world)
    job("sos-report", ["sos", "report", dest / "sos", "--json"])
    if "sos-report" in out:
        (dest / "sos" / "analysis.json").write_text(out["sos-report"])
    if "bench" in out:
        write_ratings(dest / "bench", inputs / "rating")
        job("agree", agree_args(dest))
    return out


AGREED = ("faith", "align", "hal", "exag", "expectations", "caire", "clipscore")


def agree_args(dest: Path) -> list:
    ratings = dest / "inputs" / "rating" / "ratings.csv"
    args = ["agree", "--ratings", ratings, "--source", dest / "bench", "--seed", "3"]
    # the metrics the golden data owns, named: a metric added to the catalog since (one
    # refine agree would take by default) enters no golden ranking, page or figure
    args += ["--metrics", ",".join(AGREED)]
    return args + ["--out", dest / "agree", "--json"]


def bench_args(out: Path, embedder: list) -> list:
    args = ["bench", *[x for g in GENS for x in ("--generator", g)], "--countries", "Iran,India"]
    args += [x for a in ACTS for x in ("--activity", a)]
    return args + ["--images-per-prompt", "2", "--out", out, *embedder]


def concepts_args(out: Path, concepts: Path, embedder: list) -> list:
    args = ["concepts", *[x for g in GENS for x in ("--generator", g)], "--concepts", concepts]
    return args + ["--images-per-prompt", "4", "--seed", "0", "--out", out, *embedder]


def sos_args(out: Path, embedder: list) -> list:
    args = ["sos", "bank", "--cultures", "Japanese,Nigerian", "--languages", "en,fr"]
    args += ["--prompts-per-cell", "2", "--images-per-prompt", "2", "--out", out]
    return args + ["--backend", "generator=gemini:gemini-3.1-flash-image", *embedder]


def write_ratings(bench: Path, folder: Path) -> Path:
    """Two raters rate every image of the golden bench (copied beside the ratings file,
    with its activity and country, as the app's Rate view writes them) on two questions,
    by a fixed rule; one rater answers one image twice."""
    folder.mkdir(parents=True, exist_ok=True)
    cells = [json.loads(line) for line in (bench / "cells.jsonl").read_text().splitlines()]
    where = {im["file"]: (c["activity"], c["country"]) for c in cells for im in c["images"]}
    images = sorted((bench / "images").rglob("*.png"))
    rows = []
    for k, image in enumerate(images):
        name = f"r{k:02d}.png"
        shutil.copy(image, folder / name)
        act, country = where[image.relative_to(bench).as_posix()]
        about = {"activity": act, "country": country}
        rows.append(
            {"image": name, "rater": "ana", **about}
            | {"faithfulness": 1 + k % 5, "alignment": 1 + (k * 3) % 5}
        )
        rows.append(
            {"image": name, "rater": "ben", **about}
            | {"faithfulness": 1 + (k + 1) % 5, "alignment": 1 + (k * 2) % 5}
        )
    rows.append({**rows[0], "faithfulness": 5, "alignment": 5})
    path = folder / "ratings.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*rows[0]])
        w.writeheader()
        w.writerows(rows)
    return path


# -- comparison ---------------------------------------------------------------------
def files(root: Path) -> dict[str, Path]:
    """The tree's files by their names."""
    return {
        p.relative_to(root).as_posix(): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in VOLATILE_FILES
    }


def placeholders(root: Path) -> dict[str, str]:
    """The machine's names in a tree (from its golden.json) and what stands for them."""
    meta = read_meta(root)
    names = {meta["siglip"]: "<siglip>", meta["root"]: "<root>"}
    if meta.get("prefix"):
        names[meta["prefix"]] = "<prefix>"
    return names


def normalise_text(text: str, names: dict[str, str]) -> str:
    for old, new in names.items():
        text = text.replace(old, new)
    return text


def compare_arrays(a: Path, b: Path, na: dict[str, str], nb: dict[str, str]) -> list[str]:
    import numpy as np

    xa, xb = np.load(a), np.load(b)
    if a.suffix == ".npz":
        if sorted(xa.files) != sorted(xb.files):
            return [f"arrays {sorted(xa.files)} against {sorted(xb.files)}"]
        pairs = [(k, xa[k], xb[k]) for k in sorted(xa.files)]
    else:
        pairs = [("", xa, xb)]
    out = []
    for key, x, y in pairs:
        if x.shape != y.shape:
            out.append(f"{key} shape {x.shape} against {y.shape}")
        elif x.dtype.kind in "fc" and not np.allclose(x, y, rtol=TOLERANCE, atol=TOLERANCE):
            out.append(f"{key} differs by up to {float(np.max(np.abs(x - y)))}")
        elif x.dtype.kind in "US":
            if [normalise_text(str(v), na) for v in x.ravel()] != [
                normalise_text(str(v), nb) for v in y.ravel()
            ]:
                out.append(f"{key} differs")
        elif x.dtype.kind not in "fc" and not np.array_equal(x, y):
            out.append(f"{key} differs")
    return out


def differences(golden: Path, fresh: Path) -> list[str]:
    """Every difference between two golden trees: files present in one only, and per
    file the first values that differ (numbers beyond TOLERANCE)."""
    found: list[str] = []
    names = (placeholders(golden), placeholders(fresh))
    mine, theirs = files(golden), files(fresh)
    for name in sorted(set(mine) ^ set(theirs)):
        found.append(f"{name}: only in {'golden' if name in mine else 'fresh'}")
    for name in sorted(set(mine) & set(theirs)):
        a, b = mine[name], theirs[name]
        found += [f"{name}: {d}" for d in compare_file(a, b, *names)][:5]
    return found


def compare_file(a: Path, b: Path, na: dict[str, str], nb: dict[str, str]) -> list[str]:
    suffix = a.suffix
    if suffix in {".png", ".jpg", ".webp"}:
        return [] if a.read_bytes() == b.read_bytes() else ["bytes differ"]
    if suffix in {".npy", ".npz"}:
        return compare_arrays(a, b, na, nb)
    ta = normalise_text(a.read_text(), na)
    tb = normalise_text(b.read_text(), nb)
    if suffix == ".json":
        return compare(json.loads(ta), json.loads(tb), "")
    if suffix == ".jsonl":
        la, lb = ta.splitlines(), tb.splitlines()
        if len(la) != len(lb):
            return [f"{len(la)} lines against {len(lb)}"]
        return [
            d
            for k, (x, y) in enumerate(zip(la, lb, strict=True))
            for d in compare(json.loads(x), json.loads(y), f"line {k + 1}")
        ]
    if suffix == ".csv":
        return compare_csv(ta, tb)
    if suffix == ".html":
        return compare_numbers_in_text(ta, tb)
    return [] if ta == tb else ["text differs"]


def new_metric(name: str, golden: object) -> bool:
    """Whether ``name`` is a catalog metric that the golden file does not have: a metric
    added since, whose column and keys the golden data does not own (they are not
    compared, so a new metric regenerates no golden file)."""
    from metrics.catalog import known

    if isinstance(golden, str):  # a page: the metrics its cells name
        return known(name) and f'data-metric="{name}"' not in golden
    return known(name) and name not in golden  # a file's columns, a record's keys


def new_setting(name: str, value: object, golden: dict) -> bool:
    """Whether ``name`` is a run setting the golden record does not have, at its default: a
    setting added since (at its default it changes nothing the golden data shows)."""
    from refine.records import RunSpec

    field = RunSpec.model_fields.get(name)
    if name in golden or field is None or field.is_required():
        return False
    default = field.get_default(call_default_factory=True)
    return value == (default.model_dump(mode="json") if hasattr(default, "model_dump") else default)


def new_item(item: object, golden: list) -> bool:
    """Whether ``item`` of a list names a metric (``{"metric": NAME, ...}``) that no item of
    the golden list names: an entry added with a metric added since."""
    if not isinstance(item, dict) or not isinstance(item.get("metric"), str):
        return False
    named = {x.get("metric") for x in golden if isinstance(x, dict)}
    return item["metric"] not in named and new_metric(item["metric"], [])


def compare_csv(ta: str, tb: str) -> list[str]:
    """The golden file's columns, each compared by name (not position) with the fresh
    file's; a column of a metric added since is the fresh file's own."""
    ra, rb = list(csv.reader(io.StringIO(ta))), list(csv.reader(io.StringIO(tb)))
    if not ra or not rb:
        return [f"columns {ra[:1]} against {rb[:1]}"]
    missing = [c for c in ra[0] if c not in rb[0]]
    stray = [c for c in rb[0] if c not in ra[0] and not new_metric(c, ra[0])]
    if missing or stray:
        return [f"columns {missing} only in the golden file, {stray} only in the fresh one"]
    if len(ra) != len(rb):
        return [f"{len(ra)} rows against {len(rb)}"]
    at = {c: k for k, c in enumerate(rb[0])}
    keep = [c for c in ra[0] if c not in VOLATILE_KEYS]
    out = []
    for n, (x, y) in enumerate(zip(ra[1:], rb[1:], strict=True), start=2):
        row = dict(zip(ra[0], x, strict=True))
        out += compare([row[c] for c in keep], [y[at[c]] for c in keep], f"row {n}")
    return out


# a table cell or header of one metric in a page (refine.present.report's data-metric)
METRIC_CELL = re.compile(r'<t([hd])\b[^>]*\bdata-metric="([^"]+)"[^>]*>.*?</t\1>', re.S)


def without_new_metrics(fresh: str, golden: str) -> str:
    """A fresh page without the cells and headers of metrics the golden page has none of."""

    def kept(m: re.Match) -> str:
        return "" if new_metric(m.group(2), golden) else m.group(0)

    return METRIC_CELL.sub(kept, fresh)


NUMBER = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


SVG = re.compile(r"<svg\b.*?</svg>", re.S)
MARK = re.compile(r"<g id=\"[^\"]*\" (class=\"[^\"]*\"(?: data-[\w-]+=(?:\"[^\"]*\"|'[^']*'))*)>")
SVG_TEXT = re.compile(r"<text\b[^>]*>([^<]*)</text>")


def chart_data(svg: str) -> str:
    """What a chart says rather than how matplotlib drew it: its marks' classes and numbers
    (``data-*``) and its words, without path coordinates, which a matplotlib upgrade moves."""
    marks = "|".join(m.group(1) for m in MARK.finditer(svg))
    words = "|".join(t.group(1) for t in SVG_TEXT.finditer(svg))
    return f"<svg>{marks}||{words}</svg>"


def compare_numbers_in_text(ta: str, tb: str) -> list[str]:
    """HTML: the same text once numbers are set aside (and a final newline), and the same
    numbers; a chart is compared by :func:`chart_data`."""
    ta, tb = ta.rstrip("\n"), without_new_metrics(tb.rstrip("\n"), ta)
    ta = SVG.sub(lambda m: chart_data(m.group(0)), ta)
    tb = SVG.sub(lambda m: chart_data(m.group(0)), tb)
    if NUMBER.sub("#", ta) != NUMBER.sub("#", tb):
        return ["text differs"]
    printed = [Printed(x) for x in NUMBER.findall(ta)], [Printed(x) for x in NUMBER.findall(tb)]
    return compare(*printed, "")


def compare(a, b, where: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        # a metric added since, and a setting added since at its default
        b = {k: v for k, v in b.items() if not new_metric(k, a) and not new_setting(k, v, a)}
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))} in one only"]
        return [d for k in a if k not in VOLATILE_KEYS for d in compare(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        b = [x for x in b if not new_item(x, a)]  # a ranking's entry of a metric added since
        if len(a) != len(b):
            return [f"{where}: {len(a)} items against {len(b)}"]
        return [
            d
            for k, (x, y) in enumerate(zip(a, b, strict=True))
            for d in compare(x, y, f"{where}[{k}]")
        ]
    na, nb = number(a), number(b)
    if na is not None and nb is not None:
        allowed = max(TOLERANCE * max(1.0, abs(na)), last_place(a), last_place(b))
        same = (math.isnan(na) and math.isnan(nb)) or abs(na - nb) <= allowed
        return [] if same else [f"{where}: {a!r} against {b!r}"]
    return [] if a == b else [f"{where}: {a!r} against {b!r}"]


def number(x) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        return float(x)
    if isinstance(x, str):
        try:
            return float(x) if NUMBERISH.fullmatch(x) else None
        except ValueError:
            return None
    return None


class Printed(str):
    """A number as a page prints it for people (rounded to a few places), not as a file
    stores it (a float's repr, whose digits are all its own, however few)."""


def last_place(x) -> float:
    """One unit in the last place of a number printed for people ("0.550": 0.001), with
    room for the printing's own rounding; 0 for any other value."""
    if not isinstance(x, Printed) or "." not in x or "e" in x.lower():
        return 0.0
    return 1.000001 * 10.0 ** -len(x.split(".", 1)[1])


NUMBERISH = re.compile(r"-?(\d+\.?\d*(e-?\d+)?|nan|inf)")


# -- the world the golden outputs are made in -----------------------------------------
class Stage:
    """The stand-in Gemini server (its address and a key in the environment) and the tiny
    SigLIP, for a script run outside pytest."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root  # a fixed folder: the trees name the same paths every time

    def __enter__(self) -> Stage:
        import os
        import tempfile

        from tests.fakes.gemini_server import FakeGemini
        from tests.fakes.tiny_models import build_tiny_siglip

        self._saved = {
            k: os.environ.get(k)
            for k in (
                "GEMINI_API_KEY",
                "GOOGLE_GEMINI_BASE_URL",
                "HF_HUB_OFFLINE",
                "REFINE_CACHE_DIR",
            )
        }
        if self.root is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="refine-golden-")
            self.root = Path(self._tmp.name)
        else:
            self._tmp = None
            shutil.rmtree(self.root, ignore_errors=True)
            self.root.mkdir(parents=True)
        os.environ.update(HF_HUB_OFFLINE="1", REFINE_CACHE_DIR=f"{self.root}/cache")
        self.server = FakeGemini().start()
        os.environ["GEMINI_API_KEY"] = "test-key"
        os.environ["GOOGLE_GEMINI_BASE_URL"] = self.server.url
        self.siglip = build_tiny_siglip(self.root)
        return self

    def __exit__(self, *exc) -> None:
        import os

        self.server.stop()
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if self._tmp is not None:
            self._tmp.cleanup()
        else:
            shutil.rmtree(self.root, ignore_errors=True)


def write_meta(dest: Path, siglip: Path) -> None:
    """What the trees name that belongs to the machine that made them: the folder, the
    tiny SigLIP and the Python environment (the bundled MiniLM's path lies inside it)."""
    import sys

    meta = {"root": str(dest), "siglip": str(siglip), "prefix": sys.prefix}
    (dest / "golden.json").write_text(json.dumps(meta, indent=1) + "\n")


def read_meta(dest: Path) -> dict[str, str]:
    return json.loads((dest / "golden.json").read_text())
