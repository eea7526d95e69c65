"""What the loop's own benches share (:mod:`refine.harness.tasks.strategies.task`, strategies at
equal cost, and :mod:`refine.harness.tasks.editor_loops.task`, editors over many edits): a cell
per (variant, activity, country), where the variant is a strategy or an editor; the
models of a refinement run, built once per process; and cells kept while the scoring is
the same."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.harness.cells import Cell
from refine.harness.engine import MakerSpec
from refine.harness.task import CellTask

# the roles whose models score (or draw) a loop bench's images: a cell is kept while they
# are the same
SCORING = ("generator", "editor", "observer", "judge", "llm", "text_embedder", "image_embedder")


class LoopBenchTask(CellTask):
    """A loop bench on the harness. Subclasses set ``maker_class`` (the module and name of
    their cell maker, imported where the jobs are made) and give ``variants``."""

    what = "the bench folder (--out)"
    metrics = ("faith", "quality")
    maker_class: tuple[str, str]

    def __init__(
        self,
        plan: Any,
        out: str | Path,
        backend_options: dict[str, dict[str, Any]] | None = None,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(out, emit)
        self.plan = plan
        self.backend_options = backend_options or {}

    def variants(self) -> list[str]:
        raise NotImplementedError

    def maker(self) -> MakerSpec:
        import importlib

        module, name = self.maker_class
        cls = getattr(importlib.import_module(module), name)
        kwargs = {"plan": self.plan, "folder": self.folder, "backend_options": self.backend_options}
        return MakerSpec(cls, kwargs)

    def jobs(self) -> list[tuple[str, str, str]]:
        return [(v, a, c) for a, c in self.plan.prompts for v in self.variants()]

    def label(self, job: tuple[str, str, str]) -> str:
        return f"{job[0]}: {job[1]} ({job[2]})"

    def reusable(self, cell: Cell, scoring: Any) -> bool:
        tau, _, scorer = scoring
        return cell.inputs.get("tau") == tau and cell.inputs.get("scorer") == scorer


def loop_models(
    plan: Any, backend_options: dict[str, dict[str, Any]] | None, instances: Any, roles=SCORING
) -> tuple[Any, float, str, dict[str, str]]:
    """(a refiner, tau, where tau comes from, the ``roles``' model names) of a loop bench's
    process: ``instances`` when it is a :class:`refine.loop.refiner.Refiner` (its models
    used as they are), else one built from the plan's profile and backends."""
    from refine.loop.refiner import Refiner

    if isinstance(instances, Refiner):
        refiner = instances
    else:
        refiner = Refiner(plan.profile, plan.backends, backend_options, instances=instances)
    backends = refiner.backends
    tau, tau_source = backends.tau(plan.tau)
    scoring = {r: backends.names[r] for r in roles if backends.names.get(r)}
    return refiner, tau, tau_source, scoring


FORGETTING = ("fixed", "forgotten", "lost", "removed", "came_back")


def forgetting_of(run: Any, along: str = "kept") -> dict[str, Any]:
    """A cell's forgetting (refine.loop.tracking): what its run's images fixed and lost,
    over its kept rounds (a strategy's loop) or along its chain of edits (an editor's),
    per dimension and in all."""
    from refine.loop import tracking

    by = tracking.forgetting(run, along)
    return {**tracking.totals(by).as_dict(), "dimensions": {d: f.as_dict() for d, f in by.items()}}


def forgetting_sum(cells: list[Cell]) -> dict[str, Any] | None:
    """The forgetting of ``cells`` added up, in all and per dimension, with the share of
    fixes forgotten and of removed items that came back (None: no cell has a run whose
    rounds it follows, as best-of-N's)."""
    got = [c.data["forgetting"] for c in cells if c.data.get("forgetting")]
    if not got:
        return None
    out: dict[str, Any] = {k: sum(g[k] for g in got) for k in FORGETTING}
    dims: dict[str, dict[str, int]] = {}
    for g in got:
        for d, f in g["dimensions"].items():
            row = dims.setdefault(d, dict.fromkeys(FORGETTING, 0))
            for k in FORGETTING:
                row[k] += f[k]
    out["dimensions"] = dict(sorted(dims.items()))
    out["prompts"] = len(got)
    out["forgotten_share"] = out["forgotten"] / out["fixed"] if out["fixed"] else None
    out["came_back_share"] = out["came_back"] / out["removed"] if out["removed"] else None
    return out


def forgetting_line(f: dict[str, Any] | None) -> str:
    """``2 of 8 fix(es) forgotten (setting 2 of 2); 0 of 4 removed item(s) came back``."""
    if f is None:
        return "forgetting: no edits followed"
    where = [f"{d} {x['forgotten']} of {x['fixed']}" for d, x in f["dimensions"].items()
             if x["forgotten"]]  # fmt: skip
    back = [f"{d} {x['came_back']} of {x['removed']}" for d, x in f["dimensions"].items()
            if x["came_back"]]  # fmt: skip
    text = f"forgetting: {f['forgotten']} of {f['fixed']} fix(es) forgotten"
    text += f" ({', '.join(where)})" if where else ""
    text += f"; {f['came_back']} of {f['removed']} removed item(s) came back"
    return text + (f" ({', '.join(back)})" if back else "")
