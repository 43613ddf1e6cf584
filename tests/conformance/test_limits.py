"""Limits that hold across every process sharing a store: a pool's rate judged
when its tickets are claimed, and circuit breakers' state kept with a compare-and-set
(``store.base``'s ``claim_attempts``, ``get_breaker`` and ``put_breaker``).

The claims tests share the conventions of ``test_claims.py`` (its ``driver`` fixture
sweeps what other tests left).  Rate windows are judged by the store's clock, so these
tests use short periods and sleep past them in real time; a claim's moment is known
here only between the call and its answer, which is what the checks allow for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest

from plait.core.guards import CircuitBreaker
from plait.core.model import CircuitBreakerSpec
from plait.errors import StoreError
from plait.store import open_store
from plait.store.base import Store, WriteBatch

from .test_claims import LEASE, Driver, _sharing, claim_steps, sweep

UID = Callable[[str], str]
Claim = tuple[float, float, int]  # (called at, answered at, tickets claimed)


@pytest.fixture
async def driver(store: Store, uid: UID) -> AsyncIterator[Driver]:
    """As ``test_claims``'s: other tests' claimable tickets swept, this test's tidied."""
    await sweep(store)
    made = Driver(store, uid("wf"))
    try:
        yield made
    finally:
        await made.tidy()


# ------------------------------------------------------------------ rates


async def test_a_pools_rate_holds_a_ticket_until_its_window_moves(
        store: Store, driver: Driver, uid: UID) -> None:
    pool = uid("rated")
    run_id = await driver.run(("r1", "r2", "r3", "free"))
    for n, step in enumerate(("r1", "r2", "r3")):
        await driver.start(run_id, step, priority=float(n), pool=pool, rate_count=2,
                           rate_period=0.5)
    await driver.start(run_id, "free", priority=9.0)
    first = time.time()
    # two of the pool in its window; the third waits, without holding back the others
    assert await claim_steps(store, "w1", 10) == ["r1", "r2", "free"]
    assert await claim_steps(store, "w2", 10) == []
    stored = {t.ticket.step_id: t.ticket for t in await store.tickets(run_id)}
    assert (stored["r3"].rate_count, stored["r3"].rate_period) == (2, 0.5)
    assert (stored["free"].rate_count, stored["free"].rate_period) == (None, None)
    await asyncio.sleep(max(0.0, first + 0.6 - time.time()))
    assert await claim_steps(store, "w2", 10) == ["r3"]


async def test_a_rate_counts_claims_not_held_tickets(store: Store, driver: Driver,
                                                     uid: UID) -> None:
    """Completing a claimed ticket frees its pool's slot, never its place in the rate
    window: the window counts claims that happened."""
    pool = uid("rated")
    run_id = await driver.run(("a", "b"))
    await driver.start(run_id, "a", pool=pool, pool_limit=5, rate_count=1,
                       rate_period=0.4)
    await driver.start(run_id, "b", pool=pool, pool_limit=5, rate_count=1,
                       rate_period=0.4)
    [held] = await store.claim_attempts("w1", 5, LEASE)
    assert held.step_id == "a"
    await driver.store.write(_withdraw(run_id, held.step_id))
    assert await claim_steps(store, "w1", 5) == []  # a's claim still fills the window
    await asyncio.sleep(0.5)
    assert await claim_steps(store, "w1", 5) == ["b"]


def _withdraw(run_id: str, step: str) -> WriteBatch:
    return WriteBatch(run_id, withdrawn=[(step, 1, False)])


async def _claim_for(store: Store, worker: str, until: float) -> list[Claim]:
    claims: list[Claim] = []
    while time.time() < until:
        called = time.time()
        got = await store.claim_attempts(worker, 2, LEASE)
        claims.append((called, time.time(), len(got)))
        await asyncio.sleep(0.01)
    return claims


def _assert_within_rate(claims: list[Claim], count: int, period: float) -> None:
    """A claim called at or after t and answered before t + period happened inside
    [t, t + period): at most ``count`` of them for every t (each call's start taken
    as t), as the rule allows at most ``count`` in any window of ``period``."""
    taken = [(called, answered, n) for called, answered, n in claims if n]
    for t, _, _ in taken:
        inside = sum(n for called, answered, n in taken
                     if called >= t and answered < t + period)
        assert inside <= count, (t, inside)


async def _rated_tickets(driver: Driver, pool: str, n: int, count: int,
                         period: float) -> str:
    steps = tuple(f"s{i}" for i in range(n))
    run_id = await driver.run(steps)
    for step in steps:
        await driver.start(run_id, step, pool=pool, rate_count=count, rate_period=period)
    return run_id


async def test_concurrent_claimers_never_exceed_a_pools_rate(
        store: Store, driver: Driver, uid: UID) -> None:
    count, period = 3, 0.3
    await _rated_tickets(driver, uid("rated"), 40, count, period)
    until = time.time() + 1.0
    results = await asyncio.gather(*(_claim_for(store, f"w{n}", until) for n in range(8)))
    claims = [c for got in results for c in got]
    total = sum(n for _, _, n in claims)
    _assert_within_rate(claims, count, period)
    assert count * 2 <= total <= count * (int(1.0 / period) + 2)  # the window moved


