"""A worker's loops are supervised (runtime/worker.py): a loop that fails unexpectedly
is logged with its traceback and restarted, and the work still gets done; a loop that
keeps failing stops the worker (``WorkerFailed``, after draining).  A run whose driving
fails is released and taken again; an attempt that fails in the worker (not in its
step) is stored interrupted and retried.  In one process, on the memory store; the exit
code of ``plait worker`` is in tests/acceptance/test_workers_cli.py."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.runtime.engine import Engine
from plait.runtime.worker import Restarts, Worker, WorkerFailed
from plait.store import MemoryStore, Store
from plait.store.base import RunRecord

from .conftest import StepsModule

QUICK = Restarts(first=0.01, most=0.02, limit=3, healthy=60.0)
_STEPS = '''
import time

def nap(seconds):
    time.sleep(seconds)
    return seconds
'''


class Injected(RuntimeError):
    """The failure a test injects (never a StoreError: no loop expects it)."""


class _Failing:
    """``store.<method>``, failing its first ``times`` calls (None: every call)."""

    def __init__(self, store: Store, method: str, times: int | None) -> None:
        self.real = getattr(store, method)
        self.method, self.times, self.calls = method, times, 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.times is None or self.calls <= self.times:
            raise Injected(f"{self.method} failed (injected)")
        return await self.real(*args, **kwargs)


def _fail(monkeypatch: pytest.MonkeyPatch, store: Store, method: str,
          times: int | None = 1) -> _Failing:
    failing = _Failing(store, method, times)
    monkeypatch.setattr(store, method, failing)
    return failing


def _worker(store: Store, **kwargs: Any) -> Worker:
    # eager=False: every attempt is a ticket, so claims and completions carry the work
    options: dict[str, Any] = {"name": "w1", "concurrency": 2, "lease": 1.0, "poll": 0.05,
                               "grace": 1.0, "schedules": False, "eager": False,
                               "restarts": QUICK}
    options.update(kwargs)
    return Worker(store, **options)


async def _until(check: Callable[[], Any], what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out: {what}"
        await asyncio.sleep(0.02)


async def _completes(store: Store, run: RunRecord) -> None:
    async def ended() -> bool:
        return (await store.get_run(run.run_id)).status in (
            RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
    await _until(ended, f"run {run.run_id} to end")
    stored = await store.get_run(run.run_id)
    assert stored.status is RunStatus.COMPLETED, stored.error


def _chain(module: str, seconds: float = 0.0) -> dict[str, Any]:
    return {"name": f"wf-{uuid.uuid4().hex[:8]}", "defaults": {"retry": {"max_retries": 0}},
            "steps": [{"id": "a", "type": "python", "call": f"{module}:nap",
                       "with": {"seconds": seconds}},
                      {"id": "b", "type": "python", "call": f"{module}:nap",
                       "with": {"seconds": 0}, "depends_on": ["a"]}]}


def _failures(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage() and r.exc_info
            and isinstance(r.exc_info[1], Injected)]


@pytest.fixture
def steps_module(write_steps_module: StepsModule) -> str:
    return write_steps_module(_STEPS)


# the loop, the store method only it calls, and how long its run's first step naps (the
# heartbeat loop only beats while an attempt runs: one that outlives its lease of 0.6 s
# by more than the reaper's period, 0.3 s, so that the reaper would take it if the loop
# stayed dead, and max_retries 0 would fail the run)
LOOPS = [("claim", "claim_attempts", 0.0), ("completion", "complete_attempts", 0.0),
         ("drive", "runs_to_drive", 0.0), ("drive", "reap_expired", 0.0),
         ("heartbeat", "extend_leases", 1.0)]


@pytest.mark.parametrize(("loop", "method", "nap"), LOOPS,
                         ids=[f"{loop}-{method}" for loop, method, _ in LOOPS])
async def test_a_loop_that_fails_once_is_restarted_and_the_work_gets_done(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        steps_module: str, loop: str, method: str, nap: float) -> None:
    store = MemoryStore()
    await store.open()
    failing = _fail(monkeypatch, store, method)
    worker = _worker(store, lease=0.6)
    running = asyncio.create_task(worker.run())
    try:
        checked = check_definition(_chain(steps_module, nap))
        first = await Engine(store).submit(checked, {})
        await _completes(store, first)
        assert failing.calls > 1  # it failed, and was called again: restarted
        again = check_definition(_chain(steps_module))
        second = await Engine(store).submit(again, {})  # and it goes on working
        await _completes(store, second)
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)  # no WorkerFailed: one failure is not enough
    assert [s.attempts for s in await store.get_steps(first.run_id)] == [1, 1]
    assert len(_failures(caplog, f"its {loop} loop failed; restarting it")) == 1


@pytest.mark.parametrize(("loop", "method"), [("claim", "claim_attempts"),
                                              ("drive", "reap_expired")])
async def test_a_loop_that_keeps_failing_stops_the_worker(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        steps_module: str, loop: str, method: str) -> None:
    store = MemoryStore()
    await store.open()
    _fail(monkeypatch, store, method, times=None)
    worker = _worker(store, grace=0.2)
    run = await Engine(store).submit(check_definition(_chain(steps_module)), {})
    with pytest.raises(WorkerFailed) as caught:
        await asyncio.wait_for(worker.run(), 10)  # returns by itself: nobody stops it
    assert (caught.value.loop, caught.value.failures) == (loop, QUICK.limit)
    assert isinstance(caught.value.error, Injected)
    assert worker.draining
    assert len(_failures(caplog, f"its {loop} loop failed; restarting it")) == \
        QUICK.limit - 1
    assert len(_failures(caplog, f"its {loop} loop failed {QUICK.limit} times in a row")) \
        == 1
    assert (await store.get_run(run.run_id)).owner is None  # released in the drain


async def test_the_scheduler_loop_is_restarted(monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    await store.open()
    failing = _fail(monkeypatch, store, "list_workflows")  # the tick's first read
    worker = _worker(store, schedules=True)
    running = asyncio.create_task(worker.run())

    async def ticked_again() -> bool:
        return failing.calls > 1
    try:
        await _until(ticked_again, "the scheduler to tick again")
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)
    assert len(_failures(caplog, "its schedule loop failed; restarting it")) == 1


async def test_a_run_whose_driving_fails_is_released_and_driven_again(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        steps_module: str) -> None:
    store = MemoryStore()
    await store.open()
    worker = _worker(store)
    restore = worker.engine.restore
    calls = 0

    async def failing_once(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise Injected("restoring the run failed (injected)")
        return await restore(*args, **kwargs)
    monkeypatch.setattr(worker.engine, "restore", failing_once)
    running = asyncio.create_task(worker.run())
    try:
        run = await Engine(store).submit(check_definition(_chain(steps_module)), {})
        await _completes(store, run)
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)
    assert calls == 2  # taken again after its release, by the same worker
    assert len(_failures(caplog, f"driving run {run.run_id} failed")) == 1


async def test_an_attempt_that_fails_in_the_worker_is_stored_interrupted_and_retried(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        steps_module: str) -> None:
    """The attempt runner itself fails once (not the step: the runner turns every
    failure of a step into its outcome).  The attempt's lease is not held forever: it
    is stored interrupted, and the step retries."""
    from plait.runtime import executor

    class Runner(executor.AttemptRunner):
        failures = 0

        async def run(self, call: Any, fallback: bool) -> None:
            if Runner.failures == 0:
                Runner.failures += 1
                raise Injected("the attempt runner failed (injected)")
            await super().run(call, fallback)
    monkeypatch.setattr(executor, "AttemptRunner", Runner)
    store = MemoryStore()
    await store.open()
    definition = _chain(steps_module)
    definition["defaults"] = {"retry": {"max_retries": 1, "initial_delay": "0s"}}
    worker = _worker(store)
    running = asyncio.create_task(worker.run())
    try:
        run = await Engine(store).submit(check_definition(definition), {})
        await _completes(store, run)
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)
    attempts = await store.get_attempts(run.run_id)
    assert [(a.step_id, a.attempt, a.status) for a in attempts] == [
        ("a", 1, "failed"), ("a", 2, "completed"), ("b", 1, "completed")]
    assert "WorkerError" in str(attempts[0].error)
    assert "the attempt runner failed" in str(attempts[0].error)
    assert len(_failures(caplog, "attempt 1 of step 'a'")) == 1


async def test_an_eager_attempt_whose_task_fails_stops_the_worker_at_once(
        monkeypatch: pytest.MonkeyPatch, steps_module: str) -> None:
    """Its run could never hear of that attempt: the worker does not go on as if."""
    from plait.runtime.claims import ClaimSource

    async def broken(self: ClaimSource, eager: object) -> None:
        raise Injected("the eager attempt's task failed (injected)")
    monkeypatch.setattr(ClaimSource, "_run_eager", broken)
    store = MemoryStore()
    await store.open()
    run = await Engine(store).submit(check_definition(_chain(steps_module)), {})
    worker = _worker(store, eager=True)
    with pytest.raises(ExceptionGroup) as caught:
        await asyncio.wait_for(worker.run(), 10)  # returns by itself: nobody stops it
    assert caught.group_contains(Injected)
    assert worker.draining
    assert (await store.get_run(run.run_id)).status is not RunStatus.COMPLETED
