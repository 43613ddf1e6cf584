"""A ``workflow`` step on a PostgreSQL worker waits for its child run holding no slot
(docs/subworkflows.md): one worker with one slot finishes a map of child runs and a
parent nested three deep; a parent whose child ended without waking it is found by
the workers' sweep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from plait.core.child_ids import child_run_id
from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.rundoc.notes import waits_of
from plait.runtime.child_ends import wake_stranded
from plait.runtime.engine import Engine
from plait.runtime.notify import PgNotifications
from plait.runtime.signals import deliver
from plait.runtime.worker import Worker
from plait.store.base import Store
from plait.store.url import open_store
from waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

CHILD = {"name": "child", "input": {"type": "object"},
         "steps": [{"id": "twice", "type": "transform", "value": "{{ input.n * 2 }}"}],
         "output": "{{ steps.twice.output }}"}
ITEMS = 50


@pytest.fixture
async def store(pg_database: str) -> AsyncIterator[Store]:
    opened = open_store(pg_database)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


async def _finish(store: Store, url: str | None, run_id: str,
                  timeout: float) -> RunStatus:
    """Run ONE worker with one slot (woken by LISTEN when ``url``) until the run ends;
    its final status."""
    worker = Worker(store, name="solo", concurrency=1, lease=5.0, poll=0.5, grace=2.0,
                    schedules=False,
                    notifications=None if url is None else PgNotifications(url))
    task = asyncio.create_task(worker.run())
    try:
        async def ended() -> bool:
            return (await store.get_run(run_id)).status in (
                RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
        await until(ended, what=f"run {run_id} to end", timeout=timeout, every=0.05)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    return (await store.get_run(run_id)).status


async def test_one_worker_with_one_slot_finishes_a_map_of_child_runs(
        store: Store, pg_database: str) -> None:
    engine = Engine(store)
    await engine.submit(check_definition(CHILD), {"n": 0})  # stores `child`
    parent = {"name": "fan", "steps": [
        {"id": "each", "type": "map", "over": list(range(ITEMS)),
         "step": {"type": "workflow", "workflow": "child", "input": {"n": "{{ item }}"}}}],
        "output": "{{ steps.each.output }}"}
    run = await engine.submit(check_definition(parent), {})
    began = time.monotonic()
    status = await _finish(store, pg_database, run.run_id, timeout=100)
    took = time.monotonic() - began
    done = await store.get_run(run.run_id)
    assert status is RunStatus.COMPLETED, done.error
    assert done.output == [2 * n for n in range(ITEMS)]
    print(f"{ITEMS} child runs on one slot: {took:.1f} s")


async def test_one_worker_with_one_slot_finishes_a_parent_nested_three_deep(
        store: Store, pg_database: str) -> None:
    engine = Engine(store)
    await engine.submit(check_definition(CHILD), {"n": 0})
    for name, inner in (("mid", "child"), ("top", "mid")):
        definition = {"name": name, "input": {"type": "object"}, "steps": [
            {"id": "a", "type": "workflow", "workflow": inner,
             "input": {"n": "{{ input.n }}"}},
            {"id": "b", "type": "workflow", "workflow": inner,
             "input": {"n": "{{ steps.a.output }}"}, "depends_on": ["a"]}],
            "output": "{{ steps.b.output }}"}
        await engine.submit(check_definition(definition), {"n": 0})
    root = {"name": "root", "steps": [
        {"id": "go", "type": "workflow", "workflow": "top", "input": {"n": 1}}],
        "output": "{{ steps.go.output }}"}
    run = await engine.submit(check_definition(root), {})
    status = await _finish(store, pg_database, run.run_id, timeout=100)
    done = await store.get_run(run.run_id)
    assert status is RunStatus.COMPLETED, done.error
    assert done.output == 16  # 1 doubled four times


async def test_a_parent_whose_child_ended_without_waking_it_is_found_by_the_sweep(
        store: Store) -> None:
    engine = Engine(store)
    gated = {"name": "gated", "steps": [{"id": "go", "type": "event", "event": "go"}],
             "output": "{{ steps.go.output }}"}
    await engine.submit(check_definition(gated), {})
    parent = {"name": "lone", "steps": [
        {"id": "sub", "type": "workflow", "workflow": "gated"}],
        "output": "{{ steps.sub.output }}"}
    run = await engine.submit(check_definition(parent), {})
    child_id = child_run_id(run.run_id, "sub", "0")
    worker = Worker(store, name="w1", concurrency=1, lease=5.0, poll=0.05, grace=2.0,
                    schedules=False)
    task = asyncio.create_task(worker.run())
    try:
        async def both_wait() -> bool:
            # (the parent waits once its child exists)
            return (await store.get_run(run.run_id)).status is RunStatus.WAITING \
                and (await store.get_run(child_id)).status is RunStatus.WAITING
        await until(both_wait, what="the parent and its child to wait", timeout=30)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    statuses = {s.step_id: s.status.value for s in await store.get_steps(run.run_id)}
    wait = waits_of(statuses, await store.get_events(run.run_id))["sub"]
    assert (wait["kind"], wait["child_run_id"], wait["event"]) == ("child", child_id, None)
    # the child ends in a process that wakes nobody (as one that dies before waking
    # the parent): a local engine on the same database
    await deliver(Engine(store), child_id, "go", {"ok": 1}, for_workers=False)
    assert (await store.get_run(child_id)).status is RunStatus.COMPLETED
    assert (await store.get_run(run.run_id)).status is RunStatus.WAITING
    sweeper = Engine(store, worker="sweeper")
    # at least this parent (the module's database may hold another test's stranded one)
    assert await wake_stranded(sweeper) >= 1
    assert (await store.get_run(run.run_id)).status is RunStatus.RUNNING
    assert await _finish(store, None, run.run_id, timeout=30) is RunStatus.COMPLETED
    assert (await store.get_run(run.run_id)).output == {"ok": 1}
    assert await wake_stranded(sweeper) == 0  # nothing left to wake


async def test_a_parent_that_fails_while_its_step_waits_for_a_child_cancels_the_child(
        store: Store, pg_database: str) -> None:
    engine = Engine(store)
    gated = {"name": "gated", "steps": [{"id": "go", "type": "event", "event": "go"}]}
    await engine.submit(check_definition(gated), {})
    parent = {"name": "doomed", "on_failure": "fail_fast", "steps": [
        {"id": "sub", "type": "workflow", "workflow": "gated"},
        {"id": "pause", "type": "delay", "duration": "1s"},
        {"id": "boom", "type": "transform", "value": "{{ input.missing.field }}",
         "depends_on": ["pause"]}]}
    run = await engine.submit(check_definition(parent), {})
    child_id = child_run_id(run.run_id, "sub", "0")
    worker = Worker(store, name="w1", concurrency=1, lease=5.0, poll=0.05, grace=2.0,
                    schedules=False, notifications=PgNotifications(pg_database))
    task = asyncio.create_task(worker.run())
    try:
        async def cancelled() -> bool:
            return (await store.get_run(run.run_id)).status is RunStatus.FAILED \
                and (await store.get_run(child_id)).status is RunStatus.CANCELLED
        await until(cancelled, what="the parent to fail and its child to be cancelled",
                    timeout=30)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)


async def test_one_worker_with_one_slot_runs_a_map_of_definitions_written_at_run_time(
        store: Store, pg_database: str) -> None:
    """Each item's child is the definition its item holds, stored as `fan.each` (one
    version per distinct graph); the items wait for their children holding no slot."""
    engine = Engine(store)
    graphs = [{"name": "any", "steps": [
        {"id": "one", "type": "transform", "value": n},
        {"id": "two", "type": "transform", "value": "{{ steps.one.output * 10 }}",
         "depends_on": ["one"]}]} for n in range(6)]
    parent = {"name": "fan", "steps": [
        {"id": "each", "type": "map", "over": "{{ input.graphs }}",
         "step": {"type": "workflow", "definition": "{{ item }}"}}],
        "output": "{{ steps.each.output }}"}
    run = await engine.submit(check_definition(parent), {"graphs": graphs})
    status = await _finish(store, pg_database, run.run_id, timeout=100)
    done = await store.get_run(run.run_id)
    assert status is RunStatus.COMPLETED, done.error
    assert done.output == [{"two": 10 * n} for n in range(6)]
    assert (await store.get_workflow("fan.each")).version == 6
    child = await store.get_run(child_run_id(run.run_id, "each[2]", "0"))
    assert (child.workflow, child.parent_run_id) == ("fan.each", run.run_id)
