"""refine batch on a real local Ray instance (2 CPUs, 127.0.0.1) through the fake Gemini
world: the same run records as the local engine; a worker killed mid-run is replaced and
its run resumes with no round lost or made twice; an interrupted driver is finished by
the local engine's --resume; bad settings get one line each."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading

import pytest

from refine.events import EntryChanged
from refine.harness.engine import EngineOptions
from refine.harness.ray import RayEngineError
from refine.harness.tasks.batch.specs import open_batch
from refine.harness.tasks.batch.task import run_batch
from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from refine.profiles import load_profile
from tests.e2e.test_batch import write_jsonl

pytestmark = pytest.mark.slow  # Ray: a cluster of worker processes

ACT, COUNTRY = "people eating food at home", "Iran"


@pytest.fixture(scope="module")
def cluster():
    # imported here, not as the module is collected: a run of the fast tests, which
    # leaves these out, would import Ray in each worker for nothing
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def specs(tmp_path, n=6, rounds=1):
    rows = [
        {
            "activity": ACT,
            "country": COUNTRY,
            "rounds": rounds,
            "seed": 40 + k,
            "target": 1.0,
            "max_drift": 2,
            "name": f"run{k}",
        }
        for k in range(n)
    ]
    return write_jsonl(tmp_path / "specs.jsonl", rows)


def rounds_of(store_dir, batch):
    out = {}
    for e in batch.entries:
        run = RunStore(store_dir / e.run_dir).load()
        out[e.name] = [
            (r.index, r.decision, r.text, [c.scores.faith for c in r.candidates], r.chosen)
            for r in run.rounds
        ]
    return out


def test_the_same_records_as_the_local_engine_with_a_killed_worker_replaced(
    cluster, world, backends, options, tmp_path
):
    """Ray makes the local engine's records, even with a worker killed in the middle of a
    run: it is replaced and the run resumes, no round lost or made twice (one Ray batch
    for both: a batch started two workers, about 8 s of imports each). Two runs, one a
    worker: the killed worker's run is resumed by its replacement while the other worker
    makes the other (four runs showed nothing more)."""
    path = specs(tmp_path, n=2, rounds=2)
    local, lstore = open_batch(path, tmp_path / "local", "gemini", backends)
    local = run_batch(
        local, lstore, Refiner("gemini", backends, options), engine=EngineOptions(workers=2)
    )
    world.log.clear()  # the kill waits for an edit of the Ray workers, not the local run's
    world.edit_delay_s = 1.0  # runs long enough to be killed in the middle
    remote, rstore = open_batch(path, tmp_path / "ray", "gemini", backends)
    seen, events, killed = [], [], []

    def kill_one():
        while "edit" not in world.log:
            threading.Event().wait(0.05)
        os.kill(int(seen[0].split("@")[0]), signal.SIGKILL)
        killed.append(seen[0])
        world.edit_delay_s = 0.0  # killed in the middle: the rest need not be slow

    def on_workers(names):
        seen.extend(names)
        threading.Thread(target=kill_one, daemon=True).start()

    remote = run_batch(
        remote,
        rstore,
        on_event=events.append,
        backend_options=options,
        on_workers=on_workers,
        engine=EngineOptions("ray", workers=2),
    )
    assert len(seen) == 2 and all("@" in w for w in seen) and str(os.getpid()) not in seen[0]
    assert killed and remote.summary["finished"] == 2 and remote.summary["retries"] >= 1
    assert json.loads((rstore.dir / "batch.json").read_text())["summary"]["retries"] >= 1
    # progress per worker: who made each run, its runs so far, rounds per minute (the
    # killed worker's replacement is a worker of its own)
    ended = [e for e in events if isinstance(e, EntryChanged) and e.done is not None]
    assert len(ended) == 2 and all("@" in e.worker for e in ended)
    assert len({e.worker for e in ended} - set(seen)) <= len(killed)  # or the replacement
    assert {e.worker for e in ended} & (set(seen) - set(killed))  # the one that lived made runs
    for worker in {e.worker for e in ended}:
        runs = [e.worker_runs for e in ended if e.worker == worker]
        assert runs == list(range(1, len(runs) + 1))
    assert all(e.rounds_per_min > 0 and e.worker_rounds_per_min > 0 for e in ended)
    assert f"[worker {ended[-1].worker}: " in ended[-1].describe()
    # the killed run was resumed, not started again: the local engine's rounds, each once
    assert len(list((rstore.dir / "runs").glob("*/run.json"))) == 2
    for e in remote.entries:
        run = RunStore(rstore.dir / e.run_dir).load()
        assert [r.index for r in run.rounds] == list(range(len(run.rounds)))  # none twice
        assert run.status == "finished" and len(run.rounds) == 3
    assert rounds_of(rstore.dir, remote) == rounds_of(lstore.dir, local)
    assert {**remote.summary, "retries": 0} == local.summary and local.summary["retries"] == 0


# the module's tests share the cell workers a job leaves (refine.harness.ray): these three
# end them, so they run after the others (tests/budget.py's run_order), in this order.
# Before, the kept-workers test ran third and the bank's test started a worker anew
# (4 s more of the test's time, about 6 CPU-s)
@pytest.mark.module_end  # Ctrl-C ends the worker it took
def test_an_interrupted_driver_is_finished_by_the_local_engine(
    cluster, world, backends, options, tmp_path
):
    path = specs(tmp_path, n=4)
    batch, store = open_batch(path, tmp_path / "b", "gemini", backends)

    def stop_after_first(event):
        if isinstance(event, EntryChanged) and event.done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(
            batch,
            store,
            on_event=stop_after_first,
            backend_options=options,
            # one worker: what is tested is the driver's end (the merged test shares runs
            # between two); a worker's start is about 6 s of imports
            engine=EngineOptions("ray", workers=1),
        )
    again, store = open_batch(path, tmp_path / "b", "gemini", backends, resume=True)
    assert sum(e.status == "finished" for e in again.entries) >= 1
    again = run_batch(
        again, store, Refiner("gemini", backends, options), engine=EngineOptions(workers=2)
    )
    assert again.summary["finished"] == 4
    assert len(list((store.dir / "runs").glob("*/run.json"))) == 4  # begun runs went on


def test_bad_settings_get_one_line_each(tmp_path, world, monkeypatch):
    """As the console script runs each (tests.e2e.test_cli_run.cli), in this process where
    its Ray is not the point (a process each, importing the command line, cost 0.7 s)."""
    from tests.e2e.test_cli_run import cli

    path = specs(tmp_path, n=1)
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "ray", None)  # Ray not installed: its import fails
        done = cli("batch", path, "--engine", "ray", "--out", tmp_path / "o")
    assert (
        done.returncode == 2
        and "the cultural-refine[ray] extra: pip install '.[ray]'" in done.stderr
    )
    assert len(done.stderr.strip().splitlines()) == 1
    # in a process of its own: this one may be joined to the module's Ray instance already
    address = ("--address", "127.0.0.1:9")
    done = cli("batch", path, "--engine", "ray", *address, "--out", tmp_path / "p", process=True)
    assert done.returncode == 2 and "--address 127.0.0.1:9: nothing answers there" in done.stderr
    done = cli("batch", path, "--address", "x:1", "--out", tmp_path / "q")
    assert done.returncode == 2 and "only with --engine ray" in done.stderr
    assert "edit" not in world.log and "generate" not in world.log  # no model was called


# -- refine bench on Ray ---------------------------------------------------------------
def bench_plan(siglip_path):
    from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts

    return BenchPlan(
        generators=["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"],
        prompts=plan_prompts(["Iran", "India"], [ACT, "wedding celebration"]),
        images_per_prompt=2,
        backends={"image_embedder": f"siglip:{siglip_path}"},
    )


def test_concepts_on_ray_are_the_same_concepts(cluster, world, siglip_path, options, tmp_path):
    from refine.harness.tasks.concepts.plan import ConceptPlan, load_concepts
    from refine.harness.tasks.concepts.task import run_concepts

    concepts = tmp_path / "c.jsonl"
    concepts.write_text(
        '{"prompt": "Image of traditional clothing"}\n'
        '{"concept": "a dish", "country": "Nigeria", "artifacts": "jollof rice; egusi"}\n'
    )
    plan = ConceptPlan(
        generators=["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"],
        concepts=load_concepts(concepts),
        images_per_prompt=4,
        backends={"image_embedder": f"siglip:{siglip_path}"},
    )
    lines = []
    local = run_concepts(plan, tmp_path / "local", backend_options=options)
    remote = run_concepts(
        plan,
        tmp_path / "ray",
        backend_options=options,
        on_event=lines.append,
        # one worker makes every cell (two share the bench's and the bank's cells)
        engine=EngineOptions("ray", workers=1),
    )
    assert (remote.config, remote.summary) == (local.config, local.summary)
    assert len(remote.cells) == 4
    rows = [(tmp_path / f / "concept_rows.csv").read_text() for f in ("local", "ray")]
    assert rows[0] == rows[1]
    (worker,) = lines[0].removeprefix("ray: 1 worker(s): ").split(", ")
    made = [line for line in lines if line.startswith("[")]
    assert len(made) == 4 and all(f"[{worker}]" in line for line in made)


def pool_workers(line: str) -> list[str]:
    """The workers a pool names in its first line ("ray: N worker(s): a, b")."""
    return re.sub(r"^ray: \d+ worker\(s\): ", "", line).split(", ")


def killer(world, lines, killed):
    """A progress callback that keeps the lines and, once the pool names its workers,
    SIGKILLs the first one as soon as the world has been asked for an image (and then
    answers without the delay that kept the cells long enough to be killed in)."""

    def on_line(line):
        lines.append(line)
        if line.startswith("ray: "):
            first = pool_workers(line)[0]

            def kill():
                while "generate" not in world.log:
                    threading.Event().wait(0.05)
                os.kill(int(first.split("@")[0]), signal.SIGKILL)
                killed.append(first)
                world.delay_by_kind = {}

            threading.Thread(target=kill, daemon=True).start()

    return on_line


def test_bench_on_ray_survives_a_killed_worker_and_makes_the_same_bench(
    cluster, world, siglip_path, options, tmp_path
):
    """A worker killed in the middle of a cell is replaced, the cell is made again, and
    the bench is the local engine's: the same record and rows, every cell once, each
    made by a worker of its own process. One worker: the killed one's replacement makes
    what is left (that the other workers go on meanwhile is the batch's test above; a
    worker's start is about 4.5 CPU-s). The cells whose prompt a generator refuses
    (IMAGE_SAFETY, its finish reason sent back from the worker) fail alone, with the
    local engine's reasons, and the bench goes on."""
    from refine.harness.task import CellsFailed
    from refine.harness.tasks.bench.cells import BenchStore, cell_key
    from refine.harness.tasks.bench.task import run_bench
    from tests.fakes.gemini_world import GREEN, RED

    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    world.bare, world.bare_models = {"generate": "IMAGE_SAFETY"}, {"gemini-3-pro-image"}
    world.bare_words = "wedding"  # the two wedding cells of one generator
    plan = bench_plan(siglip_path)
    with pytest.raises(CellsFailed) as local:
        run_bench(plan, tmp_path / "local", backend_options=options)
    world.log.clear()  # the kill waits for the Ray workers' first image request
    world.delay_by_kind = {"generate": 0.5}  # cells long enough to be killed in the middle
    lines, killed = [], []
    with pytest.raises(CellsFailed) as ray:
        run_bench(
            plan,
            tmp_path / "ray",
            backend_options=options,
            on_event=killer(world, lines, killed),
            engine=EngineOptions("ray", workers=1),
        )
    assert killed and any(line.startswith("retrying ") for line in lines)
    assert len(ray.value.failures) == 2 and sorted(ray.value.failures) == sorted(
        local.value.failures
    )
    assert all("wedding" in f and "IMAGE_SAFETY" in f for f in ray.value.failures)
    results = ray.value.results
    cells = BenchStore(tmp_path / "ray").records()
    keys = [cell_key(c) for c in cells]
    assert len(keys) == 6 and len(set(keys)) == 6  # every cell made once
    assert sum(row["prompts"] for row in results.summary["generators"].values()) == 6
    docs = [json.loads((tmp_path / f / "results.json").read_text()) for f in ("local", "ray")]
    # the same record but for the cells' timings
    assert [(d["config"], d["summary"]) for d in docs[1:]] == [
        (docs[0]["config"], docs[0]["summary"])
    ]
    assert docs[1]["summary"]["generators"]["gemini:gemini-3-pro-image"]["prompts"] == 2
    rows = [(tmp_path / f / "rows.csv").read_text() for f in ("local", "ray")]
    assert rows[0] == rows[1]
    # each cell was made by a worker (named in its progress line: the one the pool
    # started, or the one that replaced it once killed), in its own process; the images
    # are in the bench folder
    workers = pool_workers(lines[0])
    assert workers == killed and "@" in workers[0]
    assert not workers[0].startswith(f"{os.getpid()}@")
    made = [line for line in lines if line.startswith("[")]
    named = [re.findall(r"\[(\d+@[^\]]+)\]", line) for line in made]
    assert len(made) == 8 and all(len(n) == 1 for n in named), made  # 6 made, 2 failed
    assert sum("IMAGE_SAFETY" in line for line in made) == 2
    named = {n[0] for n in named}
    assert not any(w.startswith(f"{os.getpid()}@") for w in named)
    assert len(named - set(workers)) == 1  # the replacement, a process of its own, made cells
    assert all((tmp_path / "ray" / im["file"]).is_file() for c in cells for im in c["images"])


def test_bench_engine_settings_get_one_line_each(tmp_path):
    from tests.e2e.test_cli_run import cli

    done = cli("bench", "--address", "x:1", "--out", str(tmp_path / "a"))
    assert done.returncode == 2 and "only with --engine ray" in done.stderr


# -- refine sos bank on Ray ------------------------------------------------------------
def test_sos_bank_on_ray_is_the_same_bank(cluster, world, siglip_path, tmp_path):
    """The bank is the local engine's: the same manifest, embeddings and centroids, each
    cell made by the worker (one, as in the bench's test). A killed worker's replacement
    is the cell engine's, which the bank shares with the bench: the bench's test kills
    one."""
    import numpy as np

    from refine.backends.selection import Backends
    from refine.evaluate.sos import Bank
    from refine.harness.tasks.sos.bank import build_bank

    overrides = {"image_embedder": f"siglip:{siglip_path}"}
    chosen = Backends(load_profile("gemini"), overrides)
    gen, emb = chosen.get("generator"), chosen.get("image_embedder")
    grid = ("person", ["Japanese", "Nigerian"], ["en", "fr"])
    build_bank(tmp_path / "local", *grid, gen, emb, prompts_per_cell=2)
    lines = []
    build_bank(
        tmp_path / "ray",
        *grid,
        gen,
        emb,
        prompts_per_cell=2,
        on_progress=lambda done, total, what: lines.append(f"cell {done}/{total}: {what}"),
        models=("gemini", overrides),
        emit=lines.append,
        engine=EngineOptions("ray", workers=1),
    )
    assert not any(line.startswith("retrying ") for line in lines)
    local, remote = Bank(tmp_path / "local"), Bank(tmp_path / "ray")
    assert len(remote.done()) == 4 and all(len(c["images"]) == 2 for c in remote.done())
    assert remote.manifest == local.manifest  # prompts, image files, embeddings, done
    for name in ("embeddings.npy",):
        np.testing.assert_allclose(
            np.load(tmp_path / "ray" / name), np.load(tmp_path / "local" / name), atol=1e-5
        )
    a, b = (
        np.load(tmp_path / "ray" / "centroids.npz"),
        np.load(tmp_path / "local" / "centroids.npz"),
    )
    assert sorted(a.files) == sorted(b.files)
    for key in a.files:
        if a[key].dtype.kind == "f":
            np.testing.assert_allclose(a[key], b[key], atol=1e-5)
        else:
            assert (a[key] == b[key]).all()
    # each cell named with the worker that made it, the one the pool started, in a
    # process of its own
    workers = pool_workers(lines[0])
    cells = [line for line in lines if line.startswith("cell ")]
    named = [re.findall(r"\[(\d+@[^\]]+)\]", line) for line in cells]
    assert len(cells) == 4 and all(len(n) == 1 for n in named), cells
    assert {n[0] for n in named} == set(workers) and len(workers) == 1
    assert not workers[0].startswith(f"{os.getpid()}@")


@pytest.mark.module_end  # a job of another kind ends the workers kept
def test_a_toy_task_spec_on_ray_writes_the_record_the_local_engine_does(cluster, tmp_path):
    """The toy task registered here, run by its own command (refine toy) on Ray."""
    from refine.harness import registry
    from refine.harness.results import Results
    from refine.harness.task import run_task
    from tests.e2e.test_cli_run import cli
    from tests.fakes.toy_task import TOY, ToyPlan, ToyTask

    local = run_task(ToyTask(ToyPlan(ks=[1, 2, 3]), tmp_path / "local"))
    with registry.registered(TOY):
        # cells from two workers: the batch test
        done = cli("toy", "--ks", "1,2,3", "--out", tmp_path / "ray", "--engine", "ray")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("ray: 1 worker(s): ")
    remote = Results.read(tmp_path / "ray")
    assert remote.summary["vendi"]["mean"] == pytest.approx(2.0)
    assert (remote.config, remote.summary, remote.cells) == (
        local.config,
        local.summary,
        local.cells,
    )
    csvs = [(tmp_path / f / "toy.csv").read_text() for f in ("local", "ray")]
    assert csvs[0] == csvs[1]


@pytest.mark.module_end  # ends every kept worker
def test_a_driver_that_joined_ray_keeps_its_workers_for_its_next_job(
    cluster, tmp_path, monkeypatch
):
    """A job that ended cleanly leaves its workers (their imports done, most of a worker's
    start) to this program's next job, which they serve with its own maker; unused, they
    end after IDLE_S, or at once by release_kept(). A worker that cannot build its maker
    is one line, and is not kept."""
    from refine.harness import ray as ray_engine
    from refine.harness.task import run_task
    from tests.fakes.toy_task import ToyPlan, ToyTask, UnbuildableToyTask

    def run(task, name, lines, workers):
        engine = EngineOptions("ray", workers=workers)
        return run_task(
            task(ToyPlan(ks=[3]), tmp_path / name), engine=engine, on_event=lines.append
        )

    def ended(worker):
        pid = int(worker.split("@")[0])
        return ray_engine.wait_for(lambda: not ray_engine._alive(pid), 15.0)

    ray_engine.release_kept()  # what the module's tests before kept (a -k selection)
    first, again, broken = [], [], []
    run(ToyTask, "a", first, workers=2)  # two workers start at once
    started = pool_workers(first[0])
    assert len(started) == 2 and not any(line.startswith("kept from") for line in first)
    monkeypatch.setattr(ray_engine, "IDLE_S", 0.5)  # the next job's workers then wait this long
    result = run(ToyTask, "b", again, workers=1)
    (worker,) = pool_workers(again[0])
    assert worker in started and again[1] == f"kept from this program's last job: {worker}"
    assert [c["vendi"] for c in result.cells] == pytest.approx([3.0])  # made: k = 3
    assert ended(worker)  # unused for IDLE_S
    (other,) = set(started) - {worker}  # still kept (its 120 s)
    assert ray_engine.release_kept() == 1 and ended(other)

    with pytest.raises(RayEngineError, match="^a Ray worker could not start: .*not on this node"):
        run(UnbuildableToyTask, "c", broken, workers=1)
    assert ray_engine.release_kept() == 0  # its worker was not kept
