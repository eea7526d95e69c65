"""Shared fixtures: a fixed-vector embedder, the real MiniLM, and the fake Gemini world."""

from __future__ import annotations

import atexit
import gc
import itertools
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from refine.backends.imports import steady_collector
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.gemini_world import World
from tests.fakes.tiny_models import build_tiny_siglip
from tests.leaks import (  # noqa: F401 (the check's hooks and fixture, registered here)
    nothing_left_running,
    pytest_runtest_protocol,
    pytest_sessionfinish,
    pytest_sessionstart,
    session_folder,
)

gc.disable()  # until the tests begin (see _set_aside)

# every test process keeps to one core's worth of threads, under pytest-xdist (three workers
# share two cores; more threads per worker only make them wait on each other) and in one
# process alike (-n 0: the same float32 sums as the workers'), and so does every process
# a test starts (a command, a Ray worker, accelerate's): torch's, the BLAS libraries' and
# the tokenizers' thread pools
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_configure(config):
    """The suite's time against its budget, checked after the tests and given as the run's
    last line (tests/budget.py)."""
    from tests import budget

    budget.register(config)


_FINISHED = False  # this process is a pytest-xdist worker whose session has ended


def _end_without_finalizing() -> None:
    """A worker's last exit step, once its session has ended (:func:`pytest_unconfigure`;
    a process that only inherited the worker's environment exits as usual, with its own
    status): its results are sent and its session's checks are done (the atexit handlers
    registered after this one, the libraries', have run), so it
    leaves without the interpreter's finalization, which tears down every module of a
    process that loaded torch, transformers, diffusers and Gradio: 3 to 6 s at the end of
    the run while the run waits for its workers to exit. The two handlers registered
    before this one that matter, logging's and multiprocessing's (both harmless twice),
    run here."""
    if not _FINISHED:
        return
    import logging

    logging.shutdown()
    if "multiprocessing.util" in sys.modules:
        sys.modules["multiprocessing.util"]._exit_function()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


if os.environ.get("PYTEST_XDIST_WORKER"):
    atexit.register(_end_without_finalizing)  # registered first: run last


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    global _FINISHED
    _FINISHED = hasattr(config, "workerinput")  # a worker of pytest-xdist
    if _FINISHED:
        # pytest's check for exceptions raised in finalizers runs a full garbage
        # collection twice as the session ends (1.8 s over a worker's heap of torch,
        # transformers and Gradio, while the run waits for its workers); the worker then
        # leaves without finalizing anything (see above), so what it holds is set aside
        # from collection, and those two passes find nothing to walk
        gc.freeze()


# The cycle collector and the libraries' objects. Each full pass walks every object a
# process holds, most of them torch's, transformers', Gradio's and the like: loaded once,
# kept to the end. Measured over a whole run, 20 of the workers' 307 CPU seconds went to 43
# such passes, a quarter of them while the test modules were imported. So the collector is
# off while they are imported, and after that, and after each test that imported many
# modules, what survives a full pass is set aside from later passes (``gc.freeze``):
# reference counting still frees it, the collector no longer walks it.
_FROZEN_AT = [0]  # how many modules were loaded when the collector last set them aside


def _set_aside() -> None:
    steady_collector()  # the pace of the toolkit's own processes
    gc.collect()
    gc.freeze()
    _FROZEN_AT[0] = len(sys.modules)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    """The tests begin (in each worker, and in the process that hands them out)."""
    _set_aside()
    gc.enable()


def pytest_runtest_logfinish(nodeid, location):
    if len(sys.modules) - _FROZEN_AT[0] >= 20:
        _set_aside()


os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the tests' Ray workers run at the tests' priority, as the toolkit's own local cluster's do
# (Ray's default, nice 15, starves them beside a busy process)
os.environ.setdefault("RAY_worker_niceness", "0")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# what libraries write to the temporary folder, and built references and cached model
# answers, go to a folder of this test session only, removed at its end; the session fails
# when a test leaves a process, a listening socket or a file behind (tests/leaks.py)
session_folder()

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "assets"
EXAMPLE = ASSETS / "examples" / "iran_eating_home"


