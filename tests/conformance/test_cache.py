"""The step cache (``Store.get_cached`` / ``put_cached``, ``cache: {key, ttl}``):
keyed by workflow, step and rendered key; a reader gets the newest result created at or
after its ``since``; shared by every store instance on the same database."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from plait.errors import StoreError
from plait.store import open_store
from plait.store.base import Store

UID = Callable[[str], str]
T0 = 1_700_000_000.0


async def test_put_then_get_within_the_window(store: Store, uid: UID) -> None:
    wf = uid("wf")
    await store.put_cached(wf, "fetch", "https://a.test", {"n": [1, 2]}, "run-1", T0)

    found = await store.get_cached(wf, "fetch", "https://a.test", T0 - 3600)

    assert found is not None
    assert (found.output, found.run_id, found.created_at) == ({"n": [1, 2]}, "run-1", T0)


async def test_an_entry_older_than_since_is_not_returned(store: Store, uid: UID) -> None:
    wf = uid("wf")
    await store.put_cached(wf, "fetch", "k", 1, "run-1", T0)

    assert await store.get_cached(wf, "fetch", "k", T0 + 0.001) is None
    assert (await store.get_cached(wf, "fetch", "k", T0)) is not None  # at `since`: fresh


async def test_keyed_by_workflow_step_and_key(store: Store, uid: UID) -> None:
    wf, other = uid("wf"), uid("other")
    await store.put_cached(wf, "a", "k", "wf-a-k", "r", T0)

    assert await store.get_cached(other, "a", "k", 0) is None
    assert await store.get_cached(wf, "b", "k", 0) is None
    assert await store.get_cached(wf, "a", "K", 0) is None
    found = await store.get_cached(wf, "a", "k", 0)
    assert found is not None and found.output == "wf-a-k"


async def test_the_newest_result_wins(store: Store, uid: UID) -> None:
    wf = uid("wf")
    await store.put_cached(wf, "s", "k", "second", "run-2", T0 + 10)
    await store.put_cached(wf, "s", "k", "first", "run-1", T0)  # older: does not replace
    await store.put_cached(wf, "s", "k", "third", "run-3", T0 + 20)

    found = await store.get_cached(wf, "s", "k", 0)
    assert found is not None and (found.output, found.run_id) == ("third", "run-3")


async def test_null_and_long_keys_and_values(store: Store, uid: UID) -> None:
    wf = uid("wf")
    long_key = "x" * 20_000 + "é\u2603"
    await store.put_cached(wf, "s", long_key, None, "r", T0)

    found = await store.get_cached(wf, "s", long_key, 0)
    assert found is not None and found.output is None
    assert await store.get_cached(wf, "s", long_key[:-1], 0) is None


async def test_the_output_is_a_copy(store: Store, uid: UID) -> None:
    wf = uid("wf")
    value = {"items": [1]}
    await store.put_cached(wf, "s", "k", value, "r", T0)
    value["items"].append(2)

    found = await store.get_cached(wf, "s", "k", 0)
    assert found is not None and found.output == {"items": [1]}
    found.output["items"].append(3)  # type: ignore[index, union-attr]
    again = await store.get_cached(wf, "s", "k", 0)
    assert again is not None and again.output == {"items": [1]}


async def test_a_value_that_is_not_json_is_refused(store: Store, uid: UID) -> None:
    with pytest.raises(StoreError, match="cached result of step 's'"):
        await store.put_cached(uid("wf"), "s", "k", {1, 2}, "r", T0)  # type: ignore[arg-type]


async def test_another_instance_on_the_same_database_sees_it(store: Store, uid: UID) -> None:
    wf = uid("wf")
    await store.put_cached(wf, "s", "k", {"shared": True}, "r", T0)
    other = open_store(store.url)
    await other.open()
    try:
        found = await other.get_cached(wf, "s", "k", 0)
        if store.url.startswith("memory"):
            assert found is None  # a second memory:// is a store of its own
        else:
            assert found is not None and found.output == {"shared": True}
    finally:
        await other.close()
