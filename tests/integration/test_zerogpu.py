"""The ZeroGPU Space: each model call of the local backends runs under one lease of
``spaces.GPU(duration=...)``, and the Space's entry loads the models before it serves. The
``spaces`` package is replaced by a stand-in that records each lease (on a machine without
ZeroGPU the real one leases nothing)."""

from __future__ import annotations

import functools
import pickle

import pytest
from PIL import Image

from refine.backends import create
from tests.fakes.tiny_models import build_tiny_open_clip, build_tiny_qwen3, build_tiny_sd
from ui import zerogpu

RED = Image.new("RGB", (64, 64), (200, 30, 30))


class StandInSpaces:
    """``spaces`` as ZeroGPU's decorator is called, ``GPU(duration=s)(fn)``, and as its
    worker process is reached: the arguments and the answer go through pickle, as between
    processes (small: no backend, no weights, no callable)."""

    def __init__(self) -> None:
        self.leases: list[tuple[str, int]] = []
        self.open = 0
        self.largest = 0

    def GPU(self, duration: int):  # noqa: N802 (the package's name)
        def decorate(fn):
            @functools.wraps(fn)
            def leased(*args, **kwargs):
                assert self.open == 0, "a lease inside a lease"
                sent = pickle.dumps((args, kwargs))
                self.largest = max(self.largest, len(sent))
                args, kwargs = pickle.loads(sent)
                self.open += 1
                self.leases.append((args[1], duration))  # the method's name
                try:
                    return pickle.loads(pickle.dumps(fn(*args, **kwargs)))
                finally:
                    self.open -= 1

            return leased

        return decorate


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-zerogpu")
    return {
        "sd": build_tiny_sd(root, 4),
        "ip2p": build_tiny_sd(root, 8),
        "qwen": build_tiny_qwen3(root, "qwen3.5"),
        "clip": build_tiny_open_clip(root / "clip"),
    }


@pytest.fixture
def spaces():
    stand_in = StandInSpaces()
    try:
        yield stand_in
    finally:
        zerogpu.unlease()


@pytest.mark.slow
def test_each_model_call_holds_one_lease(tiny, spaces):
    wrapped = zerogpu.lease_per_call(spaces, 30)
    assert "DiffusersGenerator.generate" in wrapped and "HFModel._generate" in wrapped
    # the methods of their own that run a model: a localized inpaint, ImageReward's
    # reading, CLIP-FlanT5's VQAScore
    for own in ("DiffusersInpainter.edit", "ImageReward.score", "ClipT5Judge._yes"):
        assert own in wrapped
    cpu = {"device": "cpu", "shared": False}
    gen = create("generator", f"diffusers:{tiny['sd']}", steps=1, width=64, height=64, **cpu)
    editor = create("editor", f"diffusers:{tiny['ip2p']}", steps=1, **cpu)
    vlm = create("observer", f"hf:{tiny['qwen']}", max_new_tokens=4, batch_size=1, **cpu)
    clip = create("image_embedder", tiny["clip"], **cpu)

    steps = []
    made = gen.generate("a feast", [1, 2], progress=lambda *step: steps.append(step))
    assert spaces.leases == [("generate", 30)] and len(made) == 2
    assert steps == []  # a progress reporter stays behind: the worker cannot call it
    editor.edit(made[0], "add a teapot", [3])
    vlm.generate_texts(["one?", "two?"], [RED, RED])  # two batches: two generate calls
    vlm.yes_probability([RED], ["Is it red?"])
    vlm.rate_scale([RED], ["Rate 0-10."], 0, 10)  # the digits, then "10" against "1"
    clip.clip_iqa([RED])  # its logit scale, its image and its two prompts
    embedded = clip.encode_images([RED])  # a tensor comes back on the CPU
    assert embedded.device.type == "cpu" and embedded.shape == (1, 16)
    assert [name for name, _ in spaces.leases] == [
        "generate",
        "edit",
        "_generate",
        "_generate",
        "answer_distribution",
        "answer_distribution",
        "next_token_probability",
        "encode_texts",
        "encode_images",
        "logit_scale",
        "encode_images",
    ]
    assert {seconds for _, seconds in spaces.leases} == {30}
    from tests.fakes.tiny_models import build_tiny_clip_t5

    spaces.leases.clear()
    t5 = create("judge", f"clip-t5:{build_tiny_clip_t5(tiny['sd'].parent)}", **cpu)
    assert len(t5.vqa_score([RED, RED], ["a", "b"])) == 2
    assert spaces.leases == [("_yes", 30)]  # one lease for the batch
    assert spaces.largest < 100_000  # ids, names and small images: never a model
    # wrapping again takes the new duration, not a lease around a lease
    zerogpu.lease_per_call(spaces, 90)
    spaces.leases.clear()
    vlm.yes_probability([RED], ["Is it red?"])
    assert spaces.leases == [("answer_distribution", 90)]
    zerogpu.unlease()
    spaces.leases.clear()
    vlm.yes_probability([RED], ["Is it red?"])
    assert spaces.leases == []
    with pytest.raises(ValueError, match="REFINE_GPU_SECONDS=0: 1 or more"):
        zerogpu.lease_per_call(spaces, 0)


