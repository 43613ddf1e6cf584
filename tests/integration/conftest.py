"""Running workflows through the public API, against the memory store.

``run_wf`` runs a workflow on a fresh engine (optionally with a seeded ``rand``) and
bounds the run with a timeout so a scheduling bug fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import RunResult, Workflow
from plait.core.states import RunStatus
from plait.core.validate import CheckedWorkflow
from plait.runtime.engine import Engine
from plait.runtime.worker import Worker
from plait.store import MemoryStore, Store, open_store

RUN_TIMEOUT_S = 15.0


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql",
                                                         marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An open store of each backend, for tests that share one store between a driver
    and workers (PostgreSQL: a fresh database of the module, see tests/pgutil.py)."""
    if request.param == "memory":
        opened: Store = MemoryStore()
    else:
        url = f"sqlite:///{tmp_path / 'plait.db'}" if request.param == "sqlite" \
            else str(request.getfixturevalue("pg_database"))
        opened = open_store(url)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()

RunWf = Callable[..., Awaitable[RunResult]]


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    eng = Engine(MemoryStore())
    try:
        yield eng
    finally:
        eng.close()


async def run_with(engine: Engine, wf: Workflow, input: Any = None,
                   timeout: float = RUN_TIMEOUT_S) -> RunResult:
    return await asyncio.wait_for(engine.run(wf.validate(), {} if input is None else input),
                                  timeout)


@pytest.fixture
def run_wf() -> RunWf:
    async def run(wf: Workflow, input: Any = None, *, rand: Callable[[], float] | None = None,
                  timeout: float = RUN_TIMEOUT_S) -> RunResult:
        eng = Engine(MemoryStore(), **({"rand": rand} if rand is not None else {}))
        try:
            return await run_with(eng, wf, input, timeout)
        finally:
            eng.close()
    return run


def statuses(result: RunResult) -> dict[str, str]:
    return {sid: step.status for sid, step in result.steps.items()}


StepsModule = Callable[[str], str]


@pytest.fixture
def write_steps_module(tmp_path: Path) -> Iterator[StepsModule]:
    """``write_steps_module(source)``: the source written as a module of a fresh name,
    importable from ``sys.path`` (what workers and ``call: module:function`` steps
    import) for the test; its name is returned."""
    written: list[str] = []
    sys.path.insert(0, str(tmp_path))

    def write(source: str) -> str:
        name = f"steps_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        written.append(name)
        return name
    try:
        yield write
    finally:
        sys.path.remove(str(tmp_path))
        for name in written:
            sys.modules.pop(name, None)


async def run_on_two_workers(store: Store, checked: CheckedWorkflow,
                             wait_s: float = 30.0, *, input: Any = None,
                             eager: bool = True) -> tuple[str, RunStatus]:
    """Submit a run of ``checked`` (with ``input``, default ``{}``) and let two
    in-process workers (w1, w2) execute it until it completes or fails; its id and
    final status.  ``wait_s`` bounds the wait, never a claim about speed; ``eager``:
    False makes every attempt a ticket."""
    workers = [Worker(store, name=name, concurrency=2, lease=2.0, poll=0.05, grace=2.0,
                      schedules=False, eager=eager) for name in ("w1", "w2")]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        run = await Engine(store).submit(checked, {} if input is None else input)
        deadline = asyncio.get_running_loop().time() + wait_s
        while (status := (await store.get_run(run.run_id)).status) not in (
                RunStatus.COMPLETED, RunStatus.FAILED):
            assert asyncio.get_running_loop().time() < deadline, f"still {status}"
            await asyncio.sleep(0.05)
    finally:
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)
    return run.run_id, status
