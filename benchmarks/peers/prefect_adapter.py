"""Prefect 3: a @flow that submits one @task per step, its parents' futures as arguments.

Each task receives its parents' results (Prefect resolves futures passed as arguments,
inside a list too, and waits for them) and computes the shared step body
(`workloads.step_value`).  `.submit()` hands each task to the flow's task runner, the
default ThreadPoolTaskRunner (its default size: no fixed cap, one thread per task in
flight).  Tasks without a sleep are plain functions; sleep tasks are `async def`
awaiting asyncio.sleep.  The flow returns the sinks' results, which the harness checks.

Ephemeral mode: no server is configured, so Prefect starts its own temporary local API
on a SQLite database under a fresh PREFECT_HOME in a temporary directory.  setup() starts
it with a one-task flow, so no measured run pays for it (its cost is reported as setup).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from importlib.metadata import version
from typing import Any

# Prefect reads its settings when imported: point it at a private home first.
_HOME = tempfile.mkdtemp(prefix="prefect-bench-")
os.environ.update(PREFECT_HOME=_HOME, PREFECT_SERVER_ALLOW_EPHEMERAL_MODE="true",
                  PREFECT_SERVER_ANALYTICS_ENABLED="false")
os.environ.pop("PREFECT_API_URL", None)

from prefect import flow, task  # noqa: E402
from prefect.futures import wait  # noqa: E402
from workloads import StepValue, Workload, step_value  # noqa: E402


@task
def step_task(name: str, parents: list[StepValue]) -> StepValue:
    return step_value(name, parents)


@task
async def sleep_task(name: str, parents: list[StepValue], seconds: float) -> StepValue:
    await asyncio.sleep(seconds)
    return step_value(name, parents)


def build_flow(workload: Workload) -> Any:
    sinks = workload.sinks()

    @flow(name=workload.name)
    def dag() -> dict[str, StepValue]:
        futures: dict[str, Any] = {}
        for step in workload.steps:
            parents = [futures[p] for p in workload.parents[step]]
            seconds = workload.duration.get(step, 0.0)
            futures[step] = (sleep_task.submit(step, parents, seconds) if seconds > 0
                             else step_task.submit(step, parents))
        wait(list(futures.values()))
        return {s: futures[s].result() for s in sinks}
    return dag


@flow(name="warm-up")
def _start_server() -> None:
    step_task("warm-up", [])


class PrefectAdapter:
    engine = "Prefect"

    def setup(self) -> None:
        """Start the ephemeral API (about 8 s here) before any timed or warm-up run."""
        _start_server()

    def version(self) -> str:
        return version("prefect")

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> Any:
        return build_flow(workload)

    def run(self, dag: Any) -> dict[str, StepValue]:
        result: dict[str, StepValue] = dag()
        return result

    def teardown(self) -> None:
        shutil.rmtree(_HOME, ignore_errors=True)

    def notes(self) -> str:
        return "ThreadPoolTaskRunner, default size (no cap)"
