"""Every many-cell job, one sub-package per family, each holding its plan, cells and summary:
``bench`` (generators on the CULTIVate catalog), ``concepts`` (CUBE diversity),
``strategies`` and ``editor_loops`` (the loop's own benches, on ``loop_benches``),
``rescore`` (a bench scored again), ``sos`` (multilingual image banks) and ``batch`` (runs
from a spec file)."""
