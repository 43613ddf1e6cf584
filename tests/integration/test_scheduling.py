"""Scheduling: eager starts, critical path first, concurrency, pools and
rate limits, cancellation and the run timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from plait import FatalError, Retry, Workflow
from plait.runtime.engine import Engine
from plait.store import MemoryStore, RunFilter, StepRecord
from waiting import until

from .conftest import RunWf, run_with, statuses


def sleeper(seconds: float, log: list[tuple[str, str, float]] | None = None,
            name: str = "") -> Callable[[], Any]:
    async def step() -> str:
        if log is not None:
            log.append((name, "start", time.monotonic()))
        await asyncio.sleep(seconds)
        if log is not None:
            log.append((name, "end", time.monotonic()))
        return name
    return step


class Gauge:
    """Counts steps running at once (across runs when shared)."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.starts: list[float] = []

    def step(self, seconds: float) -> Callable[[], Any]:
        async def run() -> None:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.starts.append(time.monotonic())
            try:
                await asyncio.sleep(seconds)
            finally:
                self.active -= 1
        return run


# ---------------------------------------------------------------- eager, critical path


async def test_a_fast_branch_is_not_held_back_by_a_slow_sibling(run_wf: RunWf) -> None:
    wf = Workflow("eager")
    wf.add_step("root", lambda: 1)
    wf.add_step("slow", sleeper(0.5), depends_on=["root"])
    wf.add_step("fast1", sleeper(0.01), depends_on=["root"])
    wf.add_step("fast2", sleeper(0.01), depends_on=["fast1"])
    wf.add_step("fast3", sleeper(0.01), depends_on=["fast2"])
    wf.add_step("join", lambda: 2, depends_on=["slow", "fast3"])
    result = await run_wf(wf)
    steps = result.steps
    # fast3 sits at depth 4, slow at depth 2: no level barrier holds fast3 back
    assert steps["fast3"].finished_at < steps["slow"].finished_at  # type: ignore[operator]
    assert steps["fast3"].started_at - steps["root"].finished_at < 0.3  # type: ignore[operator]
    assert steps["join"].started_at >= steps["slow"].finished_at  # type: ignore[operator]


async def test_concurrency_one_starts_the_longest_remaining_path_first(
        run_wf: RunWf) -> None:
    log: list[tuple[str, str, float]] = []
    wf = Workflow("critical", concurrency=1)
    # definition order puts the short branches first
    wf.add_step("short_a", sleeper(0.01, log, "short_a"))
    wf.add_step("short_b", sleeper(0.01, log, "short_b"))
    wf.add_step("mid1", sleeper(0.01, log, "mid1"))
    wf.add_step("mid2", sleeper(0.01, log, "mid2"), depends_on=["mid1"])
    wf.add_step("long1", sleeper(0.01, log, "long1"))
    wf.add_step("long2", sleeper(0.01, log, "long2"), depends_on=["long1"])
    wf.add_step("long3", sleeper(0.01, log, "long3"), depends_on=["long2"])
    result = await run_wf(wf)
    assert result.status == "completed"
    order = [name for name, what, _ in log if what == "start"]
    assert order[0] == "long1"
    # never more than one at a time
    events = [what for _, what, _ in log]
    assert events == ["start", "end"] * 7
    # at each pick the ready step with the longest remaining path goes first
    assert order.index("mid1") < order.index("short_a")
    assert order.index("long2") < order.index("short_a")
    heights = {"short_a": 1, "short_b": 1, "mid1": 2, "mid2": 1, "long1": 3, "long2": 2,
               "long3": 1}
    deps = {"mid2": "mid1", "long2": "long1", "long3": "long2"}
    for n, name in enumerate(order):
        started = set(order[:n])
        ready = [s for s in heights if s not in started
                 and (s not in deps or deps[s] in started)]
        assert heights[name] == max(heights[s] for s in ready), (name, order)


async def test_run_concurrency_limit(run_wf: RunWf) -> None:
    gauge = Gauge()
    wf = Workflow("conc", concurrency=3)
    for n in range(8):
        wf.add_step(f"s{n}", gauge.step(0.05))
    result = await run_wf(wf)
    assert result.status == "completed"
    assert gauge.peak == 3


# ---------------------------------------------------------------- pools


