"""A run whose steps wait for a time on ``plait worker`` (PostgreSQL): while it waits
it is stored ``waiting`` with its due time (``wake_at``), held by no worker and with no
ticket out; once the time has come any worker continues it by itself (no signal, no
resume): a sleep returns, an ``event`` step's timeout fails it, an approval's timeout
decides it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.runtime.engine import Engine
from plait.runtime.worker import Worker
from plait.store.base import RunRecord, Store
from plait.store.url import open_store
from waiting import until

from .conftest import StepsModule

pytestmark = [pytest.mark.slow, pytest.mark.postgres]  # a cluster of workers

_STEPS = '''
async def nap(ctx):
    await ctx.sleep("nap", 2)
    return {"attempt": ctx.attempt}
'''
_ENDED = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


@pytest.fixture
async def store(pg_database: str) -> AsyncIterator[Store]:
    opened = open_store(pg_database)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def _flow(*steps: dict[str, Any]) -> Any:
    return check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": list(steps)})


async def _on_two_workers(store: Store, checked: Any) -> tuple[str, list[RunRecord]]:
    """Run ``checked`` on two workers until it ends; its id and what was seen of it
    while it waited (``waiting`` with no owner)."""
    workers = [Worker(store, name=name, concurrency=2, lease=2.0, poll=0.05, grace=2.0,
                      schedules=False) for name in ("w1", "w2")]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    engine = Engine(store)
    try:
        run = await engine.submit(checked, {})
        parked: list[RunRecord] = []

        async def let_go() -> bool:
            seen = await store.get_run(run.run_id)
            if seen.status is RunStatus.WAITING and seen.owner is None:
                parked.append(seen)
                return True
            assert seen.status not in _ENDED, f"ended {seen.status} without waiting"
            return False
        await until(let_go, what="the run to wait, let go", timeout=20, every=0.02)
        assert await store.tickets(run.run_id) == []  # nothing out while it waits

        async def ended() -> bool:
            return (await store.get_run(run.run_id)).status in _ENDED
        await until(ended, what="a worker to continue the run", timeout=20, every=0.05)
    finally:
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)
        engine.close()
    return run.run_id, parked


async def test_a_sleeping_run_waits_holding_nothing_and_a_worker_wakes_it(
        store: Store, write_steps_module: StepsModule) -> None:
    module = write_steps_module(_STEPS)
    run_id, parked = await _on_two_workers(store, _flow(
        {"id": "s", "type": "python", "call": f"{module}:nap"}))
    waiting = parked[0]
    assert waiting.wake_at is not None and waiting.wake_at > waiting.created_at
    run = await store.get_run(run_id)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.wake_at is None
    steps = {s.step_id: s for s in await store.get_steps(run_id)}
    assert steps["s"].output == {"attempt": 2}
    assert steps["s"].finished_at is not None and steps["s"].finished_at >= waiting.wake_at
    attempts = [(a.attempt, a.status) for a in await store.get_attempts(run_id)]
    assert attempts == [(1, "waiting"), (2, "completed")]


async def test_an_event_step_fails_at_its_timeout_without_a_signal(store: Store) -> None:
    run_id, parked = await _on_two_workers(store, _flow(
        {"id": "go", "type": "event", "event": "go", "timeout": "1s"}))
    assert parked[0].wake_at is not None
    run = await store.get_run(run_id)
    assert run.status is RunStatus.FAILED
    go = {s.step_id: s for s in await store.get_steps(run_id)}["go"]
    assert go.error is not None and "no event 'go' within 1s" in go.error


async def test_an_approval_is_decided_at_its_timeout_by_a_worker(store: Store) -> None:
    run_id, parked = await _on_two_workers(store, _flow(
        {"id": "ok", "type": "approval", "prompt": "go?", "timeout": "1s",
         "on_timeout": "approve"}))
    assert parked[0].wake_at is not None
    run = await store.get_run(run_id)
    assert run.status is RunStatus.COMPLETED, run.error
    ok = {s.step_id: s for s in await store.get_steps(run_id)}["ok"]
    assert isinstance(ok.output, dict) and ok.output["by"] == "timeout"