async def test_claimers_on_separate_connections_never_exceed_a_pools_rate(
        store: Store, driver: Driver, uid: UID) -> None:
    count, period = 2, 0.3
    run_id = await _rated_tickets(driver, uid("rated"), 30, count, period)
    others = await _sharing(store, 3, run_id)
    if not store.url.startswith("memory"):
        assert others, f"{store.url}: a second store on the URL should share its data"
    try:
        stores = [store, *others]
        until = time.time() + 1.0
        results = await asyncio.gather(*(_claim_for(stores[n % len(stores)], f"w{n}",
                                                    until) for n in range(8)))
    finally:
        for other in others:
            await other.close()
    claims = [c for got in results for c in got]
    _assert_within_rate(claims, count, period)
    assert sum(n for _, _, n in claims) >= count * 2


# ------------------------------------------------------------------ breakers


async def test_a_breaker_is_stored_by_compare_and_set(store: Store, uid: UID) -> None:
    key = uid("api")
    assert await store.get_breaker(key) == (None, 0)
    assert not await store.put_breaker(key, {"failures": 1}, 1)  # none stored at 1
    assert await store.get_breaker(key) == (None, 0)
    assert await store.put_breaker(key, {"failures": 1}, 0)
    assert not await store.put_breaker(key, {"failures": 9}, 0)  # another got there first
    assert await store.get_breaker(key) == ({"failures": 1}, 1)
    assert await store.put_breaker(key, {"failures": 2, "opened_at": 5.5}, 1)
    assert not await store.put_breaker(key, {"failures": 7}, 1)  # stale
    state, version = await store.get_breaker(key)
    assert (state, version) == ({"failures": 2, "opened_at": 5.5}, 2)
    assert state is not None
    state["failures"] = 100  # the caller's own copy
    assert await store.get_breaker(key) == ({"failures": 2, "opened_at": 5.5}, 2)
    assert await store.get_breaker(uid("other")) == (None, 0)


async def test_a_breaker_state_that_is_not_json_is_refused(store: Store, uid: UID) -> None:
    key = uid("api")
    with pytest.raises(StoreError, match=key):
        await store.put_breaker(key, {"failures": {1, 2}}, 0)  # type: ignore[dict-item]
    assert await store.get_breaker(key) == (None, 0)


async def _fail_once(store: Store, spec: CircuitBreakerSpec) -> int:
    """Record one failure: read, apply the core's rule, compare-and-set; again on a
    lost race.  Returns the tries it took."""
    for tries in range(1, 1000):
        state, version = await store.get_breaker(spec.key)
        breaker = CircuitBreaker.from_json(spec, state)
        breaker.record_failure(time.time())
        if await store.put_breaker(spec.key, breaker.to_json(), version):
            return tries
        await asyncio.sleep(0)
    raise AssertionError(f"breaker {spec.key!r}: a failure was never recorded")


async def _sharing_breakers(store: Store, n: int, key: str) -> list[Store]:
    """Up to ``n`` more stores on ``store``'s URL that see breaker ``key`` (stored)."""
    found: list[Store] = []
    for _ in range(n):
        other = open_store(store.url)
        await other.open()
        if await other.get_breaker(key) == (None, 0):  # a store of its own (memory://)
            await other.close()
            continue
        found.append(other)
    return found


async def test_concurrent_updaters_count_every_failure_once(store: Store, uid: UID) -> None:
    spec = CircuitBreakerSpec(key=uid("api"), failure_threshold=5, reset_after=60.0)
    assert await store.put_breaker(spec.key, CircuitBreaker(spec).to_json(), 0)
    others = await _sharing_breakers(store, 3, spec.key)
    if not store.url.startswith("memory"):
        assert others, f"{store.url}: a second store on the URL should share its data"
    try:
        stores = [store, *others]
        tries = await asyncio.gather(*(_fail_once(stores[n % len(stores)], spec)
                                       for n in range(8)))
    finally:
        for other in others:
            await other.close()
    state, version = await store.get_breaker(spec.key)
    breaker = CircuitBreaker.from_json(spec, state)
    assert (breaker.failures, version) == (8, 9)  # the first put, then one per failure
    assert breaker.state == "open"
    assert sum(tries) >= 8


async def _take_trial(store: Store, spec: CircuitBreakerSpec, now: float, holder: str) -> bool:
    """Ask for the breaker's trial at ``now`` as ``holder``: read, apply the core's
    rule, compare-and-set (again on a lost race).  Whether it was granted."""
    for _ in range(1000):
        state, version = await store.get_breaker(spec.key)
        breaker = CircuitBreaker.from_json(spec, state)
        if not breaker.allow(now, holder):
            return False
        if await store.put_breaker(spec.key, breaker.to_json(), version):
            return True
        await asyncio.sleep(0)
    raise AssertionError(f"breaker {spec.key!r}: the trial was never decided")


async def test_one_trial_lease_across_stores_and_another_once_it_runs_out(
        store: Store, uid: UID) -> None:
    spec = CircuitBreakerSpec(key=uid("api"), failure_threshold=1, reset_after=30.0)
    opened = CircuitBreaker(spec)
    opened.record_failure(1000.25)
    assert await store.put_breaker(spec.key, opened.to_json(), 0)
    others = await _sharing_breakers(store, 3, spec.key)
    try:
        stores = [store, *others]
        won = await asyncio.gather(*(_take_trial(stores[n % len(stores)], spec, 1030.5,
                                                 f"w{n}/run-é/s#1") for n in range(6)))
    finally:
        for other in others:
            await other.close()
    assert won.count(True) == 1, won
    state, _ = await store.get_breaker(spec.key)
    held = CircuitBreaker.from_json(spec, state)  # the lease, stored exactly
    assert (held.holder, held.trial_until) == (f"w{won.index(True)}/run-é/s#1", 1060.5)
    assert not await _take_trial(store, spec, 1060.4, "late")
    assert await _take_trial(store, spec, 1060.5, "next")  # the lease ran out
