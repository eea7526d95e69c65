"""Building references with language models: proposers, union, refiner, stereotypes, the
on-disk cache, and finding built references again (through the fake Gemini server)."""

from __future__ import annotations

import json

import pytest

from refine.evaluate.refs_build import LLMCache, build_references, load_built, union_of
from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_server import text_answer

ACT, COUNTRY = "people repairing a bicycle", "Peru"
PROPOSALS = {
    "gemini-3.8-flash": {
        "setting": ["Street-side repair stall", "Adobe walls"],
        "objects": ["Bicycle on a stand", "Tyre levers"],
        "attire": ["Work apron"],
        "interaction": ["Mechanic explaining to customer"],
        "spatial": ["Bicycle in the centre"],
    },
    "gemini-3.1-pro-preview": {
        "setting": ["street-side repair stall", "Market street"],
        "objects": ["Inner tube in water basin"],
        "attire": ["Chullo knitted hat"],
        "interaction": [],
        "spatial": ["Tools laid out on a cloth"],
    },
}
REFINED = {
    "setting": ["Street-side repair stall", "Market street"],
    "objects": ["Bicycle on a stand", "Inner tube in water basin", "Tyre levers"],
    "attire": ["Work apron"],
    "interaction": ["Mechanic explaining to customer"],
    "spatial": ["Tools laid out on a cloth"],
}
STEREOTYPES = ["llamas in the street", "ponchos on everyone", "Machu Picchu backdrop"]


class Models:
    """The fake server's answers per model and prompt; records what was asked."""

    def __init__(self):
        self.asked: list[tuple[str, str]] = []
        self.refine_prompt = ""

    def __call__(self, path, body):
        model = path.split("models/")[1].split(":")[0]
        text = " ".join(p.get("text", "") for p in body["contents"][0]["parts"])
        if "Describe what a faithful" in text:
            kind, answer = "propose", PROPOSALS[model]
        elif "reviewing visual descriptors" in text:
            kind, answer = "refine", REFINED
            self.refine_prompt = text
        elif "exaggerate cultural stereotypes" in text:
            kind, answer = "stereotypes", {"stereotypes": STEREOTYPES}
        else:
            raise AssertionError(text[:200])
        self.asked.append((model, kind))
        return 200, text_answer(json.dumps(answer))


@pytest.fixture
def models(gemini_env):
    m = Models()
    gemini_env.handler = m
    yield m
    gemini_env.handler = None


