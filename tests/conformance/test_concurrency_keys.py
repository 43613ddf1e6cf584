"""Concurrency keys (``Store.claim_run``): a run with a ``concurrency_key`` that
has not started is taken only while fewer than its ``max_runs_per_key`` other runs of
the key hold a slot (running, or pending / waiting with a live owner), judged in one
atomic step across every process sharing the store.  Every test uses a key of its own
(``uid``), so what other tests left in a shared database never counts.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

from plait.core.states import RunStatus as R
from plait.store.base import RunChange, RunRecord, Store, WriteBatch

from .test_claims import _sharing

UID = Callable[[str], str]
LEASE = 30.0


async def _runs(store: Store, workflow: str, key: str | None, limit: int | None,
                n: int, *, status: R = R.PENDING, owner: str | None = None,
                heartbeat_at: float | None = None) -> list[str]:
    """``n`` new runs of ``key``, oldest first (one step each)."""
    ids = []
    for i in range(n):
        run_id = uuid.uuid4().hex
        await store.create_run(RunRecord(
            run_id=run_id, workflow=workflow, version=1, fingerprint="0123456789ab",
            status=status, input={"i": i}, created_at=1_000.0 + i, owner=owner,
            heartbeat_at=heartbeat_at, concurrency_key=key, max_runs_per_key=limit),
            ["a"])
        ids.append(run_id)
    return ids


async def _claim(store: Store, run_id: str, owner: str) -> bool:
    return await store.claim_run(run_id, owner, time.time(), LEASE) is not None


async def _move(store: Store, run_id: str, source: R, target: R) -> None:
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=source, target=target, at=time.time())))


async def test_a_run_stores_its_key_and_bound(store: Store, uid: UID) -> None:
    key = uid("customer")
    [run_id] = await _runs(store, uid("wf"), key, 3, 1)
    run = await store.get_run(run_id)
    assert (run.concurrency_key, run.max_runs_per_key) == (key, 3)
    [plain] = await _runs(store, uid("wf"), None, None, 1)
    run = await store.get_run(plain)
    assert (run.concurrency_key, run.max_runs_per_key) == (None, None)
    claimed = await store.claim_run(run_id, "host:1", time.time(), LEASE)
    assert claimed is not None and claimed.concurrency_key == key


async def test_a_third_run_waits_while_two_of_its_key_run(store: Store, uid: UID) -> None:
    first, second, third = await _runs(store, uid("wf"), uid("customer"), 2, 3)
    assert await _claim(store, first, "host:1")
    await _move(store, first, R.PENDING, R.RUNNING)
    assert await _claim(store, second, "host:2")  # claimed, not started: a slot too
    assert not await _claim(store, third, "host:3")
    refused = await store.get_run(third)
    assert (refused.owner, refused.status) == (None, R.PENDING)
    assert await _claim(store, second, "host:2")  # its holder claims it again
    await _move(store, first, R.RUNNING, R.COMPLETED)
    assert await _claim(store, third, "host:3")


async def test_a_released_pending_run_frees_its_slot(store: Store, uid: UID) -> None:
    first, second = await _runs(store, uid("wf"), uid("customer"), 1, 2)
    assert await _claim(store, first, "host:1")
    assert not await _claim(store, second, "host:2")
    await store.release_run(first, "host:1")
    assert await _claim(store, second, "host:2")
    assert not await _claim(store, first, "host:1")


async def test_a_claim_whose_owner_stopped_heartbeating_frees_its_slot(
        store: Store, uid: UID) -> None:
    first, second = await _runs(store, uid("wf"), uid("customer"), 1, 2)
    assert await store.claim_run(first, "host:1", time.time() - 2 * LEASE, LEASE)
    assert await _claim(store, second, "host:2")


async def test_keys_are_independent(store: Store, uid: UID) -> None:
    workflow = uid("wf")
    [a1, a2] = await _runs(store, workflow, uid("a"), 1, 2)
    [b1] = await _runs(store, workflow, uid("b"), 1, 1)
    [free] = await _runs(store, workflow, None, None, 1)
    assert await _claim(store, a1, "host:1")
    assert await _claim(store, b1, "host:2")
    assert await _claim(store, free, "host:3")
    assert not await _claim(store, a2, "host:4")


async def test_a_running_run_is_taken_over_whatever_its_key_holds(
        store: Store, uid: UID) -> None:
    key = uid("customer")
    stale = time.time() - 10 * LEASE  # both drivers stopped long ago
    first, second = await _runs(store, uid("wf"), key, 1, 2, status=R.RUNNING,
                                owner="host:gone", heartbeat_at=stale)
    assert await _claim(store, first, "host:1")
    assert await _claim(store, second, "host:2")  # two running with a bound of one
    [pending] = await _runs(store, uid("wf"), key, 1, 1)
    assert not await _claim(store, pending, "host:3")


async def test_a_run_waiting_for_a_person_holds_no_slot_until_claimed(
        store: Store, uid: UID) -> None:
    waiting, other = await _runs(store, uid("wf"), uid("customer"), 1, 2)
    assert await _claim(store, waiting, "host:1")
    await _move(store, waiting, R.PENDING, R.RUNNING)
    await _move(store, waiting, R.RUNNING, R.WAITING)
    await store.release_run(waiting, "host:1")
    assert await _claim(store, other, "host:2")
    assert not await _claim(store, waiting, "host:1")  # continuing it needs a slot
    await _move(store, other, R.PENDING, R.CANCELLED)
    assert await _claim(store, waiting, "host:1")


async def test_concurrent_claimers_take_exactly_the_free_slots(
        store: Store, uid: UID) -> None:
    runs = await _runs(store, uid("wf"), uid("customer"), 2, 8)
    got = await asyncio.gather(*(_claim(store, run_id, f"host:{n}")
                                 for n, run_id in enumerate(runs)))
    assert sum(got) == 2


async def test_claimers_on_separate_store_instances_take_exactly_the_free_slots(
        store: Store, uid: UID) -> None:
    runs = await _runs(store, uid("wf"), uid("customer"), 2, 8)
    others = await _sharing(store, 3, runs[0])
    if not store.url.startswith("memory"):
        assert others, f"{store.url}: a second store on the URL should share its data"
    try:
        stores = [store, *others]
        got = await asyncio.gather(*(_claim(stores[n % len(stores)], run_id, f"host:{n}")
                                     for n, run_id in enumerate(runs)))
    finally:
        for other in others:
            await other.close()
    assert sum(got) == 2
    holders = [(await store.get_run(run_id)).owner for run_id in runs]
    assert sum(owner is not None for owner in holders) == 2


async def test_runs_to_drive_skips_runs_held_back_by_a_full_key(
        store: Store, uid: UID) -> None:
    key = uid("customer")
    first, held = await _runs(store, uid("wf"), key, 1, 2)
    [free] = await _runs(store, uid("wf"), uid("other"), 1, 1)
    assert await _claim(store, first, "host:1")
    await _move(store, first, R.PENDING, R.RUNNING)
    await store.release_run(first, "host:1")  # its driver stopped: a takeover's turn
    listed = await store.runs_to_drive(LEASE, 100_000)
    assert first in listed and free in listed
    assert held not in listed
    await _move(store, first, R.RUNNING, R.COMPLETED)
    assert held in await store.runs_to_drive(LEASE, 100_000)


async def test_a_held_back_run_asked_to_cancel_is_taken_to_cancel_it(
        store: Store, uid: UID) -> None:
    first, held = await _runs(store, uid("wf"), uid("customer"), 1, 2)
    assert await _claim(store, first, "host:1")
    assert not await _claim(store, held, "host:2")
    await store.request_cancel(held)
    assert held in await store.runs_to_drive(LEASE, 100_000)
    assert await _claim(store, held, "host:2")
