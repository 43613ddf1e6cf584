"""Eager attempts (docs/design/workers.md): a worker driving a run runs the attempts
it has free slots for itself, stored ``running`` first, without a ticket; the rest,
steps with a pool or a circuit breaker, and every attempt of a worker started with
``eager=False`` (``plait worker --no-eager``) go through tickets.  A driver whose run
was taken over while its eager attempt ran writes nothing, and notes the lost result.
On every store."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from plait.core.states import RunStatus, StepStatus
from plait.definitions import check_definition
from plait.runtime.engine import Engine
from plait.runtime.worker import Worker
from plait.store.base import Heartbeat, Store, WriteBatch

from .conftest import StepsModule

pytestmark = pytest.mark.slow  # starts workers and their leases

_STEPS = '''
import os, time

def start(n):
    return {"n": n}

def branch(start, input):
    return start["n"] * input["k"]

def join(b1, b2, b3):
    return b1 + b2 + b3

def last(join):
    return {"total": join}

def nap(seconds):
    time.sleep(seconds)
    return seconds

def gate(directory):
    open(os.path.join(directory, "started"), "w").close()
    while not os.path.exists(os.path.join(directory, "open")):
        time.sleep(0.01)
    return "through"
'''


@pytest.fixture
def steps_module(write_steps_module: StepsModule) -> str:
    return write_steps_module(_STEPS)


class _Recording:
    """The store, recording every ticket a batch dispatches (by step id)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.dispatched: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def write(self, batch: WriteBatch) -> None:
        await self._store.write(batch)
        self.dispatched += [t.step_id for t in batch.dispatch]


def _fan_out(module: str, **extra: Any) -> dict[str, Any]:
    py = "python"
    return {"name": f"wf-{uuid.uuid4().hex[:8]}", **extra, "steps": [
        {"id": "start", "type": py, "call": f"{module}:start", "with": {"n": 2}},
        *({"id": f"b{k}", "type": py, "call": f"{module}:branch", "depends_on": ["start"]}
          for k in (1, 2, 3)),
        {"id": "join", "type": py, "call": f"{module}:join", "depends_on": ["b1", "b2", "b3"]},
        {"id": "last", "type": py, "call": f"{module}:last", "depends_on": ["join"]}]}


def _worker(store: Any, name: str, **options: Any) -> Worker:
    given: dict[str, Any] = {"concurrency": 4, "lease": 2.0, "poll": 0.1, "grace": 5.0,
                             "schedules": False}
    given.update(options)
    return Worker(store, name=name, **given)


async def _final(store: Store, run_id: str, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while (await store.get_run(run_id)).status not in (
            RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
        assert asyncio.get_running_loop().time() < deadline, "the run did not end"
        await asyncio.sleep(0.05)


async def _run(workers: list[Worker], store: Store, run_id: str) -> None:
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        await _final(store, run_id)
    finally:
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)


@pytest.mark.parametrize("eager", [True, False])
async def test_a_driver_with_free_slots_runs_the_attempts_itself(
        store: Store, steps_module: str, eager: bool) -> None:
    checked = check_definition(_fan_out(steps_module))
    run = await Engine(store).submit(checked, {"k": 1})
    recording = _Recording(store)
    worker = _worker(recording, "w1", eager=eager)
    await _run([worker], store, run.run_id)
    stored = await store.get_run(run.run_id)
    assert stored.status is RunStatus.COMPLETED, stored.error
    steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
    assert steps["last"].output == {"total": 6}
    attempts = await store.get_attempts(run.run_id)
    assert sorted(a.step_id for a in attempts) == sorted(steps)
    assert {a.worker for a in attempts} == {"w1"}
    assert {s.worker for s in steps.values()} == {"w1"}
    assert worker.completed == 6
    # eager: no ticket at all; --no-eager: one per attempt
    assert sorted(recording.dispatched) == ([] if eager else sorted(steps))
    assert await store.tickets(run.run_id) == []
    assert await store.outcomes(run.run_id) == []


async def test_steps_with_a_pool_or_a_breaker_always_get_a_ticket(
        store: Store, steps_module: str) -> None:
    definition = _fan_out(steps_module, pools={"db": {"concurrency": 1}})
    definition["steps"][1]["pool"] = "db"  # b1
    definition["steps"][2]["circuit_breaker"] = {
        "key": f"svc-{uuid.uuid4().hex[:8]}", "failure_threshold": 3,
        "reset_after": "10s"}  # b2
    checked = check_definition(definition)
    run = await Engine(store).submit(checked, {"k": 2})
    recording = _Recording(store)
    await _run([_worker(recording, "w1")], store, run.run_id)
    stored = await store.get_run(run.run_id)
    assert stored.status is RunStatus.COMPLETED, stored.error
    assert sorted(recording.dispatched) == ["b1", "b2"]
    steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
    assert steps["last"].output == {"total": 12}


async def test_what_the_driver_has_no_slot_for_is_claimed_by_another_worker(
        store: Store, steps_module: str) -> None:
    checked = check_definition({"name": f"wide-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": f"n{k}", "type": "python", "call": f"{steps_module}:nap",
         "with": {"seconds": 0.4}} for k in range(4)]})
    run = await Engine(store).submit(checked, {})
    recording = _Recording(store)
    driver = _worker(recording, "driver", concurrency=1)
    helper = _worker(store, "helper", concurrency=4, max_runs=0)  # executes only
    await _run([driver, helper], store, run.run_id)
    assert (await store.get_run(run.run_id)).status is RunStatus.COMPLETED
    by_step = {a.step_id: a.worker for a in await store.get_attempts(run.run_id)}
    assert sorted(by_step.values()).count("driver") >= 1
    assert "helper" in by_step.values(), by_step
    # exactly the attempts the helper ran were tickets
    assert sorted(recording.dispatched) == sorted(
        s for s, w in by_step.items() if w == "helper")
    assert driver.completed + helper.completed == 4


