"""``workflow`` and ``loop`` steps on a cluster (docs/subworkflows.md): the child runs
are pending runs that the workers drive like any other, and the parent's step ends
when its child does, on every store (PostgreSQL included)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from plait.core.child_ids import child_run_id
from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.runtime.engine import Engine
from plait.runtime.notify import PgNotifications
from plait.runtime.worker import Worker
from plait.store.base import RunFilter, Store
from plait.store.url import open_store

pytestmark = pytest.mark.slow  # starts clusters of workers

CHILD = {"name": "child", "input": {"type": "object"},
         "steps": [{"id": "twice", "type": "transform", "value": "{{ input.n * 2 }}"}],
         "output": "{{ steps.twice.output }}"}
PARENT = {"name": "parent", "steps": [
    {"id": "sub", "type": "workflow", "workflow": "child", "input": {"n": 5}},
    {"id": "grow", "type": "loop", "workflow": "child",
     "input": {"n": "{{ loop.previous if loop.previous else 1 }}"},
     "until": "{{ loop.output >= 8 }}", "max_iterations": 6, "depends_on": ["sub"]}]}


async def test_workers_drive_child_runs_and_the_parent_completes(store: Store) -> None:
    engine = Engine(store)
    await engine.submit(check_definition(CHILD), {"n": 0})  # stores `child` (pending)
    run = await engine.submit(check_definition(PARENT), {})
    workers = [Worker(store, name=f"w{k}", concurrency=2, lease=2.0, poll=0.05,
                      grace=2.0, schedules=False) for k in (1, 2)]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        for _ in range(400):
            if (await store.get_run(run.run_id)).status is RunStatus.COMPLETED:
                break
            await asyncio.sleep(0.05)
    finally:
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)
    parent = await store.get_run(run.run_id)
    assert parent.status is RunStatus.COMPLETED, parent.error
    steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
    assert steps["sub"].output == 10
    assert steps["grow"].output == {"iterations": 3, "output": 8}
    children = [r for r in await store.list_runs(RunFilter(limit=100))
                if r.parent_run_id == run.run_id]
    assert len(children) == 4
    assert all(c.status is RunStatus.COMPLETED for c in children)
    for child in children:  # driven by the workers, like any run
        [step] = await store.get_steps(child.run_id)
        assert step.worker in ("w1", "w2")


@pytest.fixture
async def pg_store(pg_database: str) -> AsyncIterator[Store]:
    opened = open_store(pg_database)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.mark.postgres
async def test_cancelling_a_parent_on_a_cluster_cancels_its_child(pg_store: Store) -> None:
    store = pg_store
    engine = Engine(store)
    slow = {"name": "slow", "steps": [{"id": "wait", "type": "delay", "duration": "30s"}]}
    await engine.submit(check_definition(slow), {})  # stores `slow`
    parent = {"name": "parent", "steps": [
        {"id": "sub", "type": "workflow", "workflow": "slow"}]}
    run = await engine.submit(check_definition(parent), {})
    workers = [Worker(store, name=f"w{k}", concurrency=2, lease=2.0, poll=0.05,
                      grace=2.0, schedules=False) for k in (1, 2)]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    child_id = child_run_id(run.run_id, "sub", "0")
    try:
        for _ in range(400):
            runs = {r.run_id: r for r in await store.list_runs(RunFilter(limit=10))}
            if child_id in runs and runs[child_id].status in (RunStatus.RUNNING,
                                                                RunStatus.WAITING):
                break  # (its delay parks it: stored waiting for its time)
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the child run never started")
        # (as plait cancel: the parent waits for its child holding nothing, so the
        # request is acted on here, or by the process that drives it)
        await engine.cancel(run.run_id)
        for _ in range(400):
            if (await store.get_run(child_id)).status is RunStatus.CANCELLED:
                break
            await asyncio.sleep(0.05)
    finally:
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)
    assert (await store.get_run(run.run_id)).status is RunStatus.CANCELLED
    assert (await store.get_run(child_id)).status is RunStatus.CANCELLED


@pytest.mark.postgres
async def test_a_child_run_is_announced_so_a_worker_starts_it_before_its_next_poll(
        pg_store: Store, pg_database: str) -> None:
    store = pg_store
    engine = Engine(store)
    await engine.submit(check_definition(CHILD), {"n": 0})  # stores `child`
    run = await engine.submit(check_definition({"name": "parent", "steps": [
        {"id": "sub", "type": "workflow", "workflow": "child", "input": {"n": 4}}]}), {})
    child_id = child_run_id(run.run_id, "sub", "0")
    listener = await psycopg.AsyncConnection.connect(pg_database, autocommit=True)
    await listener.execute("LISTEN plait_run")
    # a poll far longer than the wait below: only the announcement can start the child
    worker = Worker(store, name="w1", concurrency=2, lease=2.0, poll=60.0, grace=2.0,
                    schedules=False, notifications=PgNotifications(pg_database))
    task = asyncio.create_task(worker.run())
    try:
        heard = [n.payload async for n in listener.notifies(timeout=20.0, stop_after=1)]
        assert heard == [child_id]
        for _ in range(300):
            if (await store.get_run(run.run_id)).status is RunStatus.COMPLETED:
                break
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
        await listener.close()
    parent, child = await store.get_run(run.run_id), await store.get_run(child_id)
    assert child.status is RunStatus.COMPLETED, child
    assert parent.status is RunStatus.COMPLETED, parent.error
    assert [s.output for s in await store.get_steps(run.run_id)] == [8]
