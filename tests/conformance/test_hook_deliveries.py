"""Webhook deliveries (``Store.claim_delivery`` / ``forget_delivery``): the first claim
of a (hook, delivery id) wins, for every store instance on the same database, until the
delivery is forgotten or older than the time its caller still accepts it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from plait.store import open_store
from plait.store.base import Store

from .conftest import backend_params, backend_url, open_backend

UID = Callable[[str], str]
T0 = 1_700_000_000.0


async def test_the_first_claim_wins(store: Store, uid: UID) -> None:
    hook = uid("hook")
    assert await store.claim_delivery(hook, "d1", "run-1", T0, 0) == "run-1"
    assert await store.claim_delivery(hook, "d1", "run-2", T0 + 1, 0) == "run-1"
    assert await store.claim_delivery(hook, "d2", "run-3", T0 + 1, 0) == "run-3"


async def test_a_delivery_id_is_kept_per_hook(store: Store, uid: UID) -> None:
    a, b = uid("a"), uid("b")
    assert await store.claim_delivery(a, "same", "run-a", T0, 0) == "run-a"
    assert await store.claim_delivery(b, "same", "run-b", T0, 0) == "run-b"


async def test_concurrent_claims_store_exactly_one(store: Store, uid: UID) -> None:
    hook = uid("hook")
    won = await asyncio.gather(*(store.claim_delivery(hook, "d", f"run-{i}", T0, 0)
                                 for i in range(8)))
    assert len(set(won)) == 1 and won[0].startswith("run-")


async def test_forget_deletes_only_the_run_it_names(store: Store, uid: UID) -> None:
    hook = uid("hook")
    await store.claim_delivery(hook, "d", "run-1", T0, 0)
    await store.forget_delivery(hook, "d", "run-other")
    assert await store.claim_delivery(hook, "d", "run-2", T0, 0) == "run-1"
    await store.forget_delivery(hook, "d", "run-1")
    assert await store.claim_delivery(hook, "d", "run-2", T0, 0) == "run-2"


async def test_deliveries_older_than_the_window_are_forgotten(store: Store,
                                                              uid: UID) -> None:
    hook = uid("hook")
    await store.claim_delivery(hook, "old", "run-1", T0, 0)
    await store.claim_delivery(hook, "new", "run-2", T0 + 500, 0)
    # a claim that forgets what was received before T0 + 300
    assert await store.claim_delivery(hook, "x", "run-3", T0 + 600, T0 + 300) == "run-3"
    assert await store.claim_delivery(hook, "old", "run-4", T0 + 600, T0 + 300) == "run-4"
    assert await store.claim_delivery(hook, "new", "run-5", T0 + 600, T0 + 300) == "run-2"


# an anonymous memory:// store has no second instance
@pytest.mark.parametrize("backend", backend_params("sqlite", "postgresql"))
async def test_two_store_instances_on_one_database_share_deliveries(
        backend, request: pytest.FixtureRequest, tmp_path: Path, uid: UID) -> None:
    url = backend_url(backend, request, tmp_path)
    first = await open_backend(backend, url, open_store)
    second = await open_backend(backend, url, open_store)
    try:
        hook = uid("hook")
        won = await asyncio.gather(first.claim_delivery(hook, "d", "run-1", T0, 0),
                                   second.claim_delivery(hook, "d", "run-2", T0, 0))
        assert won[0] == won[1]
        assert await second.claim_delivery(hook, "d", "run-3", T0, 0) == won[0]
        await first.forget_delivery(hook, "d", won[0])
        assert await second.claim_delivery(hook, "d", "run-4", T0, 0) == "run-4"
    finally:
        await first.close()
        await second.close()
