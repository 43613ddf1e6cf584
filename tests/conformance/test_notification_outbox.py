"""The notification outbox (``WriteBatch.outbox``, ``Store.enqueue_notifications``,
``claim_notifications``, ``settle_notification``, ``release_notifications``,
``list_notifications``): a notification is stored with the batch that causes it, held
by one sender at a time, and kept after it is sent or given up."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from plait.core.states import RunStatus, StepStatus
from plait.errors import StaleWriteError, StoreError
from plait.store.base import OutboxRow, RunChange, Store, WriteBatch

from .test_claims import _sharing
from .test_store import change, new_run

UID = Callable[[str], str]
T0 = 1_700_000_000.0  # before any row a real notifier stores: only these tests' are due
MANY = 10_000


def outbox_row(row_id: str, run_id: str | None = None, *, next_at: float = T0 - 10,
               event: str = "run_failed") -> OutboxRow:
    return OutboxRow(id=row_id, run_id=run_id, event=event, step="",
                     target={"url": "https://hooks.example/x"}, shown="https://hooks.example",
                     body={"event": event, "id": row_id, "text": "naïve ✓"},
                     next_at=next_at, created_at=next_at)


async def claimed(store: Store, sender: str, ids: set[str], now: float = T0,
                  lease: float = 30.0) -> list[OutboxRow]:
    return [r for r in await store.claim_notifications(sender, now, lease, MANY)
            if r.id in ids]


async def stored(store: Store, row_id: str) -> OutboxRow:
    found = [r for r in await store.list_notifications(None, MANY) if r.id == row_id]
    assert len(found) == 1
    return found[0]


async def test_a_batch_stores_its_notifications_with_its_changes(store: Store,
                                                                 uid: UID) -> None:
    run = await new_run(store, uid)
    key = uid("n")
    S = StepStatus
    await store.write(WriteBatch(run, steps=[change("a", S.PENDING, S.QUEUED)],
                                 run=RunChange(source=RunStatus.PENDING, target=RunStatus.RUNNING,
                                               at=1.0),
                                 outbox=[outbox_row(key, run)]))
    row = await stored(store, key)
    assert (row.state, row.attempts, row.run_id) == ("pending", 0, run)
    assert row.body == {"event": "run_failed", "id": key, "text": "naïve ✓"}
    assert row.target == {"url": "https://hooks.example/x"}


async def test_a_refused_batch_stores_no_notification(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    key = uid("n")
    S = StepStatus
    with pytest.raises(StaleWriteError):  # "a" is pending, not running
        await store.write(WriteBatch(run, steps=[change("a", S.RUNNING, S.COMPLETED)],
                                     outbox=[outbox_row(key, run)]))
    assert [r for r in await store.list_notifications(None, MANY) if r.id == key] == []


async def test_an_id_is_stored_once(store: Store, uid: UID) -> None:
    key = uid("n")
    assert await store.enqueue_notifications([outbox_row(key)]) == 1
    assert await store.enqueue_notifications([outbox_row(key, event="alert")]) == 0
    assert (await stored(store, key)).event == "run_failed"


async def test_a_held_row_goes_to_no_other_sender_until_its_lease_ends(
        store: Store, uid: UID) -> None:
    key, later = uid("n"), uid("later")
    await store.enqueue_notifications([outbox_row(key), outbox_row(later, next_at=T0 + 50)])
    ids = {key, later}
    mine = await claimed(store, "s1", ids)
    assert [r.id for r in mine] == [key] and mine[0].claimed_by == "s1"
    assert await claimed(store, "s2", ids, now=T0 + 10) == []
    # the lease ran out (s1 died): s2 takes it, and s1 can no longer settle it
    taken = await claimed(store, "s2", ids, now=T0 + 31)
    assert [r.id for r in taken] == [key]
    assert not await store.settle_notification(key, "s1", state="sent", attempts=1,
                                               next_at=T0)
    assert [r.id for r in await claimed(store, "s3", ids, now=T0 + 40)] == []


async def test_concurrent_claims_give_each_row_to_one_sender(store: Store,
                                                            uid: UID) -> None:
    ids = {uid(f"n{i}") for i in range(6)}
    await store.enqueue_notifications([outbox_row(i) for i in ids])
    found = await asyncio.gather(*(claimed(store, f"s{i}", ids) for i in range(4)))
    got = [r.id for rows in found for r in rows]
    assert sorted(got) == sorted(ids)


async def test_senders_of_several_processes_share_rows_without_overlap(
        store: Store, uid: UID) -> None:
    """Several processes (separate connections where the backend has them) race."""
    run = await new_run(store, uid)
    ids = {uid(f"n{i}") for i in range(12)}
    await store.enqueue_notifications([outbox_row(i, run) for i in ids])
    stores = [store, *await _sharing(store, 3, run)]
    try:
        found = await asyncio.gather(*(claimed(s, f"s{n}-{k}", ids)
                                       for n, s in enumerate(stores) for k in range(2)))
    finally:
        for extra in stores[1:]:
            await extra.close()
    got = [r.id for rows in found for r in rows]
    assert sorted(got) == sorted(ids)


async def test_a_retry_waits_for_its_time_and_counts_attempts(store: Store,
                                                              uid: UID) -> None:
    key = uid("n")
    await store.enqueue_notifications([outbox_row(key)])
    await claimed(store, "s1", {key})
    assert await store.settle_notification(key, "s1", state="pending", attempts=1,
                                           next_at=T0 + 100, error="HTTP 500")
    row = await stored(store, key)
    assert (row.state, row.attempts, row.next_at, row.error, row.claimed_by) == (
        "pending", 1, T0 + 100, "HTTP 500", None)
    assert await claimed(store, "s2", {key}, now=T0 + 99) == []
    assert [r.attempts for r in await claimed(store, "s2", {key}, now=T0 + 100)] == [1]


async def test_sent_and_given_up_rows_are_kept_and_listed(store: Store, uid: UID) -> None:
    sent, lost = uid("sent"), uid("lost")
    await store.enqueue_notifications([outbox_row(sent), outbox_row(lost)])
    await claimed(store, "s", {sent, lost})
    assert await store.settle_notification(sent, "s", state="sent", attempts=1, next_at=T0)
    assert await store.settle_notification(lost, "s", state="given_up", attempts=3,
                                           next_at=T0, error="HTTP 500")
    assert not await store.settle_notification(lost, "s", state="sent", attempts=4,
                                               next_at=T0)
    given_up = {r.id: r for r in await store.list_notifications("given_up", MANY)}
    assert lost in given_up and sent not in given_up
    assert (given_up[lost].attempts, given_up[lost].error) == (3, "HTTP 500")
    assert (await stored(store, sent)).state == "sent"
    assert await claimed(store, "s2", {sent, lost}, now=T0 + 1000) == []


async def test_a_released_row_is_claimable_at_once(store: Store, uid: UID) -> None:
    key = uid("n")
    await store.enqueue_notifications([outbox_row(key)])
    await claimed(store, "draining", {key}, lease=3600)
    assert await store.release_notifications("draining") >= 1
    row = await stored(store, key)
    assert (row.state, row.attempts, row.claimed_by) == ("pending", 0, None)
    assert [r.id for r in await claimed(store, "next", {key})] == [key]


async def test_an_unknown_state_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="unknown notification state"):
        await store.list_notifications("lost", 10)
