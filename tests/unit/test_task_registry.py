"""The task registry: each bundled task's spec found by its lazy target, what a recipe of a
task may say read from its spec alone, and a task registered in a test taken by recipes
with no other edit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from refine.harness import registry
from refine.harness.registry import TaskSpec
from tests.fakes.toy_task import TOY
from tests.unit.test_recipes import MINIMAL, load_recipe_text


def test_every_bundled_task_is_found_by_its_target_and_names_itself():
    for name in registry.names():
        spec = registry.task(name)
        assert spec.name == name
        if spec.plan is not None:
            assert spec.plan_class().__name__ == spec.plan.rpartition(":")[2]
            assert callable(spec.runner())
    assert registry.task("bench").tables == ("metrics", "agreement", "settings")
    assert "cd:country (0, 1, 0)" in registry.task("concepts").table_names()
    recipe_only = registry.TaskSpec(name="recipe-only", help="", plan=None, run=None)
    with pytest.raises(ValueError, match="runs from its recipes"):
        recipe_only.runner()


def test_reading_a_spec_imports_none_of_its_task():
    # in a process of its own: taking the task's modules out of this one would leave its
    # other tests holding classes of another import
    code = (
        "import sys\n"
        "from refine.harness import registry\n"
        "spec = registry.task('strategies')\n"
        "assert spec.metrics == ('faith', 'quality'), spec.metrics\n"
        "assert 'refine.harness.tasks.strategies.task' not in sys.modules\n"
        "from refine.harness.tasks.strategies import run_strategies\n"
        "assert run_strategies is spec.runner()\n"
        "print('lazy')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "lazy", done.stderr


def test_an_unknown_task_is_refused_with_the_tasks_there_are(tmp_path):
    with pytest.raises(ValueError, match=r"no task 'toy' \(tasks: bench, concepts, "):
        load_recipe_text(tmp_path, MINIMAL.replace('task = "bench"', 'task = "toy"'))
    with pytest.raises(ValueError, match="registered already"):
        registry.register(TaskSpec("bench", "again", None, None))
    with pytest.raises(ValueError, match="a plan and a run function, or neither"):
        TaskSpec("half", "h", "m:Plan", None)
    with pytest.raises(ValueError, match="no table kind 'pie'"):
        TaskSpec("pies", "p", None, None, tables=("pie",))


def test_a_registered_task_is_a_recipes_task_with_its_own_metrics(tmp_path):
    toy = MINIMAL.replace('task = "bench"', 'task = "toy"').replace("faith", "vendi")
    with registry.registered(TOY):
        recipe = load_recipe_text(tmp_path, toy)
        assert recipe.task == "toy"
        with pytest.raises(ValueError, match="no metric 'faith' in a toy recipe"):
            load_recipe_text(tmp_path, MINIMAL.replace('task = "bench"', 'task = "toy"'))
        kind = toy.replace("[table]", '[table]\nkind = "labels"')
        with pytest.raises(ValueError, match="a toy recipe makes a table of kind metrics"):
            load_recipe_text(tmp_path, kind)
    assert "toy" not in registry.names()


@pytest.mark.parametrize(
    ("plan", "fields", "says"),
    [
        ("bench", {"generators": ["a", "a"]}, "--generator: a generator is named twice"),
        ("bench", {"prompts": []}, "--countries/--activity/--category: no prompts"),
        ("bench", {"images_per_prompt": 0}, "--images-per-prompt: Input should be greater"),
        ("bench", {"observer_prompts": "mine"}, "--observer-prompts: Input should be"),
        ("concepts", {"images_per_prompt": 1}, "--images-per-prompt: Input should be greater"),
        ("concepts", {"weights": (1.0, 1.0, 0.0)}, "--cube-weights: weights must sum to 1"),
        ("concepts", {"quality": "best"}, "--cube-quality: Input should be 'auto'"),
        ("strategies", {"strategies": ["edit", "sideways"]}, "--strategies: sideways unknown"),
        ("strategies", {"budget_calls": None}, "--strategies needs a budget"),
        ("strategies", {"target": float("nan")}, "--target: Input should be a finite number"),
        ("editor-loops", {"loops": 0}, "--loops: Input should be greater than or equal to 1"),
        ("editor-loops", {"backends": {"editor": "x"}}, "--backend: editor=...: name the editors"),
        ("editor-loops", {"colour": "red"}, "--colour: Extra inputs are not permitted"),
    ],
)
def test_every_check_of_a_plan_is_its_own_and_names_the_flag(plan, fields, says):
    from pydantic import ValidationError

    from refine.harness.plan import refusal
    from refine.harness.tasks.concepts.plan import Concept

    good = {
        "bench": {"generators": ["gemini:g"], "prompts": [("wedding", "India")]},
        "concepts": {"generators": ["gemini:g"], "concepts": [Concept("dish", "a dish")]},
        "strategies": {"strategies": ["edit"], "prompts": [("a", "b")], "budget_calls": 4},
        "editor-loops": {"editors": ["gemini:e"], "prompts": [("a", "b")]},
    }[plan]
    cls = registry.task(plan).plan_class()
    first, second, *rest = good.items()  # what a dataclass plan took by position still is
    made = cls(first[1], second[1], **dict(rest))
    assert (getattr(made, first[0]), getattr(made, second[0])) == (first[1], second[1])
    with pytest.raises(TypeError, match="given twice"):
        cls(first[1], **good)
    with pytest.raises(ValidationError) as err:
        cls(**(good | fields))
    assert refusal(err.value, cls).startswith(says), refusal(err.value, cls)


def test_a_rescores_plan_checks_its_roles_and_variants():
    from pydantic import ValidationError

    from refine.harness.plan import refusal
    from refine.harness.tasks.rescore.plan import RescorePlan

    plan = RescorePlan("bench", backends=["observer=hf:Qwen/Qwen3-VL-8B-Instruct"])
    assert (plan.source, plan.backends) == ("bench", {"observer": "hf:Qwen/Qwen3-VL-8B-Instruct"})
    for fields, says in (
        ({"backends": {"generator": "gemini:g"}}, "--backend: generator: a rescore replaces"),
        ({"exag": "exag:other"}, "--exag: ita or mllm, not 'exag:other'"),
        ({"tau": 0.0}, "--tau: Input should be greater than 0"),
    ):
        with pytest.raises(ValidationError) as err:
            RescorePlan("bench", **fields)
        assert refusal(err.value, RescorePlan).startswith(says), refusal(err.value, RescorePlan)
