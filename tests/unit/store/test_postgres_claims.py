"""What the PostgreSQL claims do beyond the conformance suite (tests/conformance/
test_claims.py): claimers, reapers and pool admission on separate connections, as
separate worker processes would run them (a store instance per worker, each with its
own connection pool); no deadlock between a worker completing tickets and a driver
withdrawing the same ones; a claim that walks past a full pool; and the NOTIFY a
LISTEN connection receives once a dispatch, a completion, a reap or a withdrawal has
committed (and never for a refused batch).

Every store here is opened with ``retry_for=0``: a deadlock (which PostgreSQL detects
and rolls back, and the store would otherwise quietly run again) fails the test."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from plait.core.runstate import StepChange, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.errors import StaleWriteError
from plait.store.base import (
    InboxOutcome,
    Lease,
    RunChange,
    RunRecord,
    Ticket,
    WriteBatch,
    reaped_error,
)
from plait.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres
S = StepStatus
R = RunStatus
LEASE = 30.0
SHORT = 0.05  # a lease meant to run out
PAST_SHORT = 0.25
WORKERS = 16


def no_retry(url: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}retry_for=0"


async def opened(url: str) -> PostgresStore:
    store = PostgresStore(no_retry(url))
    await store.open()
    return store


@pytest.fixture
async def store(pg_database: str) -> AsyncIterator[PostgresStore]:
    """A store on the module's database, emptied of tickets and outcomes first (claims
    are store-wide: what an earlier test left would be claimed or reaped here)."""
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("DELETE FROM tickets")
        conn.execute("DELETE FROM outcomes")
    made = await opened(pg_database)
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
async def workers(pg_database: str, store: PostgresStore) -> AsyncIterator[list[PostgresStore]]:
    """WORKERS more stores on the same database: a connection pool each."""
    made = list(await asyncio.gather(*(opened(pg_database) for _ in range(WORKERS))))
    try:
        yield made
    finally:
        for other in made:
            await other.close()


@pytest.fixture
async def raw(pg_database: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    conn = await psycopg.AsyncConnection.connect(pg_database, autocommit=True)
    try:
        yield conn
    finally:
        await conn.close()


# ------------------------------------------------------------------ helpers


def change(step: str, source: StepStatus, target: StepStatus, attempts: int = 1) -> StepChange:
    return StepChange(step, source, target, time.time(),
                      StepRuntime(status=target, attempts=attempts))


async def dispatched(store: PostgresStore, count: int, **ticket: Any) -> str:
    """A running run of ``count`` steps ``s0``... each stored running with its ticket,
    in one batch (``ticket``: the tickets' fields; ``priority`` may be a callable of
    the step's number)."""
    run_id = uuid.uuid4().hex
    steps = [f"s{n}" for n in range(count)]
    await store.create_run(RunRecord(run_id=run_id, workflow="wf", version=1,
                                     fingerprint="0" * 12, status=R.PENDING, input={},
                                     created_at=time.time()), steps)
    priority = ticket.pop("priority", 0.0)
    await store.write(WriteBatch(
        run_id, run=RunChange(source=R.PENDING, target=R.RUNNING, at=time.time()),
        steps=[c for step in steps for c in (change(step, S.PENDING, S.QUEUED, 0),
                                             change(step, S.QUEUED, S.RUNNING))],
        dispatch=[Ticket(run_id=run_id, step_id=step, attempt=1,
                         priority=priority(n) if callable(priority) else priority, **ticket)
                  for n, step in enumerate(steps)]))
    return run_id


def ok(lease: Lease, output: Any = None) -> InboxOutcome:
    return InboxOutcome(run_id=lease.run_id, step_id=lease.step_id, attempt=lease.attempt,
                   fallback=lease.fallback, kind="ok", output=output, at=time.time())


async def claim_all(store: PostgresStore, worker: str, per_claim: int) -> list[Lease]:
    got: list[Lease] = []
    while leases := await store.claim_attempts(worker, per_claim, LEASE):
        assert len(leases) <= per_claim
        got += leases
        await asyncio.sleep(0)
    return got


async def pool_claimed(raw: psycopg.AsyncConnection[Any], pool: str) -> int:
    row = await (await raw.execute("SELECT count(*) FROM tickets "
                                   "WHERE pool = %s AND token IS NOT NULL", (pool,))).fetchone()
    assert row is not None
    return int(row[0])


# ------------------------------------------------------------------ claimers


async def test_sixteen_claimers_on_sixteen_connections_never_share_a_ticket(
        store: PostgresStore, workers: list[PostgresStore],
        raw: psycopg.AsyncConnection[Any]) -> None:
    runs = [await dispatched(store, 30, priority=lambda n: float(n % 7)) for _ in range(4)]
    results = await asyncio.gather(*(claim_all(s, f"w{n}", 3)
                                     for n, s in enumerate(workers)))
    leases = {(lease.run_id, lease.step_id): (f"w{n}", lease.token)
              for n, got in enumerate(results) for lease in got}
    assert sum(len(got) for got in results) == len(leases) == 120  # none twice, all
    assert len({token for _, token in leases.values()}) == 120
    assert sum(1 for got in results if got) > 1  # they did claim side by side
    stored = await (await raw.execute(
        "SELECT r.run_id, t.step_id, t.claimed_by, t.token FROM tickets AS t "
        "JOIN runs AS r ON r.id = t.run")).fetchall()
    assert {(run_id, step): (holder, token) for run_id, step, holder, token in stored} \
        == leases  # the rows agree: every ticket held by the one that got its lease
    for run_id in runs:
        assert {s.step_id: s.worker for s in await store.get_steps(run_id)} == {
            step: holder for (run, step), (holder, _) in leases.items() if run == run_id}


async def test_a_claim_walks_past_a_full_pool_to_what_it_can_take(
        store: PostgresStore, workers: list[PostgresStore]) -> None:
    busy = await dispatched(store, 6, pool="gpu", pool_limit=1, priority=0.0)
    free = await dispatched(store, 3, priority=1.0)
    leases = await store.claim_attempts("w1", 3, LEASE)
    assert [(lease.run_id, lease.step_id) for lease in leases] == [
        (busy, "s0"), (free, "s0"), (free, "s1")]  # in claim order; gpu let one in
    assert [(lease.run_id, lease.step_id)
            for lease in await workers[0].claim_attempts("w2", 5, LEASE)] == [(free, "s2")]
    assert await workers[1].claim_attempts("w3", 5, LEASE) == []


# ------------------------------------------------------------------ pool admission


async def test_concurrent_claimers_never_take_a_pools_last_slot_twice(
        store: PostgresStore, workers: list[PostgresStore],
        raw: psycopg.AsyncConnection[Any]) -> None:
    for limit in (1, 2, 3, 1, 2, 3):
        pool = f"pool-{uuid.uuid4().hex[:8]}"
        await dispatched(store, 10, pool=pool, pool_limit=limit)
        results = await asyncio.gather(*(s.claim_attempts(f"w{n}", 2, LEASE)
                                         for n, s in enumerate(workers)))
        assert sum(len(got) for got in results) == limit
        assert await pool_claimed(raw, pool) == limit


async def test_a_pools_limit_holds_at_every_moment_while_workers_churn(
        store: PostgresStore, workers: list[PostgresStore],
        raw: psycopg.AsyncConnection[Any]) -> None:
    """Sixteen workers claim, hold a moment and complete a pool's 64 tickets while
    another connection counts the pool's claimed tickets over and over."""
    pool, limit = "churn", 3
    runs = [await dispatched(store, 16, pool=pool, pool_limit=limit) for _ in range(4)]
    done = asyncio.Event()
    seen: list[int] = []

    async def watch() -> None:
        while not done.is_set():
            seen.append(await pool_claimed(raw, pool))

    async def work(s: PostgresStore, worker: str) -> int:
        completed = 0
        for _ in range(2_000):
            leases = await s.claim_attempts(worker, 2, LEASE)
            if not leases:
                if not [t for r in runs for t in await s.tickets(r)]:
                    return completed
                await asyncio.sleep(0.002)
                continue
            await asyncio.sleep(0.001)
            assert await s.complete_attempts(worker, [(x.token, ok(x)) for x in leases]) \
                == [True] * len(leases)
            completed += len(leases)
        raise AssertionError(f"{worker} never saw the pool drained")

    watcher = asyncio.create_task(watch())
    try:
        counts = await asyncio.gather(*(work(s, f"w{n}") for n, s in enumerate(workers)))
    finally:
        done.set()
        await watcher
    assert sum(counts) == 64
    assert len([o for r in runs for o in await store.outcomes(r)]) == 64
    assert len(seen) > 10 and max(seen) <= limit


async def test_claimers_meeting_two_pools_in_either_order_do_not_deadlock(
        store: PostgresStore, workers: list[PostgresStore],
        raw: psycopg.AsyncConnection[Any]) -> None:
    """Tickets of two limited pools interleaved: claimers that skip each other's locked
    rows meet the pools in different orders (each waits only for a pool's lock while
    holding none; a deadlock would fail a claim, since retry_for=0)."""
    for _ in range(5):
        run_id = await dispatched(store, 24, pool=None, priority=lambda n: float(n))
        await raw.execute(
            "UPDATE tickets SET pool = CASE WHEN (substr(step_id, 2)::int) %% 2 = 0 "
            "THEN 'even' ELSE 'odd' END, pool_limit = 4 "
            "WHERE run = (SELECT id FROM runs WHERE run_id = %s)", (run_id,))
        results = await asyncio.gather(*(s.claim_attempts(f"w{n}", 3, LEASE)
                                         for n, s in enumerate(workers)))
        assert await pool_claimed(raw, "even") <= 4
        assert await pool_claimed(raw, "odd") <= 4
        assert sum(len(got) for got in results) >= 4  # one pool admitted at the least
        await store.write(WriteBatch(run_id, withdrawn=[(f"s{n}", 1, False)
                                                        for n in range(24)]))


# ------------------------------------------------------------------ reapers


async def test_eight_reapers_on_eight_connections_reap_an_expired_lease_once(
        store: PostgresStore, workers: list[PostgresStore]) -> None:
    reapers = workers[:8]
    for _ in range(5):
        run_id = await dispatched(store, 1)
        [gone] = await store.claim_attempts("w-gone", 1, SHORT)
        await asyncio.sleep(PAST_SHORT)
        results = await asyncio.gather(*(s.reap_expired() for s in reapers))
        assert sorted(r for got in results for r in got) == [(run_id, "s0", 1)]
        [out] = await store.outcomes(run_id)
        assert (out.kind, out.worker) == ("interrupted", "w-gone")
        assert await store.complete_attempts("w-gone", [(gone.token, ok(gone))]) == [False]
    many = await dispatched(store, 20)
    await store.claim_attempts("w-gone", 20, SHORT)
    await asyncio.sleep(PAST_SHORT)
    results = await asyncio.gather(*(s.reap_expired(limit=4) for s in reapers))
    assert sorted(r for got in results for r in got) == sorted(
        (many, f"s{n}", 1) for n in range(20))  # 8 x 4 >= 20: all, each once
    assert len(await store.outcomes(many)) == 20


async def test_a_reaped_outcome_carries_the_one_wording_of_reaped_error(
        store: PostgresStore) -> None:
    """The server fills base.reaped_error's text in (holder, step, attempt): a holder
    name that needs escaping in JSON comes out as the Python function words it."""
    holder = 'host "a"\\b:42 \u00e9\u2603'
    run_id = await dispatched(store, 1)
    await store.claim_attempts(holder, 1, SHORT)
    await asyncio.sleep(PAST_SHORT)
    assert await store.reap_expired() == [(run_id, "s0", 1)]
    [out] = await store.outcomes(run_id)
    assert out.error == reaped_error(holder, "s0", 1)
    assert out.worker == holder


# ------------------------------------------------------------------ completion vs withdrawal


async def test_a_completion_racing_a_withdrawal_has_one_winner_per_ticket(
        store: PostgresStore, workers: list[PostgresStore]) -> None:
    """The worker completes both of a run's attempts while its driver cancels both
    steps, withdrawing their tickets, on another connection: each attempt ends either
    in the inbox or discarded with a note, and neither waits for the other in a cycle
    (the driver locks the run, then tickets in key order; the completion locks tickets
    in key order and inserts outcomes, which the driver's run lock does not block)."""
    worker, driver = workers[0], workers[1]
    wins = {True: 0, False: 0}
    for _ in range(25):
        run_id = await dispatched(store, 2)
        leases = sorted(await worker.claim_attempts("w1", 2, LEASE), key=lambda x: x.step_id)
        keys = [(lease.step_id, 1, False) for lease in leases]
        completed, withdrawn = await asyncio.gather(
            worker.complete_attempts("w1", [(x.token, ok(x)) for x in leases]),
            driver.write(WriteBatch(run_id, withdrawn=keys)))
        assert withdrawn is None
        inbox = {o.step_id for o in await store.outcomes(run_id)}
        assert inbox == {x.step_id for x, done in zip(leases, completed, strict=True)
                         if done}
        notes = [e.data["late_result_discarded"]["step"]
                 for e in await store.get_events(run_id)
                 if e.kind == "note" and "late_result_discarded" in e.data]
        assert sorted(notes) == sorted(x.step_id for x, done in
                                       zip(leases, completed, strict=True) if not done)
        assert await store.tickets(run_id) == []
        for done in completed:
            wins[done] += 1
    assert wins[True] + wins[False] == 50


async def test_a_driver_holding_the_run_never_blocks_an_outcome_insert(
        store: PostgresStore, workers: list[PostgresStore], pg_database: str,
        raw: psycopg.AsyncConnection[Any]) -> None:
    """The interleaving the race above rarely meets, made to happen: a completion holds
    its tickets' locks (as plait_complete_attempts does when it inserts the outcomes)
    while a driver's batch, holding the run's row, waits for one of those tickets.  The
    outcome insert takes KEY SHARE on the run's row (its foreign key), which the
    driver's NO KEY UPDATE does not block; were the driver's lock FOR UPDATE, both
    would wait for each other."""
    run_id = await dispatched(store, 2)
    [first, _] = await store.claim_attempts("w1", 2, LEASE)
    row = await (await raw.execute("SELECT id FROM runs WHERE run_id = %s",
                                   (run_id,))).fetchone()
    assert row is not None
    async with await psycopg.AsyncConnection.connect(pg_database, autocommit=True) as watch:
        async with raw.transaction():
            await raw.execute("SELECT FROM tickets WHERE run = %s "
                              "ORDER BY step_id FOR UPDATE", (row[0],))
            withdrawal = asyncio.create_task(workers[0].write(WriteBatch(
                run_id, withdrawn=[("s0", 1, False), ("s1", 1, False)])))
            for _ in range(500):  # until the driver's batch waits for a ticket's lock
                waiting = await (await watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                    "current_database() AND wait_event_type = 'Lock'")).fetchone()
                if waiting and waiting[0]:
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the driver's batch never waited for the tickets")
            await raw.execute("SET LOCAL lock_timeout = '500ms'")
            await raw.execute("INSERT INTO outcomes (run, step_id, attempt, fallback, kind, "
                              "worker, at) VALUES (%s, 's0', 1, false, 'ok', 'w1', 1.0)",
                              (row[0],))
            await raw.execute("DELETE FROM tickets WHERE run = %s AND step_id = 's0'",
                              (row[0],))
        await withdrawal
    assert [o.step_id for o in await store.outcomes(run_id)] == [first.step_id]
    assert await store.tickets(run_id) == []  # s1 withdrawn, once the locks were free


