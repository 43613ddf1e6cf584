"""The tokens a run's model calls spent (``Store.add_llm_tokens`` / ``llm_tokens``):
one count per run, to which every add counts, also concurrent adds of two store
instances on one database (two workers)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from plait.errors import RunNotFound, StoreError
from plait.store import open_store
from plait.store.base import Store

from .conftest import backend_params, backend_url, open_backend
from .test_store import new_run, new_run_id

UID = Callable[[str], str]


async def test_a_new_run_has_spent_nothing(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    assert await store.llm_tokens(run) == 0


async def test_adds_sum_and_return_the_new_count(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    assert await store.add_llm_tokens(run, 30) == 30
    assert await store.add_llm_tokens(run, 0) == 30
    assert await store.add_llm_tokens(run, 12) == 42
    assert await store.llm_tokens(run) == 42


async def test_counts_are_kept_per_run(store: Store, uid: UID) -> None:
    run, other = await new_run(store, uid), await new_run(store, uid)
    await store.add_llm_tokens(run, 5)
    await store.add_llm_tokens(other, 7)
    assert (await store.llm_tokens(run), await store.llm_tokens(other)) == (5, 7)


async def test_counts_past_32_bits(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    await store.add_llm_tokens(run, 2**31 - 1)
    assert await store.add_llm_tokens(run, 2**31 - 1) == 2**32 - 2


async def test_concurrent_adds_all_count(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    await asyncio.gather(*(store.add_llm_tokens(run, n) for n in range(1, 11)))
    assert await store.llm_tokens(run) == 55


async def test_an_unknown_run_is_refused(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.add_llm_tokens(new_run_id(), 1)
    with pytest.raises(RunNotFound):
        await store.llm_tokens(new_run_id())


@pytest.mark.parametrize("tokens", [-1, True, 1.5, "3"])
async def test_a_count_that_is_not_a_whole_number_is_refused(store: Store, uid: UID,
                                                             tokens: object) -> None:
    run = await new_run(store, uid)
    with pytest.raises(StoreError, match="whole number"):
        await store.add_llm_tokens(run, tokens)  # type: ignore[arg-type]
    assert await store.llm_tokens(run) == 0


# an anonymous memory:// store has no second instance
@pytest.mark.parametrize("backend", backend_params("sqlite", "postgresql"))
async def test_two_store_instances_on_one_database_share_the_count(
        backend, request: pytest.FixtureRequest, tmp_path: Path, uid: UID) -> None:
    url = backend_url(backend, request, tmp_path)
    first = await open_backend(backend, url, open_store)
    second = await open_backend(backend, url, open_store)
    try:
        run = await new_run(first, uid)
        await asyncio.gather(*(s.add_llm_tokens(run, 10) for s in (first, second) * 5))
        assert await first.llm_tokens(run) == await second.llm_tokens(run) == 100
    finally:
        await first.close()
        await second.close()
