"""The claims capability (``store.base``'s docstring is the contract): tickets, leases,
the outcome inbox and the runs that need a driver, on every backend.

Claims are store-wide (a claim takes any run's ticket; pools and reapers span the
store), while a PostgreSQL test database is shared and never truncated (conftest.py).
So the ``driver`` fixture first sweeps the store of claimable and expired tickets that
earlier tests may have left (a test that crashed), and at the end withdraws the
tickets, consumes the outcomes and cancels the runs of its own test; every test makes
its runs older (``created_at``) than the other suites' so that ``runs_to_drive`` lists
them first.  Do not run two sessions of this suite against one database at once.

Timing: leases meant to expire are 0.05 s long and tests sleep past them, in real time,
because expiry is judged by the store's own clock.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from plait.core.runstate import StepChange, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.errors import RunNotFound, StaleWriteError, StoreError, UnstorableValue
from plait.runtime.unstorable import cleaned_batch, complete_split
from plait.store import open_store
from plait.store.base import (
    AttemptKey,
    InboxOutcome,
    Lease,
    RunChange,
    RunFilter,
    RunRecord,
    Store,
    Ticket,
    WriteBatch,
)

from .conftest import backend_params

S = StepStatus
R = RunStatus
UID = Callable[[str], str]
LEASE = 30.0
SHORT = 0.05  # a lease meant to run out
PAST_SHORT = 0.2  # sleep this long for it to have run out
SLACK = 1.0  # store time vs this process's clock (a server's clock: same host here)
STEPS = ("a", "b", "c", "d")
_AGE = itertools.count()


# ------------------------------------------------------------------ the driver


class Driver:
    """What a run's driver writes, reduced to what the claims tests need: runs, step
    changes that start attempts with their tickets, and outcomes applied."""

    def __init__(self, store: Store, workflow: str) -> None:
        self.store = store
        self.workflow = workflow
        self.runs: list[str] = []

    async def run(self, steps: Sequence[str] = STEPS, *, start: bool = True) -> str:
        run_id = uuid.uuid4().hex
        # older than every other suite's runs (runs_to_drive lists oldest first)
        created = 1.0 + next(_AGE) * 1e-3
        await self.store.create_run(RunRecord(
            run_id=run_id, workflow=self.workflow, version=3, fingerprint="0123456789ab",
            status=R.PENDING, input={}, created_at=created), list(steps))
        self.runs.append(run_id)
        if start:
            await self.store.write(WriteBatch(run_id, run=RunChange(
                source=R.PENDING, target=R.RUNNING, at=time.time())))
        return run_id

    async def start(self, run_id: str, step: str, attempt: int = 1, *,
                    consumed: Sequence[AttemptKey] = (),
                    withdrawn: Sequence[AttemptKey] = (), **ticket: Any) -> Ticket:
        """Store ``step`` running with ``attempt`` counted and its ticket, in one batch
        (with outcomes consumed and tickets withdrawn, when given)."""
        new = Ticket(run_id=run_id, step_id=step, attempt=attempt, **ticket)
        await self.store.write(WriteBatch(
            run_id, steps=await self._to_running(run_id, step, attempt), dispatch=[new],
            consumed=list(consumed), withdrawn=list(withdrawn)))
        return new

    async def _to_running(self, run_id: str, step: str, attempt: int) -> list[StepChange]:
        status = await step_status(self.store, run_id, step)
        now = time.time()
        path = [(S.PENDING, S.QUEUED)] if status is S.PENDING else [(S.RUNNING, S.QUEUED)]
        path.append((S.QUEUED, S.RUNNING))
        return [change(step, source, target, now, attempts=attempt, started_at=now)
                for source, target in path]

    async def finish(self, run_id: str, step: str, key: AttemptKey,
                     target: StepStatus = S.COMPLETED) -> None:
        """Apply an inbox outcome: the step ends and the outcome is consumed."""
        await self.store.write(WriteBatch(run_id, steps=[change(
            step, S.RUNNING, target, time.time(), attempts=key[1])], consumed=[key]))

    async def tidy(self) -> None:
        """Leave nothing of this test's runs for other tests (a shared database)."""
        for run_id in self.runs:
            run = await self.store.get_run(run_id)
            withdrawn = [t.ticket.key for t in await self.store.tickets(run_id)]
            consumed = [o.key for o in await self.store.outcomes(run_id)]
            final = run.status in (R.COMPLETED, R.FAILED, R.CANCELLED)
            await self.store.write(WriteBatch(
                run_id, withdrawn=withdrawn, consumed=consumed,
                run=None if final else RunChange(source=run.status, target=R.CANCELLED,
                                                 at=time.time())))


async def sweep(store: Store) -> None:
    """Withdraw every ticket that can be claimed or reaped now (left by other tests)."""
    await store.reap_expired(100_000)
    while leases := await store.claim_attempts("conformance-sweeper", 500, LEASE):
        by_run: dict[str, list[AttemptKey]] = {}
        for lease in leases:
            by_run.setdefault(lease.run_id, []).append(key_of(lease))
        for run_id, keys in by_run.items():
            await store.write(WriteBatch(run_id, withdrawn=keys))


@pytest.fixture
async def driver(store: Store, uid: UID) -> AsyncIterator[Driver]:
    await sweep(store)
    made = Driver(store, uid("wf"))
    try:
        yield made
    finally:
        await made.tidy()


