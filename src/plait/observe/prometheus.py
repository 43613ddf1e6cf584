"""Prometheus metrics (docs/observability.md has the list with names and labels).

Two sources, one registry the caller owns (nothing is registered globally, so tests
and several servers in one process never share counters):

- ``StoreCollector``: what the store holds, for every process that shares it: runs by
  workflow and status, steps by status, finished step durations, retries, queue depth
  (tickets queued and claimed), lease reclaims and LLM token usage.  The numbers come
  from ``Store.metrics_snapshot`` (aggregates computed by the database: one pass of
  ``GROUP BY`` queries per scrape, nothing but the aggregates sent back), refreshed by
  ``await collector.refresh()`` before each exposition: Prometheus' collectors are
  synchronous, the store is not.
- ``LiveMetrics``: what this process does as it does it: attempts started and ended
  and their durations (a run observer of the engine, ``runtime.observers``), and the
  dispatch latency of the attempts its workers claim (``observe_dispatch``).

API::

    registry = CollectorRegistry()
    app = metrics_asgi_app(store, registry)      # ASGI: GET -> the exposition text
    text = await exposition(store, registry)     # the same text, for the CLI
    live = LiveMetrics(registry); engine.observers.add(live)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ..core.validate import CheckedWorkflow
from ..runtime.engine import Engine
from ..store.base import RunRecord, Store, WriteBatch
from ..store.observations import MetricsSnapshot

if TYPE_CHECKING:
    from ..runtime.worker import Worker

__all__ = ["DURATION_BUCKETS", "LiveMetrics", "StoreCollector", "exposition",
           "metrics_asgi_app"]

# seconds: from quick transforms to hour-long jobs
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                    60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0)
DISPATCH_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                    30.0, 60.0)


class StoreCollector(Collector):
    """Metrics over the stored history (see the module docstring)."""

    def __init__(self, store: Store, *, buckets: Iterable[float] = DURATION_BUCKETS) -> None:
        self.store = store
        self.buckets = tuple(sorted(buckets))
        self.snapshot: MetricsSnapshot | None = None  # the last refresh's

    async def refresh(self) -> MetricsSnapshot:
        self.snapshot = await self.store.metrics_snapshot(self.buckets)
        return self.snapshot

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


class LiveMetrics:
    """This process's counters and histograms, updated as its engines run attempts
    (``engine.observers.add(live)``) and its workers claim them
    (``observe_dispatch``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
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

    def attach(self, target: Engine | Worker) -> None:
        """Count what ``target`` does: the attempts of the runs an engine drives, and
        for a worker also the dispatch latency of the attempts it claims."""
        from ..runtime.worker import Worker

        if isinstance(target, Worker):
            target.on_dispatch = self.observe_dispatch
            target = target.engine
        target.observers.add(self)

    def watch(self, run: RunRecord, checked: CheckedWorkflow) -> _RunCounts:
        return _RunCounts(self, run.workflow)

    def observe_dispatch(self, workflow: str, seconds: float) -> None:
        self.dispatch.labels(workflow).observe(max(0.0, seconds))


class _RunCounts:
    def __init__(self, live: LiveMetrics, workflow: str) -> None:
        self._live = live
        self._workflow = workflow
        self._open: dict[tuple[str, int, bool], float] = {}

    def batch(self, batch: WriteBatch) -> None:
        live, workflow = self._live, self._workflow
        for change in batch.attempts:
            key = (change.step, change.attempt, change.fallback)
            if not change.ended:
                self._open[key] = change.at
                live.started.labels(workflow, change.step).inc()
                continue
            live.ended.labels(workflow, change.step, change.status).inc()
            began = self._open.pop(key, None)
            if began is not None:
                live.duration.labels(workflow, change.step).observe(max(0.0, change.at
                                                                         - began))

    async def close(self, run: RunRecord) -> None:
        self._open.clear()


async def exposition(store: Store, registry: CollectorRegistry | None = None) -> bytes:
    """The text exposition of ``store``'s metrics (and of whatever else ``registry``
    holds): what ``plait metrics --prometheus`` prints."""
    registry = registry if registry is not None else CollectorRegistry()
    collector = _collector_of(store, registry)
    await collector.refresh()
    return generate_latest(registry)


def _collector_of(store: Store, registry: CollectorRegistry) -> StoreCollector:
    """The registry's collector of ``store``, registered on first use."""
    found = getattr(registry, "_plait_store_collector", None)
    if isinstance(found, StoreCollector) and found.store is store:
        return found
    collector = StoreCollector(store)
    registry.register(collector)
    registry._plait_store_collector = collector  # type: ignore[attr-defined]
    return collector


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]],
                    Callable[[Any], Awaitable[None]]], Awaitable[None]]


def metrics_asgi_app(store: Store, registry: CollectorRegistry | None = None) -> ASGIApp:
    """An ASGI app serving the exposition (``GET``; gzip when asked; Prometheus'
    OpenMetrics when its Accept header asks): mount it at ``/metrics``.  Each request
    refreshes the store's aggregates first.  ``registry``: the caller's (give the one
    its ``LiveMetrics`` uses, to serve both); None: a new one."""
    from prometheus_client import make_asgi_app

    registry = registry if registry is not None else CollectorRegistry()
    collector = _collector_of(store, registry)
    inner = make_asgi_app(registry)

    async def app(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                  send: Callable[[Any], Awaitable[None]]) -> None:
        if scope.get("type") == "http":
            await collector.refresh()
        await inner(scope, receive, send)

    return app
