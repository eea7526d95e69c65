"""A run service for front ends: one run at a time on one set of models, watched live.

``RunService.start(...)`` runs the loop on a worker thread and returns a :class:`Job`;
``job.updates()`` yields an :class:`Update` after every stage and round (the run record
as saved so far, the stage in progress, an instruction waiting for review). In pause
mode the loop waits before every edit until ``job.submit_instruction(text)``; ``job.stop()``
ends the run within seconds (the round in progress is recorded as stopped). Any number of
readers may follow one run; ``job.updates(attach=True)`` begins with the run as it stands
(a page opened during it). Saved runs open without any model.

Visitors: a front end names who asks (a visitor id, see :func:`visitor_hash`). A run started
for a visitor keeps its owner for as long as it exists: the hash of the id is written to the
run folder's ``.owner`` (never returned, never zipped); :meth:`RunService.check_owner` is
what every change to a saved run goes through. A run without one (made by the CLI) is
read-only to visitors. References built or reviewed by a visitor are kept in a folder of
that visitor's; the shared ones under ``out/references`` change only for an admin.
"""

from refine.service.folders import (
    NOT_YOURS,
    OWNER_FILE,
    READ_ONLY,
    RunFolders,
    SavedRun,
    phrase,
    visitor_hash,
)
from refine.service.jobs import Job, Update
from refine.service.runs import RunService
from refine.service.slot import ServiceBusy, Slot
from refine.service.tuning import Tuning

__all__ = [
    "NOT_YOURS",
    "OWNER_FILE",
    "READ_ONLY",
    "Job",
    "RunFolders",
    "RunService",
    "SavedRun",
    "ServiceBusy",
    "Slot",
    "Tuning",
    "Update",
    "phrase",
    "visitor_hash",
]
