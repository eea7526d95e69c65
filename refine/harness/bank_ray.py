"""The Ray engine of ``refine sos bank``: the cells of a bank made by Ray actors.

Each worker holds the profile's generator, image embedder and (when prompts must be
translated) language model; a cell (one culture and language) is the unit of work and of
retry. The worker generates the cell's images into the bank folder, which every node must
see, and writes the cell's embeddings; the driver alone writes the manifest and the
combined files, so a bank stopped half-way goes on with either engine.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.backends.selection import Backends
from refine.harness.ray import RayPool, sees
from refine.harness.tasks.sos_bank import make_cell


class BankWorker:
    """One worker: the bank's models in their own process."""

    def __init__(
        self, profile: str, overrides: dict[str, str], needs_llm: bool, env: dict[str, str]
    ) -> None:
        os.environ.update(env)

        backends = Backends(profile, overrides)
        self.generator = backends.get("generator")
        self.embedder = backends.get("image_embedder")
        self.llm = backends.get("llm") if needs_llm else None
        self.identity = f"{os.getpid()}@{socket.gethostname()}"

    def whoami(self) -> str:
        return self.identity

    def sees(self, probe: str, token: str) -> bool:
        return sees(probe, token)

    def make(self, key: str, cell: dict, out: str, params: dict) -> dict:

        return make_cell(Path(out), key, cell, params, self.generator, self.embedder, self.llm)


class RayBankCells:
    """``workers`` BankWorker actors (see :func:`refine.harness.tasks.sos_bank.build_bank`)."""

    def __init__(
        self,
        profile: str,
        overrides: dict[str, str],
        needs_llm: bool,
        out: Path,
        workers: int,
        gpus_per_worker: float,
        address: str | None,
        emit: Callable[[str], None],
    ) -> None:
        self.pool = RayPool(
            BankWorker,
            (profile, overrides, needs_llm),
            workers,
            gpus_per_worker,
            address,
            out,
            "the bank folder (--out)",
            emit,
            "sos-bank",
        )

    def run(
        self,
        cells: list[tuple[str, dict[str, Any]]],
        out: str,
        params: dict[str, Any],
        record: Callable[[str, dict[str, Any]], None],
    ) -> None:
        self.pool.run(
            cells,
            lambda actor, item: actor.make.remote(item[0], item[1], out, params),
            lambda item, update, worker: record(item[0], {**update, "worker": worker}),
            lambda item: f"{item[1]['culture']} x {item[1]['language']}",
        )

    def close(self) -> None:
        self.pool.close()
