"""The floor: a hand-written asyncio runner of a Workload, with nothing an engine adds.

It keeps, per step, the number of parents not yet finished; a step whose count drops to
zero goes on a ready queue and becomes a task at once, so scheduling is eager with no
level barriers.  Each task receives its parents' results, computes the same step body
as every engine (``workloads.step_value``) and hands its result back; the runner keeps
every result and returns the sinks'.  No persistence, no state machine, no parameter
binding: whatever plait (or any engine) costs above this is the price of its features.

``threads=True`` runs the body as a sync function in the loop's default thread pool
(``loop.run_in_executor``), the floor for plait's sync steps.
"""

from __future__ import annotations

import asyncio
import platform
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from workloads import StepValue, Workload, step_value


async def _step(name: str, parents: list[StepValue], seconds: float,
                finished: asyncio.Queue[tuple[str, StepValue]]) -> None:
    if seconds > 0:
        await asyncio.sleep(seconds)
    finished.put_nowait((name, step_value(name, parents)))


def _sync_body(name: str, parents: list[StepValue], seconds: float) -> StepValue:
    if seconds > 0:
        time.sleep(seconds)
    return step_value(name, parents)


async def _thread_step(name: str, parents: list[StepValue], seconds: float,
                       finished: asyncio.Queue[tuple[str, StepValue]]) -> None:
    loop = asyncio.get_running_loop()
    value = await loop.run_in_executor(None, _sync_body, name, parents, seconds)
    finished.put_nowait((name, value))


async def run_workload(workload: Workload, threads: bool = False) -> dict[str, StepValue]:
    """Run every step once, each as soon as all its parents are done; returns
    ``{sink: value}``."""
    children = workload.children()
    parents_of: Mapping[str, tuple[str, ...]] = workload.parents
    unfinished = {s: len(parents_of[s]) for s in workload.steps}
    ready = deque(s for s in workload.steps if not unfinished[s])
    finished: asyncio.Queue[tuple[str, StepValue]] = asyncio.Queue()
    results: dict[str, StepValue] = {}
    pending = workload.size
    step = _thread_step if threads else _step
    async with asyncio.TaskGroup() as group:
        while pending:
            while ready:
                name = ready.popleft()
                seconds = workload.duration.get(name, 0.0)
                parents = [results[p] for p in parents_of[name]]
                group.create_task(step(name, parents, seconds, finished))
            name, value = await finished.get()
            results[name] = value
            pending -= 1
            for child in children[name]:
                unfinished[child] -= 1
                if not unfinished[child]:
                    ready.append(child)
    return {s: results[s] for s in workload.steps if not children[s]}


class BaselineAdapter:
    """The bench adapter shape (see child.py) around run_workload.  Option
    ``threads=1``: sync step bodies in the default thread pool."""

    engine = "raw asyncio"

    def __init__(self, threads: str = "0") -> None:
        self.threads = threads not in ("0", "", "false")
        if self.threads:
            self.engine = "raw asyncio + threads"

    def version(self) -> str:
        return "Python " + platform.python_version()

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> Workload:
        # Nothing to build: the runner reads the Workload itself.
        return workload

    async def arun(self, graph: Workload) -> dict[str, Any]:
        return await run_workload(graph, self.threads)
