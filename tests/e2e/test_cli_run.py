"""`refine run` and `refine refs` as a user runs them, in real subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from refine.io.store import RunStore

ACT, COUNTRY = "people eating food at home", "Iran"
MAIN = "from refine.cli import main; main()"


def refine_cmd(*args):
    return [sys.executable, "-c", MAIN, *args]


def no_retries_profile(folder):
    """The gemini profile as a file whose Gemini roles do not retry (``max_retries = 0``, a
    client option a profile's ``[options.ROLE]`` table sets): a failure the fake server is
    told to give reaches the run at once, not after 1 + 2 + 4 + 8 s of backoff."""
    from refine.profiles import load_profile

    text = load_profile("gemini").path.read_text()
    gemini = ("generator", "editor", "observer", "judge", "llm")
    for role in gemini:
        if f"[options.{role}]\n" in text:
            text = text.replace(f"[options.{role}]\n", f"[options.{role}]\nmax_retries = 0\n")
        else:
            text += f"\n[options.{role}]\nmax_retries = 0\n"
    path = folder / "gemini-no-retries.toml"
    path.write_text(text)
    read = load_profile(str(path)).options  # read back as the run reads it: no role retries
    assert all(read[role]["max_retries"] == 0 for role in gemini), read
    return path


def env():
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


def cli(*args, timeout=300, process=False):
    """``refine ARGS`` as a user runs it, its output captured as text: the console entry
    point (``refine.cli.main``) in this process, where the packages are already imported
    (a new process spends about 5 s importing torch and transformers before it starts);
    with ``process`` (or REFINE_TEST_SUBPROCESS=1, to run every call so), in a subprocess.
    A kill, a Ray cluster or a fresh import each want ``process``."""
    if process or os.environ.get("REFINE_TEST_SUBPROCESS") == "1":
        return subprocess.run(
            refine_cmd(*args), env=env(), capture_output=True, text=True, timeout=timeout
        )
    return in_process(*args)


def scored(stdout: str) -> list[dict]:
    """The images of ``refine score --json``'s results record, in the order given: each
    with its observations, scores, feedback and expectations checked."""
    return [im for cell in json.loads(stdout)["cells"] for im in cell["images"]]


def in_process(*args) -> subprocess.CompletedProcess:
    """``refine ARGS`` through ``refine.cli.main`` here: stdout, stderr and the exit code
    as a subprocess would give them (an unexplained error: its traceback, code 1)."""
    import contextlib
    import io
    import traceback

    from refine.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            if not isinstance(done.code, int | None):
                print(done.code, file=sys.stderr)
        except Exception:
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def run_args(out, rounds, siglip_path):
    return [
        *("run", ACT, "--country", COUNTRY, "--out", str(out), "--rounds", str(rounds)),
        *("--target", "1.0", "--max-drift", "2", "--backend"),
        f"image_embedder=siglip:{siglip_path}",
    ]


@pytest.mark.slow
def test_resume_after_kill_9_mid_round(world, siglip_path, tmp_path):
    world.edit_delay_s = 60.0
    args = run_args(tmp_path, 2, siglip_path)
    proc = subprocess.Popen(refine_cmd(*args), env=env(), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while "edit" not in world.log:  # round 0 is saved before the first edit is asked for
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the run never reached its first edit"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    killed = RunStore(run_dir).load()
    assert killed.status == "running" and len(killed.rounds) == 1
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]
    world.edit_delay_s = 0.0
    out = cli("run", "--resume", str(run_dir), "--json")
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)
    assert done["status"] == "finished" and done["id"] == killed.id
    assert done["rounds"][0] == killed.rounds[0].model_dump(mode="json")
    assert [r["decision"] for r in done["rounds"]] == ["initial", "accepted", "rejected"]
    assert RunStore(run_dir).load().model_dump(mode="json") == done


def test_a_full_disk_is_one_line_and_resume_finishes_the_run(
    world, siglip_path, tmp_path, monkeypatch
):
    """The disk fills as round 1's record is written: one line says so and what to do
    (it was a traceback), the record on disk is round 0's, whole, and --resume finishes."""
    import errno

    from refine.io import store as stores

    real, saves = stores.RunStore.save, []

    def filling(self, run):
        saves.append(len(run.rounds))
        if len(run.rounds) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.dir / "run.json"))
        return real(self, run)

    with monkeypatch.context() as m:
        m.setattr(stores.RunStore, "save", filling)
        done = in_process(*run_args(tmp_path, 1, siglip_path))  # the patch is this process's
    assert done.returncode == 1, done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("error: the disk is full writing ") and "--resume" in said, said
    assert "Traceback" not in done.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(RunStore(run_dir).load().rounds) == 1  # round 0's record, whole
    again = cli("run", "--resume", str(run_dir), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["status"] == "finished"


def test_run_summary_and_errors(world, siglip_path, tmp_path):
    args = run_args(tmp_path, 1, siglip_path)
    out = cli(*args)
    assert out.returncode == 0, out.stderr
    assert "stopped by max rounds: 1 editing round(s) done" in out.stdout
    assert "round 1: edit" in out.stderr and "accepted" in out.stdout
    # where the references came from, said once the run has begun
    assert "\n  references: the bundled pack (cultivate.json)\n" in out.stderr
    bad = cli("run", "people eating at home", "--country", "Iran", "--out", str(tmp_path))
    assert bad.returncode == 2 and "did you mean 'people eating food at home'" in bad.stderr
    bad = cli("run", ACT, "--country", "Iran", "--profile", "huge-gpu")
    assert bad.returncode == 2 and "unknown profile 'huge-gpu'" in bad.stderr
    # NaN failed every bound's comparison, and read as above the upper bound
    bad = cli("run", ACT, "--country", "Iran", "--max-drift", "nan", "--out", str(tmp_path))
    assert (bad.returncode, bad.stderr) == (2, "error: --max-drift 'nan': not a finite number\n")
    shown = cli("refs", "show", ACT, "--country", "iran", "--json")
    refs = json.loads(shown.stdout)
    assert refs["country"] == "Iran" and "Persian rug on floor" in refs["descriptors"]["setting"]
    assert len(refs["stereotypes"]) == 15 and "AHEaD" in refs["source"]


def test_settings_that_disagree_are_refused_before_any_model_loads(
    gemini_env, world, siglip_path, tmp_path
):
    """--memory with a writer that takes no hints, and --reference-guided with no photos,
    each in one line before any model is asked or loaded (they waited for every model
    first: 22 s and 13 s on the cpu profile)."""
    asked = len(gemini_env.paths)
    args = run_args(tmp_path, 1, siglip_path)
    for extra, said in (
        (["--memory", "--writer", "template"], "error: --memory gives past fixes to the "
         "language model that words the instruction; --writer template uses none"),
        (["--reference-guided"], "error: --reference-guided: no real photos of people eating "
         "food at home in Iran"),
    ):  # fmt: skip
        done = cli(*args, *extra)
        assert done.returncode == 2 and done.stderr.startswith(said), done.stderr
        assert "loading" not in done.stderr  # no model was loaded or checked
    assert len(gemini_env.paths) == asked and not world.log
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]  # no run folder


