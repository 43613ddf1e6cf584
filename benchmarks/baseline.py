"""The floor: a hand-written asyncio runner of a Workload, with nothing an engine adds.

It keeps, per step, the number of parents not yet finished; a step whose count drops to
zero goes on a ready queue and becomes a task at once, so scheduling is eager with no
level barriers.  No persistence, no state machine, no outputs: whatever plait (or any
engine) costs above this is the price of its features.
"""

from __future__ import annotations

import asyncio
import platform
from collections import deque

from workloads import Workload


async def _step(name: str, seconds: float, finished: asyncio.Queue[str]) -> None:
    if seconds > 0:
        await asyncio.sleep(seconds)
    finished.put_nowait(name)


async def run_workload(workload: Workload) -> None:
    """Run every step once, each as soon as all its parents are done."""
    children = workload.children()
    unfinished = {s: len(workload.parents[s]) for s in workload.steps}
    ready = deque(s for s in workload.steps if not unfinished[s])
    finished: asyncio.Queue[str] = asyncio.Queue()
    pending = workload.size
    async with asyncio.TaskGroup() as group:
        while pending:
            while ready:
                name = ready.popleft()
                seconds = workload.duration.get(name, 0.0)
                group.create_task(_step(name, seconds, finished))
            name = await finished.get()
            pending -= 1
            for child in children[name]:
                unfinished[child] -= 1
                if not unfinished[child]:
                    ready.append(child)


class BaselineAdapter:
    """The bench adapter shape (see harness.Adapter) around run_workload."""

    engine = "raw asyncio"

    def version(self) -> str:
        return "Python " + platform.python_version()

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> Workload:
        # Nothing to build: the runner reads the Workload itself.
        return workload

    async def arun(self, graph: Workload) -> None:
        await run_workload(graph)
