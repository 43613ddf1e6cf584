"""runtime.breakers: a circuit breaker's state, one per key where it is judged (the
store, when processes share it; the event loop otherwise), and what an attempt tells it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plait.core.model import CircuitBreakerSpec, JSONDict
from plait.errors import StoreError
from plait.runtime.breakers import LocalBreakers, StoreBreakers, breakers_for
from plait.store import open_store
from plait.store.base import Store
from plait.store.memory import MemoryStore

PAYMENTS = CircuitBreakerSpec(key="payments", failure_threshold=3, reset_after=10.0)


@pytest.fixture(params=["memory", "sqlite"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[
        tuple[Store, Store]]:
    """Two drivers' stores: one memory store shared, or two SQLite stores on one file."""
    if request.param == "memory":
        one = open_store("memory://")
        await one.open()
        yield one, one
        await one.close()
        return
    url = f"sqlite:///{tmp_path}/x.db"
    one, two = open_store(url), open_store(url)
    await one.open()
    await two.open()
    yield one, two
    await two.close()
    await one.close()


async def test_failures_through_one_driver_open_the_breaker_for_the_other(
        stores: tuple[Store, Store]) -> None:
    a, b = StoreBreakers(stores[0]), StoreBreakers(stores[1])
    for t in (1.0, 2.0):
        assert await b.allow(PAYMENTS, t, "b")
        await a.record_failure(PAYMENTS, t)
    assert await b.allow(PAYMENTS, 2.5, "b")
    await a.record_failure(PAYMENTS, 3.0)
    assert (await b.state(PAYMENTS)).state == "open"
    assert not await b.allow(PAYMENTS, 4.0, "b")
    assert not await a.allow(PAYMENTS, 12.9, "a")
    # after reset_after one trial goes through, to one driver only
    assert sorted(await asyncio.gather(a.allow(PAYMENTS, 13.0, "a"),
                                       b.allow(PAYMENTS, 13.0, "b"))) == [False, True]
    await b.record_success(PAYMENTS)  # the trial succeeded: closed for both
    assert (await a.state(PAYMENTS)).state == "closed"
    assert await a.allow(PAYMENTS, 14.0, "a")


async def test_a_failed_trial_reopens_it_for_every_driver(
        stores: tuple[Store, Store]) -> None:
    a, b = StoreBreakers(stores[0]), StoreBreakers(stores[1])
    for t in (1.0, 2.0, 3.0):
        await a.record_failure(PAYMENTS, t)
    assert await b.allow(PAYMENTS, 13.0, "b")  # b takes the trial
    await b.record_failure(PAYMENTS, 13.5)
    assert not await a.allow(PAYMENTS, 20.0, "a")  # reopened at 13.5: a trial only from 23.5
    assert await a.allow(PAYMENTS, 23.5, "a")


async def test_a_trial_whose_driver_went_silent_is_let_go_for_another(
        stores: tuple[Store, Store]) -> None:
    a, b = StoreBreakers(stores[0]), StoreBreakers(stores[1])
    for t in (1.0, 2.0, 3.0):
        await a.record_failure(PAYMENTS, t)
    assert await a.allow(PAYMENTS, 13.0, "a")  # a takes the trial, then never reports
    assert not await b.allow(PAYMENTS, 22.9, "b")
    assert await b.allow(PAYMENTS, 23.0, "b")  # its lease ran out: b takes a trial
    await b.record_success(PAYMENTS)
    assert (await a.state(PAYMENTS)).state == "closed"


async def test_a_released_trial_is_taken_by_the_other_driver_at_once(
        stores: tuple[Store, Store]) -> None:
    a, b = StoreBreakers(stores[0]), StoreBreakers(stores[1])
    for t in (1.0, 2.0, 3.0):
        await a.record_failure(PAYMENTS, t)
    assert await a.allow(PAYMENTS, 13.0, "a")
    await b.release(PAYMENTS, "a")  # any driver may tell it: the holder is named
    assert await b.allow(PAYMENTS, 13.1, "b")
    await b.release(PAYMENTS, "a")  # a's lease is gone: b's trial is left alone
    assert not await a.allow(PAYMENTS, 13.2, "a")


