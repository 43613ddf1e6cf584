"""Prefect 3: a @flow that submits one @task per step with `.submit(wait_for=parents)`.

`wait_for` is Prefect's way to order tasks that pass no data; `.submit()` hands each task
to the flow's task runner, the default ThreadPoolTaskRunner (its default size: no fixed
cap, one thread per task in flight).  No-op tasks are plain functions; sleep tasks are
`async def` awaiting asyncio.sleep.

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
from workloads import Workload  # noqa: E402


@task
def noop_task() -> None:
    return None


@task
async def sleep_task(seconds: float) -> None:
    await asyncio.sleep(seconds)


def build_flow(workload: Workload) -> Any:
    @flow(name=workload.name)
    def dag() -> int:
        futures: dict[str, Any] = {}
        for step in workload.steps:
            parents = [futures[p] for p in workload.parents[step]]
            seconds = workload.duration.get(step, 0.0)
            futures[step] = (sleep_task.submit(seconds, wait_for=parents) if seconds > 0
                             else noop_task.submit(wait_for=parents))
        wait(list(futures.values()))
        return sum(1 for f in futures.values() if f.state.is_completed())
    return dag


@flow(name="warm-up")
def _start_server() -> None:
    noop_task()


class PrefectAdapter:
    engine = "Prefect"

    def setup(self) -> None:
        """Start the ephemeral API (about 8 s here) before any timed or warm-up run."""
        _start_server()

    def version(self) -> str:
        return version("prefect")

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> tuple[Any, int]:
        return build_flow(workload), workload.size

    def run(self, built: tuple[Any, int]) -> None:
        dag, size = built
        ran = dag()
        if ran != size:
            raise RuntimeError(f"Prefect completed {ran} of {size} tasks")

    def teardown(self) -> None:
        shutil.rmtree(_HOME, ignore_errors=True)

    def notes(self) -> str:
        return "ThreadPoolTaskRunner, default size (no cap)"
