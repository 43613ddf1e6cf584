"""Events sent to a run by name (``Store.event_put`` / ``event_get``): the first event
stored for a (run, name) stands, for every store instance on one database; a later
one is refused (EventTaken) and changes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from plait.errors import EventTaken, RunNotFound, StoreError
from plait.store import open_store
from plait.store.base import Signal, Store

from .conftest import backend_params, backend_url, open_backend
from .test_store import new_run, new_run_id

UID = Callable[[str], str]
T0 = 1_700_000_000.0


async def test_get_after_put_returns_the_stored_event(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    data = {"text": "é", "n": [1, 2.5, None], "ok": True}
    stored = await store.event_put(run, "paid", data, T0)
    assert stored == Signal(name="paid", data=data, at=T0)
    assert await store.event_get(run, "paid") == stored


async def test_unknown_names_and_runs_read_as_none(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    await store.event_put(run, "a", 1, T0)
    assert await store.event_get(run, "b") is None
    assert await store.event_get(new_run_id(), "a") is None


async def test_null_data_is_stored_not_absent(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    await store.event_put(run, "go", None, T0)
    assert await store.event_get(run, "go") == Signal(name="go", data=None, at=T0)


async def test_the_first_event_stands_and_a_second_is_refused(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    await store.event_put(run, "paid", "first", T0)
    with pytest.raises(EventTaken) as taken:
        await store.event_put(run, "paid", "second", T0 + 5)
    assert taken.value.sent_at == T0 and "first one sent stands" in str(taken.value)
    assert await store.event_get(run, "paid") == Signal(name="paid", data="first", at=T0)


async def test_concurrent_puts_store_exactly_one(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    got = await asyncio.gather(*(store.event_put(run, "n", i, T0 + i) for i in range(6)),
                               return_exceptions=True)
    stored = [g for g in got if isinstance(g, Signal)]
    assert len(stored) == 1
    assert all(isinstance(g, EventTaken) for g in got if not isinstance(g, Signal))
    assert await store.event_get(run, "n") == stored[0]


async def test_names_are_kept_per_run(store: Store, uid: UID) -> None:
    run, other = await new_run(store, uid), await new_run(store, uid)
    await store.event_put(run, "n", "run", T0)
    await store.event_put(other, "n", "other", T0)
    assert (await store.event_get(run, "n")).data == "run"  # type: ignore[union-attr]
    assert (await store.event_get(other, "n")).data == "other"  # type: ignore[union-attr]


async def test_an_unknown_run_is_refused(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.event_put(new_run_id(), "n", 1, T0)


async def test_data_that_is_not_json_is_refused(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    with pytest.raises(StoreError):
        await store.event_put(run, "n", {"x": object()}, T0)  # type: ignore[dict-item]
    assert await store.event_get(run, "n") is None


async def test_the_stored_data_is_the_callers_own_copy(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    data: dict[str, list[int]] = {"items": [1]}
    stored = await store.event_put(run, "n", data, T0)  # type: ignore[arg-type]
    data["items"].append(2)
    stored.data["items"].append(3)  # type: ignore[index, union-attr]
    got = await store.event_get(run, "n")
    got.data["items"].append(4)  # type: ignore[index, union-attr]
    assert (await store.event_get(run, "n")).data == {"items": [1]}  # type: ignore[union-attr]


# an anonymous memory:// store has no second instance
@pytest.mark.parametrize("backend", backend_params("sqlite", "postgresql"))
async def test_two_store_instances_on_one_database_store_one_event(
        backend, request: pytest.FixtureRequest, tmp_path: Path, uid: UID) -> None:
    url = backend_url(backend, request, tmp_path)
    first = await open_backend(backend, url, open_store)
    second = await open_backend(backend, url, open_store)
    try:
        run = await new_run(first, uid)
        got = await asyncio.gather(first.event_put(run, "n", "one", T0),
                                   second.event_put(run, "n", "two", T0 + 1),
                                   return_exceptions=True)
        stored = [g for g in got if isinstance(g, Signal)]
        assert len(stored) == 1 and sum(isinstance(g, EventTaken) for g in got) == 1
        assert await second.event_get(run, "n") == stored[0]
        assert await first.event_get(run, "n") == stored[0]
    finally:
        await first.close()
        await second.close()
