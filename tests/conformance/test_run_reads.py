"""The two reads that replace several: ``Store.heartbeat`` (a driver's poll: the lease
refreshed, the holder and the cancel flag in one call) and ``Store.read_run`` (a run
with its steps, attempts, history and journal, read at once)."""

from __future__ import annotations

import pytest

from plait.core.runstate import AttemptChange
from plait.errors import RunNotFound
from plait.store.base import Heartbeat, RunChange, Store, WriteBatch

from .test_store import DEFINITION, UID, R, S, change, new_run, new_run_id, run_record


async def test_a_heartbeat_says_whether_a_cancel_was_requested(store: Store,
                                                                uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.claim_run(run_id, "host:1", now=100.0, lease=30.0)
    assert await store.heartbeat(run_id, "host:1", now=101.0) == Heartbeat(
        held=True, owner="host:1", cancel_requested=False)
    await store.request_cancel(run_id)
    assert await store.heartbeat(run_id, "host:1", now=102.0) == Heartbeat(
        held=True, owner="host:1", cancel_requested=True)
    assert (await store.get_run(run_id)).heartbeat_at == 102.0


async def test_a_heartbeat_of_a_driver_that_lost_the_run_names_the_new_owner(
        store: Store, uid: UID) -> None:
    """The lost lease is detected by the same call, which leaves the new owner's
    lease alone; the cancel flag is reported to the loser too."""
    run_id = await new_run(store, uid)
    await store.claim_run(run_id, "host:1", now=100.0, lease=30.0)
    await store.claim_run(run_id, "host:2", now=140.0, lease=30.0)
    await store.request_cancel(run_id)
    assert await store.heartbeat(run_id, "host:1", now=141.0) == Heartbeat(
        held=False, owner="host:2", cancel_requested=True)
    assert (await store.get_run(run_id)).heartbeat_at == 140.0
    await store.release_run(run_id, "host:2")
    assert await store.heartbeat(run_id, "host:2", now=142.0) == Heartbeat(
        held=False, owner=None, cancel_requested=True)


async def test_read_run_gives_what_the_single_reads_give(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid, steps=("c", "a", "b"))
    await store.claim_run(run_id, "host:1", now=1.0, lease=30.0)
    await store.write(WriteBatch(
        run_id=run_id, owner="host:1",
        run=RunChange(source=R.PENDING, target=R.RUNNING, at=2.0),
        steps=[change("a", S.PENDING, S.QUEUED, at=2.0),
               change("a", S.QUEUED, S.RUNNING, at=3.0, attempts=1, worker="host:1")],
        attempts=[AttemptChange("a", 1, 3.0, False, "running", worker="host:1")],
        notes=[("a", {"said": [1, 2.5, "x", None]}), (None, {"run": True})]))
    await store.write(WriteBatch(
        run_id=run_id, owner="host:1",
        steps=[change("a", S.RUNNING, S.COMPLETED, at=4.0, attempts=1,
                      output={"n": 1.5}, worker="host:1")],
        attempts=[AttemptChange("a", 1, 4.0, False, "completed", worker="host:1")]))
    await store.journal_put(run_id, "a", "call-2", {"v": 2}, 1, 3.5)
    await store.journal_put(run_id, "a", "call-1", None, 1, 3.6)
    await store.request_cancel(run_id)
    document = await store.read_run(run_id)
    assert document.run == await store.get_run(run_id)
    assert document.steps == await store.get_steps(run_id)
    assert [s.step_id for s in document.steps] == ["c", "a", "b"]
    assert document.steps[1].output == {"n": 1.5}
    assert document.attempts == await store.get_attempts(run_id)
    assert document.events == await store.get_events(run_id)
    assert document.journal == await store.journal(run_id)
    assert [e.name for e in document.journal] == ["call-2", "call-1"]


async def test_read_run_of_a_run_with_nothing_under_it(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid, steps=())
    document = await store.read_run(run_id)
    assert document.run.run_id == run_id
    assert (document.steps, document.attempts, document.journal) == ([], [], [])
    assert document.events == await store.get_events(run_id)


async def test_read_run_of_an_unknown_run_raises_run_not_found(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.read_run(new_run_id())
    with pytest.raises(RunNotFound):
        await store.read_run("not a valid id\x00")


async def test_read_run_gives_the_workflow_version_the_run_runs(store: Store,
                                                                 uid: UID) -> None:
    name = uid("wf")
    stored = await store.save_workflow(name, DEFINITION, "0123456789ab", None)
    run_id = new_run_id()
    await store.create_run(run_record(run_id, name, version=stored.version), ["a"])
    workflow = (await store.read_run(run_id)).workflow
    assert workflow is not None and workflow.definition == DEFINITION
    assert workflow == await store.get_workflow(name, stored.version)
    unstored = await new_run(store, uid, version=7)
    assert (await store.read_run(unstored)).workflow is None


async def test_get_steps_by_id_gives_the_named_rows_as_get_steps_does(
        store: Store, uid: UID) -> None:
    """What a worker reads of a run that its ticket left out: only the named steps, in
    definition order, each row as ``get_steps`` has it; unknown ids are left out."""
    run_id = await new_run(store, uid, steps=("c", "a", "b"))
    await store.claim_run(run_id, "host:1", now=1.0, lease=30.0)
    big = {"text": "x" * 100_000, "n": [1, 2.5, None]}
    await store.write(WriteBatch(
        run_id=run_id, owner="host:1",
        run=RunChange(source=R.PENDING, target=R.RUNNING, at=2.0),
        steps=[change("a", S.PENDING, S.QUEUED, at=2.0),
               change("a", S.QUEUED, S.RUNNING, at=3.0, attempts=1, worker="host:1"),
               change("c", S.PENDING, S.SKIPPED, at=3.0)],
        attempts=[AttemptChange("a", 1, 3.0, False, "running", worker="host:1")]))
    await store.write(WriteBatch(
        run_id=run_id, owner="host:1",
        steps=[change("a", S.RUNNING, S.COMPLETED, at=4.0, attempts=1, output=big,
                      worker="host:1")],
        attempts=[AttemptChange("a", 1, 4.0, False, "completed", worker="host:1")]))
    every = await store.get_steps(run_id)
    found = await store.get_steps_by_id(run_id, ["a", "nope", "c"])
    assert found == [every[0], every[1]]
    assert [(s.step_id, s.status, s.output) for s in found] == [
        ("c", S.SKIPPED, None), ("a", S.COMPLETED, big)]
    assert await store.get_steps_by_id(run_id, ["b"]) == [every[2]]
    assert await store.get_steps_by_id(run_id, []) == []
    assert await store.get_steps_by_id(run_id, ["nope", "x'); DROP TABLE steps; --"]) == []
    assert await store.get_steps(run_id) == every


async def test_get_steps_by_id_of_an_absent_run_is_run_not_found(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.get_steps_by_id(new_run_id(), ["a"])
