"""The run store: images on disk before the record that names them, safe names."""

from __future__ import annotations

import json
import os

import pytest
from PIL import Image

import refine.io.store as store_module
from refine.io.store import RunLocked, RunStore
from refine.records import ReferencePack, Run, RunSpec


def a_run(run_id: str) -> Run:
    refs = ReferencePack(activity="a", country="b", descriptors={"setting": ["kitchen"]})
    return Run(id=run_id, spec=RunSpec(activity="a", country="b"), references=refs)


def test_images_are_written_before_the_record(tmp_path):
    store = RunStore.create(tmp_path, "r1")
    red = Image.new("RGB", (32, 16), (200, 30, 30))
    store.save_image("round_00_c0.png", red)
    red.paste((0, 0, 255), (0, 0, 32, 16))  # the caller's later changes do not leak in
    store.save(a_run("r1"))
    on_disk = Image.open(store.dir / "round_00_c0.png").convert("RGB")
    assert on_disk.getpixel((5, 5)) == (200, 30, 30) and on_disk.size == (32, 16)
    assert store.load_image("round_00_c0.png").getpixel((5, 5)) == (200, 30, 30)
    assert RunStore(store.dir).load_image("round_00_c0.png").getpixel((5, 5)) == (200, 30, 30)
    assert json.loads((store.dir / "run.json").read_text())["id"] == "r1"
    store.close()


def test_a_failed_image_write_stops_the_record(tmp_path, monkeypatch):
    store = RunStore.create(tmp_path, "r2")
    store.save(a_run("r2"))
    before = (store.dir / "run.json").read_text()

    def broken(path, image):
        raise OSError("disk full")

    monkeypatch.setattr(store_module, "_write_png", broken)
    store.save_image("round_01_c0.png", Image.new("RGB", (8, 8)))
    run = a_run("r2")
    run.stop_reason = "changed"
    with pytest.raises(OSError, match="disk full"):
        store.save(run)
    assert (store.dir / "run.json").read_text() == before  # no record names a lost image
    store.close()


def test_names_stay_inside_the_run_directory(tmp_path):
    store = RunStore.create(tmp_path, "r3")
    with pytest.raises(ValueError, match="outside the run directory"):
        store.save_image("../escape.png", Image.new("RGB", (4, 4)))
    with pytest.raises(ValueError, match="not safe for a file name"):
        RunStore.create(tmp_path, "../x")
    assert RunStore.create(tmp_path, "r3").dir.name == "r3-2"


def test_runs_started_at_once_never_collide(tmp_path):
    import threading

    made, errors = [], []

    def create():
        try:
            made.append(RunStore.create(tmp_path / "runs", "20261122-140000-iran-eating").dir)
        except Exception as err:  # pragma: no cover - the failure this test looks for
            errors.append(err)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(made)) == 8
    assert sorted(p.name for p in made)[:2] == [
        "20261122-140000-iran-eating",
        "20261122-140000-iran-eating-2",
    ]


def test_a_held_run_is_refused_and_a_stale_lock_taken_over(tmp_path):
    import os
    import socket
    import stat

    from refine.io.files import FILE_MODE
    from refine.io.store import RunLocked

    store = RunStore.create(tmp_path, "r3")
    store.save(a_run("r3"))
    store.acquire()
    me = f"{os.getpid()}@{socket.gethostname()}"
    with pytest.raises(RunLocked, match=f"in use by process {me}"):
        RunStore(store.dir).acquire()
    store.close()  # closing releases the lock
    assert not (store.dir / ".lock").exists()
    # a lock left by a process that is gone (killed) is taken over, with its temp files
    (store.dir / ".lock").write_text(f"999999999@{socket.gethostname()}")
    (store.dir / ".run.json.abc.tmp").write_text("half")
    (store.dir / ".round_01_c0.png.tmp").write_bytes(b"\x89PNG")
    again = RunStore(store.dir)
    assert again.holder() is None
    again.acquire()
    assert not list(store.dir.glob(".*.tmp"))
    assert (store.dir / ".lock").read_text() == me
    again.release()
    # files follow the umask, not mkstemp's 0600
    assert stat.S_IMODE((store.dir / "run.json").stat().st_mode) == FILE_MODE


def _race(run_dir, start, done, won):
    from refine.io.store import RunLocked, RunStore

    store = RunStore(run_dir)
    start.wait()
    try:
        store.acquire()
        won.put(os.getpid())
    except RunLocked:
        pass
    done.wait()  # the winner holds the run until everyone has tried
    store.release()


@pytest.mark.slow
def test_processes_racing_for_a_run_get_one_holder_every_time(tmp_path, monkeypatch):
    """Six processes try to take one run at the same moment, 24 times over: each time
    exactly one holds it (with the lock created first and its owner written after, a
    loser could read an empty lock as stale and take it too: 9 of 24 trials did)."""
    import multiprocessing

    # forked from a clean one-thread server: a fork of a busy test process can inherit a
    # lock another thread held, and hang
    ctx = multiprocessing.get_context("forkserver")
    # the server's socket in the session's short folder: in the temporary folder, under a
    # long TMPDIR, its path passed the 107 bytes a socket's may have
    import multiprocessing.util
    import os
    import tempfile

    short = tempfile.mkdtemp(prefix="mp-", dir=os.environ.get("REFINE_TEST_SHORT_TMP"))
    monkeypatch.setattr(multiprocessing.util, "get_temp_dir", lambda: short)
    ctx.set_forkserver_preload(["refine.io.store", "tests.unit.test_store"])
    store = RunStore.create(tmp_path, "race")
    store.save(a_run("race"))
    try:
        race(ctx, store)
    finally:  # the server and its resource tracker end with the test, not the session
        from multiprocessing import forkserver, resource_tracker

        forkserver._forkserver._stop()
        resource_tracker._resource_tracker._stop()
        import shutil

        shutil.rmtree(short, ignore_errors=True)


def race(ctx, store: RunStore) -> None:
    for trial in range(24):
        start, done, won = ctx.Barrier(6), ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_race, args=(store.dir, start, done, won)) for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
            assert p.exitcode == 0
        winners = []
        while not won.empty():
            winners.append(won.get())
        assert len(winners) == 1, f"trial {trial}: {len(winners)} holders"
        assert store.holder() is None  # released, and free for the next trial


def test_the_lock_dies_with_its_process(tmp_path):
    """A process killed while it holds a run leaves it free: the OS drops the lock."""
    import signal
    import subprocess
    import sys
    import time

    store = RunStore.create(tmp_path, "killed")
    store.save(a_run("killed"))
    code = (
        "import sys, time; from refine.io.store import RunStore; "
        f"RunStore({str(store.dir)!r}).acquire(); print('held', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    assert store.holder() == f"{proc.pid}@{__import__('socket').gethostname()}"
    with pytest.raises(RunLocked, match=f"process {proc.pid}@"):
        RunStore(store.dir).acquire()
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    time.sleep(0.05)
    assert store.holder() is None
    store.acquire()  # taken over at once
    store.release()
