"""``observe.prometheus``: the store's aggregates folded into bounded series, and a
server's refreshes shared (one read at a time, kept ``cache_s`` seconds)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

from plait.observe.prometheus import StoreCollector, bounded
from plait.observe.series import OTHER
from plait.store.base import Store
from plait.store.observations import DurationBuckets, MetricsSnapshot


class CountingStore:
    """A store whose snapshot read is counted, and held until ``gate`` opens."""

    def __init__(self) -> None:
        self.reads = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def metrics_snapshot(self, bounds: Sequence[float]) -> MetricsSnapshot:
        self.reads += 1
        await self.gate.wait()
        return MetricsSnapshot(runs={("wf", "completed"): self.reads})


def collector(store: CountingStore, clock: list[float], cache_s: float) -> StoreCollector:
    return StoreCollector(cast(Store, store), cache_s=cache_s, clock=lambda: clock[0])


def test_bounded_sums_the_items_of_a_map_under_its_step() -> None:
    def took(step: str, n: int) -> DurationBuckets:
        return DurationBuckets(workflow="wf", step=step, count=n, total=float(n),
                               buckets=[n, n])

    raw = MetricsSnapshot(
        runs={("wf", "completed"): 2},
        steps={("wf", "m[0]", "completed"): 1, ("wf", "m[1]", "completed"): 1,
               ("wf", "m", "completed"): 1, ("wf", "m[2]", "failed"): 1},
        retries={("wf", "m[0]"): 2, ("wf", "m[1]"): 1},
        durations=[took("m[0]", 1), took("m[1]", 2), took("a", 3)],
        tokens={("wf", "m[0]", "total_tokens"): 5, ("wf", "m[1]", "total_tokens"): 6},
        tickets_queued=4, lease_reclaims=1)
    out = bounded(raw)
    assert out.steps == {("wf", "m", "completed"): 3, ("wf", "m", "failed"): 1}
    assert out.retries == {("wf", "m"): 3}
    assert out.tokens == {("wf", "m", "total_tokens"): 11}
    found = {d.step: (d.count, d.total, d.buckets) for d in out.durations}
    assert found == {"m": (3, 3.0, [3, 3]), "a": (3, 3.0, [3, 3])}
    assert (out.runs, out.tickets_queued, out.lease_reclaims) == (raw.runs, 4, 1)
    assert raw.durations[0].count == 1  # the store's snapshot is left as it was


async def test_refreshes_within_the_cache_time_read_the_store_once() -> None:
    store, clock = CountingStore(), [100.0]
    c = collector(store, clock, cache_s=10.0)
    await c.refresh()
    clock[0] += 9.9
    assert (await c.refresh()).runs == {("wf", "completed"): 1}
    assert store.reads == 1
    clock[0] += 0.2
    assert (await c.refresh()).runs == {("wf", "completed"): 2}
    assert store.reads == 2


async def test_concurrent_refreshes_share_one_read() -> None:
    store, clock = CountingStore(), [0.0]
    store.gate.clear()
    c = collector(store, clock, cache_s=10.0)
    waiting: Any = asyncio.gather(*(c.refresh() for _ in range(5)))
    await asyncio.sleep(0)
    store.gate.set()
    results = await waiting
    assert store.reads == 1
    assert all(r is results[0] for r in results)


async def test_without_a_cache_every_refresh_reads() -> None:
    store, clock = CountingStore(), [0.0]
    c = collector(store, clock, cache_s=0.0)
    await c.refresh()
    await c.refresh()
    assert store.reads == 2


def test_names_past_the_budget_count_as_other() -> None:
    raw = MetricsSnapshot(
        runs={("a", "completed"): 1, ("b", "completed"): 1, ("c", "completed"): 2,
              ("d", "failed"): 1},
        steps={(w, s, "completed"): 1 for w in "abcd" for s in ("x", "y")},
        retries={("b", "y"): 4, ("c", "x"): 1, ("d", "x"): 1})
    out = bounded(raw, max_workflows=2, max_steps=3)
    assert out.runs == {("a", "completed"): 1, ("b", "completed"): 1,
                        (OTHER, "completed"): 2, (OTHER, "failed"): 1}
    assert out.steps == {("a", "x", "completed"): 1, ("a", "y", "completed"): 1,
                         ("b", "x", "completed"): 1, ("b", OTHER, "completed"): 1,
                         (OTHER, OTHER, "completed"): 4}
    assert out.retries == {("b", OTHER): 4, (OTHER, OTHER): 2}
