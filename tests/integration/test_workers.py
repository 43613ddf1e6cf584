"""Workers of a cluster, in one process: ``Worker`` and ``ClaimSource`` on every store
(docs/workers.md).  Two workers drive and execute runs together; leases that stop
being heartbeated are reaped and retried; a late result is discarded and noted; a
driver that dies is taken over without re-running what was still in flight."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.errors import StoreError
from plait.runtime.claims import ClaimSource
from plait.runtime.engine import Engine
from plait.runtime.worker import Worker, in_flight
from plait.store.base import InboxOutcome, RunRecord, Store
from plait.store.url import open_store

from .conftest import StepsModule

pytestmark = pytest.mark.slow  # starts workers claiming over shared stores

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

def noisy(ctx, n):
    ctx.logger.info("step %s says %d", ctx.step_id, n)
    ctx.logger.warning("and warns")
    time.sleep(0.05)
    return n

def timed(seconds):
    t0 = time.time()
    time.sleep(seconds)
    return {"t0": t0, "t1": time.time()}

def boom(marker):
    with open(marker, "a") as f:
        f.write("x")
    raise RuntimeError("the service is down")

def slow(marker):
    with open(marker, "a") as f:
        f.write("x")
    time.sleep(1.0)
    return "slow done"
'''


@pytest.fixture
def steps_module(write_steps_module: StepsModule) -> str:
    return write_steps_module(_STEPS)


def _fan_out(module: str) -> dict[str, Any]:
    py = "python"
    return {"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "start", "type": py, "call": f"{module}:start", "with": {"n": 2}},
        *({"id": f"b{k}", "type": py, "call": f"{module}:branch", "depends_on": ["start"]}
          for k in (1, 2, 3)),
        {"id": "join", "type": py, "call": f"{module}:join", "depends_on": ["b1", "b2", "b3"]},
        {"id": "last", "type": py, "call": f"{module}:last", "depends_on": ["join"]}]}


async def _until(check: Callable[[], Any], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def _final(store: Store, run_ids: list[str], timeout: float = 20.0) -> None:
    async def done() -> bool:
        runs = [await store.get_run(r) for r in run_ids]
        return all(r.status in (RunStatus.COMPLETED, RunStatus.FAILED,
                                RunStatus.CANCELLED) for r in runs)
    await _until(done, timeout)


class _Workers:
    def __init__(self, *workers: Worker) -> None:
        self.workers = workers
        self.tasks = [asyncio.create_task(w.run()) for w in workers]

    async def stop(self) -> None:
        for w in self.workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*self.tasks), 15)


def _worker(store: Store, name: str, **kwargs: Any) -> Worker:
    options: dict[str, Any] = {"concurrency": 2, "lease": 2.0, "poll": 0.1, "grace": 2.0,
                               "schedules": False}
    options.update(kwargs)
    return Worker(store, name=name, **options)


async def test_two_workers_complete_fan_out_and_chain_runs(store: Store,
                                                           steps_module: str) -> None:
    checked = check_definition(_fan_out(steps_module))
    engine = Engine(store)
    runs = [await engine.submit(checked, {"k": k}) for k in (1, 2, 3)]
    workers = _Workers(_worker(store, "w1", concurrency=1),
                       _worker(store, "w2", concurrency=1))
    try:
        await _final(store, [r.run_id for r in runs])
    finally:
        await workers.stop()
    for k, run in zip((1, 2, 3), runs, strict=True):
        stored = await store.get_run(run.run_id)
        assert stored.status is RunStatus.COMPLETED, stored.error
        steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
        assert steps["last"].output == {"total": 3 * 2 * k}
        assert all(s.attempts == 1 for s in steps.values())
        assert await store.tickets(run.run_id) == []
        assert await store.outcomes(run.run_id) == []
    assert sum(w.completed for w in workers.workers) == 6 * 3
    assert all(w.completed > 0 for w in workers.workers)


async def test_history_names_the_executing_worker_and_keeps_its_logs(
        store: Store, steps_module: str) -> None:
    """The driver ("driver") executes nothing: every attempt's end and every step row
    name the worker that ran it, and each step's ctx.logger records are stored."""
    checked = check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": f"s{n}", "type": "python", "call": f"{steps_module}:noisy",
         "with": {"n": n}} for n in range(4)]})
    run = await Engine(store).submit(checked, {})
    engine = Engine(store, worker="driver", lease=2.0)
    state = await engine.restore(run, checked)
    source = ClaimSource(checked, state, store, run_id=run.run_id, poll=0.05)
    executors = _Workers(_worker(store, "w1", max_runs=0, concurrency=1),
                         _worker(store, "w2", max_runs=0, concurrency=1))
    try:
        await asyncio.wait_for(engine.execute(checked, run, state, source=source), 20)
    finally:
        await executors.stop()
    assert (await store.get_run(run.run_id)).status is RunStatus.COMPLETED
    attempts = await store.get_attempts(run.run_id)
    by_worker = {w.name: w.completed for w in executors.workers}
    assert {a.worker for a in attempts} <= {"w1", "w2"}, attempts
    assert {name: sum(a.worker == name for a in attempts) for name in by_worker} == \
        by_worker
    steps = {s.step_id: s.worker for s in await store.get_steps(run.run_id)}
    assert steps == {a.step_id: a.worker for a in attempts}
    logs = [(e.step_id, e.data["log"]["level"], e.data["log"]["message"],
             e.data["log"]["attempt"])
            for e in await store.get_events(run.run_id) if "log" in e.data]
    assert sorted(logs) == sorted(
        [(f"s{n}", "INFO", f"step s{n} says {n}", 1) for n in range(4)]
        + [(f"s{n}", "WARNING", "and warns", 1) for n in range(4)])


