"""An SoS bank: multilingual image banks per generator, what the SoS analysis reads
(plan.py: the grid asked for and run_bank; prompts.py: the native-speaker prompts;
cells.py: a cell's images; bank.py: the task, bank.json and build_bank; recipe.py: a bank
per generator analysed together, the labels table). ``BANK`` is the bank's task (``refine
sos bank``); ``SPEC``, the ``sos`` recipes' (SoS Tab. 2: a bank per generator and the
labels table; ``refine sos banks``)."""

from refine.harness.registry import TaskSpec, lazy_exports

SPEC = TaskSpec(
    name="sos",
    limits_jobs=False,  # banks, each made as one piece (a recipe's --limit: its cultures)
    help="Build an SoS bank per generator and say where language outweighs culture.",
    plan="refine.harness.tasks.sos.recipe:SosPlan",
    run="refine.harness.tasks.sos.recipe:run_sos",
    page="sos",
    table_metrics=("sos", "clipscore", "mclip"),  # the labels table's methods
    tables=("labels",),
    summary="refine.harness.tasks.sos.recipe:sos_lines",
    errors=("refine.evaluate.sos:BankError",),
    command=("sos", "banks"),
    table="refine.harness.tasks.sos.recipe:sos_table",
    estimate="refine.harness.tasks.sos.recipe:sos_estimate",
)

BANK = TaskSpec(
    name="sos-bank",
    limits_jobs=False,
    help="Generate and embed images for every (culture, language) cell; resumable. "
    "--engine ray makes the cells on Ray actors (the bank folder on storage every node sees).",
    plan="refine.harness.tasks.sos.plan:BankPlan",
    run="refine.harness.tasks.sos.plan:run_bank",
    summary="refine.harness.tasks.sos.plan:bank_lines",
    errors=("refine.evaluate.sos:BankError",),
    command=("sos", "bank"),
)

__getattr__ = lazy_exports(
    __name__,
    {
        "build_bank": "bank",
        "BankPlan": "plan",
        "run_bank": "plan",
        "SosPlan": "recipe",
        "run_sos": "recipe",
    },
)  # imported when asked for
