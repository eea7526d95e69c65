"""refine.io.files: atomic writes leave the old file or the new one and no temp file on
failure; confined paths refuse climbing out, links and NUL; image folders list plain
images only."""

from __future__ import annotations

import os
import stat

import pytest

from refine.io import files


def test_an_atomic_write_that_fails_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "run.json"
    files.atomic_write_text(target, "old")

    def broken(tmp):
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        files.atomic_write(target, broken)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
    files.atomic_write_json(target, {"a": "é"})
    assert target.read_text(encoding="utf-8") == '{\n "a": "é"\n}'
    assert stat.S_IMODE(target.stat().st_mode) == files.FILE_MODE


def test_the_temp_file_keeps_the_suffix_writers_go_by(tmp_path):
    seen = []
    files.atomic_write(tmp_path / "a.png", lambda tmp: (seen.append(tmp), tmp.write_bytes(b"x")))
    assert seen[0].suffix == ".png" and files.is_temp(seen[0]) and not seen[0].exists()


def test_confined_paths(tmp_path):
    root = tmp_path / "out"
    (root / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    os.symlink(tmp_path / "secret", root / "link")
    assert files.confined(root, "runs/r1") == root / "runs" / "r1"
    assert files.confined(root, str(root / "runs")) == root / "runs"
    for bad in ("../secret", str(tmp_path / "secret"), "link", "runs/../../secret", "nope"):
        with pytest.raises(ValueError, match="is not a folder inside"):
            files.confined(root, bad)
    for empty in ("", "  ", None, "runs\x00"):
        with pytest.raises(ValueError):
            files.confined(root, empty)


def test_image_folders_and_plain_files(tmp_path):
    for name in ("b.PNG", "a.jpg", "notes.txt", "c.webp"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "d.png").mkdir()
    os.symlink(tmp_path / "a.jpg", tmp_path / "e.png")
    assert [p.name for p in files.image_files(tmp_path)] == ["a.jpg", "b.PNG", "c.webp", "e.png"]
    assert files.plain_file_inside(tmp_path, tmp_path / "a.jpg") == "a.jpg"
    assert files.plain_file_inside(tmp_path, tmp_path / "e.png") is None  # a link
    assert files.plain_file_inside(tmp_path, tmp_path / "notes.txt") is None
    assert files.plain_file_inside(tmp_path / "d.png", tmp_path / "a.jpg") is None  # outside
    assert files.file_sha256(tmp_path / "a.jpg") == (
        "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    )


def test_json_lines_split_on_newlines_alone_and_bad_lines_are_named(tmp_path):
    """A JSON-lines file is split on \\n alone: text holding U+2028, U+2029 or U+0085 is one
    record (str.splitlines cut it in two); a line cut by a kill, or that json_value refuses
    (NaN, nested past reading), is left out; a line that is not UTF-8 is named with its
    file and line (the last line may end within a character: a kill's cut)."""
    import json

    from refine.io.files import append_jsonl_rows, json_lines, read_jsonl

    path = tmp_path / "rows.jsonl"
    rows = [{"text": f"a{sep}b"} for sep in ("\u2028", "\u2029", "\u0085", "\x0b", "\x1c")]
    append_jsonl_rows(path, rows)
    assert [v for _, v in read_jsonl(path)] == rows
    assert json_lines("a\r\nb\u2028c\n\nd") == ["a", "b\u2028c", "", "d"]
    with path.open("a") as f:
        f.write('{"x": NaN}\n' + "[" * 50_000 + "]" * 50_000 + '\n{"cut": ')
    assert [v for _, v in read_jsonl(path)] == rows
    append_jsonl_rows(path, [{"after": 1}])  # the cut line closed first
    assert [v for _, v in read_jsonl(path)] == [*rows, {"after": 1}]
    with pytest.raises(ValueError, match="Out of range float values"):
        append_jsonl_rows(path, [{"x": float("nan")}])
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b'{"a": 1}\n{"b": "\xff"}\n{"c": "\xe2\x80')
    with pytest.raises(ValueError, match=r"broken.jsonl: line 2 is not UTF-8 text"):
        read_jsonl(broken)
    broken.write_bytes(b'{"a": 1}\n{"c": "\xe2\x80')  # the last line cut within a character
    assert read_jsonl(broken) == [(1, {"a": 1})]
    assert json.loads(path.read_text().split("\n")[0]) == rows[0]