async def test_pool_limit_within_one_run(run_wf: RunWf) -> None:
    gauge = Gauge()
    other = Gauge()
    wf = Workflow("pooled1", pools={"llm": {"concurrency": 2}})
    for n in range(5):
        wf.add_step(f"llm{n}", gauge.step(0.05), pool="llm")
    for n in range(3):
        wf.add_step(f"free{n}", other.step(0.05))
    result = await run_wf(wf)
    assert result.status == "completed"
    assert gauge.peak == 2
    assert other.peak == 3  # steps outside the pool are not limited by it


async def test_pool_limit_holds_across_two_concurrent_runs(engine: Engine) -> None:
    gauge = Gauge()
    wf = Workflow("pooled2", pools={"llm": {"concurrency": 2}})
    for n in range(4):
        wf.add_step(f"llm{n}", gauge.step(0.05), pool="llm")
    # a long step outside the pool keeps each run busy while it waits for a slot
    # (a run with nothing else to do is tested below)
    wf.add_step("busy", sleeper(0.6))
    checked = wf.validate()
    one, two = await asyncio.wait_for(asyncio.gather(engine.run(checked, {}),
                                                     engine.run(checked, {})), 15)
    assert one.status == two.status == "completed"
    assert len(gauge.starts) == 8
    assert gauge.peak == 2  # 8 pooled steps over two runs, never more than 2 at once
    assert engine.pools.get(checked.spec.pools["llm"]).active == 0


async def test_pool_limit_holds_across_two_runs_of_one_engine(engine: Engine) -> None:
    gauge = Gauge()
    other = Gauge()
    wf = Workflow("pooled", pools={"llm": {"concurrency": 2}})
    for n in range(4):
        wf.add_step(f"llm{n}", gauge.step(0.06), pool="llm")
    wf.add_step("free", other.step(0.06))
    checked = wf.validate()
    one, two = await asyncio.wait_for(asyncio.gather(engine.run(checked, {}),
                                                     engine.run(checked, {})), 15)
    assert one.status == two.status == "completed"
    assert gauge.peak == 2  # 8 pooled steps over two runs, never more than 2 at once
    assert other.peak == 2  # steps outside the pool are not limited by it
    assert engine.pools.get(checked.spec.pools["llm"]).active == 0


async def test_pool_rate_limit_spaces_starts(run_wf: RunWf) -> None:
    gauge = Gauge()
    wf = Workflow("rated", pools={"api": {"rate": "2/300ms"}})
    for n in range(5):
        wf.add_step(f"call{n}", gauge.step(0.0), pool="api")
    started = time.monotonic()
    result = await run_wf(wf)
    assert result.status == "completed"
    starts = sorted(gauge.starts)
    assert len(starts) == 5
    for first, third in zip(starts, starts[2:]):
        assert third - first >= 0.3 - 0.01, starts  # at most 2 in any 300 ms
    assert time.monotonic() - started < 2.0


async def test_pool_limit_holds_after_a_fallback_call(engine: Engine) -> None:
    gauge = Gauge()

    def broken() -> None:
        raise FatalError("down")

    wf = Workflow("poolfb", pools={"p": {"concurrency": 1}})
    wf.add_step("first", broken, pool="p", retry=0, fallback=lambda: "fb")
    for n in range(3):
        wf.add_step(f"after{n}", gauge.step(0.05), pool="p", depends_on=["first"])
    checked = wf.validate()
    result = await asyncio.wait_for(engine.run(checked, {}), 10)
    assert result.steps["first"].fallback_used
    assert engine.pools.get(checked.spec.pools["p"]).active == 0
    assert gauge.peak == 1


# ---------------------------------------------------------------- cancellation, timeout


async def _start(engine: Engine, wf: Workflow) -> tuple[str, asyncio.Task[Any]]:
    checked = wf.validate()
    run = await engine.submit(checked, {})
    task = asyncio.create_task(engine.execute(checked, run))
    return run.run_id, task


async def _stored(engine: Engine, run_id: str,
                  holds: Callable[[dict[str, StepRecord]], bool], what: str) -> None:
    """Wait until the stored steps of ``run_id`` satisfy ``holds``."""
    async def check() -> bool:
        return holds({s.step_id: s for s in await engine.store.get_steps(run_id)})
    await until(check, what=what)


def _running(*steps: str) -> Callable[[dict[str, StepRecord]], bool]:
    return lambda stored: all(s in stored and stored[s].status == "running" for s in steps)


