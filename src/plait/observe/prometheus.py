"""Prometheus metrics (docs/observability.md has the list with names and labels).

Two sources, one registry the caller owns (nothing is registered globally, so tests
and several servers in one process never share counters):

- ``StoreCollector``: what the store holds, for every process that shares it: runs by
  workflow and status, steps by status, finished step durations, retries, queue depth
  (tickets queued and claimed), lease reclaims and LLM token usage.  The numbers come
  from ``Store.metrics_snapshot`` (aggregates computed by the database: one pass of
  ``GROUP BY`` queries per refresh, nothing but the aggregates sent back), refreshed by
  ``await collector.refresh()`` before each exposition: Prometheus' collectors are
  synchronous, the store is not.  A server's collector keeps a refresh for
  ``SCRAPE_CACHE_S`` seconds and makes one at a time, so scrapes arriving together (or
  several Prometheus servers) share one pass over the store.
- ``LiveMetrics``: what this process does as it does it: attempts started and ended
  and their durations (a run observer of the engine, ``runtime.observers``), and the
  dispatch latency of the attempts its workers claim (``observe_dispatch``).

Labels are bounded (``observe.series``): a map item counts under its map step
(``step="fetch"`` for ``fetch[3]``), a child run under its own workflow and steps, at
most 100 workflows and 1,000 (workflow, step) pairs get series of their own (the rest
count as ``(other)``), and every other label (status, state, kind) takes a fixed set
of values.  The folding of the store's aggregates into those labels and the rendering
of the text run in a thread, off the server's event loop.

API::

    registry = CollectorRegistry()
    app = metrics_asgi_app(store, registry)      # ASGI: GET -> the exposition text
    routes.append(Route("/metrics", app))        # Starlette/FastAPI (a mount redirects)
    text = await exposition(store, registry)     # the same text, for the CLI
    live = LiveMetrics(registry); engine.observers.add(live)
"""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.registry import Collector

from ..core.validate import CheckedWorkflow
from ..store.base import RunRecord, Store, WriteBatch
from ..store.observations import DurationBuckets, MetricsSnapshot
from .series import MAX_STEPS, MAX_WORKFLOWS, Labels

__all__ = ["DURATION_BUCKETS", "SCRAPE_CACHE_S", "LiveMetrics", "MetricsApp",
           "StoreCollector", "bounded", "exposition", "metrics_asgi_app"]

# seconds: from quick transforms to hour-long jobs
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                    60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0)
DISPATCH_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                    30.0, 60.0)
# how long a server reuses the store's aggregates: within Prometheus' usual 15 s
# scrape interval, so each scrape of one Prometheus sees fresh numbers while a burst
# of scrapes costs one pass over the store
SCRAPE_CACHE_S = 10.0


