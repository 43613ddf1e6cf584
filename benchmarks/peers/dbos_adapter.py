"""DBOS: one @DBOS.workflow whose steps are @DBOS.step calls, on a SQLite system database.

DBOS replays a workflow from its recorded steps after a crash, which needs the steps to
start in a deterministic order.  Its documented way to run steps in parallel is to create
their tasks in a fixed order and gather them, so the DAG runs level by level: every step
of a level starts together and the next level waits for the whole level.  Steps are
`async def` (sleep steps await asyncio.sleep).  The system database is a SQLite file in a
fresh temporary directory (DBOS's default backend; no Postgres needed).
"""

from __future__ import annotations

import asyncio
import tempfile
from importlib.metadata import version

from dbos import DBOS
from graph_shape import levels
from workloads import Workload


@DBOS.step()
async def noop_step() -> None:
    return None


@DBOS.step()
async def sleep_step(seconds: float) -> None:
    await asyncio.sleep(seconds)


@DBOS.workflow()
async def dag_workflow(durations: list[list[float]]) -> int:
    """Run each level's steps concurrently, in a fixed start order; return steps run."""
    ran = 0
    for level in durations:
        tasks = [asyncio.create_task(sleep_step(d) if d > 0 else noop_step()) for d in level]
        await asyncio.gather(*tasks)
        ran += len(tasks)
    return ran


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

    def build(self, workload: Workload) -> tuple[list[list[float]], int]:
        durations = [[workload.duration.get(s, 0.0) for s in level]
                     for level in levels(workload)]
        return durations, workload.size

    async def arun(self, built: tuple[list[list[float]], int]) -> None:
        durations, size = built
        ran = await dag_workflow(durations)
        if ran != size:
            raise RuntimeError(f"DBOS ran {ran} of {size} steps")

    def teardown(self) -> None:
        DBOS.destroy()
        self._tmp.cleanup()

    def notes(self) -> str:
        return "level by level (deterministic step order for replay)"