async def test_concurrent_failures_from_two_drivers_are_all_counted(
        stores: tuple[Store, Store]) -> None:
    spec = CircuitBreakerSpec(key="many", failure_threshold=100, reset_after=10.0)
    a, b = StoreBreakers(stores[0]), StoreBreakers(stores[1])
    await asyncio.gather(*(d.record_failure(spec, 1.0) for _ in range(10) for d in (a, b)))
    assert (await a.state(spec)).failures == 20


async def test_calls_that_change_nothing_write_nothing() -> None:
    store = open_store("memory://")
    await store.open()
    shared = StoreBreakers(store)
    assert await shared.allow(PAYMENTS, 1.0, "x")
    await shared.record_success(PAYMENTS)
    await shared.release(PAYMENTS, "x")
    assert await store.get_breaker(PAYMENTS.key) == (None, 0)
    await shared.record_failure(PAYMENTS, 2.0)
    assert (await store.get_breaker(PAYMENTS.key))[1] == 1


class _AlwaysOutraced(MemoryStore):
    """A store where another driver always wrote first."""

    async def put_breaker(self, key: str, state: JSONDict, version: int) -> bool:
        return False


async def test_giving_up_after_its_tries_names_the_breaker() -> None:
    store = _AlwaysOutraced()
    await store.open()
    shared = StoreBreakers(store, tries=3)
    with pytest.raises(StoreError, match="circuit breaker 'payments'.*3 read-and-update"):
        await shared.record_failure(PAYMENTS, 1.0)


async def test_settling_an_attempt_the_store_cannot_take_is_logged_not_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    store = _AlwaysOutraced()
    await store.open()
    with caplog.at_level("WARNING", logger="plait.breakers"):
        await StoreBreakers(store, tries=2).settle(PAYMENTS, "r/s#1", "error", False, 1.0)
    assert "circuit breaker 'payments'" in caplog.text and "r/s#1" in caplog.text


@pytest.mark.parametrize(("kind", "waits", "after"), [
    ("ok", False, "closed"),  # a successful trial closes it
    ("error", False, "open"),  # a failed one opens it again
    ("cancelled", False, "open"),  # a cancelled one lets its trial go
    ("error", True, "open"),  # so does one parked to wait for approval
])
async def test_settle_tells_the_breaker_how_its_trial_ended(
        kind: str, waits: bool, after: str) -> None:
    local = LocalBreakers()
    await local.record_failure(PAYMENTS, 0.0)
    await local.record_failure(PAYMENTS, 0.0)
    await local.record_failure(PAYMENTS, 0.0)
    assert await local.allow(PAYMENTS, 10.0, "r/s#1")
    await local.settle(PAYMENTS, "r/s#1", kind, waits, 10.5)
    state = await local.state(PAYMENTS)
    assert (state.state, state.holder) == (after, None)
    # a new trial at once after a cancel or a park; after a failure, reset_after later
    assert await local.allow(PAYMENTS, 10.6, "r/s#2") is (kind != "error" or waits)


async def test_a_store_other_processes_share_keeps_the_breakers(tmp_path: Path) -> None:
    """The choice is the store's declared capability: SQLite's file is shared, so its
    breakers are in it; a memory store's are the event loop's, whichever store."""
    sqlite, memory, other = (open_store(f"sqlite:///{tmp_path}/y.db"),
                             open_store("memory://"), open_store("memory://"))
    for store in (sqlite, memory, other):
        await store.open()
    try:
        chosen = breakers_for(sqlite)
        assert isinstance(chosen, StoreBreakers) and chosen is breakers_for(sqlite)
        await chosen.record_failure(PAYMENTS, 1.0)
        assert (await sqlite.get_breaker(PAYMENTS.key))[0] is not None
        local = breakers_for(memory)
        assert isinstance(local, LocalBreakers) and local is breakers_for(other)
        await local.record_failure(PAYMENTS, 1.0)
        assert await memory.get_breaker(PAYMENTS.key) == (None, 0)
        assert (await breakers_for(other).state(PAYMENTS)).failures == 1
    finally:
        for store in (sqlite, memory, other):
            await store.close()