class StoreCollector(Collector):
    """Metrics over the stored history (see the module docstring)."""

    def __init__(self, store: Store, *, buckets: Iterable[float] = DURATION_BUCKETS,
                 cache_s: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.buckets = tuple(sorted(buckets))
        self.cache_s = cache_s  # 0: every refresh reads the store
        self.snapshot: MetricsSnapshot | None = None  # the last refresh's, labels bounded
        self._clock = clock
        self._read_at: float | None = None
        self._reading = asyncio.Lock()

    async def refresh(self) -> MetricsSnapshot:
        """The store's aggregates with bounded labels (``bounded``, folded in a
        thread): read again unless the last read is under ``cache_s`` old.  One read
        at a time: a refresh that waited for another's uses its result."""
        async with self._reading:
            if self._fresh():
                assert self.snapshot is not None
                return self.snapshot
            raw = await self.store.metrics_snapshot(self.buckets)
            self.snapshot = await asyncio.to_thread(bounded, raw)
            self._read_at = self._clock()
            return self.snapshot

    def _fresh(self) -> bool:
        return (self.snapshot is not None and self._read_at is not None
                and self._clock() - self._read_at < self.cache_s)

    def collect(self) -> Iterable[Metric]:
        snap = self.snapshot
        if snap is None:
            return
        runs = GaugeMetricFamily("plait_runs", "Stored runs by workflow and status",
                                 labels=["workflow", "status"])
        for (workflow, status), n in sorted(snap.runs.items()):
            runs.add_metric([workflow, status], n)
        yield runs
        steps = GaugeMetricFamily("plait_steps", "Stored steps by workflow, step and status",
                                  labels=["workflow", "step", "status"])
        for (workflow, step, status), n in sorted(snap.steps.items()):
            steps.add_metric([workflow, step, status], n)
        yield steps
        durations = HistogramMetricFamily(
            "plait_step_duration_seconds",
            "Finished steps' durations (first start to end, retries included)",
            labels=["workflow", "step"])
        for d in sorted(snap.durations, key=lambda d: (d.workflow, d.step)):
            cumulative = [(_bound(b), float(n)) for b, n in zip(self.buckets, d.buckets,
                                                                  strict=True)]
            cumulative.append(("+Inf", float(d.count)))
            durations.add_metric([d.workflow, d.step], cumulative, d.total)
        yield durations
        retries = CounterMetricFamily("plait_step_retries",
                                      "Attempts beyond each step's first",
                                      labels=["workflow", "step"])
        for (workflow, step), n in sorted(snap.retries.items()):
            retries.add_metric([workflow, step], n)
        yield retries
        queue = GaugeMetricFamily("plait_queue_depth",
                                  "Dispatched attempts (tickets): queued, or claimed by a "
                                  "worker and running", labels=["state"])
        queue.add_metric(["queued"], snap.tickets_queued)
        queue.add_metric(["claimed"], snap.tickets_claimed)
        yield queue
        reclaims = CounterMetricFamily("plait_lease_reclaims",
                                       "Attempts whose worker's lease expired (reaped)")
        reclaims.add_metric([], snap.lease_reclaims)
        yield reclaims
        tokens = CounterMetricFamily("plait_llm_tokens",
                                     "Tokens used by steps (usage of their outputs)",
                                     labels=["workflow", "step", "kind"])
        for (workflow, step, kind), n in sorted(snap.tokens.items()):
            tokens.add_metric([workflow, step, kind.removesuffix("_tokens")], n)
        yield tokens


def _bound(value: float) -> str:
    return repr(float(value))


def bounded(raw: MetricsSnapshot, *, max_workflows: int = MAX_WORKFLOWS,
            max_steps: int = MAX_STEPS) -> MetricsSnapshot:
    """``raw`` with bounded labels (``observe.series``: map items under their map
    step, names past the budget under ``(other)``), the counts that fold together
    summed."""
    labels = Labels.chosen(_workflows(raw), _steps(raw), max_workflows=max_workflows,
                           max_steps=max_steps)
    out = MetricsSnapshot(tickets_queued=raw.tickets_queued,
                          tickets_claimed=raw.tickets_claimed,
                          lease_reclaims=raw.lease_reclaims)
    for (workflow, status), n in raw.runs.items():
        _add(out.runs, (labels.workflow(workflow), status), n)
    for (workflow, step, status), n in raw.steps.items():
        _add(out.steps, (*labels.step(workflow, step), status), n)
    for (workflow, step), n in raw.retries.items():
        _add(out.retries, labels.step(workflow, step), n)
    for (workflow, step, kind), n in raw.tokens.items():
        _add(out.tokens, (*labels.step(workflow, step), kind), n)
    out.durations = _fold_durations(raw.durations, labels)
    return out


def _workflows(raw: MetricsSnapshot) -> Iterable[str]:
    yield from (key[0] for key in raw.runs)
    yield from (workflow for workflow, _ in _steps(raw))


def _steps(raw: MetricsSnapshot) -> Iterable[tuple[str, str]]:
    yield from ((key[0], key[1]) for key in raw.steps)
    yield from raw.retries
    yield from ((key[0], key[1]) for key in raw.tokens)
    yield from ((d.workflow, d.step) for d in raw.durations)


def _add(into: dict[Any, int], key: tuple[str, ...], n: int) -> None:
    into[key] = into.get(key, 0) + n


def _fold_durations(raw: Sequence[DurationBuckets], labels: Labels) -> list[DurationBuckets]:
    by_key: dict[tuple[str, str], DurationBuckets] = {}
    for d in raw:
        key = labels.step(d.workflow, d.step)
        into = by_key.get(key)
        if into is None:
            by_key[key] = DurationBuckets(workflow=key[0], step=key[1], count=d.count,
                                          total=d.total, buckets=list(d.buckets))
            continue
        into.count += d.count
        into.total += d.total
        into.buckets = [a + b for a, b in zip(into.buckets, d.buckets, strict=True)]
    return list(by_key.values())


class Observed(Protocol):
    """What ``LiveMetrics.attach`` needs of an engine: its run observers
    (``runtime.observers.Observers``; the engine publishes, metrics subscribe)."""

    @property
    def observers(self) -> _ObserverList: ...


class _ObserverList(Protocol):
    def add(self, observer: LiveMetrics) -> None: ...


@runtime_checkable
class Claiming(Protocol):
    """What ``LiveMetrics.attach`` needs of a worker: its engine, and the hook it calls
    with the dispatch latency of each attempt it claims."""

    on_dispatch: Callable[[str, float], None] | None

    @property
    def engine(self) -> Observed: ...


class LiveMetrics:
    """This process's counters and histograms, updated as its engines run attempts
    (``engine.observers.add(live)``) and its workers claim them
    (``observe_dispatch``)."""

    def __init__(self, registry: CollectorRegistry, *, max_workflows: int = MAX_WORKFLOWS,
                 max_steps: int = MAX_STEPS) -> None:
        self.labels = Labels(max_workflows, max_steps)  # first come, first labelled
        self.started = Counter("plait_attempts_started", "Attempts started in this process",
                               ["workflow", "step"], registry=registry)
        self.ended = Counter("plait_attempts_ended", "Attempts ended in this process",
                             ["workflow", "step", "status"], registry=registry)
        self.duration = Histogram("plait_attempt_duration_seconds",
                                  "Durations of the attempts this process's runs ended",
                                  ["workflow", "step"], buckets=DURATION_BUCKETS,
                                  registry=registry)
        self.dispatch = Histogram("plait_dispatch_latency_seconds",
                                  "From an attempt's dispatch (its ticket stored) to its "
                                  "claim by a worker of this process",
                                  ["workflow"], buckets=DISPATCH_BUCKETS,
                                  registry=registry)

    def attach(self, target: Observed | Claiming) -> None:
        """Count what ``target`` does: the attempts of the runs an engine drives, and
        for a worker also the dispatch latency of the attempts it claims."""
        if isinstance(target, Claiming):
            target.on_dispatch = self.observe_dispatch
            target = target.engine
        target.observers.add(self)

    def watch(self, run: RunRecord, checked: CheckedWorkflow) -> _RunCounts:
        return _RunCounts(self, run.workflow)

    def observe_dispatch(self, workflow: str, seconds: float) -> None:
        self.dispatch.labels(self.labels.workflow(workflow)).observe(max(0.0, seconds))


class _RunCounts:
    def __init__(self, live: LiveMetrics, workflow: str) -> None:
        self._live = live
        self._workflow = workflow
        self._open: dict[tuple[str, int, bool], float] = {}

    def batch(self, batch: WriteBatch) -> None:
        live, workflow = self._live, self._workflow
        for change in batch.attempts:
            key = (change.step, change.attempt, change.fallback)
            w, step = live.labels.step(workflow, change.step)  # an item: its map step's
            if not change.ended:
                self._open[key] = change.at
                live.started.labels(w, step).inc()
                continue
            live.ended.labels(w, step, change.status).inc()
            began = self._open.pop(key, None)
            if began is not None:
                live.duration.labels(w, step).observe(max(0.0, change.at - began))

    async def close(self, run: RunRecord) -> None:
        self._open.clear()


async def exposition(store: Store, registry: CollectorRegistry | None = None) -> bytes:
    """The text exposition of ``store``'s metrics (and of whatever else ``registry``
    holds): what ``plait metrics --prometheus`` prints."""
    registry = registry if registry is not None else CollectorRegistry()
    collector = _collector_of(store, registry)
    await collector.refresh()
    return await asyncio.to_thread(generate_latest, registry)


def _collector_of(store: Store, registry: CollectorRegistry,
                  cache_s: float = 0.0) -> StoreCollector:
    """The registry's collector of ``store``, registered on first use."""
    found = getattr(registry, "_plait_store_collector", None)
    if isinstance(found, StoreCollector) and found.store is store:
        return found
    collector = StoreCollector(store, cache_s=cache_s)
    registry.register(collector)
    registry._plait_store_collector = collector  # type: ignore[attr-defined]
    return collector


Rendered = tuple[list[tuple[str, str]], bytes]  # response headers, body


def metrics_asgi_app(store: Store, registry: CollectorRegistry | None = None, *,
                     cache_s: float = SCRAPE_CACHE_S) -> MetricsApp:
    """An ASGI app answering every HTTP request with the exposition (gzip when asked;
    OpenMetrics when the Accept header asks; ``?name[]=`` picks families), status 200.
    The store's aggregates are refreshed first unless under ``cache_s`` seconds old
    (``StoreCollector.refresh``); the text is rendered in a thread.  ``registry``: the
    caller's (give the one its ``LiveMetrics`` uses, to serve both); None: a new one."""
    registry = registry if registry is not None else CollectorRegistry()
    return MetricsApp(registry, _collector_of(store, registry, cache_s))


class MetricsApp:
    """The ASGI app of ``metrics_asgi_app``.  An object, not a function: Starlette's
    ``Route("/metrics", app)`` then passes requests to it as they are."""

    def __init__(self, registry: CollectorRegistry, collector: StoreCollector) -> None:
        self.registry, self.collector = registry, collector

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope.get("type") != "http":
            return
        await self.collector.refresh()
        headers, body = await asyncio.to_thread(render_scrape, self.registry, scope)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(k.encode(), v.encode()) for k, v in headers]})
        await send({"type": "http.response.body", "body": body})


def render_scrape(registry: CollectorRegistry, scope: dict[str, Any]) -> Rendered:
    """The exposition of ``registry`` as the request ``scope`` asks for it (blocking:
    run it in a thread)."""
    asked = _header(scope, b"accept")
    encoder, content_type = choose_encoder(asked)
    names = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("name[]")
    chosen = registry.restricted_registry(names) if names else registry
    body = encoder(chosen)
    headers = [("Content-Type", content_type)]
    if gzip_accepted(_header(scope, b"accept-encoding")):
        body = gzip.compress(body)
        headers.append(("Content-Encoding", "gzip"))
    return headers, body


def _header(scope: dict[str, Any], name: bytes) -> str:
    return ",".join(value.decode("latin-1") for key, value in scope.get("headers", ())
                    if key.lower() == name)