def test_a_second_process_on_a_held_run_is_refused(tmp_path):
    import socket

    from refine.records import ReferencePack, Run, RunSpec

    store = RunStore.create(tmp_path, "held")
    refs = ReferencePack(activity=ACT, country=COUNTRY, descriptors={"setting": ["a kitchen"]})
    store.save(Run(id="held", spec=RunSpec(activity=ACT, country=COUNTRY), references=refs))
    store.acquire()  # this test's process drives the run
    try:
        out = cli("run", "--resume", str(store.dir))
    finally:
        store.release()
    assert out.returncode == 2, out.stderr
    me = f"{os.getpid()}@{socket.gethostname()}"
    assert out.stderr.strip() == f"error: --resume: {store.dir} is in use by process {me}; " + (
        "wait for it to end, or stop it"
    )


def test_ctrl_c_during_a_run_says_how_to_resume_it(capsys):
    """Ctrl-C during ``refine run`` (the batch's test sends a real SIGINT): the command
    names the run's folder and the command that goes on with it, and exits 130; before
    the run began, it says nothing was saved."""
    import typer

    from refine.cli.run_cmd import resume_hint

    for where, said in (
        ({"dir": "/runs/iran run"}, "go on with\n  refine run --resume '/runs/iran run'\n"),
        ({}, "interrupted before the run began: nothing was saved\n"),
    ):
        with pytest.raises(typer.Exit) as stopped:
            with resume_hint(where):
                raise KeyboardInterrupt
        assert stopped.value.exit_code == 130
        assert capsys.readouterr().err.endswith(said)
