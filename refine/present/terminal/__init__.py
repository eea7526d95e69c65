"""What commands print on the terminal where it is more than a line or two: the lines are
made here from what a task, a statistic or a record returned, and the command line echoes
them (as the pages are made in :mod:`refine.present.report`). :mod:`.agreement`: ``refine
agree``; :mod:`.scores`: the scores of ``refine metrics``, ``caire`` and ``calibrate-tau``;
:mod:`.records`: what the data, photos, references, backends and batch commands made."""

from __future__ import annotations

from refine.present.terminal.agreement import agreement_lines

__all__ = ["agreement_lines"]
