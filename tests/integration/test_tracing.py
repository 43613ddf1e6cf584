"""OpenTelemetry spans (docs/observability.md): a run span and a child span per step
attempt, checked with the SDK's in-memory exporter.  The SDK's provider is given to the
engine's observer, never set process-wide: nothing leaks into other tests."""

from __future__ import annotations

import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider  # a dev dependency: never skipped
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from plait import Retry, Workflow  # noqa: E402
from plait.observe.tracing import TracingObserver  # noqa: E402
from plait.runtime.engine import Engine  # noqa: E402
from plait.store import MemoryStore  # noqa: E402

from .conftest import run_with  # noqa: E402


class FailsOnce:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("reset by peer")
        return "ok"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def _engine(exporter: InMemorySpanExporter) -> Engine:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    engine = Engine(MemoryStore())
    engine.observers.add(TracingObserver(provider))
    return engine


async def test_a_run_with_a_retry_makes_a_run_span_and_one_span_per_attempt(
        exporter: InMemorySpanExporter) -> None:
    wf = Workflow("traced")
    wf.add_step("extract", lambda: 1)
    wf.add_step("fetch", FailsOnce(), depends_on=["extract"],
                retry=Retry(max_retries=2, initial_delay=0.01, jitter=False))
    wf.add_step("load", lambda: 3, depends_on=["fetch"])
    result = await run_with(_engine(exporter), wf)
    assert result.status == "completed"

    spans = exporter.get_finished_spans()
    (run,) = [s for s in spans if s.name == "plait.run"]
    steps = [s for s in spans if s.name == "plait.step"]
    assert dict(run.attributes or {}) == {
        "plait.run_id": result.run_id, "plait.workflow": "traced",
        "plait.version": result.version, "plait.status": "completed"}
    assert run.parent is None
    assert [(s.attributes["plait.step_id"], s.attributes["plait.attempt"],
             s.attributes["plait.status"]) for s in steps] == [
        ("extract", 1, "completed"), ("fetch", 1, "failed"), ("fetch", 2, "completed"),
        ("load", 1, "completed")]
    for span in steps:
        assert span.parent is not None
        assert span.parent.span_id == run.context.span_id
        assert span.context.trace_id == run.context.trace_id
        assert span.attributes["plait.run_id"] == result.run_id
        assert span.start_time <= span.end_time
    failed = steps[1]
    assert failed.status.status_code is StatusCode.ERROR
    assert "reset by peer" in (failed.status.description or "")
    (event,) = failed.events
    assert event.name == "exception"
    assert "reset by peer" in str(event.attributes["exception.message"])
    assert steps[2].status.status_code is not StatusCode.ERROR


async def test_a_failed_run_span_has_status_error(exporter: InMemorySpanExporter) -> None:
    def boom() -> None:
        raise ValueError("nope")

    wf = Workflow("traced-fail")
    wf.add_step("boom", boom, retry=Retry(max_retries=0))
    result = await run_with(_engine(exporter), wf)
    assert result.status == "failed"
    (run,) = [s for s in exporter.get_finished_spans() if s.name == "plait.run"]
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes["plait.status"] == "failed"


def test_without_a_configured_provider_nothing_is_watched() -> None:
    """The API's default (a proxy, no SDK configured): the engine's own tracing
    observer watches no run, so the run loop has no listener to call."""
    code = ("import asyncio\n"
            "import opentelemetry.trace\n"
            "from plait import Workflow\n"
            "from plait.runtime.engine import Engine\n"
            "from plait.store import MemoryStore\n"
            "engine = Engine(MemoryStore())\n"
            "seen = []\n"
            "wf = Workflow('quiet'); wf.add_step('a', lambda: 1)\n"
            "orig = engine.observers.started\n"
            "def started(run, checked):\n"
            "    seen.append(orig(run, checked)); return seen[-1]\n"
            "engine.observers.started = started\n"
            "r = asyncio.run(engine.run(wf.validate(), {}))\n"
            "print(r.status, seen, engine.listeners)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "completed [False] []"
