"""The tokens model calls spent (``Store.add_llm_tokens`` / ``llm_tokens``): each call's
usage is added to its step's (what a Prometheus scrape counts) and its total to the
count of its run and of the runs that started it (what a token budget is judged by),
in one transaction; every add counts, also concurrent adds of two store instances on
one database (two workers)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from plait.core.states import StepStatus
from plait.errors import RunNotFound, StoreError
from plait.store import open_store
from plait.store.base import Store, TokenUsage, WriteBatch

from .conftest import backend_params, backend_url, open_backend
from .test_store import change, new_run, new_run_id, run_record

UID = Callable[[str], str]
TEN = TokenUsage(prompt=6, completion=4, total=10)


async def test_a_new_run_has_spent_nothing(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    assert await store.llm_tokens(run) == 0


async def test_adds_sum_and_return_the_new_count(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    assert await store.add_llm_tokens(run, "a", TokenUsage(20, 10, 30)) == 30
    assert await store.add_llm_tokens(run, "b", TokenUsage()) == 30
    assert await store.add_llm_tokens(run, "a", TokenUsage(10, 2, 12)) == 42
    assert await store.llm_tokens(run) == 42


async def test_counts_are_kept_per_run(store: Store, uid: UID) -> None:
    run, other = await new_run(store, uid), await new_run(store, uid)
    await store.add_llm_tokens(run, "a", TokenUsage(total=5))
    await store.add_llm_tokens(other, "a", TokenUsage(total=7))
    assert (await store.llm_tokens(run), await store.llm_tokens(other)) == (5, 7)


async def test_ancestors_count_the_total_too(store: Store, uid: UID) -> None:
    top, parent, child = [await new_run(store, uid) for _ in range(3)]
    await store.add_llm_tokens(parent, "a", TEN, [top])
    assert await store.add_llm_tokens(child, "ask", TEN, [parent, top, top]) == 10
    counts = [await store.llm_tokens(r) for r in (top, parent, child)]
    assert counts == [20, 20, 10]


async def test_an_ancestor_that_is_gone_is_passed_over(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    assert await store.add_llm_tokens(run, "a", TEN, [new_run_id()]) == 10


async def test_counts_past_32_bits(store: Store, uid: UID) -> None:
    run = await new_run(store, uid)
    big = TokenUsage(total=2**31 - 1)
    await store.add_llm_tokens(run, "a", big)
    assert await store.add_llm_tokens(run, "a", big) == 2**32 - 2


async def test_concurrent_adds_all_count(store: Store, uid: UID) -> None:
    parent, run = await new_run(store, uid), await new_run(store, uid)
    await asyncio.gather(*(store.add_llm_tokens(run, f"s{n % 3}", TokenUsage(total=n),
                                                [parent]) for n in range(1, 11)))
    assert await store.llm_tokens(run) == await store.llm_tokens(parent) == 55


async def test_an_unknown_run_is_refused(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.add_llm_tokens(new_run_id(), "a", TEN)
    with pytest.raises(RunNotFound):
        await store.llm_tokens(new_run_id())


@pytest.mark.parametrize("usage", [TokenUsage(total=-1), TokenUsage(prompt=True),  # type: ignore[arg-type]
                                   TokenUsage(completion=1.5), TokenUsage(total="3")])  # type: ignore[arg-type]
async def test_a_count_that_is_not_a_whole_number_is_refused(store: Store, uid: UID,
                                                             usage: TokenUsage) -> None:
    run = await new_run(store, uid)
    with pytest.raises(StoreError, match="whole number"):
        await store.add_llm_tokens(run, "a", usage)
    assert await store.llm_tokens(run) == 0


async def test_a_metrics_snapshot_counts_each_steps_calls(store: Store, uid: UID) -> None:
    wf = uid("wf")
    run = uuid.uuid4().hex
    await store.create_run(run_record(run, wf), ["agent", "plain", "m"])
    done = {"usage": {"prompt_tokens": 1000, "completion_tokens": 1000,
                      "total_tokens": 2000}}
    S = StepStatus
    await store.write(WriteBatch(run, steps=[
        *(change(step, S.PENDING, S.QUEUED, 1.0) for step in ("agent", "plain")),
        *(change(step, S.QUEUED, S.RUNNING, 1.0, attempts=1) for step in ("agent", "plain")),
        *(change(step, S.RUNNING, S.COMPLETED, 2.0, attempts=1, output=done)
          for step in ("agent", "plain"))]))
    await store.add_llm_tokens(run, "agent", TEN)
    await store.add_llm_tokens(run, "agent", TokenUsage(3, 2, 5))
    await store.add_llm_tokens(run, "m[0]", TEN)
    await store.add_llm_tokens(run, "m[1]", TEN)

    snap = await store.metrics_snapshot((1.0,))

    # a step that sent calls counts them, not its output's usage; one that sent none
    # counts its output's; map items count under their map step
    assert [snap.tokens[wf, "agent", k] for k in ("prompt_tokens", "completion_tokens",
                                                  "total_tokens")] == [9, 6, 15]
    assert snap.tokens[wf, "plain", "total_tokens"] == 2000
    assert snap.tokens[wf, "m", "total_tokens"] == 20


# an anonymous memory:// store has no second instance
@pytest.mark.parametrize("backend", backend_params("sqlite", "postgresql"))
async def test_two_store_instances_on_one_database_share_the_count(
        backend, request: pytest.FixtureRequest, tmp_path: Path, uid: UID) -> None:
    url = backend_url(backend, request, tmp_path)
    first = await open_backend(backend, url, open_store)
    second = await open_backend(backend, url, open_store)
    try:
        run = await new_run(first, uid)
        await asyncio.gather(*(s.add_llm_tokens(run, "a", TEN) for s in (first, second) * 5))
        assert await first.llm_tokens(run) == await second.llm_tokens(run) == 100
    finally:
        await first.close()
        await second.close()