def test_refs_build_cli_asks_once_and_run_finds_it(models, tmp_path):
    args = ["refs", "build", ACT, "--country", COUNTRY, "--out", str(tmp_path / "peru.json")]
    first = cli(*args, "--json")
    assert first.returncode == 0, first.stderr
    pack = json.loads(first.stdout)
    assert models.asked == [
        ("gemini-3.8-flash", "propose"),
        ("gemini-3.1-pro-preview", "propose"),
        ("gemini-3.1-pro-preview", "refine"),
        ("gemini-3.1-pro-preview", "stereotypes"),
    ]
    assert pack["descriptors"] == REFINED and pack["stereotypes"] == STEREOTYPES
    assert "proposers gemini:gemini-3.8-flash, gemini:gemini-3.1-pro-preview" in pack["source"]
    # the refiner saw the union: both proposers' phrases, the case-variant duplicate once
    assert "Chullo knitted hat" in models.refine_prompt and "Adobe walls" in models.refine_prompt
    assert models.refine_prompt.count("treet-side repair stall") == 1
    assert json.loads((tmp_path / "peru.json").read_text())["descriptors"] == REFINED
    # asked again: everything from the cache, nothing sent
    again = cli(*args)
    assert again.returncode == 0, again.stderr
    assert "0 asked, 4 from the cache" in again.stdout and len(models.asked) == 4
    # refs show and refine run find the built references
    shown = cli("refs", "show", ACT, "--country", "peru", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["descriptors"]["objects"] == REFINED["objects"]
    unknown = cli("run", "people flying kites", "--country", "Peru", "--out", str(tmp_path))
    assert unknown.returncode == 2 and "--build-refs" in unknown.stderr
    assert "refine refs build" in unknown.stderr and len(models.asked) == 4


class CountingLM:
    def __init__(self, name, answer):
        self.id, self.answer, self.calls = f"test:{name}", answer, 0

    def complete_json(self, prompt, schema):
        self.calls += 1
        return schema.model_validate(self.answer(prompt) if callable(self.answer) else self.answer)


def test_union_cache_and_errors(tmp_path):
    a = {"setting": ["Kitchen", "tiled floor"], "objects": ["pot"]}
    b = {"setting": ["kitchen ", "Garden"], "objects": ["Pot", "ladle"]}
    u = union_of([a, b])
    assert u["setting"] == ["Kitchen", "tiled floor", "Garden"]
    assert u["objects"] == ["pot", "ladle"] and u["attire"] == []

    def refiner_answer(prompt):
        if "stereotypes" in prompt and "Answer with one JSON object: {" in prompt:
            return {"stereotypes": ["sombreros", "Sombreros", "cacti"]}
        return {"setting": ["Kitchen"], "objects": ["pot", "ladle"]}

    p1, p2 = CountingLM("p1", a), CountingLM("p2", b)
    refiner = CountingLM("r", refiner_answer)
    cache = LLMCache(tmp_path / "llm")
    result = build_references("people cooking", "Mexico", [p1, p2], refiner, cache)
    assert result.pack.descriptors["objects"] == ["pot", "ladle"]
    assert result.pack.stereotypes == ["sombreros", "cacti"]
    assert (result.asked, result.cached) == (4, 0)
    assert result.union == u and result.proposals["test:p2"]["setting"] == ["kitchen", "Garden"]
    again = build_references("people cooking", "Mexico", [p1, p2], refiner, cache)
    assert (again.asked, again.cached) == (0, 4) and again.pack == result.pack
    assert (p1.calls, p2.calls, refiner.calls) == (1, 1, 2)
    # a damaged cache entry is asked again, not trusted
    entry = next((tmp_path / "llm").rglob("*.json"))
    entry.write_text("{not json")
    third = build_references("people cooking", "Mexico", [p1, p2], refiner, cache)
    assert third.asked == 1 and third.pack == result.pack
    # a different prompt setting is a different request
    build_references("people cooking", "Mexico", [p1], refiner, cache, per_dimension=3)
    assert p1.calls == 2
    with pytest.raises(ValueError, match="proposed no descriptors"):
        build_references("x", "Mexico", [CountingLM("empty", {})], refiner, cache)
    with pytest.raises(ValueError, match="kept no descriptors"):
        build_references("y", "Mexico", [p1], CountingLM("r0", {}), cache)
    assert load_built("people cooking", "Mexico", tmp_path / "none") is None


class AheadModels:
    """The fake server answering AHEaD's prompts: per dimension (the paper's heading), a
    proposal or a refinement with style tags; records each request's temperature."""

    HEADINGS = {
        "Setting & Background\nGoal:": "setting",
        "Objects\nGoal:": "objects",
        "Attire\nGoal:": "attire",
        "Interaction & Gesture\nGoal:": "interaction",
        "Spatial Arrangement\nGoal:": "spatial",
    }

    def __init__(self):
        self.asked: list[tuple[str, str, str, float]] = []
        self.refine_prompts: list[str] = []

    def __call__(self, path, body):
        model = path.split("models/")[1].split(":")[0]
        text = " ".join(p.get("text", "") for p in body["contents"][0]["parts"])
        heat = body["generationConfig"].get("temperature")  # None: none sent
        if text.startswith("You are an expert in cross-cultural visual representation."):
            dim = next(d for h, d in self.HEADINGS.items() if h in text)
            kind = "propose"
            tokens = [f"{dim} {model} {k}" for k in range(2)] + [f"{dim} shared"]
            answer = {"descriptors": [{"token": t, "style": "modern"} for t in tokens]}
        elif text.startswith("You refine candidate visual descriptors"):
            kind = "refine"
            dim = text.split("Dimension: ")[1].split(" Candidate Descriptors:")[0]
            self.refine_prompts.append(text)
            answer = {"descriptors": [{"token": f"{dim} kept", "style": "traditional"}]}
        elif "candidate exaggerated elements" in text:
            kind, dim, answer = "stereotypes", "", {"stereotypes": ["giant samovars"]}
            self.refine_prompts.append(text)
        else:
            raise AssertionError(text[:200])
        self.asked.append((model, kind, dim, heat))
        return 200, text_answer(json.dumps(answer))


@pytest.mark.slow
def test_references_with_the_papers_prompts(gemini_env, tmp_path):
    """refs build --prompts ahead (auto for a CULTIVate activity): each proposer once per
    dimension at temperature 0.2 with Tab. 15-20, the refiner per dimension at 0.1 with
    Tab. 21 and the union's candidates and their styles, the stereotypes; every kept
    descriptor with its style tag."""
    m = AheadModels()
    gemini_env.handler = m
    try:
        act = "people eating food at home"  # a CULTIVate activity: auto is ahead
        done = cli("refs", "build", act, "--country", "Peru", "--json")
        assert done.returncode == 0, done.stderr
        pack = json.loads(done.stdout)
        proposed = [a for a in m.asked if a[1] == "propose"]
        # the paper's 0.2, but not to Gemini 3.8 Flash, which fixes its sampling: the pack
        # says where it was not applied
        heat = {(a[0], a[3]) for a in proposed}
        assert len(proposed) == 10
        assert heat == {("gemini-3.8-flash", None), ("gemini-3.1-pro-preview", 0.2)}
        assert "not applied on gemini:gemini-3.8-flash, which fixes its own" in pack["source"]
        refined = [a for a in m.asked if a[1] == "refine"]
        assert [a[2] for a in refined] == [
            "Setting & Background", "Objects", "Attire", "Interaction & Gesture",
            "Spatial Arrangement",
        ]  # fmt: skip
        assert {a[3] for a in refined} == {0.1} and m.asked[-1][1:] == ("stereotypes", "", 0.1)
        # the refiner saw both proposers' candidates, the shared one once, with its style
        first = m.refine_prompts[0]
        assert "setting gemini-3.8-flash 0 (modern)" in first and first.count("setting shared") == 1
        # the paper's counts: up to 10 descriptors a dimension, 15 stereotype candidates
        assert "Output up to 10 descriptors." in first
        assert "Generate up to 15 candidate exaggerated elements" in m.refine_prompts[-1]
        assert pack["descriptors"]["objects"] == ["Objects kept"]
        assert pack["styles"]["Objects kept"] == "traditional"
        assert pack["stereotypes"] == ["giant samovars"] and "AHEaD's prompts" in pack["source"]
        # auto: AHEaD's prompts for the catalog's activities only
        from refine.evaluate.reference_source import prompt_set

        assert prompt_set(" People eating  food at home") == "ahead"
        assert prompt_set("people repairing a bicycle") == "toolkit"
        assert prompt_set("people repairing a bicycle", "ahead") == "ahead"
        bad = cli("refs", "build", act, "--country", "Peru", "--prompts", "paper")
        assert bad.returncode == 2 and "auto, ahead or toolkit" in bad.stderr
    finally:
        gemini_env.handler = None


def test_a_build_of_references_takes_from_the_runs_call_budget(models, tmp_path):
    """--budget-calls is a hard limit on every request the command sends, the build of
    references included (a budget of 3 sent 7: the build was outside it): 3 calls cannot
    build (4 requests), so 3 are sent and the command ends in one line, before any model
    of the run loads."""
    args = ["run", ACT, "--country", "Bolivia", "--build-refs", "--out", str(tmp_path / "o")]
    short = cli(*args, "--budget-calls", "3")
    assert short.returncode == 2 and len(models.asked) == 3, short.stderr
    assert [k for _, k in models.asked] == ["propose", "propose", "refine"]
    (said,) = short.stderr.strip().splitlines()[-1:]
    assert said.startswith("error: building references: ") and "--budget-calls" in said
    assert "loading models" not in short.stderr and not (tmp_path / "o").exists()
