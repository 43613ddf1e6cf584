"""A driver of a cluster dies again and again while its step's attempt runs in its own
process (an eager attempt, as ``plait worker`` runs them): each next driver takes the
run over, counts that attempt interrupted once, and retries the step under the retry
policy the definition sets through ``defaults.retry`` (read back from the store), until
the policy is spent.  Each driver takes the run as a worker does (``claim_run``, then
``Engine.execute(claimed=True)`` with a ``ClaimSource`` holding the attempts found in
flight); "dies" means its store refuses every call from then on and its tasks stop."""

from __future__ import annotations

import asyncio
import importlib
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from plait.core.states import RunStatus, StepStatus
from plait.definitions import check_definition
from plait.errors import StoreError
from plait.runtime.claims import ClaimSource
from plait.runtime.engine import Engine
from plait.runtime.worker import in_flight
from plait.store import MemoryStore
from plait.store.base import AttemptKey, RunRecord, Store

from .conftest import StepsModule

LEASE = 0.1  # short: a dead driver tries to release the run for a lease
RETRIES = 3
Bodies = list[tuple[int, asyncio.Event]]  # the bodies started: (attempt, what ends it)

_STEPS = '''
import asyncio

BODIES = []  # (attempt, asyncio.Event that lets it return)

async def hold(ctx):
    done = asyncio.Event()
    BODIES.append((ctx.attempt, done))
    await done.wait()
    return {"attempt": ctx.attempt}
'''


class _Dying:
    """The store as one driver's process sees it: after ``die()`` every call fails."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value):
            return value

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                raise StoreError("this process is dead")
            return await value(*args, **kwargs)
        return call


class _Slots:
    """A driving worker's free slots (``LocalSlots``): always one, its tasks kept."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tasks: list[asyncio.Task[None]] = []

    def take(self) -> bool:
        return True

    def release(self) -> None:
        pass

    def settled(self, count: int, stored: bool) -> None:
        pass

    def spawn(self, body: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(body)
        self.tasks.append(task)
        return task

    def late(self, run_id: str, key: AttemptKey) -> None:
        pass

    def dispatched(self, workflow: str, seconds: float) -> None:
        pass


class _Driver:
    """One generation: a driver that takes the run over ``LEASE`` after the last one."""

    def __init__(self, store: Store, generation: int) -> None:
        self.store = _Dying(store)
        self.name = f"driver-{generation}"
        offset = generation * (LEASE + 1)  # the last driver's lease has run out
        self.engine = Engine(self.store, worker=self.name,  # type: ignore[arg-type]
                             lease=LEASE, clock=lambda: time.time() + offset)
        self.slots = _Slots(self.name)
        self.task: asyncio.Task[Any] | None = None

    async def take(self, run_id: str) -> None:
        engine, store = self.engine, self.store
        run = await store.claim_run(run_id, self.name, engine.clock(), LEASE)
        assert run is not None, f"{self.name} could not take the run over"
        checked = await engine.stored_workflow(run.workflow, run.version)
        state = await engine.restore(run, checked)
        source = ClaimSource(checked, state, store, run_id=run_id,  # type: ignore[arg-type]
                             poll=0.05, slots=self.slots,
                             in_flight=await in_flight(store,  # type: ignore[arg-type]
                                                       run_id, state))
        self.task = asyncio.create_task(engine.execute(checked, run, state, source=source,
                                                       claimed=True))

    async def die(self) -> None:
        self.store.dead = True
        tasks = [t for t in (self.task, *self.slots.tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _body(store: Store, run_id: str, bodies: Bodies, attempt: int) -> asyncio.Event:
    """What ends the body of ``attempt``, once it runs (the run must not end first)."""
    deadline = time.monotonic() + 10
    while not any(n == attempt for n, _ in bodies):
        run = await store.get_run(run_id)
        assert run.status is RunStatus.RUNNING or run.status is RunStatus.PENDING, (
            f"the run ended {run.status} before attempt {attempt}: {run.error}")
        assert time.monotonic() < deadline, f"attempt {attempt} never started: {bodies}"
        await asyncio.sleep(0.005)
    return next(done for n, done in bodies if n == attempt)


async def _killed_every_attempt(write_steps_module: StepsModule, kills: int
                                ) -> tuple[MemoryStore, RunRecord, _Driver, Bodies]:
    """Drivers 1..kills each die while their attempt's body runs; driver kills + 1
    drives on.  Returns it, with the store, the run and the bodies started."""
    module = write_steps_module(_STEPS)
    checked = check_definition({
        "name": f"wf-{uuid.uuid4().hex[:8]}",
        "defaults": {"retry": {"max_retries": RETRIES, "initial_delay": "1ms"}},
        "steps": [{"id": "root", "type": "python", "call": f"{module}:hold"}]})
    store = MemoryStore()
    run = await Engine(store).submit(checked, {})
    bodies: Bodies = importlib.import_module(module).BODIES
    driver = _Driver(store, 1)
    for generation in range(1, kills + 1):
        await driver.take(run.run_id)
        await _body(store, run.run_id, bodies, generation)
        await driver.die()
        driver = _Driver(store, generation + 1)
    await driver.take(run.run_id)
    return store, run, driver, bodies


async def _ended(store: Store, run_id: str) -> RunRecord:
    deadline = time.monotonic() + 10
    while (run := await store.get_run(run_id)).status not in (
            RunStatus.COMPLETED, RunStatus.FAILED):
        assert time.monotonic() < deadline, f"the run did not end: {run.status}"
        await asyncio.sleep(0.005)
    return run


async def test_each_takeover_counts_the_attempt_it_found_out_once(
        write_steps_module: StepsModule) -> None:
    store, run, driver, bodies = await _killed_every_attempt(write_steps_module, RETRIES)
    try:
        (await _body(store, run.run_id, bodies, RETRIES + 1)).set()
        ended = await _ended(store, run.run_id)
    finally:
        await driver.die()
    assert ended.status is RunStatus.COMPLETED, ended.error
    [root] = await store.get_steps(run.run_id)
    assert root.attempts == RETRIES + 1 and root.output == {"attempt": RETRIES + 1}
    attempts = await store.get_attempts(run.run_id)
    assert [(a.attempt, a.status) for a in attempts] == [
        *((n, "failed") for n in range(1, RETRIES + 1)), (RETRIES + 1, "completed")]
    for a in attempts[:-1]:
        assert a.worker == f"driver-{a.attempt}"
        assert "InterruptedAttempt" in (a.error or "") and a.worker in (a.error or "")


async def test_the_takeover_after_the_last_retry_fails_the_step(
        write_steps_module: StepsModule) -> None:
    store, run, driver, _ = await _killed_every_attempt(write_steps_module, RETRIES + 1)
    try:
        ended = await _ended(store, run.run_id)
    finally:
        await driver.die()
    assert ended.status is RunStatus.FAILED
    [root] = await store.get_steps(run.run_id)
    assert root.status is StepStatus.FAILED and root.attempts == RETRIES + 1
    assert "InterruptedAttempt" in (root.error or "") and "driver-4" in (root.error or "")

