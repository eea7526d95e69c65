"""An SoS bank: multilingual image banks per generator, what the SoS analysis reads
(prompts.py: the native-speaker prompts; cells.py: a cell's images; bank.py: the task,
bank.json and build_bank). A recipe of the ``sos`` task (SoS Tab. 2) builds a bank per
generator and makes the labels table."""

from refine.harness.registry import TaskSpec, lazy_exports

SPEC = TaskSpec(
    name="sos",
    help="Build an SoS bank per generator and say where language outweighs culture.",
    plan=None,  # its recipes' command builds the banks (refine bench --recipe sos-table2)
    run=None,
    table_metrics=("sos", "clipscore", "mclip"),  # the labels table's methods
    tables=("labels",),
)

__getattr__ = lazy_exports(__name__, {"build_bank": "bank"})  # imported when asked for