async def test_cancel_while_steps_run(engine: Engine) -> None:
    seen: list[str] = []

    async def long(name: str = "") -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    wf = Workflow("cancelme")
    wf.add_step("a", long)
    wf.add_step("b", long)
    wf.add_step("after", lambda: 1, depends_on=["a"])
    run_id, task = await _start(engine, wf)
    await _stored(engine, run_id, _running("a", "b"), "a and b to run")
    t0 = time.monotonic()
    await engine.cancel(run_id)
    result = await asyncio.wait_for(task, 5)
    assert time.monotonic() - t0 < 1.0
    assert result.status == "cancelled"
    assert statuses(result) == {"a": "cancelled", "b": "cancelled", "after": "cancelled"}
    assert seen == ["cancelled", "cancelled"]
    stored = await engine.store.get_run(run_id)
    assert stored.status == "cancelled" and stored.cancel_requested
    attempts = await engine.store.get_attempts(run_id)
    assert sorted((a.step_id, a.status) for a in attempts) == [("a", "cancelled"),
                                                               ("b", "cancelled")]


async def test_cancel_with_a_step_waiting_for_a_slot(engine: Engine) -> None:
    wf = Workflow("cancelq", concurrency=1)
    wf.add_step("a", sleeper(5))
    wf.add_step("b", lambda: 1)
    run_id, task = await _start(engine, wf)
    await _stored(engine, run_id, _running("a"), "a to take the only slot")
    await engine.cancel(run_id)
    try:
        result = await asyncio.wait_for(task, 1)
    finally:
        task.cancel()
    assert result.status == "cancelled"
    assert statuses(result) == {"a": "cancelled", "b": "cancelled"}


async def test_cancel_with_a_retry_pending(engine: Engine) -> None:
    from plait import Retry

    def flaky() -> None:
        raise ValueError("again")

    wf = Workflow("cancelr")
    wf.add_step("a", flaky, retry=Retry(max_retries=3, initial_delay=0.2))
    run_id, task = await _start(engine, wf)
    await _stored(engine, run_id, lambda stored: stored["a"].next_attempt_at is not None,
                  "a's retry to be scheduled")
    await engine.cancel(run_id)
    try:
        result = await asyncio.wait_for(task, 1.5)
    finally:
        task.cancel()
    assert result.status == "cancelled"
    assert statuses(result) == {"a": "cancelled"}


async def test_run_timeout_cancels_running_steps_and_fails_the_run(run_wf: RunWf) -> None:
    wf = Workflow("timed", timeout=0.2)
    wf.add_step("a", sleeper(5))
    wf.add_step("b", lambda: 1, depends_on=["a"])
    wf.add_step("quick", lambda: "done")
    started = time.monotonic()
    result = await run_wf(wf)
    assert 0.18 <= time.monotonic() - started < 1.5
    assert result.status == "failed"
    assert "timed out" in (result.error or "")
    assert statuses(result) == {"a": "cancelled", "b": "cancelled", "quick": "completed"}


async def test_run_timeout_with_a_step_waiting_for_a_slot(run_wf: RunWf) -> None:
    wf = Workflow("timedq", timeout=0.2, concurrency=1)
    wf.add_step("a", sleeper(5))
    wf.add_step("b", lambda: 1)
    result = await run_wf(wf, timeout=1.5)
    assert result.status == "failed"
    assert statuses(result) == {"a": "cancelled", "b": "cancelled"}


async def test_cancelling_the_task_records_the_run_as_cancelled(engine: Engine) -> None:
    wf = Workflow("interrupted")
    wf.add_step("a", sleeper(5))
    run_id, task = await _start(engine, wf)
    await _stored(engine, run_id, _running("a"), "a to run")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    run = await engine.store.get_run(run_id)
    assert run.status == "cancelled"
    steps = {s.step_id: str(s.status) for s in await engine.store.get_steps(run_id)}
    assert steps == {"a": "cancelled"}


# ---------------------------------------------------------------- persistence order


async def test_runs_are_listed_with_version_and_fingerprint() -> None:
    store = MemoryStore()
    eng = Engine(store)
    wf = Workflow("versioned")
    wf.add_step("a", lambda: 1)
    try:
        first = await run_with(eng, wf)
        second = await run_with(eng, wf)
        changed = Workflow("versioned")
        changed.add_step("a", lambda: 1)
        changed.add_step("b", lambda: 2)
        third = await run_with(eng, changed)
    finally:
        eng.close()
    assert (first.version, second.version, third.version) == (1, 1, 2)
    assert first.fingerprint == second.fingerprint != third.fingerprint
    runs = await store.list_runs(RunFilter(workflow="versioned"))
    assert [r.run_id for r in runs] == [third.run_id, second.run_id, first.run_id]
    assert [(r.version, r.fingerprint) for r in runs] == [
        (2, third.fingerprint), (1, first.fingerprint), (1, first.fingerprint)]


