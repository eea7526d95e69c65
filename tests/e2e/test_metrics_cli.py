"""The `refine metrics` JSON contracts, and one-line errors with exit code 2 for bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refine.cli import main
from tests.conftest import EXAMPLE, ROOT

REFS = EXAMPLE / "refs.json"
OBSERVED = EXAMPLE / "observed.json"


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def run_json(capsys, *args: str):
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    if isinstance(data, np.ndarray):
        np.save(path, data)
    elif isinstance(data, str):
        path.write_text(data)
    else:
        path.write_text(json.dumps(data))
    return path


# ----------------------------------------------------------------------------- ahead


def test_ahead_multi_contract(capsys):
    d = run_json(capsys, "metrics", "ahead", "--refs", str(REFS), "--preds", str(OBSERVED))
    assert d["mode"] == "multi" and d["n_images"] == 2 and d["tau"] == 0.52
    for key in ("align", "hal", "ddiv", "sdiv", "per_dimension", "feedback"):
        assert key in d
    assert "exag" not in d and "faith" not in d
    assert set(d["per_dimension"]) == {"setting", "objects", "attire", "interaction", "spatial"}
    dims = d["per_dimension"].values()
    assert d["align"] == pytest.approx(sum(x["align"] for x in dims) / 5)
    statuses = {m["status"] for m in d["feedback"]["references"]}
    assert statuses <= {"aligned", "missing"}
    assert len(d["feedback"]["references"]) == 50
    hallucinated = {
        m["phrase"] for m in d["feedback"]["predictions"] if m["status"] == "hallucinated"
    }
    assert "a pizza" in hallucinated and "a neon sign on the wall" in hallucinated
    assert 0 < d["align"] < 1 and 0 < d["hal"] < 1


def test_ahead_single_contract_matches_multi_singles(capsys):
    single = run_json(
        capsys,
        "metrics",
        "ahead",
        "--refs",
        str(REFS),
        "--preds",
        str(OBSERVED),
        "--mode",
        "single",
    )
    multi = run_json(capsys, "metrics", "ahead", "--refs", str(REFS), "--preds", str(OBSERVED))
    assert len(single["images"]) == 2
    assert all("ddiv" not in im and "sdiv" not in im for im in single["images"])
    mean_single = sum(im["align"] for im in single["images"]) / 2
    assert multi["sdiv"] == pytest.approx(multi["align"] - mean_single)


def test_ahead_identical_preds(capsys, tmp_path):
    refs = json.loads(REFS.read_text())
    preds = write(tmp_path, "p.json", [refs, refs])
    d = run_json(capsys, "metrics", "ahead", "--refs", str(REFS), "--preds", str(preds))
    assert (d["align"], d["hal"], d["sdiv"]) == (1.0, 0.0, 0.0)
    assert d["ddiv"] == pytest.approx(1.0)  # every reference covered twice: even


def test_ahead_with_exag(capsys, tmp_path):
    exag = write(
        tmp_path,
        "exag.json",
        {
            "candidates": ["giant domes", "oversized hookahs"],
            "scores": [[0.2, 0.9], [0.6, 0.1]],
            "baseline": [0.4, 0.3],
        },
    )
    d = run_json(
        capsys,
        "metrics",
        "ahead",
        "--refs",
        str(REFS),
        "--preds",
        str(OBSERVED),
        "--exag",
        str(exag),
        "--mode",
        "single",
    )
    first, second = d["images"]
    assert first["exag"] == pytest.approx(0.6) and second["exag"] == pytest.approx(0.2)
    assert first["faith"] == pytest.approx((first["align"] + 1 - first["hal"] + 1 - 0.6) / 3)
    assert first["feedback"]["exaggerated"] == [{"candidate": "oversized hookahs", "excess": 0.6}]
    m = run_json(
        capsys,
        "metrics",
        "ahead",
        "--refs",
        str(REFS),
        "--preds",
        str(OBSERVED),
        "--exag",
        str(exag),
    )
    assert m["exag"] == pytest.approx(0.4)
    assert m["faith"] == pytest.approx((m["align"] + 1 - m["hal"] + 1 - 0.4) / 3)
    assert [e["candidate"] for e in m["feedback"]["exaggerated"]] == [
        "oversized hookahs",
        "giant domes",
    ]


def test_ahead_tau_changes_result(capsys):
    low = run_json(
        capsys, "metrics", "ahead", "--refs", str(REFS), "--preds", str(OBSERVED), "--tau", "0.2"
    )
    high = run_json(
        capsys, "metrics", "ahead", "--refs", str(REFS), "--preds", str(OBSERVED), "--tau", "0.8"
    )
    assert low["align"] > high["align"] and low["hal"] < high["hal"]


def test_ahead_readable_output(capsys):
    code, out, _ = run(capsys, "metrics", "ahead", "--refs", str(REFS), "--preds", str(OBSERVED))
    assert code == 0
    assert "ALIGN" in out and "missing:" in out and "hallucinated:" in out


# ----------------------------------------------------------------------------- vendi


def test_vendi_contract(capsys, tmp_path):
    x = write(tmp_path, "x.npy", np.eye(4))
    d = run_json(capsys, "metrics", "vendi", "--embeddings", str(x))
    assert d["vendi"] == pytest.approx(4.0) and d["n"] == 4 and d["q"] == 1.0
    s = write(tmp_path, "s.npy", np.array([0.5, 0.5, 1.0, 1.0]))
    d = run_json(capsys, "metrics", "vendi", "--embeddings", str(x), "--quality", str(s))
    assert d["qvendi"] == pytest.approx(3.0) and d["qvendi_per_item"] == pytest.approx(0.75)
    k = write(tmp_path, "k.npy", np.array([[1.0, 0.5], [0.5, 1.0]]))
    d = run_json(capsys, "metrics", "vendi", "--kernel", str(k), "--q", "inf")
    assert d["vendi"] == pytest.approx(1 / 0.75) and d["q"] == "inf"
    d = run_json(capsys, "metrics", "vendi", "--kernel", str(k), "--q", "2")
    assert d["vendi"] == pytest.approx(1.6)


# ----------------------------------------------------------------------------- sos


def test_sos_contract_and_bank(capsys, tmp_path):
    e = write(tmp_path, "e.npy", np.array([[1.0, 0, 0], [1.0, 0, 1], [0, 1.0, 0], [0, 1.0, 1]]))
    labels = write(tmp_path, "l.csv", "culture,language\nA,en\nA,zz\nB,en\nB,zz\n")
    bank = tmp_path / "bank.npz"
    d = run_json(
        capsys,
        "metrics",
        "sos",
        "--embeddings",
        str(e),
        "--labels",
        str(labels),
        "--save-bank",
        str(bank),
    )
    assert bank.exists() and d["saved_bank"] == str(bank)
    assert [(i["culture"], i["language"]) for i in d["images"]] == [
        ("A", "en"),
        ("A", "zz"),
        ("B", "en"),
        ("B", "zz"),
    ]
    # by symmetry every image has the same SoS; compute image 0 by hand
    r2 = 1 / math.sqrt(2)
    sem_a = np.array([1 + r2, 0, r2]) / 2
    surf_en = np.array([0.5, 0.5, 0])
    e0 = np.array([1.0, 0, 0])
    expected = sem_a @ e0 / np.linalg.norm(sem_a) - surf_en @ e0 / np.linalg.norm(surf_en)
    assert d["images"][0]["sos"] == pytest.approx(expected)
    assert {p["n"] for p in d["pairs"]} == {1}
    # reuse the saved bank on one new image
    e_new = write(tmp_path, "new.npy", np.array([[1.0, 0, 0]]))
    l_new = write(tmp_path, "new.csv", "culture,language\nA,en\n")
    d2 = run_json(
        capsys,
        "metrics",
        "sos",
        "--embeddings",
        str(e_new),
        "--labels",
        str(l_new),
        "--bank",
        str(bank),
    )
    assert d2["images"][0]["sos"] == pytest.approx(expected)
    assert d2["bank"] == str(bank)


# ----------------------------------------------------------------------------- bad input


def _bad(capsys, args, *fragments):
    code, out, err = run(capsys, *args)
    assert code == 2, (out, err)
    assert "Traceback" not in err
    line = err.strip()
    assert "\n" not in line, err
    for fragment in fragments:
        assert fragment in line, line
    return line


@pytest.fixture
def files(tmp_path):
    return {
        "refs": write(tmp_path, "refs.json", {"setting": ["a rug"]}),
        "preds": write(tmp_path, "preds.json", [{"setting": ["a carpet"]}]),
    }


def test_ahead_bad_inputs(capsys, tmp_path, files):
    refs, preds = str(files["refs"]), str(files["preds"])
    _bad(
        capsys,
        ["metrics", "ahead", "--refs", str(tmp_path / "nope.json"), "--preds", preds],
        "nope.json",
        "file not found",
    )
    bad_json = write(tmp_path, "bad.json", '{"setting": [')
    _bad(
        capsys,
        ["metrics", "ahead", "--refs", str(bad_json), "--preds", preds],
        "bad.json",
        "invalid JSON",
        "line 1",
    )
    unknown = write(tmp_path, "unk.json", {"setings": ["x"]})
    _bad(
        capsys,
        ["metrics", "ahead", "--refs", str(unknown), "--preds", preds],
        "unk.json",
        "unknown dimension 'setings'",
    )
    non_str = write(tmp_path, "ns.json", [{"objects": ["ok", 7]}])
    _bad(
        capsys,
        ["metrics", "ahead", "--refs", refs, "--preds", str(non_str)],
        "ns.json",
        "image[0].objects[1]",
        "must be a string",
    )
    empty = write(tmp_path, "empty.json", {"setting": [], "objects": []})
    _bad(
        capsys, ["metrics", "ahead", "--refs", str(empty), "--preds", preds], "empty.json", "empty"
    )
    not_list = write(tmp_path, "obj.json", {"setting": ["x"]})
    _bad(
        capsys,
        ["metrics", "ahead", "--refs", refs, "--preds", str(not_list)],
        "obj.json",
        "one {dimension",
    )
    _bad(
        capsys,
        ["metrics", "ahead", "--refs", refs, "--preds", preds, "--mode", "pooled"],
        "--mode",
        "'pooled'",
    )
    _bad(capsys, ["metrics", "ahead", "--refs", refs, "--preds", preds, "--tau", "1.5"], "--tau")
    _bad(
        capsys,
        ["metrics", "ahead", "--refs", refs, "--preds", preds, "--embedder", "xx:model"],
        "--embedder",
        "unknown text_embedder backend 'xx:model'",
        "st:",
    )


def test_unusable_device(capsys, files):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    args = ["metrics", "ahead", "--refs", str(files["refs"]), "--preds", str(files["preds"])]
    _bad(capsys, [*args, "--device", "cuda"], "--device", "'cuda'", "no CUDA GPU")


def test_exag_bad_inputs(capsys, tmp_path, files):
    base = ["metrics", "ahead", "--refs", str(files["refs"]), "--preds", str(files["preds"])]
    rows = write(
        tmp_path, "rows.json", {"candidates": ["a"], "scores": [[0.1], [0.2]], "baseline": [0.1]}
    )
    _bad(capsys, [*base, "--exag", str(rows)], "rows.json", "2 rows", "1 images")
    cols = write(
        tmp_path, "cols.json", {"candidates": ["a", "b"], "scores": [[0.1]], "baseline": [0.1, 0.2]}
    )
    _bad(capsys, [*base, "--exag", str(cols)], "cols.json", "scores[0]", "2 numbers")
    base_len = write(
        tmp_path, "bl.json", {"candidates": ["a", "b"], "scores": [[0.1, 0.2]], "baseline": [0.1]}
    )
    _bad(capsys, [*base, "--exag", str(base_len)], "bl.json", "baseline")
    nan = write(tmp_path, "nan.json", '{"candidates": ["a"], "scores": [[NaN]], "baseline": [0]}')
    _bad(capsys, [*base, "--exag", str(nan)], "nan.json", "scores[0][0]", "finite")
    missing = write(tmp_path, "miss.json", {"candidates": ["a"], "scores": [[0.1]]})
    _bad(capsys, [*base, "--exag", str(missing)], "miss.json", "'baseline'")


def test_vendi_bad_inputs(capsys, tmp_path):
    nan = write(tmp_path, "nan.npy", np.array([[1.0, np.nan], [0.0, 1.0]]))
    _bad(capsys, ["metrics", "vendi", "--embeddings", str(nan)], "nan.npy", "NaN or inf", "[0, 1]")
    inf = write(tmp_path, "inf.npy", np.array([[1.0, np.inf]]))
    _bad(capsys, ["metrics", "vendi", "--kernel", str(inf)], "inf.npy", "NaN or inf")
    rect = write(tmp_path, "rect.npy", np.ones((2, 3)))
    _bad(capsys, ["metrics", "vendi", "--kernel", str(rect)], "rect.npy", "square")
    vec = write(tmp_path, "vec.npy", np.ones(3))
    _bad(capsys, ["metrics", "vendi", "--embeddings", str(vec)], "vec.npy", "2-D")
    x = write(tmp_path, "x.npy", np.eye(3))
    q = write(tmp_path, "q.npy", np.ones(4))
    _bad(
        capsys,
        ["metrics", "vendi", "--embeddings", str(x), "--quality", str(q)],
        "q.npy",
        "4 values for 3 items",
    )
    _bad(capsys, ["metrics", "vendi"], "exactly one")
    _bad(capsys, ["metrics", "vendi", "--embeddings", str(x), "--q", "abc"], "--q")
    _bad(
        capsys,
        ["metrics", "vendi", "--embeddings", str(tmp_path / "none.npy")],
        "none.npy",
        "file not found",
    )
    junk = write(tmp_path, "junk.npy", "not numpy")
    _bad(capsys, ["metrics", "vendi", "--embeddings", str(junk)], "junk.npy", ".npy")


def test_sos_bad_inputs(capsys, tmp_path):
    e = write(tmp_path, "e.npy", np.eye(3))
    short = write(tmp_path, "short.csv", "culture,language\nA,en\nB,en\n")
    _bad(
        capsys,
        ["metrics", "sos", "--embeddings", str(e), "--labels", str(short)],
        "short.csv",
        "2 label rows",
        "3 rows",
    )
    no_col = write(tmp_path, "nocol.csv", "culture,lang\nA,en\nB,en\nC,en\n")
    _bad(
        capsys,
        ["metrics", "sos", "--embeddings", str(e), "--labels", str(no_col)],
        "nocol.csv",
        "'language'",
    )
    blank = write(tmp_path, "blank.csv", "culture,language\nA,en\n,en\nC,en\n")
    _bad(
        capsys,
        ["metrics", "sos", "--embeddings", str(e), "--labels", str(blank)],
        "blank.csv",
        "line 3",
        "culture",
    )
    nan = write(tmp_path, "nan.npy", np.array([[np.nan, 1.0, 0], [0, 1.0, 0], [1.0, 0, 0]]))
    good = write(tmp_path, "good.csv", "culture,language\nA,en\nB,en\nC,en\n")
    _bad(
        capsys,
        ["metrics", "sos", "--embeddings", str(nan), "--labels", str(good)],
        "nan.npy",
        "NaN or inf",
    )
    other_bank = tmp_path / "other.npz"
    np.savez(
        other_bank,
        cultures=np.array(["Z"]),
        languages=np.array(["en"]),
        semantic=np.eye(1, 3),
        surface=np.eye(1, 3),
    )
    _bad(
        capsys,
        [
            "metrics",
            "sos",
            "--embeddings",
            str(e),
            "--labels",
            str(good),
            "--bank",
            str(other_bank),
        ],
        "other.npz",
        "culture 'A' is not in the bank",
    )


@pytest.mark.slow
def test_installed_console_script(capsys):
    """The console script's help through ``refine.cli.main`` here; the installed script
    itself once, on a bad input (its exit code and one line: 5 CPU-s of a new process's
    imports each, so once)."""
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "metrics" in out
    code, sub, _ = run(capsys, "metrics", "--help")
    assert code == 0
    for word in ("ahead", "vendi", "sos"):
        assert word in sub
    exe = Path(sys.executable).parent / "refine"
    bad = subprocess.run(
        [str(exe), "metrics", "vendi", "--kernel", "missing.npy"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip() == "error: missing.npy: file not found"


def test_backends_listing(capsys):
    listing = run_json(capsys, "backends")
    rows = listing["backends"]
    assert "gemini" in {p["name"] for p in listing["profiles"]}
    names = {(r["role"], r["example"]) for r in rows}
    assert ("text_embedder", "st:all-MiniLM-L6-v2") in names
    assert ("generator", "gemini:gemini-3.1-flash-lite-image") in names
    assert ("editor", "gemini:gemini-nano-banana-2.1") in names
    assert {r["role"] for r in rows} >= {"generator", "editor", "observer", "judge", "llm"}
    only = run_json(capsys, "backends", "--role", "judge")["backends"]
    assert {r["role"] for r in only} == {"judge"}
    _bad(capsys, ["backends", "--role", "painter"], "--role", "unknown backend role 'painter'")
