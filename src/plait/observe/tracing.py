"""OpenTelemetry spans for runs and step attempts (docs/observability.md).

When ``opentelemetry`` (the API package; the ``otel`` extra) is importable and a tracer
provider is configured (``opentelemetry.trace.set_tracer_provider``, or the SDK's
auto-instrumentation), every run an engine drives gets a span ``plait.run`` and each of
its step attempts a child span ``plait.step``:

- ``plait.run``: attributes ``plait.run_id``, ``plait.workflow``, ``plait.version``
  and, once known, ``plait.status``; status ERROR with the run's error when it fails.
- ``plait.step``: attributes ``plait.run_id``, ``plait.step_id``, ``plait.attempt``,
  ``plait.fallback``, ``plait.status`` (completed, failed, cancelled) and
  ``plait.worker``; a failed attempt records its error as an exception event and sets
  status ERROR.  Start and end times are the attempt's stored times.

Spans are built from the run's committed batches (``runtime.observers``), so a run
driven on a cluster is traced by its driver, attempts included, wherever they ran.

Cost: plait never imports ``opentelemetry`` itself.  A tracer provider can only have
been configured by code that imported ``opentelemetry.trace`` first, so when a run
starts the observer looks the module up in ``sys.modules`` (a dict lookup): absent, or
present with no provider configured (the API's default proxy), the run is not watched
and the run loop does nothing more than before.  ``plait run`` pays no import.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from ..core.states import FINAL_RUN_STATES, RunStatus
from ..core.validate import CheckedWorkflow
from ..store.base import RunRecord, WriteBatch

__all__ = ["TracingObserver", "available", "configured_provider"]


def _trace() -> Any:
    """The ``opentelemetry.trace`` module when this process imported it, else None."""
    return sys.modules.get("opentelemetry.trace")


def available() -> bool:
    """Whether the OpenTelemetry API is installed (asked of the import system, without
    importing it)."""
    return importlib.util.find_spec("opentelemetry") is not None


def configured_provider() -> Any:
    """The process's tracer provider when one is really configured, else None."""
    trace = _trace()
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class TracingObserver:
    """A run observer (``runtime.observers``) making the spans.  ``provider``: a
    tracer provider to use (tests give the SDK's); None: the process's, when one is
    configured when a run starts."""

    def __init__(self, provider: Any = None) -> None:
        self._provider = provider

    def watch(self, run: RunRecord, checked: CheckedWorkflow) -> _RunSpans | None:
        provider = self._provider if self._provider is not None else configured_provider()
        if provider is None:
            return None
        tracer = provider.get_tracer("plait")
        return _RunSpans(_trace(), tracer, run)


class _RunSpans:
    def __init__(self, trace: Any, tracer: Any, run: RunRecord) -> None:
        self._trace_api = trace
        self._tracer = tracer
        self._run_id = run.run_id
        self._span = tracer.start_span("plait.run", attributes={
            "plait.run_id": run.run_id, "plait.workflow": run.workflow,
            "plait.version": run.version})
        self._context = trace.set_span_in_context(self._span)
        self._attempts: dict[tuple[str, int, bool], Any] = {}
        self._ended = False

    def batch(self, batch: WriteBatch) -> None:
        for change in batch.attempts:
            key = (change.step, change.attempt, change.fallback)
            if not change.ended:
                self._attempts[key] = self._tracer.start_span(
                    "plait.step", context=self._context, start_time=_ns(change.at),
                    attributes={"plait.run_id": self._run_id, "plait.step_id": change.step,
                                "plait.attempt": change.attempt,
                                "plait.fallback": change.fallback})
                continue
            span = self._attempts.pop(key, None)
            if span is None:  # started before this driver took the run over
                span = self._tracer.start_span(
                    "plait.step", context=self._context, start_time=_ns(change.at),
                    attributes={"plait.run_id": self._run_id, "plait.step_id": change.step,
                                "plait.attempt": change.attempt,
                                "plait.fallback": change.fallback})
            span.set_attribute("plait.status", change.status)
            if change.worker is not None:
                span.set_attribute("plait.worker", change.worker)
            if change.status == "failed":
                error = change.error or "failed"
                span.record_exception(_AttemptFailed(error),
                                      attributes={"exception.type": error.split(":")[0]})
                span.set_status(self._trace_api.Status(self._trace_api.StatusCode.ERROR,
                                                       error))
            span.end(end_time=_ns(change.at))
        change_of_run = batch.run
        if change_of_run is not None and change_of_run.target in FINAL_RUN_STATES:
            self._end(change_of_run.target, change_of_run.error, change_of_run.at)

    def _end(self, status: RunStatus, error: str | None, at: float | None) -> None:
        if self._ended:
            return
        self._ended = True
        for span in self._attempts.values():  # attempts the run stopped waiting for
            span.set_attribute("plait.status", "abandoned")
            span.end(end_time=None if at is None else _ns(at))
        self._attempts.clear()
        self._span.set_attribute("plait.status", str(status))
        if status is RunStatus.FAILED:
            self._span.set_status(self._trace_api.Status(
                self._trace_api.StatusCode.ERROR, error or "run failed"))
        self._span.end(end_time=None if at is None else _ns(at))

    async def close(self, run: RunRecord) -> None:
        # a run that ended was closed by its batch; one that waits for a person or
        # whose driver stopped ends its span here, with the status it has now
        self._end(run.status, run.error, run.finished_at)


class _AttemptFailed(Exception):
    """What ``record_exception`` records for a failed attempt: its stored error."""
