"""Usage errors on the command line: one line naming the option and what is wrong, exit 2,
never a traceback (whatever click typer carries)."""

from __future__ import annotations

import pytest

from refine.cli import main

ACT = "people eating food at home"
BAD = [
    (["run", ACT, "--country", "Iran", "--rounds", "-1"], "--rounds '-1': Input should be greater"),
    (
        ["run", ACT, "--country", "Iran", "--rounds", "abc"],
        "--rounds 'abc': Input should be a valid",
    ),
    (["run", ACT, "--country", "Iran", "--target=2"], "--target '2': Input should be less"),
    (["run", ACT, "--country", "Iran", "--bogus"], "No such option: --bogus"),
    (["run", ACT, "--country", "Iran", "--edit-from", "middle"], "--edit-from: Input should be"),
    (["run", ACT, "--country", "Iran", "--instruction", "0=x"], "--instruction: '0=x'"),
    (["run", ACT, "--country", "Iran", "--backend", "painter=x"], "--backend: 'painter=x'"),
    (["run", ACT, "--country", "Iran", "--prompt-languages", "xx"], "unknown language 'xx'"),
    (["run", ACT, "--country", "Atlantis"], "Atlantis"),
    (["run", ACT], "give an ACTIVITY and --country"),
    (["app", "--port", "99999"], "--port '99999': Input should be less than or equal to 65535"),
    (["app", "--auth", "nocolon"], "--auth: use USER:PASS"),
    (["frobnicate"], "No such command 'frobnicate'"),
    (["batch"], "Missing argument 'specs'. (see 'refine batch --help')"),
    (["score"], "Missing argument 'IMAGES'"),
    (["metrics", "vendi", "--q"], "requires an argument. (see 'refine metrics vendi --help')"),
    (["caire", "score", "x.png"], "Missing option '--labels'"),
    (["caire", "kb", "build"], "(see 'refine caire kb build --help')"),
    (["sos", "bank", "--cultures", "x"], "--languages: Field required"),
    (["refs", "show"], "Missing argument 'activity'"),
    (["backends", "--role", "painter"], "--role: unknown backend role 'painter'"),
    (["run", ACT, "--country", "Iran", "--out", "/etc/hostname"], "--out: /etc/hostname is a file"),
    (["batch", "x.jsonl", "--out", "/etc/hostname"], "--out: /etc/hostname is a file"),
    (["score", "/etc/hostname", "--activity", ACT, "--country", "Iran"], "use a .png"),
]


@pytest.mark.parametrize(("args", "expected"), BAD, ids=[" ".join(a)[:40] for a, _ in BAD])
def test_a_usage_error_is_one_line_and_exit_2(capsys, args, expected):
    with pytest.raises(SystemExit) as done:
        main(args)
    err = capsys.readouterr().err
    assert done.value.code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert expected in err and "Traceback" not in err