# ------------------------------------------------------------------ notifications


async def heard(listener: psycopg.AsyncConnection[Any], count: int,
                timeout: float = 5.0) -> list[tuple[str, str]]:
    """The next ``count`` notifications (fewer when ``timeout`` passes first)."""
    return [(n.channel, n.payload)
            async for n in listener.notifies(timeout=timeout, stop_after=count)]


async def nothing_heard(listener: psycopg.AsyncConnection[Any]) -> bool:
    return await heard(listener, 1, timeout=0.3) == []


async def test_listeners_hear_of_work_and_outcomes_once_committed(
        store: PostgresStore, raw: psycopg.AsyncConnection[Any]) -> None:
    await raw.execute("LISTEN plait_work")
    await raw.execute("LISTEN plait_outcome")
    run_id = await dispatched(store, 2)
    assert await heard(raw, 1) == [("plait_work", "")]
    with pytest.raises(StaleWriteError):  # refused, rolled back: nobody is told
        await store.write(WriteBatch(run_id, dispatch=[Ticket(run_id=run_id, step_id="s0",
                                                              attempt=1)]))
    assert await nothing_heard(raw)
    first, second = await store.claim_attempts("w1", 2, LEASE)
    assert await nothing_heard(raw)  # a claim changes nothing anyone waits for
    assert await store.complete_attempts("w1", [(first.token, ok(first))]) == [True]
    assert await heard(raw, 1) == [("plait_outcome", run_id)]
    assert await store.complete_attempts("w1", [(first.token, ok(first))]) == [False]
    assert await nothing_heard(raw)  # a late result stores only a note
    await store.write(WriteBatch(run_id, withdrawn=[(second.step_id, 1, False)]))
    assert await nothing_heard(raw)  # no pool limit: no slot freed

    pooled = await dispatched(store, 2, pool="gpu", pool_limit=1)
    assert await heard(raw, 1) == [("plait_work", "")]
    [held] = await store.claim_attempts("w1", 5, LEASE)
    assert await store.complete_attempts("w1", [(held.token, ok(held))]) == [True]
    assert sorted(await heard(raw, 2)) == [("plait_outcome", pooled), ("plait_work", "")]
    [expiring] = await store.claim_attempts("w1", 5, SHORT)  # the slot, freed
    await asyncio.sleep(PAST_SHORT)
    assert [r[0] for r in await store.reap_expired()] == [pooled]
    assert sorted(await heard(raw, 2)) == [("plait_outcome", pooled), ("plait_work", "")]
    assert expiring.step_id == "s1"


async def test_a_withdrawn_claim_of_a_limited_pool_tells_claimers(
        store: PostgresStore, raw: psycopg.AsyncConnection[Any]) -> None:
    run_id = await dispatched(store, 2, pool="gpu", pool_limit=1)
    [held] = await store.claim_attempts("w1", 5, LEASE)
    await raw.execute("LISTEN plait_work")
    await store.write(WriteBatch(run_id, withdrawn=[(held.step_id, 1, False)]))
    assert await heard(raw, 1) == [("plait_work", "")]
    assert [lease.step_id for lease in await store.claim_attempts("w2", 5, LEASE)] == ["s1"]
