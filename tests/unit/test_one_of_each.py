"""One of each: tau has one range and is resolved in one place; ``+lora=`` has one parser,
read the same by the bench and by the diffusers backend."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from metrics.ahead import TAU_RANGE, check_tau
from refine.backends.lora import join_adapters, split_adapters
from refine.backends.selection import Backends
from refine.profiles import load_profile
from refine.records import RunSpec
from tests.e2e.test_cli_run import cli

LO, HI = TAU_RANGE


def test_tau_one_range_everywhere(tmp_path):
    assert check_tau(LO) == LO and check_tau(HI) == HI and check_tau(0.5) == 0.5
    for bad in (LO / 2, 0.995, -0.5, math.nan, True, "0.5"):
        with pytest.raises(ValueError, match=f"from {LO} to {HI}"):
            check_tau(bad)
    assert RunSpec(activity="a", country="b", tau=LO).tau == LO
    with pytest.raises(ValidationError):
        RunSpec(activity="a", country="b", tau=0.995)
    # the CLI options, read from the commands themselves
    from refine.cli import command as made

    command = made()
    for name in ("run", "score", "bench"):
        (opt,) = [p for p in command.commands[name].params if p.name == "tau"]
        assert (opt.min, opt.max) == TAU_RANGE, name
    done = cli("metrics", "ahead", "--refs", "x.json", "--preds", "y.json", "--tau", "0.995")
    assert done.returncode == 2 and f"--tau: tau must be a cosine similarity from {LO}" in (
        done.stderr
    )
    # a profile's calibrated tau
    bad = tmp_path / "p.toml"
    bad.write_text('tau = 0.995\n[roles]\nobserver = "gemini:gemini-3.5-flash"\n')
    with pytest.raises(ValueError, match=f"p.toml: tau must be a cosine similarity from {LO}"):
        load_profile(str(bad))


def test_tau_resolved_in_one_place():
    models = Backends(load_profile("gemini"))
    with pytest.raises(TypeError, match="a loaded profile .refine.profiles.load_profile., got str"):
        Backends("gemini")  # the backends never import the profiles module above them
    assert models.tau(0.61) == (0.61, "given")
    tau, source = models.tau()
    assert LO <= tau <= HI and source != "given"
    with pytest.raises(ValueError, match="tau must be"):
        models.tau(1.5)


@pytest.mark.parametrize(
    "text,model,loras",
    [
        ("diffusers:m", "diffusers:m", []),
        ("diffusers:m+lora=a", "diffusers:m", [("a", 1.0)]),
        ("diffusers:m+lora=org/x@0.5+lora=/p/y@2", "diffusers:m", [("org/x", 0.5), ("/p/y", 2.0)]),
        ("diffusers:m+lora=weird@name@0.25", "diffusers:m", [("weird@name", 0.25)]),
    ],
)
def test_one_lora_parser(text, model, loras):
    assert split_adapters(text) == (model, loras)
    if loras:
        assert split_adapters(join_adapters(model, loras)) == (model, loras)


@pytest.mark.parametrize(
    "text,problem",
    [
        ("+lora=a", "no model name"),
        ("diffusers:m+lora=", "needs a path"),
        ("diffusers:m+lora=a@x", "scale 'x' is not a number"),
        ("diffusers:m+lora=a@5", "between 0 and 4"),
        ("diffusers:m+lora=a@nan", "between 0 and 4"),
    ],
)
def test_lora_problems_are_named_the_same_by_bench_and_backend(text, problem):
    from refine.backends import create
    from refine.harness.generators import parse_generator

    with pytest.raises(ValueError, match=problem):
        split_adapters(text)
    with pytest.raises(ValueError, match=problem):
        parse_generator(text)
    if text.startswith("diffusers:"):  # the backend's name is its model and adapters
        with pytest.raises(ValueError, match=problem):
            create("generator", text, shared=False)


def test_bench_and_backend_read_the_same_adapters():
    from refine.backends import create
    from refine.harness.generators import parse_generator

    text = "diffusers:some/model+lora=org/x@0.5+lora=/p/y"
    spec = parse_generator(text)
    backend = create("generator", text, shared=False)
    assert list(spec.loras) == backend.loras == [("org/x", 0.5), ("/p/y", 1.0)]
    assert backend.id == "diffusers:some/model+lora=org/x@0.5+lora=/p/y@1"
