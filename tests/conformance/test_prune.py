"""Retention (``Store.prune_runs``): finished runs that finished before the cutoff go,
whole, with everything of theirs and their child runs; unfinished runs, parents of
unfinished children, runs with an unfinished retry, later runs and other workflows'
runs stay."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from plait.core.states import RunStatus
from plait.errors import RunNotFound, StoreError
from plait.store.base import RunChange, RunRecord, Store, TokenUsage, WriteBatch
from plait.store.outbox import OutboxRow

from .test_store import new_run_id, run_record

R = RunStatus
UID = Callable[[str], str]
CUTOFF = 100.0  # the runs here finish at 2.0


async def _run(store: Store, workflow: str, **fields: object) -> str:
    run: RunRecord = dataclasses.replace(run_record(new_run_id(), workflow), **fields)
    await store.create_run(run, ["a", "b"])
    return run.run_id


async def _start(store: Store, run_id: str) -> None:
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=R.PENDING, target=R.RUNNING, at=1.0)))


async def _end(store: Store, run_id: str, status: RunStatus = R.COMPLETED) -> None:
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=R.RUNNING, target=status, at=2.0)))


async def _finished(store: Store, workflow: str, status: RunStatus = R.COMPLETED,
                    **fields: object) -> str:
    run_id = await _run(store, workflow, **fields)
    await _start(store, run_id)
    await _end(store, run_id, status)
    return run_id


async def _exists(store: Store, run_id: str) -> bool:
    try:
        await store.get_run(run_id)
    except RunNotFound:
        return False
    return True


async def test_finished_runs_go_with_their_rows_and_the_rest_stays(store: Store,
                                                                   uid: UID) -> None:
    wf, other = uid("wf"), uid("other")
    done = await _finished(store, wf)
    failed = await _finished(store, wf, R.FAILED)
    running = await _run(store, wf)
    await _start(store, running)
    pending = await _run(store, wf)
    elsewhere = await _finished(store, other)
    await store.event_put(done, "paid", {"n": 1}, 1.0)
    await store.journal_put(done, "a", "call", {"v": 1}, 1, 1.0)
    await store.add_llm_tokens(done, "a", TokenUsage(1, 2, 3))
    await store.put_cached(wf, "a", "key", {"v": 1}, done, 1.0)
    note = OutboxRow(id=uid("note"), event="run_failed", target={"url": "http://t/"},
                     shown="http://t", body={}, run_id=done, created_at=1.0)
    kept_note = OutboxRow(id=uid("kept"), event="run_failed", target={"url": "http://t/"},
                          shown="http://t", body={}, run_id=running, created_at=1.0)
    assert await store.enqueue_notifications([note, kept_note]) == 2

    dry = await store.prune_runs(CUTOFF, workflow=wf, dry_run=True)
    assert dry.runs == 2 and dry.total_rows > 0
    assert await _exists(store, done) and await _exists(store, failed)

    counts = await store.prune_runs(CUTOFF, workflow=wf)
    assert counts == dry
    for gone in (done, failed):
        assert not await _exists(store, gone)
        with pytest.raises(RunNotFound):
            await store.get_steps(gone)
    assert counts.rows["steps"] == 4
    assert await store.event_get(done, "paid") is None
    assert await store.get_cached(wf, "a", "key", 0.0) is None
    # its outbox row went with it; a kept run's stays
    assert [n.id for n in await store.list_notifications()] == [kept_note.id]
    for kept in (running, pending, elsewhere):
        assert await _exists(store, kept)
    assert (await store.prune_runs(CUTOFF, workflow=wf)).runs == 0


async def test_the_cutoff_and_statuses_narrow_what_goes(store: Store, uid: UID) -> None:
    wf = uid("wf")
    done = await _finished(store, wf)
    cancelled = await _finished(store, wf, R.CANCELLED)
    assert (await store.prune_runs(1.5, workflow=wf)).runs == 0  # finished at 2.0
    assert (await store.prune_runs(CUTOFF, ["cancelled"], workflow=wf)).runs == 1
    assert await _exists(store, done) and not await _exists(store, cancelled)


async def test_a_status_that_is_not_final_is_refused(store: Store, uid: UID) -> None:
    wf = uid("wf")
    done = await _finished(store, wf)
    with pytest.raises(StoreError, match="'running'"):
        await store.prune_runs(CUTOFF, ["completed", "running"], workflow=wf)
    assert await _exists(store, done)


async def test_a_child_goes_with_its_parent_and_holds_it_while_unfinished(
        store: Store, uid: UID) -> None:
    wf = uid("wf")
    parent = await _finished(store, wf)
    child = await _run(store, wf, parent_run_id=parent)
    await _start(store, child)
    grandchild = await _finished(store, wf, parent_run_id=child)
    assert (await store.prune_runs(CUTOFF, workflow=wf)).runs == 0
    assert await _exists(store, parent) and await _exists(store, grandchild)

    await _end(store, child, R.FAILED)
    counts = await store.prune_runs(CUTOFF, ["completed"], workflow=wf)
    assert counts.runs == 3  # the status narrows the parents; children go with them
    for run_id in (parent, child, grandchild):
        assert not await _exists(store, run_id)


async def test_a_run_stays_while_a_retry_of_it_is_unfinished(store: Store,
                                                             uid: UID) -> None:
    wf = uid("wf")
    old = await _finished(store, wf, R.FAILED)
    retry = await _run(store, wf, retry_of=old)
    await _start(store, retry)
    assert (await store.prune_runs(CUTOFF, workflow=wf)).runs == 0
    await _end(store, retry)
    assert (await store.prune_runs(CUTOFF, workflow=wf)).runs == 2


async def test_small_batches_get_past_runs_that_stay(store: Store, uid: UID) -> None:
    wf = uid("wf")
    runs = [await _finished(store, wf) for _ in range(5)]
    held = await _run(store, wf)
    child = await _run(store, wf, parent_run_id=runs[1])
    await _start(store, child)
    counts = await store.prune_runs(CUTOFF, workflow=wf, batch=1)
    assert counts.runs == 4
    assert [await _exists(store, r) for r in runs] == [False, True, False, False, False]
    assert await _exists(store, held) and await _exists(store, child)


async def test_a_pruned_fire_does_not_move_its_schedule_back(store: Store,
                                                             uid: UID) -> None:
    wf = uid("wf")
    for fire in (10.0, 20.0):
        run = run_record(new_run_id(), wf)
        assert await store.claim_fire(wf, "daily", fire, run, ["a"])
        await _start(store, run.run_id)
        await _end(store, run.run_id)
    assert await store.last_fire(wf, "daily") == 20.0
    assert (await store.prune_runs(CUTOFF, workflow=wf)).runs == 2
    assert await store.last_fire(wf, "daily") == 20.0


def _alert(key: str, workflow: str, at: float) -> OutboxRow:
    """An alert's notification: it has no run (``notify_alerts``)."""
    return OutboxRow(id=key, event="alert", target={"url": "http://t/"}, shown="http://t",
                     body={"event": "alert", "run_id": None, "workflow": workflow},
                     run_id=None, created_at=at, next_at=at)