async def test_an_expired_lease_is_reaped_retried_elsewhere_and_its_late_result_noted(
        store: Store, steps_module: str) -> None:
    definition = _fan_out(steps_module)
    definition["steps"][0]["retry"] = {"max_retries": 2, "initial_delay": "0s"}
    checked = check_definition(definition)
    engine = Engine(store)
    run = await engine.submit(checked, {"k": 1})
    # a driver alone first: the start step's ticket is stored; a ghost claims it and
    # never heartbeats (a worker that froze)
    driver = _worker(store, "driver", concurrency=1, lease=0.5)
    driver.concurrency = 1
    ghost_lease = None
    drive = _Workers(driver)
    try:
        async def ghost_claims() -> bool:
            nonlocal ghost_lease
            taken = await store.claim_attempts("ghost", 1, 0.5)
            ghost_lease = taken[0] if taken else ghost_lease
            return ghost_lease is not None
        driver.executor.claim_loop = _never  # type: ignore[method-assign]
        driver.eager = False
        await drive.stop()
        drive = _Workers(_no_claims(_worker(store, "driver", lease=0.5)))
        await _until(ghost_claims)
        assert ghost_lease is not None and ghost_lease.step_id == "start"
        helper = _Workers(_worker(store, "helper", lease=0.5))
        await _final(store, [run.run_id])
        await helper.stop()
    finally:
        await drive.stop()
    steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
    assert (await store.get_run(run.run_id)).status is RunStatus.COMPLETED
    assert steps["start"].attempts == 2  # the reaped attempt counted
    late = InboxOutcome(run_id=run.run_id, step_id="start", attempt=1, kind="ok",
                   output={"n": 99}, at=0.0)
    assert await store.complete_attempts("ghost", [(ghost_lease.token, late)]) == [False]
    notes = [e.data for e in await store.get_events(run.run_id) if e.kind == "note"]
    assert {"late_result_discarded": {"step": "start", "attempt": 1, "fallback": False,
                                      "worker": "ghost"}} in notes
    assert steps["last"].output == {"total": 6}  # the late result changed nothing


async def _never() -> None:
    await asyncio.Event().wait()


def _no_claims(worker: Worker) -> Worker:
    """A worker that drives runs and reaps, but executes nothing."""
    worker.executor.claim_loop = _never  # type: ignore[method-assign]
    worker.eager = False
    return worker