async def test_draining_lets_an_eager_attempt_finish_and_stores_it(
        store: Store, steps_module: str) -> None:
    checked = check_definition({"name": f"drain-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "first", "type": "python", "call": f"{steps_module}:nap",
         "with": {"seconds": 0.6}},
        {"id": "second", "type": "python", "call": f"{steps_module}:nap",
         "with": {"seconds": 0}, "depends_on": ["first"]}]})
    run = await Engine(store).submit(checked, {})
    worker = _worker(store, "w1")
    task = asyncio.create_task(worker.run())
    deadline = asyncio.get_running_loop().time() + 10
    while {s.step_id: s.status for s in await store.get_steps(run.run_id)}["first"] \
            is not StepStatus.RUNNING:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)
    worker.stop()  # SIGTERM: no new attempt here, the running one finishes
    await asyncio.wait_for(task, 15)
    steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
    assert steps["first"].status is StepStatus.COMPLETED
    assert (steps["first"].attempts, steps["first"].worker) == (1, "w1")
    assert steps["second"].status is not StepStatus.COMPLETED  # nobody ran it
    run_after = await store.get_run(run.run_id)
    assert run_after.owner is None  # released for the next worker
    # a new worker finishes the run without running ``first`` again
    await _run([_worker(store, "w2")], store, run.run_id)
    steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
    assert steps["first"].attempts == 1 and steps["second"].worker == "w2"


class _Unaware:
    """The store as a driver paused past its lease sees it: its heartbeats still
    answer that it holds the run (it has not looked yet)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def heartbeat(self, run_id: str, owner: str, now: float) -> Heartbeat:
        return Heartbeat(held=True, owner=owner, cancel_requested=False)


async def test_a_driver_whose_run_was_taken_over_stores_nothing_and_notes_its_result(
        store: Store, steps_module: str, tmp_path: Path) -> None:
    checked = check_definition({"name": f"taken-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "gate", "type": "python", "call": f"{steps_module}:gate",
         "with": {"directory": str(tmp_path)}},
        {"id": "after", "type": "python", "call": f"{steps_module}:nap",
         "with": {"seconds": 0}, "depends_on": ["gate"]}]})
    run = await Engine(store).submit(checked, {})
    worker = _worker(_Unaware(store), "w1", lease=30.0)
    task = asyncio.create_task(worker.run())
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while not (tmp_path / "started").exists():
            assert asyncio.get_running_loop().time() < deadline, "gate never started"
            await asyncio.sleep(0.02)
        # another process takes the run over (as after w1's lease ran out)
        taken = await store.claim_run(run.run_id, "thief", time.time(), 30.0,
                                      dead_owner="w1")
        assert taken is not None and taken.owner == "thief"
        before = [(e.seq, e.kind) for e in await store.get_events(run.run_id)]
        (tmp_path / "open").touch()

        async def noted() -> list[dict[str, Any]]:
            return [e.data for e in await store.get_events(run.run_id)
                    if e.kind == "note" and "late_result_discarded" in (e.data or {})]
        while not await noted():
            assert asyncio.get_running_loop().time() < deadline + 10, "no note"
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    assert await noted() == [{"late_result_discarded": {
        "step": "gate", "attempt": 1, "fallback": False, "worker": "w1"}}]
    after = [(e.seq, e.kind) for e in await store.get_events(run.run_id)]
    assert [kind for _, kind in after[len(before):]] == ["note"]  # nothing else
    gate = {s.step_id: s for s in await store.get_steps(run.run_id)}["gate"]
    assert (gate.status, gate.attempts, gate.output) == (StepStatus.RUNNING, 1, None)
    assert (await store.get_run(run.run_id)).owner == "thief"