_SERIAL = itertools.count()


class FixedEmbedder:
    """Maps each phrase to a given vector (normalised): makes every similarity known.

    Each instance has its own id, so caches never mix two instances' vectors.
    """

    def __init__(self, vectors: dict[str, list[float]], name: str = "fixed") -> None:
        self.vectors = vectors
        self.name = f"{name}-{next(_SERIAL)}"
        self.calls: list[list[str]] = []

    @property
    def id(self) -> str:
        return f"test:{self.name}"

    def encode(self, phrases):
        import torch

        self.calls.append(list(phrases))
        out = torch.tensor([self.vectors[p] for p in phrases], dtype=torch.float32)
        return torch.nn.functional.normalize(out, dim=1)


@pytest.fixture
def fixed_embedder():
    return FixedEmbedder


@pytest.fixture(scope="session")
def minilm():
    from refine.backends import create

    return create("text_embedder", "st:all-MiniLM-L6-v2", device="cpu")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``weights`` run only with REFINE_REAL_MODELS=1 (they need the real
    models in the Hugging Face cache); tests marked ``gpu`` also need a CUDA GPU."""
    real = os.environ.get("REFINE_REAL_MODELS") == "1"
    gpu = None
    for item in items:
        if "weights" in item.keywords and not real:
            item.add_marker(pytest.mark.skip(reason="real weights: set REFINE_REAL_MODELS=1"))
        elif "gpu" in item.keywords:
            if gpu is None:
                import torch

                gpu = torch.cuda.is_available()
            if not gpu:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
    # modules with slow tests first, each module's tests together, its longest first
    # (tests/budget.py's run_order, which says why)
    from tests import budget

    items[:] = budget.run_order(items, budget.profiled_tests())


# -- the loop's world: the fake Gemini server behind the real backends ----------------
@pytest.fixture(scope="session")
def gemini_env():
    server = FakeGemini().start()
    saved = {k: os.environ.get(k) for k in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL")}
    os.environ["GEMINI_API_KEY"] = "test-key"
    os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
    yield server
    server.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def world(gemini_env):
    with in_world(gemini_env) as w:
        yield w


@pytest.fixture(scope="session")
def siglip_path(tmp_path_factory):
    return build_tiny_siglip(tmp_path_factory.mktemp("loop-siglip"))


def loop_backends(siglip_path) -> dict:
    """The loop's models in the fake Gemini world: the profile's, with the tiny SigLIP."""
    return {"image_embedder": f"siglip:{siglip_path}"}


def loop_options() -> dict:
    # no retries: an injected failure surfaces at once
    fast = {"max_retries": 0}
    return {
        "image_embedder": {"device": "cpu"},
        "text_embedder": {"device": "cpu"},
        **{r: dict(fast) for r in ("generator", "editor", "observer", "judge", "llm")},
    }


@pytest.fixture
def backends(siglip_path):
    return loop_backends(siglip_path)


@pytest.fixture
def options():
    return loop_options()


@contextmanager
def in_world(server: FakeGemini, world: World | None = None) -> Iterator[World]:
    """``world`` (a new one by default) answering for the fake Gemini server meanwhile."""
    world = world or World()
    server.handler = world
    try:
        yield world
    finally:
        server.handler = None


@pytest.fixture
def kb_dir(tmp_path, siglip_path):
    """A small CAIRE knowledge base (tea: red pictures with a text; rice: blue ones) on the
    tiny SigLIP the loop fixtures use."""
    from refine.backends import create
    from refine.evaluate.caire.kb import KnowledgeBase, read_source
    from tests.integration.test_caire_kb import folder_source

    embedder = create("image_embedder", f"siglip:{siglip_path}", shared=False, device="cpu")
    kb = KnowledgeBase.open_or_create(tmp_path / "kb", embedder.id)
    kb.add(read_source(folder_source(tmp_path)), embedder)
    return tmp_path / "kb"
