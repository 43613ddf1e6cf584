"""A circuit breaker's half-open trial through the engine: it is a lease, let go at once
when its attempt is cancelled and after ``reset_after`` when it never reports, and a
later trial that succeeds closes the breaker.  On every store: a memory store's breakers
are the process's, a SQLite or PostgreSQL store's are kept in it.

The engine's clock is moved forward by the test (``Clock``), so that a long
``reset_after`` passes at once: nothing here waits for time to pass, and a trial let
through after the cancel can only be there because the cancel let the lease go.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from plait import RunResult, Workflow
from plait.core.model import CircuitBreakerSpec
from plait.runtime.engine import Engine
from plait.store import Store

from .conftest import RUN_TIMEOUT_S, run_with

RESET = 60.0  # seconds: never reached by real time within a test


class Clock:
    """``time.time()`` moved forward by ``skip``."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return time.time() + self.skipped

    def skip(self, seconds: float) -> None:
        self.skipped += seconds


class Service:
    """The step's remote service: ``down`` raises, ``hang`` never answers, ``up``
    answers; ``started`` is set when a hanging call began."""

    def __init__(self) -> None:
        self.mode = "down"
        self.started = asyncio.Event()

    async def call(self) -> str:
        if self.mode == "down":
            raise ConnectionError("the service is down")
        if self.mode == "hang":
            self.started.set()
            await asyncio.Event().wait()
        return self.mode


@pytest.fixture
async def engine(store: Store) -> AsyncIterator[Engine]:
    eng = Engine(store, clock=Clock())
    try:
        yield eng
    finally:
        eng.close()


def flow(service: Service, key: str) -> Workflow:
    wf = Workflow(f"trial-{uuid.uuid4().hex[:8]}")
    wf.add_step("call", service.call, retry=0,
                circuit_breaker={"key": key, "failure_threshold": 1, "reset_after": RESET})
    return wf


async def opened(engine: Engine, service: Service) -> CircuitBreakerSpec:
    """A new breaker, opened by a failed call, whose ``reset_after`` has passed."""
    spec = CircuitBreakerSpec(key=f"svc-{uuid.uuid4().hex[:8]}", failure_threshold=1,
                              reset_after=RESET)
    service.mode = "down"
    first = await run_with(engine, flow(service, spec.key))
    assert first.status == "failed"
    assert (await engine.breakers.state(spec)).state == "open"
    assert isinstance(engine.clock, Clock)
    engine.clock.skip(RESET)
    return spec


async def hanging_trial(engine: Engine, service: Service,
                        spec: CircuitBreakerSpec) -> tuple[str, asyncio.Task[RunResult]]:
    """A run whose attempt took the trial and hangs in it: its run id and task."""
    service.mode, service.started = "hang", asyncio.Event()
    run_id = f"r-{uuid.uuid4().hex[:10]}"
    task = asyncio.create_task(engine.run(flow(service, spec.key).validate(), {},
                                          run_id=run_id))
    await asyncio.wait_for(service.started.wait(), RUN_TIMEOUT_S)
    held = await engine.breakers.state(spec)
    assert (held.state, held.holder) == ("half_open", f"{run_id}/call#1")
    return run_id, task


async def test_a_cancelled_trial_lets_the_next_one_through_at_once(engine: Engine) -> None:
    service = Service()
    spec = await opened(engine, service)
    run_id, task = await hanging_trial(engine, service, spec)
    await engine.cancel(run_id)  # what `plait cancel` asks of the engine running it
    assert (await asyncio.wait_for(task, RUN_TIMEOUT_S)).status == "cancelled"
    released = await engine.breakers.state(spec)
    assert (released.state, released.holder, released.trial_until) == ("open", None, None)
    service.mode = "up"  # the next run's attempt is the trial, at once (no retry here)
    later = await run_with(engine, flow(service, spec.key))
    assert (later.status, later.steps["call"].output) == ("completed", "up")
    assert (await engine.breakers.state(spec)).state == "closed"


async def test_a_trial_that_never_reports_is_let_go_after_reset_after(
        engine: Engine) -> None:
    service = Service()
    spec = await opened(engine, service)
    run_id, task = await hanging_trial(engine, service, spec)
    service.mode = "up"
    refused = await run_with(engine, flow(service, spec.key))  # the trial is out
    assert "circuit breaker" in (refused.steps["call"].error or "")
    assert isinstance(engine.clock, Clock)
    engine.clock.skip(RESET)  # the hanging trial's lease ran out
    later = await run_with(engine, flow(service, spec.key))
    assert (later.status, later.steps["call"].output) == ("completed", "up")
    assert (await engine.breakers.state(spec)).state == "closed"
    await engine.cancel(run_id)  # the first trial's late release changes nothing
    await asyncio.wait_for(task, RUN_TIMEOUT_S)
    assert (await engine.breakers.state(spec)).state == "closed"


async def test_a_refused_attempt_does_not_count_against_the_breaker(engine: Engine) -> None:
    service = Service()
    spec = CircuitBreakerSpec(key=f"svc-{uuid.uuid4().hex[:8]}", failure_threshold=1,
                              reset_after=RESET)
    assert (await run_with(engine, flow(service, spec.key))).status == "failed"
    before = (await engine.breakers.state(spec)).to_json()
    refused = await run_with(engine, flow(service, spec.key))
    assert "circuit breaker" in (refused.steps["call"].error or "")
    assert (await engine.breakers.state(spec)).to_json() == before  # not reopened
