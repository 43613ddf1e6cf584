"""Events and sleeps on ``plait worker`` (PostgreSQL): a step's attempt that waits
ends on its worker as ``waiting``, the run parks, ``plait.signal`` stores the event and
hands the run to the workers, and the step's next attempt (on any worker) gets the
event's data; a sleep's end is kept by the driving worker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from plait import signal_async
from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.runtime.engine import Engine
from plait.runtime.worker import Worker
from plait.store.base import Store
from plait.store.url import open_store

from .conftest import StepsModule

pytestmark = [pytest.mark.slow, pytest.mark.postgres]  # a cluster of workers

_STEPS = '''
CALLS = []

async def pay(ctx):
    CALLS.append(ctx.attempt)
    paid = await ctx.wait_for_event("paid")
    return {"paid": paid, "attempt": ctx.attempt}

def nap(ctx):
    ctx.sleep_sync("nap", 0.5)
    return {"attempt": ctx.attempt}
'''


@pytest.fixture
async def pg_store(pg_database: str) -> AsyncIterator[tuple[Store, str]]:
    opened = open_store(pg_database)
    await opened.open()
    try:
        yield opened, pg_database
    finally:
        await opened.close()


def _flow(module: str, fn: str) -> Any:
    return check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "s", "type": "python", "call": f"{module}:{fn}"}]})


async def _status(store: Store, run_id: str, *wanted: RunStatus) -> RunStatus:
    deadline = asyncio.get_running_loop().time() + 20
    while (status := (await store.get_run(run_id)).status) not in wanted:
        assert asyncio.get_running_loop().time() < deadline, f"still {status}"
        await asyncio.sleep(0.05)
    return status


async def test_a_signal_continues_the_run_on_a_worker(
        pg_store: tuple[Store, str], write_steps_module: StepsModule) -> None:
    store, url = pg_store
    module = write_steps_module(_STEPS)
    engine = Engine(store)
    workers = [Worker(store, name=name, concurrency=2, lease=2.0, poll=0.05, grace=2.0,
                      schedules=False) for name in ("w1", "w2")]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        paid = await engine.submit(_flow(module, "pay"), {})
        napped = await engine.submit(_flow(module, "nap"), {})
        await _status(store, paid.run_id, RunStatus.WAITING)
        await signal_async(paid.run_id, "paid", {"amount": 5}, db=url)
        await _status(store, paid.run_id, RunStatus.COMPLETED, RunStatus.FAILED)
        await _status(store, napped.run_id, RunStatus.COMPLETED, RunStatus.FAILED)
    finally:
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)
        engine.close()
    steps = {s.step_id: s for s in await store.get_steps(paid.run_id)}
    assert steps["s"].output == {"paid": {"amount": 5}, "attempt": 2}, steps["s"].error
    assert steps["s"].worker in ("w1", "w2")
    attempts = [(a.attempt, a.status) for a in await store.get_attempts(paid.run_id)]
    assert attempts == [(1, "waiting"), (2, "completed")]
    napped_steps = {s.step_id: s for s in await store.get_steps(napped.run_id)}
    assert napped_steps["s"].output == {"attempt": 2}, napped_steps["s"].error
