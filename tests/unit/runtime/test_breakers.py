"""SharedBreaker: a circuit breaker whose state every driver of a store shares."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plait.core.model import CircuitBreakerSpec, JSONDict
from plait.errors import StoreError
from plait.runtime.breakers import SharedBreaker
from plait.store import open_store
from plait.store.base import Store
from plait.store.memory import MemoryStore

SPEC = CircuitBreakerSpec(key="payments", failure_threshold=3, reset_after=10.0)


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
    a, b = SharedBreaker(stores[0], SPEC), SharedBreaker(stores[1], SPEC)
    for t in (1.0, 2.0):
        assert await b.allow(t)
        await a.record(False, t)
    assert await b.allow(2.5)
    await a.record(False, 3.0)
    assert (await b.state()).state == "open"
    assert not await b.allow(4.0)
    assert not await a.allow(12.9)
    # after reset_after one trial goes through, to one driver only
    assert sorted(await asyncio.gather(a.allow(13.0), b.allow(13.0))) == [False, True]
    await b.record(True, 13.5)  # the trial succeeded: closed for both
    assert (await a.state()).state == "closed"
    assert await a.allow(14.0)


async def test_a_failed_trial_reopens_it_for_every_driver(
        stores: tuple[Store, Store]) -> None:
    a, b = SharedBreaker(stores[0], SPEC), SharedBreaker(stores[1], SPEC)
    for t in (1.0, 2.0, 3.0):
        await a.record(False, t)
    assert await b.allow(13.0)  # b takes the trial
    await b.record(False, 13.5)
    assert not await a.allow(20.0)  # reopened at 13.5: closed again only from 23.5
    assert await a.allow(23.5)


async def test_concurrent_failures_from_two_drivers_are_all_counted(
        stores: tuple[Store, Store]) -> None:
    spec = CircuitBreakerSpec(key="many", failure_threshold=100, reset_after=10.0)
    a, b = SharedBreaker(stores[0], spec), SharedBreaker(stores[1], spec)
    await asyncio.gather(*(d.record(False, 1.0) for _ in range(10) for d in (a, b)))
    assert (await a.state()).failures == 20


async def test_calls_that_change_nothing_write_nothing() -> None:
    store = open_store("memory://")
    await store.open()
    shared = SharedBreaker(store, SPEC)
    assert await shared.allow(1.0)
    await shared.record(True, 1.0)
    assert await store.get_breaker(SPEC.key) == (None, 0)
    await shared.record(False, 2.0)
    assert (await store.get_breaker(SPEC.key))[1] == 1


class _AlwaysOutraced(MemoryStore):
    """A store where another driver always wrote first."""

    async def put_breaker(self, key: str, state: JSONDict, version: int) -> bool:
        return False


async def test_giving_up_after_its_tries_names_the_breaker() -> None:
    store = _AlwaysOutraced()
    await store.open()
    shared = SharedBreaker(store, SPEC, tries=3)
    with pytest.raises(StoreError, match="circuit breaker 'payments'.*3 read-and-update"):
        await shared.record(False, 1.0)