# ------------------------------------------------------------------ helpers


def change(step: str, source: StepStatus, target: StepStatus, at: float,
           **fields: Any) -> StepChange:
    row = StepRuntime(status=target)
    for name, value in fields.items():
        setattr(row, name, value)
    return StepChange(step, source, target, at, row)


def key_of(lease: Lease) -> AttemptKey:
    return (lease.step_id, lease.attempt, lease.fallback)


def ok(lease: Lease, output: Any = None, **fields: Any) -> InboxOutcome:
    return InboxOutcome(run_id=lease.run_id, step_id=lease.step_id, attempt=lease.attempt,
                   fallback=lease.fallback, kind=fields.pop("kind", "ok"), output=output,
                   at=fields.pop("at", time.time()), **fields)


async def step_status(store: Store, run_id: str, step: str) -> StepStatus:
    return {s.step_id: s.status for s in await store.get_steps(run_id)}[step]


async def notes(store: Store, run_id: str, key: str) -> list[tuple[str | None, Any]]:
    return [(e.step_id, e.data[key]) for e in await store.get_events(run_id)
            if e.kind == "note" and key in e.data]


async def claim_steps(store: Store, worker: str, limit: int,
                      lease: float = LEASE) -> list[str]:
    return [lease.step_id for lease in await store.claim_attempts(worker, limit, lease)]


# ------------------------------------------------------------------ the round trip


async def test_dispatch_claim_complete_consume_round_trip(store: Store,
                                                          driver: Driver) -> None:
    run_id = await driver.run()
    payload = {"call": "pkg.mod:fn", "args": [1, {"deep": [None, 2.5, "é"]}], "n": 1}
    ticket = await driver.start(run_id, "a", priority=2.0, payload=payload)
    [stored] = await store.tickets(run_id)
    assert stored.ticket == ticket
    assert (stored.claimed_by, stored.expires_at) == (None, None)
    assert abs(stored.created_at - time.time()) < SLACK + 5
    assert await step_status(store, run_id, "a") is S.RUNNING

    before = time.time()
    [lease] = await store.claim_attempts("w1", 10, LEASE)
    after = time.time()
    assert (lease.run_id, lease.step_id, lease.attempt, lease.fallback) == (run_id, "a", 1,
                                                                            False)
    assert (lease.workflow, lease.version) == (driver.workflow, 3)
    assert lease.payload == payload
    assert re.fullmatch(r"[0-9a-f]{32}", lease.token)
    assert before + LEASE - SLACK <= lease.expires_at <= after + LEASE + SLACK
    lease.payload["n"] = 99  # the caller's copy: the stored payload is unchanged
    [held] = await store.tickets(run_id)
    assert held.ticket.payload == payload
    assert held.claimed_by == "w1"
    assert held.expires_at == pytest.approx(lease.expires_at, abs=1e-3)
    steps = {s.step_id: s for s in await store.get_steps(run_id)}
    assert (steps["a"].status, steps["a"].worker) == (S.RUNNING, "w1")  # who ran it
    assert await store.claim_attempts("w2", 10, LEASE) == []  # one ticket, taken
    assert await store.outcomes(run_id) == []

    done = await store.complete_attempts("w1", [(lease.token, ok(lease, {"answer": [4, 2]},
                                                                 at=123.5))])
    assert done == [True]
    assert await store.tickets(run_id) == []
    assert await store.outcomes(run_id) == [InboxOutcome(
        run_id=run_id, step_id="a", attempt=1, fallback=False, kind="ok",
        output={"answer": [4, 2]}, error=None, worker="w1", at=123.5)]
    assert await store.extend_leases("w1", [lease.token], LEASE) == set()  # over

    await driver.finish(run_id, "a", ("a", 1, False))
    assert await store.outcomes(run_id) == []
    assert await step_status(store, run_id, "a") is S.COMPLETED


# what an array's text form must quote or escape: every one comes back as it went in
AWKWARD = ["", " ", "NULL", "null", 'say "hi"', "back\\slash \\\"", "{a,b}", "a,b",
           "new\nline\ttab", "é \u2603 \U0001f600", "(x)", "'single'"]


async def test_texts_an_array_literal_would_quote_round_trip_exactly(
        store: Store, driver: Driver) -> None:
    """Ticket payloads, outcomes, logs and step outputs travel as arrays of texts in a
    batch or a completion: any character an array literal quotes is kept."""
    run_id = await driver.run()
    payload = {"texts": AWKWARD, "NULL": None, AWKWARD[5]: {AWKWARD[6]: AWKWARD[4]}}
    await driver.start(run_id, "a", payload=payload, pool=AWKWARD[6])
    await driver.start(run_id, "b", payload={"only": AWKWARD[2]})
    la, lb = sorted(await store.claim_attempts("w1", 2, LEASE), key=lambda x: x.step_id)
    assert (la.payload, lb.payload) == (payload, {"only": "NULL"})
    error = {"type": AWKWARD[4], "message": AWKWARD[5], "names": AWKWARD}
    logs = tuple({"level": "INFO", "message": text, "attempt": 1, "at": 1.0}
                 for text in AWKWARD)
    assert await store.complete_attempts("w1", [
        (la.token, ok(la, AWKWARD, logs=logs)),
        (lb.token, ok(lb, kind="error", error=error))]) == [True, True]
    oa, ob = await store.outcomes(run_id)
    assert (oa.output, oa.logs, ob.error) == (AWKWARD, logs, error)
    now = time.time()
    await store.write(WriteBatch(run_id, steps=[
        change("a", S.RUNNING, S.COMPLETED, now, attempts=1, output=oa.output),
        change("b", S.RUNNING, S.FAILED, now, attempts=1, error=AWKWARD[5])],
        consumed=[oa.key, ob.key]))
    steps = {s.step_id: s for s in await store.get_steps(run_id)}
    assert (steps["a"].output, steps["b"].error) == (AWKWARD, AWKWARD[5])


