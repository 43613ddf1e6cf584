"""Apache Hamilton: the DAG as a module of functions whose parameters name their parents.

That is Hamilton's model: a node is a function, an edge is a parameter named after
another function.  The adapter writes that module's source for the Workload and loads it
with `ad_hoc_utils.module_from_source`, then asks a driver for the sink nodes.

Every node receives its parents' outputs as those parameters and returns the shared
step body, `workloads.step_value` (imported into the module under a leading underscore,
so Hamilton does not take it for a node); the run returns the sinks' outputs, which the
harness checks.

- Sync driver: sleep steps `time.sleep`.  Its default executor runs one node at a time;
  for the sleep workloads the adapter adds Hamilton's `FutureAdapter` (a thread pool) so
  independent sleeps overlap.  That adapter submits every node at once and a node holds
  its thread while it waits for its parents, so "enough threads" means one per node.
- Async driver: `async def` nodes awaiting `asyncio.sleep`, awaited as asyncio tasks.
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from types import ModuleType
from typing import Any

from graph_shape import depth
from hamilton import ad_hoc_utils, async_driver, driver
from hamilton.plugins.h_threadpool import FutureAdapter
from workloads import Workload


def module_source(workload: Workload, is_async: bool) -> str:
    """One function per step: `def s1(s0: dict) -> dict: return _step_value("s1", (s0,))`;
    a sleep step sleeps first."""
    lines = ["import asyncio", "import time", "",
             "from workloads import step_value as _step_value", ""]
    for step in workload.steps:
        parents = workload.parents[step]
        params = ", ".join(f"{p}: dict" for p in parents)
        given = "".join(f"{p}, " for p in parents)
        seconds = workload.duration.get(step, 0.0)
        if is_async:
            lines.append(f"async def {step}({params}) -> dict:")
            if seconds > 0:
                lines.append(f"    await asyncio.sleep({seconds!r})")
        else:
            lines.append(f"def {step}({params}) -> dict:")
            if seconds > 0:
                lines.append(f"    time.sleep({seconds!r})")
        lines += [f"    return _step_value({step!r}, ({given}))", ""]
    return "\n".join(lines)


def sinks(workload: Workload) -> list[str]:
    return workload.sinks()


def sink_outputs(result: Any, sinks: list[str]) -> dict[str, Any]:
    """``{sink: output}`` from what the driver returned (a dict with the default result
    builder; anything indexable by node name works)."""
    return {s: result[s] for s in sinks}


def _allow_recursion(workload: Workload) -> None:
    # Hamilton walks the DAG recursively (several frames per node on the longest path).
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20 * depth(workload) + 1000))


class HamiltonSyncAdapter:
    engine = "Hamilton (sync driver)"

    def __init__(self) -> None:
        self.threads: int | None = None

    def version(self) -> str:
        return version("apache-hamilton")

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> tuple[Any, list[str]]:
        _allow_recursion(workload)
        module: ModuleType = ad_hoc_utils.module_from_source(module_source(workload, False))
        builder = driver.Builder().with_modules(module)
        self.threads = workload.size if workload.sleeps else None
        if self.threads:
            builder = builder.with_adapters(FutureAdapter(max_workers=self.threads))
        return builder.build(), sinks(workload)

    def run(self, built: tuple[Any, list[str]]) -> dict[str, Any]:
        dr, outputs = built
        return sink_outputs(dr.execute(outputs), outputs)

    def notes(self) -> str:
        return (f"FutureAdapter, {self.threads} threads" if self.threads
                else "default executor (one node at a time)")


class HamiltonAsyncAdapter:
    engine = "Hamilton (async driver)"

    def version(self) -> str:
        return version("apache-hamilton")

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> tuple[Any, list[str]]:
        _allow_recursion(workload)
        module = ad_hoc_utils.module_from_source(module_source(workload, True))
        # build() is a coroutine (it initialises adapters); build_without_init + ainit in
        # arun would do the same, but the driver must exist before timing starts.
        dr = async_driver.Builder().with_modules(module).build_without_init()
        return dr, sinks(workload)

    async def arun(self, built: tuple[Any, list[str]]) -> dict[str, Any]:
        dr, outputs = built
        if not getattr(dr, "_bench_ready", False):
            await dr.ainit()
            dr._bench_ready = True
        return sink_outputs(await dr.execute(outputs), outputs)