class _Dying:
    """A store proxy whose process dies: after ``die()`` every call fails."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.dead = False

    def die(self) -> None:
        self.dead = True

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value):
            return value

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                raise StoreError("this process is dead")
            return await value(*args, **kwargs)
        return call


async def test_a_dead_driver_is_taken_over_and_in_flight_attempts_are_not_rerun(
        store: Store, steps_module: str, tmp_path: Path) -> None:
    marker = tmp_path / "slow.marker"
    checked = check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "slow", "type": "python", "call": f"{steps_module}:slow",
         "with": {"marker": str(marker)}},
        {"id": "after", "type": "python", "call": f"{steps_module}:start",
         "with": {"n": 1}, "depends_on": ["slow"]}]})
    run = await Engine(store).submit(checked, {})
    dying = _Dying(store)
    engine = Engine(dying, worker="dead-driver", lease=1.0)  # type: ignore[arg-type]
    state = await engine.restore(run, checked)
    source = ClaimSource(checked, state, dying, run_id=run.run_id,  # type: ignore[arg-type]
                         poll=0.1, in_flight=await in_flight(store, run.run_id, state))
    driving = asyncio.create_task(engine.execute(checked, run, state, source=source))
    executor = _Workers(_worker(store, "executor", lease=1.0, max_runs=0))
    try:
        await _until(lambda: _exists(marker))  # the slow step runs on the executor
        dying.die()  # the driver's process dies: it writes nothing more, releases nothing
        driving.cancel()
        await asyncio.gather(driving, return_exceptions=True)
        assert (await store.get_run(run.run_id)).owner == "dead-driver"
        heir = _Workers(_worker(store, "heir", lease=1.0))
        await _final(store, [run.run_id])
        await heir.stop()
    finally:
        await executor.stop()
    stored = await store.get_run(run.run_id)
    assert stored.status is RunStatus.COMPLETED, stored.error
    steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
    assert steps["slow"].attempts == 1 and steps["slow"].output == "slow done"
    assert marker.read_text() == "x"  # ran once: the heir waited for its outcome


async def _exists(path: Path) -> bool:
    return path.exists()


async def test_a_step_whose_module_a_worker_cannot_import_fails_naming_it(
        store: Store) -> None:
    module = f"wgone_{uuid.uuid4().hex[:8]}"  # importable by nobody here
    checked = check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "lost", "type": "python", "call": f"{module}:f",
         "retry": {"max_retries": 1, "initial_delay": 0.05}}]})  # one quick retry
    # stored as a submitter that could import it would store it
    stored = await store.save_workflow(checked.spec.name, checked.definition_json,
                                       checked.fingerprint, None)
    run = RunRecord(run_id=uuid.uuid4().hex, workflow=stored.name, version=stored.version,
                    fingerprint=checked.fingerprint, status=RunStatus.PENDING, input={},
                    created_at=time.time())
    await store.create_run(run, checked.graph.ids)
    workers = _Workers(_worker(store, "w1"))
    try:
        await _final(store, [run.run_id])
    finally:
        await workers.stop()
    steps = await store.get_steps(run.run_id)
    assert (await store.get_run(run.run_id)).status is RunStatus.FAILED
    assert module in (steps[0].error or "")
    assert "StepLoadError" in (steps[0].error or "") and "w1" in (steps[0].error or "")


def _pooled(module: str, pool: dict[str, Any], n: int) -> dict[str, Any]:
    return {"name": f"wf-{uuid.uuid4().hex[:8]}", "pools": {"api": pool}, "steps": [
        {"id": f"s{k}", "type": "python", "call": f"{module}:timed", "pool": "api",
         "with": {"seconds": 0.15}} for k in range(n)]}


async def _bodies(store: Store, runs: list[RunRecord]) -> list[dict[str, float]]:
    await _final(store, [r.run_id for r in runs], timeout=60)
    bodies = []
    for run in runs:
        assert (await store.get_run(run.run_id)).status is RunStatus.COMPLETED
        bodies += [s.output for s in await store.get_steps(run.run_id)]
    return bodies


class _Threads:
    """Workers on event loops of their own (one thread each, each with its own store of
    the URL): nothing in-process is shared between them, as between hosts, so a bound
    that holds here holds through the store."""

    def __init__(self, url: str, n: int, **kwargs: Any) -> None:
        self.stops: list[tuple[asyncio.AbstractEventLoop, Worker]] = []
        self.ready = threading.Barrier(n + 1)
        self.threads = [threading.Thread(target=self._main, args=(url, f"t{k}", kwargs))
                        for k in range(n)]
        for thread in self.threads:
            thread.start()
        self.ready.wait(30)

    def _main(self, url: str, name: str, kwargs: dict[str, Any]) -> None:
        async def main() -> None:
            store = open_store(url)
            await store.open()
            try:
                worker = _worker(store, name, **kwargs)
                self.stops.append((asyncio.get_running_loop(), worker))
                self.ready.wait(30)
                await worker.run()
            finally:
                await store.close()
        asyncio.run(main())

    def stop(self) -> None:
        for loop, worker in self.stops:
            loop.call_soon_threadsafe(worker.stop)
        for thread in self.threads:
            thread.join(30)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'plait.db'}"
    return str(request.getfixturevalue("pg_database"))


async def _submitted(url: str, definition: dict[str, Any],
                     n: int) -> tuple[Store, list[RunRecord]]:
    store = open_store(url)
    await store.open()
    engine = Engine(store)
    checked = check_definition(definition)
    return store, [await engine.submit(checked, {}) for _ in range(n)]


async def test_a_pools_concurrency_holds_across_workers_and_runs(shared_url: str,
                                                                 steps_module: str) -> None:
    store, runs = await _submitted(shared_url, _pooled(steps_module, {"concurrency": 2}, 6),
                                   3)
    # one run per driver: no driver's own bookkeeping sees another run's steps
    workers = _Threads(shared_url, 3, concurrency=4, max_runs=1)
    try:
        bodies = await _bodies(store, runs)
    finally:
        workers.stop()
        await store.close()
    # every body's start and end: at no instant did more than 2 run, across 3 workers
    # sharing nothing but the store, and 3 runs (each driver alone would allow 2 of its
    # run's steps, 6 in all)
    edges = sorted([(b["t0"], 1) for b in bodies] + [(b["t1"], -1) for b in bodies])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak == 2, f"at most 2 bodies of pool api at once, saw {peak}"


async def test_a_pools_rate_holds_across_workers(shared_url: str, steps_module: str) -> None:
    store, runs = await _submitted(shared_url, _pooled(steps_module, {"rate": "2/s"}, 3), 2)
    workers = _Threads(shared_url, 2, concurrency=4, max_runs=1)
    try:
        bodies = await _bodies(store, runs)
    finally:
        workers.stop()
        await store.close()
    starts = sorted(b["t0"] for b in bodies)
    # 6 starts at 2 a second take at least 2 seconds (claims are judged in store time;
    # a body starts a little after its claim, hence the slack)
    assert starts[-1] - starts[0] >= 2.0 - 0.2
    for i in range(len(starts) - 2):
        assert starts[i + 2] - starts[i] >= 1.0 - 0.2, starts


async def test_a_circuit_breaker_opened_on_one_worker_refuses_on_every_worker(
        shared_url: str, steps_module: str, tmp_path: Path) -> None:
    marker = tmp_path / "calls"
    definition = {"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [{
        "id": "call", "type": "python", "call": f"{steps_module}:boom",
        "with": {"marker": str(marker)}, "retry": {"max_retries": 0},
        "circuit_breaker": {"key": f"svc-{uuid.uuid4().hex[:6]}", "failure_threshold": 2,
                            "reset_after": "1h"}}]}
    store, _ = await _submitted(shared_url, definition, 0)
    engine, checked = Engine(store), check_definition(definition)
    workers = _Threads(shared_url, 2, concurrency=2, max_runs=1)
    errors = []
    try:
        for _ in range(4):  # one after another: each sees what the last one recorded
            run = await engine.submit(checked, {})
            await _final(store, [run.run_id])
            (step,) = await store.get_steps(run.run_id)
            errors.append(step.error or "")
    finally:
        workers.stop()
        await store.close()
    # two failures open the breaker for the whole store: the bodies ran twice, and the
    # later runs' attempts were refused, whichever worker (thread, event loop) took them
    assert marker.read_text() == "xx"
    assert all("the service is down" in e for e in errors[:2]), errors
    assert all("circuit" in e.lower() for e in errors[2:]), errors


_ITEM_STEPS = '''
import os, time

def fetch(item, index):
    time.sleep(0.05)  # long enough that one worker's two slots cannot take them all
    return {"item": item, "index": index, "pid": os.getpid()}
'''


async def test_two_workers_share_the_items_of_a_map(store: Store, tmp_path: Path) -> None:
    name = f"mapsteps_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(_ITEM_STEPS))
    sys.path.insert(0, str(tmp_path))
    try:
        checked = check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
            {"id": "make", "type": "transform", "value": "{{ input.xs }}"},
            {"id": "fetch", "type": "map", "depends_on": ["make"], "concurrency": 4,
             "over": "{{ steps.make.output }}",
             "step": {"type": "python", "call": f"{name}:fetch",
                      "with": {"item": "{{ item }}", "index": "{{ index }}"}}},
            {"id": "total", "type": "transform", "depends_on": ["fetch"],
             "value": "{{ steps.fetch.output | map(attribute='item') | sum }}"}]})
        engine = Engine(store)
        xs = list(range(12))
        run = await engine.submit(checked, {"xs": xs})
        workers = _Workers(_worker(store, "w1"), _worker(store, "w2"))
        try:
            await _final(store, [run.run_id])
        finally:
            await workers.stop()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)
    stored = await store.get_run(run.run_id)
    assert stored.status is RunStatus.COMPLETED, stored.error
    steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
    assert steps["fetch"].output == [{"item": x, "index": x, "pid": steps["fetch[0]"]
                                      .output["pid"]} for x in xs]
    assert steps["total"].output == sum(xs)
    assert all(steps[f"fetch[{k}]"].attempts == 1 for k in range(len(xs)))
    assert await store.tickets(run.run_id) == []
    # the items were tickets, executed by both workers
    assert sum(w.completed for w in workers.workers) >= len(xs)
    assert all(w.completed > 0 for w in workers.workers)
