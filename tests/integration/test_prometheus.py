"""Prometheus metrics (docs/observability.md): the store's aggregates and this process's
live counters, as the ASGI app serves them and ``plait metrics --prometheus`` prints
them, parsed back with prometheus_client's own parser."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.routing import Route

from plait import Retry, Workflow
from plait.cli.main import cli
from plait.observe.prometheus import LiveMetrics, exposition, metrics_asgi_app
from plait.runtime.engine import Engine
from plait.store import open_store

from .conftest import run_with

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[s.name, tuple(sorted(s.labels.items()))] = s.value
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found[name, tuple(sorted(labels.items()))]


class FailsOnce:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("flaky")
        return {"text": "summary", "usage": {"prompt_tokens": 120, "completion_tokens": 30,
                                             "total_tokens": 150}}


def _boom() -> None:
    raise ValueError("bad row")


async def _history(url: str, registry: CollectorRegistry) -> None:
    store = open_store(url)
    await store.open()
    engine = Engine(store)
    engine.observers.add(LiveMetrics(registry))
    try:
        wf = Workflow("summarise")
        wf.add_step("fetch", lambda: "doc")
        wf.add_step("ask", FailsOnce(), depends_on=["fetch"],
                    retry=Retry(max_retries=2, initial_delay=0.01, jitter=False))
        assert (await run_with(engine, wf)).status == "completed"
        bad = Workflow("loader")
        bad.add_step("load", _boom, retry=Retry(max_retries=0))
        assert (await run_with(engine, bad)).status == "failed"
        assert (await run_with(engine, bad)).status == "failed"
    finally:
        engine.close()
        await store.close()


async def test_the_exposition_holds_the_stores_and_the_live_metrics(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plait.db'}"
    registry = CollectorRegistry()
    await _history(url, registry)
    store = open_store(url)
    await store.open()
    try:
        found = samples((await exposition(store, registry)).decode())
    finally:
        await store.close()

    assert value(found, "plait_runs", workflow="summarise", status="completed") == 1
    assert value(found, "plait_runs", workflow="loader", status="failed") == 2
    assert value(found, "plait_steps", workflow="loader", step="load", status="failed") == 2
    assert value(found, "plait_step_retries_total", workflow="summarise", step="ask") == 1
    assert value(found, "plait_step_duration_seconds_count", workflow="summarise",
                 step="ask") == 1
    assert value(found, "plait_step_duration_seconds_bucket", workflow="loader",
                 step="load", le="+Inf") == 2
    assert value(found, "plait_step_duration_seconds_bucket", workflow="loader",
                 step="load", le="60.0") == 2
    assert value(found, "plait_llm_tokens_total", workflow="summarise", step="ask",
                 kind="prompt") == 120
    assert value(found, "plait_llm_tokens_total", workflow="summarise", step="ask",
                 kind="total") == 150
    assert value(found, "plait_queue_depth", state="queued") == 0
    assert value(found, "plait_lease_reclaims_total") == 0
    # this process's own counters
    assert value(found, "plait_attempts_started_total", workflow="summarise",
                 step="ask") == 2
    assert value(found, "plait_attempts_ended_total", workflow="summarise", step="ask",
                 status="failed") == 1
    assert value(found, "plait_attempts_ended_total", workflow="summarise", step="ask",
                 status="completed") == 1
    assert value(found, "plait_attempt_duration_seconds_count", workflow="loader",
                 step="load") == 2


async def test_the_asgi_app_serves_fresh_numbers(tmp_path: Path) -> None:
    """Without a cache time (a server keeps the store's numbers SCRAPE_CACHE_S seconds:
    tests/unit/observe/test_prometheus.py), each request reads the store again."""
    url = f"sqlite:///{tmp_path / 'plait.db'}"
    store = open_store(url)
    await store.open()
    try:
        # routed as docs/observability.md shows: /metrics itself answers
        app = Starlette(routes=[Route("/metrics", metrics_asgi_app(store, cache_s=0.0))])
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            empty = await client.get("/metrics")
            assert empty.status_code == 200
            assert empty.headers["content-type"].startswith("text/plain")
            assert not any(k[0] == "plait_runs" for k in samples(empty.text))
            wf = Workflow("served")
            wf.add_step("a", lambda: 1)
            engine = Engine(store)
            await run_with(engine, wf)
            engine.close()
            again = await client.get("/metrics")
        assert value(samples(again.text), "plait_runs", workflow="served",
                     status="completed") == 1
    finally:
        await store.close()


def test_plait_metrics_prometheus_prints_the_exposition(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plait.db'}"
    asyncio.run(_history(url, CollectorRegistry()))
    result = CliRunner().invoke(cli, ["metrics", "--prometheus", "--db", url])
    assert result.exit_code == 0, result.output
    found = samples(result.output)
    assert value(found, "plait_runs", workflow="loader", status="failed") == 2
    assert not any(k[0].startswith("plait_attempts") for k in found)  # no live counters


def test_prometheus_takes_no_report_options(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["metrics", "--prometheus", "--json", "--db",
                                      f"sqlite:///{tmp_path / 'x.db'}"])
    assert result.exit_code == 2
    assert "--prometheus" in result.output


def double(n: int) -> int:
    return 2 * n


async def test_a_worker_reports_dispatch_latency(tmp_path: Path) -> None:
    """Attempts a worker runs are timed from their dispatch to their claim (a ticket)
    or to their start (an eager attempt of a run it drives)."""
    from plait.definitions import check_definition
    from plait.runtime.worker import Worker

    store = open_store(f"sqlite:///{tmp_path / 'plait.db'}")
    await store.open()
    registry = CollectorRegistry()
    worker = Worker(store, name="w1", concurrency=2, lease=5.0, poll=0.05, grace=1.0,
                    schedules=False)
    LiveMetrics(registry).attach(worker)
    checked = check_definition({"name": "clustered", "steps": [
        {"id": "a", "type": "python", "call": f"{__name__}:double", "with": {"n": 2}},
        {"id": "b", "type": "python", "call": f"{__name__}:double", "with": {"n": 3},
         "depends_on": ["a"]}]})
    try:
        run = await Engine(store).submit(checked, {})
        task = asyncio.create_task(worker.run())
        for _ in range(400):
            if (await store.get_run(run.run_id)).status.value == "completed":
                break
            await asyncio.sleep(0.05)
        worker.stop()
        await asyncio.wait_for(task, 10)
        found = samples((await exposition(store, registry)).decode())
    finally:
        await store.close()
    assert value(found, "plait_runs", workflow="clustered", status="completed") == 1
    count = value(found, "plait_dispatch_latency_seconds_count", workflow="clustered")
    assert count == 2
    assert 0 <= value(found, "plait_dispatch_latency_seconds_sum",
                      workflow="clustered") < 10
    assert value(found, "plait_attempts_started_total", workflow="clustered", step="b") == 1