async def test_error_and_cancelled_outcomes_keep_their_error(store: Store,
                                                             driver: Driver) -> None:
    run_id = await driver.run()
    await driver.start(run_id, "a")
    await driver.start(run_id, "b", fallback=True)
    la, lb = sorted(await store.claim_attempts("w1", 2, LEASE), key=lambda x: x.step_id)
    error = {"type": "ValueError", "message": "bad input: 'x'", "retryable": False,
             "retry_after": None}
    assert await store.complete_attempts("w1", [
        (la.token, ok(la, kind="error", error=error, at=5.0)),
        (lb.token, ok(lb, kind="cancelled", error={"type": "Cancelled"}, at=6.0))]) == [
        True, True]
    assert [(o.step_id, o.fallback, o.kind, o.error, o.output)
            for o in await store.outcomes(run_id)] == [
        ("a", False, "error", error, None), ("b", True, "cancelled", {"type": "Cancelled"},
                                             None)]


async def test_an_outcome_carries_its_attempts_log_records(store: Store,
                                                            driver: Driver) -> None:
    run_id = await driver.run()
    await driver.start(run_id, "a")
    await driver.start(run_id, "b")
    la, lb = sorted(await store.claim_attempts("w1", 2, LEASE), key=lambda x: x.step_id)
    logs = ({"level": "INFO", "message": "fetched 'é' \u2603", "attempt": 1, "at": 5.5},
            {"level": "WARNING", "message": "slow", "attempt": 1, "at": 5.75},
            # the notes of the attempt, as workers send them (runtime.claims)
            {"log": {"level": "INFO", "message": "x", "attempt": 1, "at": 6.0}},
            {"usage": {"attempt": 1, "model": "m", "prompt_tokens": 7}},
            {"emit": {"value": {"part": [1, None, "é"]}, "attempt": 1, "at": 6.5}})
    assert await store.complete_attempts("w1", [(la.token, ok(la, 1, logs=logs)),
                                                (lb.token, ok(lb, 2))]) == [True, True]
    assert [(o.step_id, o.logs) for o in await store.outcomes(run_id)] == [
        ("a", logs), ("b", ())]


async def test_a_bad_outcome_refuses_the_whole_completion(store: Store,
                                                          driver: Driver) -> None:
    run_id = await driver.run()
    await driver.start(run_id, "a")
    await driver.start(run_id, "b")
    la, lb = sorted(await store.claim_attempts("w1", 2, LEASE), key=lambda x: x.step_id)
    with pytest.raises(StoreError, match="kind"):
        await store.complete_attempts("w1", [(la.token, ok(la, 1)),
                                             (lb.token, ok(lb, kind="exploded"))])
    with pytest.raises(StoreError, match="not JSON"):
        await store.complete_attempts("w1", [(la.token, ok(la, 1)),
                                             (lb.token, ok(lb, {"x": object()}))])
    with pytest.raises(StoreError, match="its logs"):
        await store.complete_attempts("w1", [(la.token, ok(la, 1)), (lb.token, ok(
            lb, 2, logs=({"level": "INFO", "message": object()},)))])
    assert await store.outcomes(run_id) == []  # nothing of either call was stored
    assert await store.extend_leases("w1", [la.token, lb.token], LEASE) == {la.token,
                                                                             lb.token}


@pytest.mark.parametrize("bad", [{"n": float("nan")}, {"b": b"\xff"}],
                         ids=["nan", "bytes"])
async def test_a_completion_refused_for_a_value_is_split(store: Store, driver: Driver,
                                                         bad: Any) -> None:
    """A value no store can hold refuses the whole completion (UnstorableValue, nothing
    stored); split (``complete_split``), the refused outcome alone is stored as its
    attempt's failure, never retried, naming why, and the others as they were."""
    run_id = await driver.run()
    for step in "abc":
        await driver.start(run_id, step)
    la, lb, lc = sorted(await store.claim_attempts("w1", 3, LEASE), key=lambda x: x.step_id)
    results = [(la.token, ok(la, 1)), (lb.token, ok(lb, bad)), (lc.token, ok(lc, 3))]
    with pytest.raises(UnstorableValue):
        await store.complete_attempts("w1", results)
    assert await store.outcomes(run_id) == []
    assert await complete_split(store, "w1", results) == [True, True, True]
    oa, ob, oc = await store.outcomes(run_id)
    assert [(o.step_id, o.kind, o.output) for o in (oa, oc)] == [("a", "ok", 1),
                                                                  ("c", "ok", 3)]
    assert (ob.step_id, ob.kind, ob.output) == ("b", "error", None)
    assert ob.error is not None and ob.error["type"] == "UnstorableOutcome"
    assert ob.error["retryable"] is False
    assert str(ob.error["message"]).startswith(
        "the outcome of attempt 1 (ok) could not be stored: ")


