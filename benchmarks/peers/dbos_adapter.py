"""DBOS: one @DBOS.workflow whose steps are @DBOS.step calls, on a SQLite system database.

DBOS replays a workflow from its recorded steps after a crash, which needs the steps to
start in a deterministic order.  Its documented way to run steps in parallel is to create
their tasks in a fixed order and gather them, so the DAG runs level by level: every step
of a level starts together and the next level waits for the whole level.  Steps are
`async def` (sleep steps await asyncio.sleep first); each receives its parents' outputs
(kept by the workflow from the steps' results) and returns the shared step body
(`workloads.step_value`); the workflow returns the sinks' outputs, which the harness
checks.  The system database is a SQLite file in a
fresh temporary directory (DBOS's default backend; no Postgres needed).
"""

from __future__ import annotations

import asyncio
import tempfile
from importlib.metadata import version

from dbos import DBOS
from graph_shape import levels
from workloads import StepValue, Workload, step_value


@DBOS.step()
async def dag_step(name: str, parents: list[StepValue], seconds: float) -> StepValue:
    if seconds > 0:
        await asyncio.sleep(seconds)
    return step_value(name, parents)


# one level: [(step, its parents, seconds)]
Level = list[tuple[str, list[str], float]]


@DBOS.workflow()
async def dag_workflow(shape: list[Level], sinks: list[str]) -> dict[str, StepValue]:
    """Run each level's steps concurrently, in a fixed start order; return the sinks'
    outputs."""
    outputs: dict[str, StepValue] = {}
    for level in shape:
        tasks = [asyncio.create_task(dag_step(name, [outputs[p] for p in parents], seconds))
                 for name, parents, seconds in level]
        for (name, _, _), value in zip(level, await asyncio.gather(*tasks), strict=True):
            outputs[name] = value
    return {s: outputs[s] for s in sinks}


class DbosAdapter:
    engine = "DBOS (SQLite)"

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="dbos-bench-")

    def version(self) -> str:
        return version("dbos")

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def setup(self) -> None:
        DBOS(config={"name": "plait-bench",
                     "system_database_url": f"sqlite:///{self._tmp.name}/dbos.sqlite",
                     "run_admin_server": False})
        DBOS.launch()

    def build(self, workload: Workload) -> tuple[list[Level], list[str]]:
        shape = [[(s, list(workload.parents[s]), workload.duration.get(s, 0.0))
                  for s in level] for level in levels(workload)]
        return shape, workload.sinks()

    async def arun(self, built: tuple[list[Level], list[str]]) -> dict[str, StepValue]:
        shape, sinks = built
        result: dict[str, StepValue] = await dag_workflow(shape, sinks)
        return result

    def teardown(self) -> None:
        DBOS.destroy()
        self._tmp.cleanup()

    def notes(self) -> str:
        return "level by level (deterministic step order for replay)"