@pytest.mark.slow
def test_the_zerogpu_space_loads_its_models_then_serves(tiny, spaces, tmp_path, monkeypatch):
    from ui import deploy

    profile = tmp_path / "tiny-local.toml"
    profile.write_text(
        f"""
[roles]
generator = "diffusers:{tiny["sd"]}"
editor = "diffusers:{tiny["ip2p"]}"
observer = "hf:{tiny["qwen"]}"
judge = "hf:{tiny["qwen"]}"
llm = "gemini:gemini-3.8-flash"
text_embedder = "st:all-MiniLM-L6-v2"
image_embedder = "{tiny["clip"]}"
[options.generator]
device = "cpu"
[options.editor]
device = "cpu"
[options.observer]
device = "cpu"
[options.judge]
device = "cpu"
[options.image_embedder]
device = "cpu"
"""
    )
    served = {}

    def serve(demo, deployment):
        served.update(demo=demo, deployment=deployment)

    monkeypatch.setattr(deploy, "serve", serve)
    loads = []
    preload = zerogpu.preload
    monkeypatch.setattr(zerogpu, "preload", lambda svc: loads.append((svc, preload(svc))))
    env = {
        "REFINE_PROFILE": str(profile),
        "GEMINI_API_KEY": "k",
        "REFINE_OUT": str(tmp_path / "runs"),
        "REFINE_GPU_SECONDS": "45",
    }
    zerogpu.main(spaces, env)
    assert served["deployment"].profile == str(profile) and served["demo"] is not None
    # every local model was loaded before the app was served, outside any lease; the API
    # model loads nothing
    ((service, loaded),) = loads
    roles = ["generator", "editor", "observer", "judge", "text_embedder", "image_embedder"]
    assert [entry.split("=")[0] for entry in loaded] == roles
    backends = service.refiner().backends
    assert backends.get("generator").pipe is not None and backends.get("judge").model is not None
    assert spaces.leases == [] and spaces.open == 0
    # MiniLM runs on the processor between leases; tuning is off, by the app and its API
    assert backends.get("text_embedder").device == "cpu"
    with pytest.raises(ValueError, match="tuning is off on ZeroGPU"):
        service.tuning.tune("dpo", 10, 1e-4, 256)
    from refine.backends.diffusers_backends import DiffusersGenerator

    assert hasattr(DiffusersGenerator.generate, "__refine_leased__")
    with pytest.raises(SystemExit) as stopped:
        zerogpu.main(spaces, {**env, "REFINE_GPU_SECONDS": "soon"})
    assert stopped.value.code == 2