async def test_a_step_is_stored_running_before_its_function_is_called() -> None:
    store = MemoryStore()
    eng = Engine(store)
    seen: dict[str, Any] = {}

    async def probe(ctx: Any) -> str:
        steps = {s.step_id: s for s in await store.get_steps(ctx.run_id)}
        seen["status"] = str(steps["probe"].status)
        seen["attempts"] = steps["probe"].attempts
        attempts = await store.get_attempts(ctx.run_id)
        seen["attempt_rows"] = [(a.step_id, a.status) for a in attempts]
        return "ok"

    wf = Workflow("persist")
    wf.add_step("probe", probe)
    try:
        await run_with(eng, wf)
    finally:
        eng.close()
    assert seen == {"status": "running", "attempts": 1,
                    "attempt_rows": [("probe", "running")]}


async def test_cancel_through_a_shared_store_from_another_engine(tmp_path: Any) -> None:
    from plait.store import open_store

    url = f"sqlite:///{tmp_path}/runs.db"
    mine, theirs = open_store(url), open_store(url)
    await mine.open()
    await theirs.open()
    runner, canceller = Engine(mine), Engine(theirs)
    try:
        wf = Workflow("remote")
        wf.add_step("a", sleeper(10))
        wf.add_step("b", lambda: 1, depends_on=["a"])
        run_id, task = await _start(runner, wf)
        await asyncio.sleep(0.2)
        t0 = time.monotonic()
        await canceller.cancel(run_id)  # this engine does not execute the run
        result = await asyncio.wait_for(task, 5)
        assert time.monotonic() - t0 < 2.5  # noticed by polling the store
        assert result.status == "cancelled"
        assert statuses(result) == {"a": "cancelled", "b": "cancelled"}
        assert (await theirs.get_run(run_id)).status == "cancelled"
    finally:
        runner.close()
        canceller.close()
        await mine.close()
        await theirs.close()


async def test_pool_limit_holds_across_separate_run_async_calls(tmp_path: Any) -> None:
    """Runs started the way the README shows, each `run_async` with its own engine, on
    memory and on one SQLite file: a pool is the process's, not the call's."""
    gauge = Gauge()
    wf = Workflow("pooled_calls", pools={"llm": {"concurrency": 2}})
    for n in range(3):
        wf.add_step(f"llm{n}", gauge.step(0.05), pool="llm")
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    calls = [wf.run_async({}) for _ in range(3)] + [wf.run_async({}, db=url)
                                                   for _ in range(3)]
    results = await asyncio.wait_for(asyncio.gather(*calls), 30)
    assert {r.status for r in results} == {"completed"}
    assert len(gauge.starts) == 18
    assert gauge.peak == 2  # 18 pooled steps over six calls, never more than 2 at once


async def test_a_circuit_breaker_opened_by_one_run_is_open_for_the_next() -> None:
    calls: list[str] = []

    def down() -> None:
        calls.append("called")
        raise RuntimeError("service down")

    breaker = {"key": "svc", "failure_threshold": 2, "reset_after": 60}
    wf = Workflow("breaker_calls")
    wf.add_step("call", down, retry=Retry(max_retries=1, initial_delay=0.001),
                circuit_breaker=breaker)
    first = await wf.run_async({})
    second = await wf.run_async({})
    assert len(calls) == 2  # the first run's two failures opened it
    assert first.status == second.status == "failed"
    assert second.steps["call"].attempts == 1
    assert "circuit breaker 'svc' is open" in (second.steps["call"].error or "")


async def test_sync_steps_of_separate_runs_share_the_process_thread_pool() -> None:
    """Each run_async call has its own engine; its sync steps still reuse the threads
    earlier runs started instead of starting a pool of their own per run."""
    import threading

    seen: list[threading.Thread] = []

    def sync_step() -> int:
        seen.append(threading.current_thread())
        return 1

    wf = Workflow("threads")
    wf.add_step("work", sync_step)
    assert (await wf.run_async({})).status == "completed"  # the pool has a thread now
    before = set(threading.enumerate())
    for _ in range(10):
        assert (await wf.run_async({})).status == "completed"
    assert len(seen) == 11
    # a pool per run would start a thread per run (10 new ones); the shared pool hands
    # the work to threads that were idle already (a worker marks itself idle just after
    # handing back its result, so a quick next run may start one more now and then)
    assert len(set(seen[1:]) - before) <= 2
