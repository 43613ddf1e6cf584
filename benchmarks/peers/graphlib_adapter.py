"""The standard library: graphlib.TopologicalSorter driving a ThreadPoolExecutor.

The sorter hands out every step whose parents are done; the loop submits them to the
pool, with their parents' results, and marks each done as its future completes, so
scheduling is eager.  Steps are sync (`time.sleep` for sleep steps first) and return the
shared step body (`workloads.step_value`); the run returns the sinks' results, which the
harness checks.  Pool size: ThreadPoolExecutor's default for no-op
workloads, the widest level for sleep workloads.
"""

from __future__ import annotations

import platform
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from graphlib import TopologicalSorter

from graph_shape import default_threads, sleep_threads
from workloads import StepValue, Workload, step_value


def _step(name: str, parents: list[StepValue], seconds: float) -> StepValue:
    if seconds > 0:
        time.sleep(seconds)
    return step_value(name, parents)


def run_sorted(workload: Workload, pool: ThreadPoolExecutor) -> dict[str, StepValue]:
    """Run every step once; returns every step's result."""
    sorter = TopologicalSorter(workload.parents)
    sorter.prepare()
    running: dict[Future[StepValue], str] = {}
    results: dict[str, StepValue] = {}
    while sorter.is_active():
        for step in sorter.get_ready():
            parents = [results[p] for p in workload.parents[step]]
            seconds = workload.duration.get(step, 0.0)
            running[pool.submit(_step, step, parents, seconds)] = step
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            step = running.pop(future)
            results[step] = future.result()  # re-raises a step's error here
            sorter.done(step)
    return results


class GraphlibAdapter:
    engine = "graphlib + ThreadPoolExecutor"

    def __init__(self) -> None:
        self.threads = default_threads()
        self._pool: ThreadPoolExecutor | None = None

    def version(self) -> str:
        return "Python " + platform.python_version()

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> tuple[Workload, list[str]]:
        # One long-lived pool, as a service would keep: runs measure scheduling, not
        # thread start-up.  The sorter is made per run: it is single-use.
        self.threads = sleep_threads(workload) or default_threads()
        self._pool = ThreadPoolExecutor(max_workers=self.threads)
        return workload, workload.sinks()

    def run(self, built: tuple[Workload, list[str]]) -> dict[str, StepValue]:
        assert self._pool is not None, "build() makes the pool"
        workload, sinks = built
        results = run_sorted(workload, self._pool)
        return {s: results[s] for s in sinks}

    def teardown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()

    def notes(self) -> str:
        return f"threads: {self.threads}"
