"""Dask: `dask.delayed` calls wired by their arguments, computed on the threaded scheduler.

Each step is a delayed call of a plain function whose positional arguments are its
parents' delayed results, so Dask sees exactly the Workload's edges; `pure=False` because
a step is an action, not a value to deduplicate.  Steps run on the threaded scheduler's
pool: its default size for no-op workloads, and for sleep workloads (`time.sleep`, Dask
tasks are sync) as many threads as the widest level, so no sleeper waits for a thread.
"""

from __future__ import annotations

import time
from importlib.metadata import version
from typing import Any

import dask
from graph_shape import sleep_threads
from workloads import Workload


def _noop(*parents: object) -> int:
    return 1


def _sleep(seconds: float, *parents: object) -> int:
    time.sleep(seconds)
    return 1


def build_delayed(workload: Workload) -> list[Any]:
    """One delayed per step; returns the sinks (steps nobody depends on)."""
    children = workload.children()
    task: dict[str, Any] = {}
    for step in workload.steps:
        parents = [task[p] for p in workload.parents[step]]
        seconds = workload.duration.get(step, 0.0)
        if seconds > 0:
            task[step] = dask.delayed(_sleep, pure=False)(seconds, *parents, dask_key_name=step)
        else:
            task[step] = dask.delayed(_noop, pure=False)(*parents, dask_key_name=step)
    return [task[s] for s in workload.steps if not children[s]]


class DaskAdapter:
    engine = "Dask (threads)"

    def __init__(self) -> None:
        self.threads: int | None = None

    def version(self) -> str:
        return version("dask")

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> list[Any]:
        self.threads = sleep_threads(workload)
        return build_delayed(workload)

    def run(self, sinks: list[Any]) -> None:
        options: dict[str, Any] = {"scheduler": "threads"}
        if self.threads:
            options["num_workers"] = self.threads
        dask.compute(*sinks, **options)

    def notes(self) -> str:
        return f"threads: {self.threads or 'default (= cores)'}"