async def test_settled_alerts_before_the_cutoff_go_and_the_rest_stay(store: Store,
                                                                      uid: UID) -> None:
    wf, other = uid("wf"), uid("other")
    sent, given_up, pending = (_alert(uid(n), wf, 1.0) for n in ("sent", "gave", "due"))
    later, elsewhere = _alert(uid("later"), wf, 2 * CUTOFF), _alert(uid("else"), other, 1.0)
    mine = {r.id for r in (sent, given_up, pending, later, elsewhere)}
    assert await store.enqueue_notifications([sent, given_up, pending, later, elsewhere]) == 5
    claimed = await store.claim_notifications("sender", 3 * CUTOFF, 60.0, limit=100)
    assert mine <= {r.id for r in claimed}
    for row, state in ((sent, "sent"), (given_up, "given_up"), (later, "sent"),
                       (elsewhere, "sent")):
        assert await store.settle_notification(row.id, "sender", state=state, attempts=1,
                                               next_at=3 * CUTOFF)
    await store.release_notifications("sender")  # `pending` stays to be sent

    async def left() -> set[str]:
        return {r.id for r in await store.list_notifications(limit=1000)} & mine

    # a prune narrowed by status is about runs: no alert goes
    narrowed = await store.prune_runs(CUTOFF, ["failed"], workflow=wf)
    assert "notification_outbox" not in narrowed.rows and await left() == mine

    dry = await store.prune_runs(CUTOFF, workflow=wf, dry_run=True)
    assert (dry.runs, dry.rows) == (0, {"notification_outbox": 2})
    assert await left() == mine
    assert await store.prune_runs(CUTOFF, workflow=wf) == dry
    assert await left() == {pending.id, later.id, elsewhere.id}

    # without --workflow, every workflow's old settled alerts go
    assert (await store.prune_runs(CUTOFF)).rows.get("notification_outbox", 0) >= 1
    assert await left() == {pending.id, later.id}
