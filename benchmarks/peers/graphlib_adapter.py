"""The standard library: graphlib.TopologicalSorter driving a ThreadPoolExecutor.

The sorter hands out every step whose parents are done; the loop submits them to the
pool and marks each done as its future completes, so scheduling is eager.  Steps are sync
(`time.sleep` for sleep steps).  Pool size: ThreadPoolExecutor's default for no-op
workloads, the widest level for sleep workloads.
"""

from __future__ import annotations

import platform
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from graphlib import TopologicalSorter

from graph_shape import default_threads, sleep_threads
from workloads import Workload


def _noop() -> None:
    return None


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def run_sorted(workload: Workload, pool: ThreadPoolExecutor) -> int:
    """Run every step once; returns how many ran."""
    sorter = TopologicalSorter(workload.parents)
    sorter.prepare()
    running: dict[Future[None], str] = {}
    ran = 0
    while sorter.is_active():
        for step in sorter.get_ready():
            seconds = workload.duration.get(step, 0.0)
            future = pool.submit(_sleep, seconds) if seconds > 0 else pool.submit(_noop)
            running[future] = step
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            future.result()  # re-raise a step's error here
            sorter.done(running.pop(future))
            ran += 1
    return ran


class GraphlibAdapter:
    engine = "graphlib + ThreadPoolExecutor"

    def __init__(self) -> None:
        self.threads = default_threads()
        self._pool: ThreadPoolExecutor | None = None

    def version(self) -> str:
        return "Python " + platform.python_version()

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> Workload:
        # One long-lived pool, as a service would keep: runs measure scheduling, not
        # thread start-up.  The sorter is made per run: it is single-use.
        self.threads = sleep_threads(workload) or default_threads()
        self._pool = ThreadPoolExecutor(max_workers=self.threads)
        return workload

    def run(self, workload: Workload) -> None:
        assert self._pool is not None, "build() makes the pool"
        ran = run_sorted(workload, self._pool)
        if ran != workload.size:
            raise RuntimeError(f"ran {ran} of {workload.size} steps")

    def teardown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()

    def notes(self) -> str:
        return f"threads: {self.threads}"
