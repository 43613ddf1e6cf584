"""Dask: `dask.delayed` calls wired by their arguments, computed on the threaded scheduler.

Each step is a delayed call of a plain function whose positional arguments are its
parents' delayed results (Dask passes it their values), so Dask sees exactly the
Workload's edges; the function returns the shared step body (`workloads.step_value`)
and the run returns the sinks' values, which the harness checks; `pure=False` because
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
from workloads import StepValue, Workload, step_value


def _step(name: str, *parents: StepValue) -> StepValue:
    return step_value(name, parents)


def _sleep(name: str, seconds: float, *parents: StepValue) -> StepValue:
    time.sleep(seconds)
    return step_value(name, parents)


def build_delayed(workload: Workload) -> tuple[list[str], list[Any]]:
    """One delayed per step; returns the sinks (steps nobody depends on), by name and
    as delayed objects."""
    task: dict[str, Any] = {}
    for step in workload.steps:
        parents = [task[p] for p in workload.parents[step]]
        seconds = workload.duration.get(step, 0.0)
        if seconds > 0:
            task[step] = dask.delayed(_sleep, pure=False)(step, seconds, *parents,
                                                          dask_key_name=step)
        else:
            task[step] = dask.delayed(_step, pure=False)(step, *parents, dask_key_name=step)
    sinks = workload.sinks()
    return sinks, [task[s] for s in sinks]


class DaskAdapter:
    engine = "Dask (threads)"

    def __init__(self) -> None:
        self.threads: int | None = None

    def version(self) -> str:
        return version("dask")

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> tuple[list[str], list[Any]]:
        self.threads = sleep_threads(workload)
        return build_delayed(workload)

    def run(self, built: tuple[list[str], list[Any]]) -> dict[str, StepValue]:
        names, sinks = built
        options: dict[str, Any] = {"scheduler": "threads"}
        if self.threads:
            options["num_workers"] = self.threads
        return dict(zip(names, dask.compute(*sinks, **options), strict=True))

    def notes(self) -> str:
        return f"threads: {self.threads or 'default (= cores)'}"
