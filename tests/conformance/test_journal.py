"""The step journal (``Store.journal_get`` / ``journal_step`` / ``journal_put`` /
``journal``): the first value stored for a (run, step, name) wins, for every store
instance on one database; a step's stored results are read in one call; the journal
lists every step's entries in the order they were stored."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from plait.errors import RunNotFound, StoreError
from plait.store import open_store
from plait.store.base import Journaled, JournalEntry, Store

from .conftest import backend_params, backend_url, open_backend
from .test_store import new_run, new_run_id

UID = Callable[[str], str]
T0 = 1_700_000_000.0


async def test_get_after_put_returns_the_stored_value(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    value = {"text": "é", "n": [1, 2.5, None], "ok": True}
    stored = await store.journal_put(run, "a", "call-1", value, 1, T0)
    assert stored == Journaled(value=value, attempt=1, at=T0)
    assert await store.journal_get(run, "a", "call-1") == stored


async def test_unknown_names_steps_and_runs_read_as_none(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    await store.journal_put(run, "a", "x", 1, 1, T0)
    assert await store.journal_get(run, "a", "y") is None
    assert await store.journal_get(run, "b", "x") is None
    assert await store.journal_get(new_run_id(), "a", "x") is None


async def test_a_null_result_is_stored_not_absent(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    await store.journal_put(run, "a", "nothing", None, 1, T0)
    assert await store.journal_get(run, "a", "nothing") == Journaled(value=None,
                                                                     attempt=1, at=T0)


async def test_the_first_stored_value_wins(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    await store.journal_put(run, "a", "call", "first", 1, T0)
    again = await store.journal_put(run, "a", "call", "second", 2, T0 + 5)
    assert again == Journaled(value="first", attempt=1, at=T0)
    assert (await store.journal_get(run, "a", "call")).value == "first"  # type: ignore[union-attr]


async def test_concurrent_puts_store_exactly_one(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    got = await asyncio.gather(*(store.journal_put(run, "a", "n", i, i, T0)
                                 for i in range(1, 7)))
    assert len({g.value for g in got}) == 1
    assert await store.journal_get(run, "a", "n") == got[0]


async def test_names_are_kept_per_run_and_step(store: Store, uid: UID) -> None:
    run, other = await new_run(store, uid), await new_run(store, uid)
    await store.journal_put(run, "a", "n", "run a", 1, T0)
    await store.journal_put(run, "b", "n", "run b", 1, T0)
    await store.journal_put(other, "a", "n", "other a", 1, T0)
    assert [(await store.journal_get(r, s, "n")).value  # type: ignore[union-attr]
            for r, s in ((run, "a"), (run, "b"), (other, "a"))] == \
        ["run a", "run b", "other a"]


async def test_entries_are_listed_in_the_order_stored(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    assert await store.journal(run) == []
    for step, name, attempt in (("b", "z", 1), ("a", "y", 1), ("b", "a", 2)):
        await store.journal_put(run, step, name, {"big": "x" * 100}, attempt, T0 + attempt)
    await store.journal_put(run, "b", "z", "again", 3, T0 + 9)  # not a new entry
    assert await store.journal(run) == [
        JournalEntry(step="b", name="z", attempt=1, at=T0 + 1),
        JournalEntry(step="a", name="y", attempt=1, at=T0 + 1),
        JournalEntry(step="b", name="a", attempt=2, at=T0 + 2)]


async def test_a_steps_results_are_read_together_by_name(store: Store, uid: UID) -> None:
    run, other = await new_run(store, uid), await new_run(store, uid)
    assert await store.journal_step(run, "a") == {}
    await store.journal_put(run, "a", "x", {"n": [1]}, 1, T0)
    await store.journal_put(run, "a", "y", None, 2, T0 + 1)
    await store.journal_put(run, "a", "x", "second", 3, T0 + 2)  # the first stays
    await store.journal_put(run, "b", "x", "step b", 1, T0)
    await store.journal_put(other, "a", "z", "other run", 1, T0)
    assert await store.journal_step(run, "a") == {
        "x": Journaled(value={"n": [1]}, attempt=1, at=T0),
        "y": Journaled(value=None, attempt=2, at=T0 + 1)}
    assert await store.journal_step(run, "c") == {}
    assert await store.journal_step(new_run_id(), "a") == {}


async def test_a_steps_results_are_the_callers_own_copies(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    await store.journal_put(run, "a", "n", {"items": [1]}, 1, T0)
    (await store.journal_step(run, "a"))["n"].value["items"].append(2)  # type: ignore[index, union-attr]
    assert (await store.journal_step(run, "a"))["n"].value == {"items": [1]}


async def test_an_unknown_run_is_refused(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.journal_put(new_run_id(), "a", "n", 1, 1, T0)
    with pytest.raises(RunNotFound):
        await store.journal(new_run_id())


async def test_a_value_that_is_not_json_is_refused(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    with pytest.raises(StoreError):
        await store.journal_put(run, "a", "n", {"x": object()}, 1, T0)  # type: ignore[dict-item]
    assert await store.journal_get(run, "a", "n") is None


async def test_the_stored_value_is_the_callers_own_copy(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    value: dict[str, list[int]] = {"items": [1]}
    stored = await store.journal_put(run, "a", "n", value, 1, T0)  # type: ignore[arg-type]
    value["items"].append(2)
    stored.value["items"].append(3)  # type: ignore[index, union-attr]
    assert (await store.journal_get(run, "a", "n")).value == {"items": [1]}  # type: ignore[union-attr]


# an anonymous memory:// store has no second instance
@pytest.mark.parametrize("backend", backend_params("sqlite", "postgresql"))
async def test_two_store_instances_on_one_database_store_one_value(
        backend, request: pytest.FixtureRequest, tmp_path: Path, uid: UID) -> None:
    url = backend_url(backend, request, tmp_path)
    first = await open_backend(backend, url, open_store)
    second = await open_backend(backend, url, open_store)
    try:
        run = await new_run(first, uid)
        got = await asyncio.gather(first.journal_put(run, "a", "n", "zombie", 1, T0),
                                   second.journal_put(run, "a", "n", "successor", 2, T0))
        assert got[0] == got[1]
        assert await second.journal_get(run, "a", "n") == got[0]
        assert await first.journal_step(run, "a") == {"n": got[0]}
        assert await first.journal(run) == [JournalEntry(
            step="a", name="n", attempt=got[0].attempt, at=T0)]
    finally:
        await first.close()
        await second.close()
