"""How a job's cells are made: ``run_jobs`` (threads, or one after the other) and the local
engine, one cell maker (one set of models) shared by ``workers`` threads. The Ray engines
(``bench_ray``, ``batch_ray``, ``bank_ray``) give each worker its own maker."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def run_jobs(make: Callable[[Any], None], todo: Sequence[Any], workers: int, name: str) -> None:
    """``make(job)`` for every job: ``workers`` at a time on threads (API models), else
    one after the other. The first failure stops the rest; what is done is kept."""
    if workers > 1 and len(todo) > 1:
        with ThreadPoolExecutor(min(workers, len(todo)), thread_name_prefix=name) as pool:
            for _ in pool.map(make, todo):
                pass
    else:
        for job in todo:
            make(job)


class LocalEngine:
    """One cell maker (``describe()``, ``make(job, store)``), ``workers`` jobs at a time
    on threads."""

    def __init__(self, maker: Any, workers: int = 1, name: str = "cells") -> None:
        self.maker, self.workers, self.name = maker, workers, name

    def describe(self) -> tuple[float, str, dict[str, str]]:
        return self.maker.describe()

    def run(
        self, todo: Sequence[Any], store: Any, done: Callable[[dict[str, Any], str], None]
    ) -> None:
        run_jobs(lambda job: done(self.maker.make(job, store), ""), todo, self.workers, self.name)

    def close(self) -> None:
        pass
