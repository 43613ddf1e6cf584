"""The seam between the run loop and what executes its attempts (``runtime.worksource``).

A test double stands in for ``LocalSource``: it runs nothing, records what the loop
starts and cancels, and the test feeds outcomes back by hand, as a source whose attempts
run on other machines would.  The run still goes the way plait's rules say (retries,
interrupted attempts, fallbacks, breakers, cancel), which shows that those decisions
are the loop's, not the local source's.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import weakref

import pytest

from plait import Retry, Workflow
from plait.core.retry import ErrorInfo
from plait.core.runstate import RunState
from plait.core.validate import CheckedWorkflow
from plait.errors import InterruptedAttempt
from plait.runtime.engine import Engine
from plait.runtime.local import LocalSource
from plait.runtime.loop import RunLoop
from plait.runtime.runner import error_info
from plait.runtime.runview import RunView
from plait.runtime.when import WhenJudge
from plait.runtime.worksource import Claims, Outcome, Report, Reported, Spawn, WorkSource
from plait.steps.context import StepLog
from plait.steps.registry import StepCall
from plait.steps.secrets import Secrets
from plait.store.memory import MemoryStore

QUICK = Retry(max_retries=1, initial_delay=0.001, jitter=0.0)
FLAKY = ErrorInfo(type="ValueError", message="flaky", names=("ValueError",))


def never() -> None:
    raise AssertionError("a fake work source runs no step function")


class FakeSource:
    """Records starts and cancels; outcomes are reported by the test (``report``)."""

    remote = False

    def __init__(self) -> None:
        self.started: list[StepCall] = []
        self.fallbacks: list[bool] = []
        self.cancelled: list[object] = []
        self.closed = 0
        self._report: Report | None = None
        self._taken = 0
        self._more = asyncio.Event()

    def open(self, spawn: Spawn, report: Report, log: StepLog) -> None:
        self._report = report
        self.log = log

    def start(self, call: StepCall, fallback: bool) -> object:
        self.started.append(call)
        self.fallbacks.append(fallback)
        self._more.set()
        return (call.step.id, call.attempt, fallback)  # any handle will do

    def cancel(self, handle: object) -> None:
        self.cancelled.append(handle)

    def adopt(self, running: list[int]) -> dict[int, object]:
        return {}

    def claims(self) -> Claims | None:
        raise AssertionError("a local source is never asked for claims")

    def applied(self, outcomes: list[Reported]) -> None:
        raise AssertionError("a local source is never told what was applied")

    def reserve(self, i: int) -> bool:
        raise AssertionError("a local source is never asked to reserve an attempt")

    def committed(self) -> None:
        raise AssertionError("a local source is never told of a commit")

    def close(self) -> None:
        self.closed += 1
        self._report = None

    async def next_start(self) -> StepCall:
        while self._taken == len(self.started):
            self._more.clear()
            await asyncio.wait_for(self._more.wait(), timeout=5)
        self._taken += 1
        return self.started[self._taken - 1]

    def report(self, outcome: Outcome) -> None:
        assert self._report is not None, "the loop closed this source"
        self._report(outcome)


async def _loop(wf: Workflow, source: WorkSource) -> tuple[Engine, RunLoop]:
    checked = wf.validate()
    engine = Engine(MemoryStore(), rand=lambda: 0.0)
    run = await engine.submit(checked, {})
    # the loop writes as the run's driver: it must hold the run (WriteBatch.owner)
    claimed = await engine.store.claim_run(run.run_id, engine.worker, 0.0, engine.lease)
    assert claimed is not None
    run = claimed
    secrets = Secrets()
    state = RunState(checked, run_id=run.run_id, input=run.input, secrets=secrets)
    return engine, RunLoop(engine, checked, run, state, secrets, source)


async def test_a_fake_source_drives_a_run_through_retries_and_an_interruption(
        caplog: pytest.LogCaptureFixture) -> None:
    wf = Workflow("seam")
    wf.add_step("a", never, retry=QUICK)
    wf.add_step("b", never, depends_on=["a"], retry=QUICK)
    wf.add_step("c", never, depends_on=["b"])
    source = FakeSource()
    engine, loop = await _loop(wf, source)
    running = asyncio.create_task(loop.run())

    a1 = await source.next_start()
    source.report(Outcome(a1.index, a1.attempt, "error", error=FLAKY))
    a2 = await source.next_start()  # retried under a's policy, after its delay
    source.report(Outcome(a2.index, a2.attempt, "ok", {"a": 1}))
    b1 = await source.next_start()
    with caplog.at_level(logging.WARNING, logger="plait.engine"):
        source.report(Outcome(a2.index, a2.attempt, "ok", {"a": "twice"}))  # dropped
    lost = error_info(InterruptedAttempt("host-b:7", step="b"))
    source.report(Outcome(b1.index, b1.attempt, "interrupted", error=lost))
    b2 = await source.next_start()  # an interrupted attempt is a failed one: retried
    with caplog.at_level(logging.WARNING, logger="plait.engine"):
        # a late outcome of attempt 1 (its worker came back) is dropped too
        source.report(Outcome(b1.index, b1.attempt, "ok", {"late": True}))
    source.report(Outcome(b2.index, b2.attempt, "ok", {"b": 2}))
    c1 = await source.next_start()
    source.report(Outcome(c1.index, c1.attempt, "ok", {"c": 3}))
    await asyncio.wait_for(running, timeout=5)

    assert [(c.step.id, c.attempt) for c in source.started] == [
        ("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1)]
    assert source.fallbacks == [False] * 5 and source.cancelled == []
    assert source.closed == 1
    assert "step 'a': dropped an outcome (ok) of attempt 2: no attempt is out" in caplog.text
    assert "step 'b': dropped an outcome (ok) of attempt 1: attempt 2 is out" in caplog.text
    result = loop.result()
    assert result.status == "completed"
    assert {s: (r.status, r.attempts, r.output) for s, r in result.steps.items()} == {
        "a": ("completed", 2, {"a": 1}), "b": ("completed", 2, {"b": 2}),
        "c": ("completed", 1, {"c": 3})}
    stored = await engine.store.get_run(result.run_id)
    assert (stored.status, stored.output) == ("completed", {"c": {"c": 3}})
    attempts = {(a.step_id, a.attempt): a for a in
                await engine.store.get_attempts(result.run_id)}
    assert (attempts["a", 1].status, attempts["a", 1].error) == ("failed", "ValueError: flaky")
    assert attempts["b", 1].status == "failed"
    assert "attempt interrupted: the process running it (host-b:7) never stored its outcome" in (
        attempts["b", 1].error or "")
    assert attempts["b", 2].status == "completed"


async def test_the_fallback_after_a_refusal_or_a_failure_is_decided_by_the_loop() -> None:
    def fb() -> None:
        raise AssertionError("a fake work source runs no fallback either")

    wf = Workflow("fallbacks")
    wf.add_step("refused", never, retry=0, fallback=fb,
                circuit_breaker={"key": "refusing", "failure_threshold": 1})
    wf.add_step("failing", never, retry=0,
                circuit_breaker={"key": "failing", "failure_threshold": 1})
    source = FakeSource()
    engine, loop = await _loop(wf, source)
    running = asyncio.create_task(loop.run())
    first = {(await source.next_start()).step.id for _ in range(2)}
    assert first == {"refused", "failing"}
    calls = {c.step.id: c for c in source.started}
    shut = error_info(RuntimeError("circuit breaker 'refusing' is open"))
    source.report(Outcome(calls["refused"].index, 1, "refused", error=shut))
    source.report(Outcome(calls["failing"].index, 1, "error", error=FLAKY))
    fallback = await source.next_start()  # after its only attempt failed
    assert (fallback.step.id, fallback.attempt, source.fallbacks[-1]) == ("refused", 1, True)
    source.report(Outcome(fallback.index, 1, "ok", {"from": "fallback"}, fallback=True))
    await asyncio.wait_for(running, timeout=5)

    result = loop.result()
    refused, failing = result.steps["refused"], result.steps["failing"]
    assert (refused.status, refused.fallback_used, refused.output) == (
        "completed", True, {"from": "fallback"})
    assert (failing.status, failing.error) == ("failed", "ValueError: flaky")
    assert result.status == "failed"


async def test_a_cancel_reaches_the_attempts_through_the_source() -> None:
    wf = Workflow("cancelled")
    wf.add_step("slow", never)
    source = FakeSource()
    _, loop = await _loop(wf, source)
    running = asyncio.create_task(loop.run())
    slow = await source.next_start()
    loop.request_cancel("stop it")
    assert source.cancelled == [("slow", 1, False)]
    source.report(Outcome(slow.index, slow.attempt, "cancelled"))
    await asyncio.wait_for(running, timeout=5)
    result = loop.result()
    assert (result.status, result.error) == ("cancelled", "stop it")
    assert (result.steps["slow"].status, result.steps["slow"].skip_reason) == (
        "cancelled", "stop it")
    assert source.closed == 1


async def _sleepy() -> dict[str, int]:
    await asyncio.sleep(0)
    return {"n": 1}


async def _boom() -> None:
    raise ValueError("boom")


def test_a_finished_run_is_freed_by_reference_counting() -> None:
    # Nothing the loop holds may refer back to it after the run: a run's rows and
    # outputs would otherwise wait for the cyclic collector (and be scanned by it).
    wf = Workflow("freed", pools={"p": {"concurrency": 1}})
    wf.add_step("a", _sleepy, pool="p")
    wf.add_step("b", _boom, depends_on=["a"], pool="p", retry=QUICK,
                fallback={"output": "{{ [1, 2] | sum }}"})
    wf.add_step("c", _sleepy, depends_on=["b"], when="{{ range(2) | list | length > 1 }}")
    checked = wf.validate()

    async def run() -> weakref.ref[RunLoop]:
        engine = Engine(MemoryStore(), rand=lambda: 0.0)
        run = await engine.submit(checked, {})
        claimed = await engine.store.claim_run(run.run_id, engine.worker, 0.0, 30.0)
        assert claimed is not None  # the loop writes as the run's driver
        secrets = Secrets()
        state = RunState(checked, run_id=run.run_id, input=run.input, secrets=secrets)
        loop = RunLoop(engine, checked, claimed, state, secrets,
                       LocalSource(checked, engine.clock))
        await loop.run()
        result = loop.result()
        assert result.status == "completed", result.error
        assert result.steps["b"].output == 3 and result.steps["c"].output == {"n": 1}
        return weakref.ref(loop)

    gc.collect()
    gc.disable()
    try:
        freed = asyncio.run(run())
        assert freed() is None
    finally:
        gc.enable()


def _one_step_run(when: str | None = None) -> tuple[CheckedWorkflow, RunState, RunView]:
    wf = Workflow("one")
    wf.add_step("a", _sleepy, when=when)
    checked = wf.validate()
    secrets = Secrets()
    state = RunState(checked, run_id="r1", input={}, secrets=secrets)
    view = RunView(checked, state, "r1", Engine(MemoryStore()).services,
                   StepLog(secrets.redact_text), frozenset(), [None])
    return checked, state, view


async def test_local_source_reports_each_cancelled_attempt_once_started_or_not() -> None:
    # asyncio never runs the body of a task cancelled before its first step, so the
    # runner cannot report for it: the source does, on the next turn
    checked, _, view = _one_step_run()
    reported: list[Reported] = []
    source = LocalSource(checked, time.time)
    async with asyncio.TaskGroup() as tg:
        source.open(tg.create_task, reported.append, view.step_log)
        early = source.start(StepCall(checked.spec.steps[0], 0, 1, 0.0, view), False)
        source.cancel(early)
        source.cancel(early)  # the loop may ask twice before the task's turn
        assert reported == []  # never from inside cancel
        await asyncio.sleep(0)
        assert reported == [Outcome(0, 1, "cancelled")]
        late = source.start(StepCall(checked.spec.steps[0], 0, 2, 0.0, view), False)
        await asyncio.sleep(0)  # the attempt runs up to its first await
        source.cancel(late)
    source.close()
    assert reported == [Outcome(0, 1, "cancelled"), Outcome(0, 2, "cancelled")]


async def test_a_when_cancelled_before_its_render_started_is_no_longer_awaited() -> None:
    checked, state, _ = _one_step_run(when="{{ range(2) | list | length > 1 }}")
    state.when_due = [0]
    judge = WhenJudge(checked, state)
    woken: list[bool] = []
    async with asyncio.TaskGroup() as tg:
        judge.render(tg.create_task, lambda: woken.append(True))
        assert list(judge.judging) == [0]
        judge.cancel()
        assert judge.judging == {} and judge.judged == []
    assert woken == []