async def test_a_run_batch_refused_for_a_value_is_stored_cleaned(store: Store,
                                                                 driver: Driver) -> None:
    run_id = await driver.run()
    now = time.time()
    batch = WriteBatch(run_id, steps=[
        change("a", S.PENDING, S.QUEUED, now),
        change("a", S.QUEUED, S.RUNNING, now, attempts=1, started_at=now),
        change("a", S.RUNNING, S.COMPLETED, now, attempts=1,
               output={"x": float("inf"), "ok": "é"})],
        notes=[("a", {"usage": {"tokens": float("nan")}})])
    with pytest.raises(UnstorableValue) as refused:
        await store.write(batch)
    assert await step_status(store, run_id, "a") is S.PENDING  # nothing stored
    await store.write(cleaned_batch(batch, refused.value))
    steps = {s.step_id: s for s in await store.get_steps(run_id)}
    assert (steps["a"].status, steps["a"].output) == (S.COMPLETED, {"x": None, "ok": "é"})
    assert await notes(store, run_id, "usage") == [("a", {"tokens": None})]
    [(step, warning)] = await notes(store, run_id, "log")
    assert step is None and warning["level"] == "WARNING"
    assert "stored cleaned: NaN and infinities dropped" in warning["message"]


async def test_unknown_runs_are_named(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.outcomes(uuid.uuid4().hex)
    with pytest.raises(RunNotFound):
        await store.tickets(uuid.uuid4().hex)
    ghost = InboxOutcome(run_id=uuid.uuid4().hex, step_id="a", attempt=1, kind="ok", at=1.0)
    assert await store.complete_attempts("w1", [(uuid.uuid4().hex, ghost)]) == [False]


# ------------------------------------------------------------------ claim order and limits


async def test_claims_follow_priority_then_the_order_tickets_were_stored(
        store: Store, driver: Driver) -> None:
    first, second = await driver.run(("s0", "s1", "s2")), await driver.run(("s3", "s4"))
    for run_id, step, priority in [(first, "s0", 3.0), (first, "s1", 1.0),
                                   (second, "s3", 1.0), (first, "s2", -1.5),
                                   (second, "s4", 2.0)]:
        await driver.start(run_id, step, priority=priority)
    assert await claim_steps(store, "w1", 2) == ["s2", "s1"]
    assert await claim_steps(store, "w2", 10) == ["s3", "s4", "s0"]


async def test_a_claim_never_takes_more_than_its_limit(store: Store, driver: Driver) -> None:
    steps = tuple(f"s{n}" for n in range(7))
    run_id = await driver.run(steps)
    for step in steps:
        await driver.start(run_id, step)
    assert await store.claim_attempts("w1", 0, LEASE) == []
    assert await store.claim_attempts("w1", -3, LEASE) == []
    assert await claim_steps(store, "w1", 3) == ["s0", "s1", "s2"]
    assert await claim_steps(store, "w2", 3) == ["s3", "s4", "s5"]
    assert await claim_steps(store, "w1", 3) == ["s6"]
    assert await store.claim_attempts("w3", 3, LEASE) == []
    assert {t.claimed_by for t in await store.tickets(run_id)} == {"w1", "w2"}


async def test_a_pool_admits_its_limit_across_runs_and_claims(store: Store, driver: Driver,
                                                              uid: UID) -> None:
    pool = uid("pool")
    one, two = await driver.run(("p1", "p2", "free")), await driver.run(("p3", "p4"))
    await driver.start(one, "p1", priority=0.0, pool=pool, pool_limit=2)
    await driver.start(two, "p3", priority=1.0, pool=pool, pool_limit=2)
    await driver.start(one, "p2", priority=2.0, pool=pool, pool_limit=2)
    await driver.start(one, "free", priority=9.0)
    leases = {lease.step_id: lease for lease in await store.claim_attempts("w1", 10, LEASE)}
    assert sorted(leases) == ["free", "p1", "p3"]  # p2 waits: two of its pool are held
    assert await store.claim_attempts("w2", 10, LEASE) == []
    p1 = leases["p1"]
    assert await store.complete_attempts("w1", [(p1.token, ok(p1, 1))]) == [True]
    assert await claim_steps(store, "w2", 10) == ["p2"]  # the completion freed a slot
    await driver.start(two, "p4", priority=-5.0, pool=pool, pool_limit=2)
    assert await store.claim_attempts("w2", 10, LEASE) == []  # full again: p3 and p2
    await store.write(WriteBatch(two, steps=[change("p3", S.RUNNING, S.CANCELLED, 1.0)],
                                 withdrawn=[("p3", 1, False)]))
    assert await claim_steps(store, "w3", 10) == ["p4"]  # the withdrawal freed one


async def test_a_pool_without_a_limit_admits_everything(store: Store, driver: Driver,
                                                        uid: UID) -> None:
    run_id = await driver.run()
    for step in STEPS:
        await driver.start(run_id, step, pool=uid("open"))
    assert len(await store.claim_attempts("w1", 10, LEASE)) == len(STEPS)


# ------------------------------------------------------------------ concurrent claimers


async def _claim_until_empty(store: Store, worker: str) -> list[Lease]:
    got: list[Lease] = []
    for _ in range(100):  # bounded: a store that hands tickets out twice never empties
        leases = await store.claim_attempts(worker, 3, LEASE)
        if not leases:
            return got
        got += leases
        await asyncio.sleep(0)
    raise AssertionError(f"{worker} claimed {len(got)} tickets and the store still had more")


def _assert_each_held_once(results: list[list[Lease]], expected: int) -> None:
    keys = [(lease.run_id, key_of(lease)) for got in results for lease in got]
    tokens = [lease.token for got in results for lease in got]
    assert len(keys) == len(set(keys)) == expected  # none twice, all taken
    assert len(set(tokens)) == expected
    assert sum(1 for got in results if got) > 1  # they did claim concurrently


async def _tickets_of(driver: Driver, runs: int, per_run: int) -> list[str]:
    steps = tuple(f"s{n}" for n in range(per_run))
    made = []
    for _ in range(runs):
        run_id = await driver.run(steps)
        await driver.store.write(WriteBatch(run_id, dispatch=[
            Ticket(run_id=run_id, step_id=step, attempt=1, priority=float(n % 5))
            for n, step in enumerate(steps)], steps=[
            c for step in steps for c in (change(step, S.PENDING, S.QUEUED, 1.0),
                                          change(step, S.QUEUED, S.RUNNING, 1.0,
                                                 attempts=1))]))
        made.append(run_id)
    return made


async def test_sixteen_concurrent_claimers_never_share_a_ticket(store: Store,
                                                                driver: Driver) -> None:
    runs = await _tickets_of(driver, 3, 20)
    results = await asyncio.gather(*(_claim_until_empty(store, f"w{n}")
                                     for n in range(16)))
    _assert_each_held_once(results, 60)
    holder = {(lease.run_id, lease.step_id): f"w{n}"
              for n, got in enumerate(results) for lease in got}
    for run_id in runs:
        for t in await store.tickets(run_id):
            assert t.claimed_by == holder[(run_id, t.ticket.step_id)]


PRIVATE_URL = "memory://"  # anonymous memory:// is private to its object: no other handle


async def _sharing(store: Store, n: int, run_id: str) -> list[Store]:
    """``n`` more stores opened on ``store``'s URL, each seeing its data (none for an
    anonymous memory://, a store of its own).  A backend whose second instance does not
    see the run fails here, rather than leaving a test to claim through one instance."""
    if store.url == PRIVATE_URL:
        return []
    found: list[Store] = []
    try:
        for _ in range(n):
            other = open_store(store.url)
            await other.open()
            found.append(other)
            await other.get_run(run_id)
    except RunNotFound:
        for other in found:
            await other.close()
        raise AssertionError(f"a second store on {store.url} does not see run {run_id}")
    return found


# an anonymous memory:// store has no second instance
@pytest.mark.parametrize("store", backend_params("sqlite", "postgresql"), indirect=True)
async def test_claimers_on_separate_store_instances_never_share_a_ticket(
        store: Store, driver: Driver) -> None:
    runs = await _tickets_of(driver, 2, 24)
    others = await _sharing(store, 3, runs[0])
    try:
        stores = [store, *others]
        results = await asyncio.gather(*(_claim_until_empty(stores[n % len(stores)],
                                                            f"w{n}")
                                         for n in range(16)))
        _assert_each_held_once(results, 48)
        assert any(got for n, got in enumerate(results) if n % len(stores))  # via others
    finally:
        for other in others:
            await other.close()


async def test_concurrent_claimers_respect_a_pool(store: Store, driver: Driver,
                                                  uid: UID) -> None:
    pool = uid("pool")
    steps = tuple(f"s{n}" for n in range(12))
    run_id = await driver.run(steps)
    for step in steps:
        await driver.start(run_id, step, pool=pool, pool_limit=3)
    results = await asyncio.gather(*(store.claim_attempts(f"w{n}", 2, LEASE)
                                     for n in range(16)))
    held = [lease for got in results for lease in got]
    assert len(held) == 3  # never more than the pool's limit at once
    assert len({key_of(lease) for lease in held}) == 3


# ------------------------------------------------------------------ fencing


async def test_a_stale_tokens_completion_is_discarded_and_noted(store: Store,
                                                                driver: Driver) -> None:
    run_id = await driver.run()
    await driver.start(run_id, "a")
    [old] = await store.claim_attempts("w-slow", 1, SHORT)
    await asyncio.sleep(PAST_SHORT)
    reaped = [r for r in await store.reap_expired() if r[0] == run_id]
    assert reaped == [(run_id, "a", 1)]
    # the driver applies the interrupted attempt: a retry, dispatched in the same batch
    [interrupted] = await store.outcomes(run_id)
    assert interrupted.kind == "interrupted"
    await driver.start(run_id, "a", 2, consumed=[interrupted.key])
    [fresh] = await store.claim_attempts("w-fast", 1, LEASE)
    assert (fresh.attempt, fresh.token != old.token) == (2, True)

    assert await store.complete_attempts("w-slow", [(old.token, ok(old, "late"))]) == [False]
    assert await store.outcomes(run_id) == []  # the late result stored nothing
    assert await notes(store, run_id, "late_result_discarded") == [
        ("a", {"step": "a", "attempt": 1, "fallback": False, "worker": "w-slow"})]
    assert await store.complete_attempts("w-fast", [(fresh.token, ok(fresh, "fresh"))]) == [
        True]
    [stood] = await store.outcomes(run_id)
    assert (stood.attempt, stood.output, stood.worker) == (2, "fresh", "w-fast")


async def test_attempt_n_cannot_complete_attempt_n_plus_one(store: Store,
                                                            driver: Driver) -> None:
    run_id = await driver.run()
    await driver.start(run_id, "a")
    [first] = await store.claim_attempts("w1", 1, LEASE)
    # the driver gives up on attempt 1 (a timeout) and starts attempt 2 in one batch
    await driver.start(run_id, "a", 2, withdrawn=[key_of(first)])
    [second] = await store.claim_attempts("w1", 1, LEASE)  # the same worker, again
    assert second.attempt == 2 and second.token != first.token
    as_second = InboxOutcome(run_id=run_id, step_id="a", attempt=2, kind="ok", output="forged",
                        at=1.0)
    assert await store.complete_attempts("w1", [
        (first.token, as_second),           # attempt 1's token on attempt 2
        (first.token, ok(first, "late")),   # attempt 1, withdrawn
        (second.token, ok(first, "mixed")),  # attempt 2's token on attempt 1
    ]) == [False, False, False]
    assert await store.outcomes(run_id) == []
    assert await store.extend_leases("w1", [first.token, second.token], LEASE) == {
        second.token}
    assert [data["attempt"] for _, data in await notes(store, run_id,
                                                        "late_result_discarded")] == [2, 1, 1]
    assert await store.complete_attempts("w2", [(second.token, ok(second, 2))]) == [False]
    assert await store.complete_attempts("w1", [(second.token, ok(second, 2))]) == [True]
    assert [(o.attempt, o.output) for o in await store.outcomes(run_id)] == [(2, 2)]


async def test_a_withdrawn_ticket_loses_its_lease(store: Store, driver: Driver) -> None:
    run_id = await driver.run()
    await driver.start(run_id, "a")
    await driver.start(run_id, "b")
    la, lb = sorted(await store.claim_attempts("w1", 2, LEASE), key=lambda x: x.step_id)
    await driver.start(run_id, "c")
    await store.write(WriteBatch(run_id, steps=[
        change("a", S.RUNNING, S.CANCELLED, 1.0), change("c", S.RUNNING, S.CANCELLED, 1.0)],
        withdrawn=[key_of(la), ("c", 1, False), ("nope", 7, False)]))  # absent: ignored
    assert await store.extend_leases("w1", [la.token, lb.token], LEASE) == {lb.token}
    assert await store.claim_attempts("w2", 10, LEASE) == []  # c is gone, unclaimed
    assert await store.complete_attempts("w1", [(la.token, ok(la, 1)),
                                                (lb.token, ok(lb, 2))]) == [False, True]
    assert [o.step_id for o in await store.outcomes(run_id)] == ["b"]
    assert [step for step, _ in await notes(store, run_id, "late_result_discarded")] == ["a"]


async def test_extend_leases_keeps_only_the_workers_own(store: Store, driver: Driver) -> None:
    run_id = await driver.run()
    await driver.start(run_id, "a")
    [lease] = await store.claim_attempts("w1", 1, SHORT)
    before = time.time()
    assert await store.extend_leases("w1", [lease.token, uuid.uuid4().hex], LEASE) == {
        lease.token}
    assert await store.extend_leases("w2", [lease.token], LEASE) == set()  # not its lease
    assert await store.extend_leases("w1", [], LEASE) == set()
    [held] = await store.tickets(run_id)
    assert held.expires_at is not None and held.expires_at >= before + LEASE - SLACK
    await driver.start(run_id, "b")
    [lapsing] = await store.claim_attempts("w1", 1, SHORT)
    await asyncio.sleep(PAST_SHORT)  # past both first leases: a's was extended
    # b's lease ran out, but no reaper took it yet: still held, and extended
    assert await store.extend_leases("w1", [lapsing.token], LEASE) == {lapsing.token}
    assert [r for r in await store.reap_expired() if r[0] == run_id] == []
    assert await store.complete_attempts("w1", [(lease.token, ok(lease, 1)),
                                                (lapsing.token, ok(lapsing, 2))]) == [
        True, True]


# ------------------------------------------------------------------ reaping


async def test_eight_reapers_reap_an_expired_lease_once(store: Store, driver: Driver,
                                                        uid: UID) -> None:
    pool = uid("pool")
    run_id = await driver.run()
    await driver.start(run_id, "a", pool=pool, pool_limit=1)
    [gone] = await store.claim_attempts("w-gone", 1, SHORT)
    await driver.start(run_id, "b")
    [live] = await store.claim_attempts("w-live", 1, LEASE)
    await driver.start(run_id, "c", pool=pool, pool_limit=1)  # waits for a's slot
    await driver.start(run_id, "d", priority=50.0)  # unclaimed: never expires
    await asyncio.sleep(PAST_SHORT)
    results = await asyncio.gather(*(store.reap_expired() for _ in range(8)))
    mine = [r for got in results for r in got if r[0] == run_id]
    assert mine == [(run_id, "a", 1)]
    [out] = await store.outcomes(run_id)
    assert (out.step_id, out.attempt, out.kind, out.worker, out.output) == (
        "a", 1, "interrupted", "w-gone", None)
    assert out.error is not None
    assert (out.error["type"], out.error["retryable"]) == ("LeaseExpired", True)
    assert "the worker w-gone stopped heartbeating" in out.error["message"]
    assert {t.ticket.step_id: t.claimed_by for t in await store.tickets(run_id)} == {
        "b": "w-live", "c": None, "d": None}
    assert await store.extend_leases("w-gone", [gone.token], LEASE) == set()
    assert await store.complete_attempts("w-gone", [(gone.token, ok(gone, 1))]) == [False]
    assert [o.kind for o in await store.outcomes(run_id)] == ["interrupted"]
    assert await claim_steps(store, "w2", 1) == ["c"]  # the reaped lease freed its slot
    assert live.token in await store.extend_leases("w-live", [live.token], LEASE)


async def test_reap_takes_at_most_its_limit(store: Store, driver: Driver) -> None:
    run_id = await driver.run()
    for step in ("a", "b", "c"):
        await driver.start(run_id, step)
    await store.claim_attempts("w1", 3, SHORT)
    await asyncio.sleep(PAST_SHORT)
    first = await store.reap_expired(limit=2)
    rest = await store.reap_expired(limit=2)
    assert (len(first), len(rest)) == (2, 1)
    assert sorted(step for _, step, _ in first + rest) == ["a", "b", "c"]
    assert await store.reap_expired(limit=0) == []
    assert len(await store.outcomes(run_id)) == 3


# ------------------------------------------------------------------ the driver's batches


async def test_an_outcome_is_consumed_once(store: Store, driver: Driver) -> None:
    run_id = await driver.run()
    await driver.start(run_id, "a")
    [lease] = await store.claim_attempts("w1", 1, LEASE)
    await store.complete_attempts("w1", [(lease.token, ok(lease, 1))])
    await driver.finish(run_id, "a", key_of(lease))
    events = len(await store.get_events(run_id))
    with pytest.raises(StaleWriteError):  # a second driver applying the same outcome
        await store.write(WriteBatch(run_id, steps=[change("b", S.PENDING, S.QUEUED, 1.0)],
                                     consumed=[key_of(lease)]))
    with pytest.raises(StaleWriteError):  # one that never was in the inbox
        await store.write(WriteBatch(run_id, steps=[change("b", S.PENDING, S.QUEUED, 1.0)],
                                     consumed=[("b", 1, False)]))
    assert await step_status(store, run_id, "b") is S.PENDING  # nothing stored
    assert len(await store.get_events(run_id)) == events


async def test_two_drivers_applying_one_outcome_have_one_winner(store: Store,
                                                               driver: Driver) -> None:
    run_id = await driver.run()
    await driver.start(run_id, "a")
    [lease] = await store.claim_attempts("w1", 1, LEASE)
    await store.complete_attempts("w1", [(lease.token, ok(lease, 1))])
    results = await asyncio.gather(*(store.write(WriteBatch(
        run_id, steps=[change(step, S.PENDING, S.QUEUED, 1.0)], consumed=[key_of(lease)]))
        for step in ("b", "c")), return_exceptions=True)
    assert sum(r is None for r in results) == 1
    assert sum(isinstance(r, StaleWriteError) for r in results) == 1
    moved = [s for s in ("b", "c") if await step_status(store, run_id, s) is S.QUEUED]
    assert len(moved) == 1
    assert await store.outcomes(run_id) == []


async def test_a_duplicate_dispatch_is_refused(store: Store, driver: Driver) -> None:
    run_id = await driver.run()
    ticket = await driver.start(run_id, "a")
    queue_b = [change("b", S.PENDING, S.QUEUED, 1.0)]
    with pytest.raises(StaleWriteError):
        await store.write(WriteBatch(run_id, steps=queue_b, dispatch=[ticket]))
    twice = Ticket(run_id=run_id, step_id="c", attempt=1)
    with pytest.raises(StaleWriteError):
        await store.write(WriteBatch(run_id, steps=queue_b, dispatch=[twice, twice]))
    [lease] = await store.claim_attempts("w1", 1, LEASE)
    await store.complete_attempts("w1", [(lease.token, ok(lease, 1))])
    with pytest.raises(StaleWriteError):  # its outcome waits in the inbox
        await store.write(WriteBatch(run_id, steps=queue_b, dispatch=[ticket]))
    assert await step_status(store, run_id, "b") is S.PENDING
    assert await store.tickets(run_id) == []
    assert len(await store.outcomes(run_id)) == 1


async def test_a_key_listed_twice_in_a_large_batch_is_refused(store: Store,
                                                              driver: Driver) -> None:
    """A batch that dispatches thousands of tickets (a wide fan-out) is checked for a
    key listed twice as a small one is, and an outcome consumed twice is refused."""
    many = [f"s{i}" for i in range(3000)]
    run_id = await driver.run(many)
    tickets = [Ticket(run_id=run_id, step_id=s, attempt=1) for s in many]
    with pytest.raises(StaleWriteError):
        await store.write(WriteBatch(run_id, dispatch=[*tickets, tickets[1234]]))
    assert await store.tickets(run_id) == []
    await store.write(WriteBatch(run_id, dispatch=tickets))
    assert len(await store.tickets(run_id)) == 3000
    leases = await store.claim_attempts("w1", 2, LEASE)
    await store.complete_attempts("w1", [(lease.token, ok(lease, 1)) for lease in leases])
    first, second = (key_of(lease) for lease in leases)
    with pytest.raises(StaleWriteError):
        await store.write(WriteBatch(run_id, consumed=[first, second, first]))
    assert len(await store.outcomes(run_id)) == 2
    await store.write(WriteBatch(run_id, consumed=[first, second]))
    assert await store.outcomes(run_id) == []


async def test_a_ticket_must_name_the_batchs_run_and_one_of_its_steps(
        store: Store, driver: Driver) -> None:
    run_id, other = await driver.run(), await driver.run()
    with pytest.raises(StoreError, match="one run"):
        await store.write(WriteBatch(run_id, dispatch=[Ticket(run_id=other, step_id="a",
                                                              attempt=1)]))
    with pytest.raises(StoreError, match="no step 'zz'"):
        await store.write(WriteBatch(run_id, dispatch=[Ticket(run_id=run_id, step_id="zz",
                                                              attempt=1)]))
    with pytest.raises(StoreError, match="not JSON"):
        await store.write(WriteBatch(run_id, dispatch=[Ticket(
            run_id=run_id, step_id="a", attempt=1, payload={"f": object()})]))
    assert await store.tickets(run_id) == [] and await store.tickets(other) == []


# ------------------------------------------------------------------ runs to drive


async def test_runs_to_drive_are_the_unowned_and_the_stale(store: Store,
                                                           driver: Driver) -> None:
    now = time.time()
    fresh = await driver.run(start=False)  # pending, never claimed
    live_pending = await driver.run(start=False)
    await store.claim_run(live_pending, "host:live", now, LEASE)
    stale_pending = await driver.run(start=False)
    await store.claim_run(stale_pending, "host:gone", now - 100, LEASE)
    stale_running = await driver.run()
    await store.claim_run(stale_running, "host:gone", now - 100, LEASE)
    live_running = await driver.run()
    await store.claim_run(live_running, "host:live", now, LEASE)
    released = await driver.run()  # its driver stopped and let it go
    await store.claim_run(released, "host:drained", now, LEASE)
    await store.release_run(released, "host:drained")
    finished = await driver.run()
    await store.claim_run(finished, "host:gone", now - 100, LEASE)
    await store.write(WriteBatch(finished, run=RunChange(
        source=R.RUNNING, target=R.COMPLETED, at=now)))

    expected = [fresh, stale_pending, stale_running, released]  # oldest first
    assert await store.runs_to_drive(LEASE, 4) == expected
    assert await store.runs_to_drive(LEASE, 2) == expected[:2]
    assert await store.runs_to_drive(LEASE, 0) == []
    # a longer lease makes the stale owners live again
    assert [r for r in await store.runs_to_drive(1_000.0, 1_000) if r in driver.runs] == [
        fresh, released]
    taken = await store.claim_run(stale_running, "host:new", time.time(), LEASE)
    assert taken is not None
    assert stale_running not in await store.runs_to_drive(LEASE, 1_000)


async def _waiting(store: Store, driver: Driver, wake_at: float | None,
                   owner: str | None = None, seen: float | None = None) -> str:
    """A run stored ``waiting`` until ``wake_at``, held by ``owner`` (heartbeat
    ``seen``) or by nobody."""
    run_id = await driver.run()
    await store.write(WriteBatch(run_id, run=RunChange(
        source=R.RUNNING, target=R.WAITING, at=time.time(), wake_at=wake_at)))
    if owner is not None:
        await store.claim_run(run_id, owner, seen if seen is not None else time.time(),
                              LEASE)
    return run_id


async def test_runs_to_drive_lists_waiting_runs_whose_time_has_come(
        store: Store, driver: Driver) -> None:
    now = time.time()
    due = await _waiting(store, driver, now - 5)
    later = await _waiting(store, driver, now + 3_600)
    untimed = await _waiting(store, driver, None)  # waits for a person or an event
    held = await _waiting(store, driver, now - 5, owner="host:live")
    stale = await _waiting(store, driver, now - 5, owner="host:gone", seen=now - 100)

    listed = [r for r in await store.runs_to_drive(LEASE, 1_000) if r in driver.runs]
    assert listed == [due, stale]
    assert later not in listed and untimed not in listed and held not in listed


async def test_a_run_stores_its_wake_at_while_it_waits_and_drops_it_when_it_moves(
        store: Store, driver: Driver) -> None:
    at = time.time() + 60
    run_id = await _waiting(store, driver, at)
    assert (await store.get_run(run_id)).wake_at == pytest.approx(at)
    assert [r.wake_at for r in await store.list_runs(RunFilter(status=R.WAITING,
                                                               limit=1_000))
            if r.run_id == run_id] == [pytest.approx(at)]
    claimed = await store.claim_run(run_id, "host:next", time.time(), LEASE)
    assert claimed is not None and claimed.wake_at == pytest.approx(at)
    await store.write(WriteBatch(run_id, run=RunChange(
        source=R.WAITING, target=R.RUNNING, at=time.time())))
    assert (await store.get_run(run_id)).wake_at is None
    assert run_id not in await store.runs_to_drive(LEASE, 1_000)  # held, and running
    await store.write(WriteBatch(run_id, run=RunChange(
        source=R.RUNNING, target=R.WAITING, at=time.time(), wake_at=at + 1)))
    assert (await store.get_run(run_id)).wake_at == pytest.approx(at + 1)
    await store.write(WriteBatch(run_id, run=RunChange(
        source=R.WAITING, target=R.CANCELLED, at=time.time())))
    assert (await store.get_run(run_id)).wake_at is None
