"""Forked worker processes released together, for the benchmarks that contend."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable


def run_together(target: Callable, per_process: list[tuple], *, timeout: float) -> list:
    """Fork one process per argument tuple and return what each put on its queue.

    ``target`` is called as ``target(*args, start, results)``: it waits on the
    ``start`` barrier, so every process begins at once, and puts one result on
    ``results``. Results come back in the order the processes finished.
    """
    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(len(per_process)), context.Queue()
    workers = [context.Process(target=target, args=(*args, start, results)) for args in per_process]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=timeout) for _ in workers]
    for worker in workers:
        worker.join()
    return outcomes
