"""What an attempt run by a worker leaves besides its output, on every store: its
notes (ctx.emit, an llm step's token usage, a step-cache hit, ctx.logger records)
reach the run's history through its outcome, and a Python step's
``ctx.wait_for_approval`` waits, resumes on any worker once approved, and fails once
rejected (docs/workers.md, docs/waiting.md)."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import respx
from click.testing import CliRunner

from plait.cli.main import cli
from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.runtime.engine import Engine
from plait.runtime.worker import Worker
from plait.store.base import EventRecord, Store
from plait.store.memory import MemoryStore
from plait.store.url import open_store

from .conftest import StepsModule

pytestmark = pytest.mark.slow  # starts clusters of workers

BASE = "https://llm.test/v1"
URLS: dict[int, str] = {}  # id(store) -> its URL, for the CLI (not the memory store)

_STEPS = '''
CALLS = []

def stream(ctx):
    ctx.emit({"part": 1})
    ctx.logger.info("streaming")
    ctx.emit({"part": 2})
    return "streamed"

def double(input):
    CALLS.append(input["x"])
    return {"v": input["x"] * 2}

async def gate(ctx):
    CALLS.append(ctx.attempt)
    ctx.emit({"asking": ctx.attempt})
    decision = await ctx.wait_for_approval("ship?", timeout="1h")
    return {"shipped": decision["data"], "by": decision["by"]}

def after(gate):
    return gate["shipped"]

def hold(marker):
    import os, time
    deadline = time.time() + 20
    while not os.path.exists(marker) and time.time() < deadline:
        time.sleep(0.02)
    return "held"
'''


@pytest.fixture
def steps_module(write_steps_module: StepsModule) -> str:
    return write_steps_module(_STEPS)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql",
                                                         marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        opened: Store = MemoryStore()
    else:
        url = f"sqlite:///{tmp_path / 'plait.db'}" if request.param == "sqlite" \
            else str(request.getfixturevalue("pg_database"))
        opened = open_store(url)
        URLS[id(opened)] = url
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


class _Workers:
    def __init__(self, store: Store) -> None:
        self.workers = [Worker(store, name=name, concurrency=2, lease=2.0, poll=0.05,
                               grace=2.0, schedules=False) for name in ("w1", "w2")]
        self.tasks = [asyncio.create_task(w.run()) for w in self.workers]

    async def stop(self) -> None:
        for w in self.workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*self.tasks), 15)


async def _status(store: Store, run_id: str, *wanted: RunStatus,
                  timeout: float = 20.0) -> RunStatus:
    deadline = asyncio.get_running_loop().time() + timeout
    while (status := (await store.get_run(run_id)).status) not in wanted:
        assert asyncio.get_running_loop().time() < deadline, f"still {status}"
        await asyncio.sleep(0.05)
    return status


def _notes(events: list[EventRecord], step: str, kind: str) -> list[Any]:
    return [e.data[kind] for e in events
            if e.kind == "note" and e.step_id == step and kind in e.data]


async def test_emits_usage_logs_and_cache_hits_of_worker_attempts_reach_history(
        store: Store, steps_module: str, respx_mock: respx.MockRouter,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test-Zq8uV3xL0pK9")
    respx_mock.post(f"{BASE}/chat/completions").respond(200, json={
        "id": "c1", "object": "chat.completion", "model": "gpt-test-0613",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})
    checked = check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "ask", "type": "llm", "base_url": BASE, "model": "gpt-test",
         "api_key_env": "TEST_LLM_KEY", "prompt": "Say hi"},
        {"id": "stream", "type": "python", "call": f"{steps_module}:stream"},
        {"id": "double", "type": "python", "call": f"{steps_module}:double",
         "cache": {"key": "{{ input.x }}", "ttl": "1h"}}]})
    engine = Engine(store)
    workers = _Workers(store)
    try:
        first = await engine.submit(checked, {"x": 2})
        await _status(store, first.run_id, RunStatus.COMPLETED)
        second = await engine.submit(checked, {"x": 2})
        await _status(store, second.run_id, RunStatus.COMPLETED)
    finally:
        await workers.stop()
    events = await store.get_events(first.run_id)
    assert [u["prompt_tokens"] for u in _notes(events, "ask", "usage")] == [7]
    assert _notes(events, "ask", "usage")[0]["completion_tokens"] == 3
    assert [e["value"] for e in _notes(events, "stream", "emit")] == [{"part": 1},
                                                                     {"part": 2}]
    assert [r["message"] for r in _notes(events, "stream", "log")] == ["streaming"]
    assert _notes(events, "double", "cache") == []
    again = await store.get_events(second.run_id)
    hits = _notes(again, "double", "cache")
    assert len(hits) == 1 and hits[0]["from_run"] == first.run_id
    assert len(_notes(again, "stream", "emit")) == 2  # stored once each, not twice
    assert sys.modules[steps_module].CALLS == [2]  # the hit never ran the function
    if id(store) in URLS:  # plait show --json, as for a local run
        shown = [json.loads((await asyncio.to_thread(
            CliRunner().invoke, cli, ["show", run.run_id, "--db", URLS[id(store)],
                                      "--json"])).stdout) for run in (first, second)]
        assert [(s["steps"]["double"]["cached"], s["steps"]["stream"]["cached"])
                for s in shown] == [(False, False), (True, False)]
        usage = [a["usage"] for a in shown[0]["attempts"] if a["step"] == "ask"]
        assert [u["prompt_tokens"] for u in usage] == [7]
        assert [(e["step"], e["value"]) for e in shown[0]["emits"]] == [
            ("stream", {"part": 1}), ("stream", {"part": 2})]


def _gated(steps_module: str, marker: Path | None = None) -> Any:
    steps: list[dict[str, Any]] = [
        {"id": "gate", "type": "python", "call": f"{steps_module}:gate"},
        {"id": "after", "type": "python", "call": f"{steps_module}:after",
         "depends_on": ["gate"]}]
    if marker is not None:  # keeps the run running (driven) while the gate waits
        steps.append({"id": "hold", "type": "python", "call": f"{steps_module}:hold",
                      "with": {"marker": str(marker)}})
    return check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": steps})


async def _step_status(store: Store, run_id: str, step: str, wanted: str) -> None:
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        rows = {s.step_id: s for s in await store.get_steps(run_id)}
        if step in rows and str(rows[step].status) == wanted:
            return
        assert asyncio.get_running_loop().time() < deadline, rows.get(step)
        await asyncio.sleep(0.05)


async def test_a_python_step_waits_on_workers_and_resumes_on_a_worker_once_approved(
        store: Store, steps_module: str, tmp_path: Path) -> None:
    """The worker driving the run applies the approval: the step's next attempt is a
    ticket a worker runs, and wait_for_approval returns the decision there."""
    engine = Engine(store)
    marker = tmp_path / "release"
    workers = _Workers(store)
    try:
        run = await engine.submit(_gated(steps_module, marker), {})
        await _step_status(store, run.run_id, "gate", "waiting")
        await engine.approve(run.run_id, "gate", by="ada", data={"v": 2})
        await _step_status(store, run.run_id, "after", "completed")
        marker.touch()
        await _status(store, run.run_id, RunStatus.COMPLETED, RunStatus.FAILED)
    finally:
        marker.touch()
        await workers.stop()
    stored = await store.get_run(run.run_id)
    steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
    assert stored.status is RunStatus.COMPLETED, (stored.error, steps["gate"].error)
    assert steps["gate"].output == {"shipped": {"v": 2}, "by": "ada"}
    assert steps["after"].output == {"v": 2}
    assert steps["gate"].attempts == 2
    assert steps["gate"].worker in ("w1", "w2")
    assert sys.modules[steps_module].CALLS == [1, 2]  # ran again from the start
    attempts = [(a.attempt, a.status) for a in await store.get_attempts(run.run_id)
                if a.step_id == "gate"]
    assert attempts == [(1, "waiting"), (2, "completed")]
    events = await store.get_events(run.run_id)
    assert [e["value"] for e in _notes(events, "gate", "emit")] == [{"asking": 1},
                                                                   {"asking": 2}]
    waits = _notes(events, "gate", "wait")
    assert [(w["prompt"], w["timeout"]) for w in waits] == [("ship?", 3600.0)]


async def test_a_parked_run_of_workers_continues_once_approved_or_fails_if_rejected(
        store: Store, steps_module: str) -> None:
    """Nothing else runs: the run parks (``waiting``); the decision is stored and the
    run continued as ``plait approve`` does."""
    engine = Engine(store)
    workers = _Workers(store)
    try:
        approved = await engine.submit(_gated(steps_module), {})
        rejected = await engine.submit(_gated(steps_module), {})
        for run in (approved, rejected):
            await _status(store, run.run_id, RunStatus.WAITING)
        await engine.approve(approved.run_id, "gate", by="ada", data={"v": 3})
        await engine.approve(rejected.run_id, "gate", approved=False, by="bob")
        done = await engine.resume(approved.run_id)
        failed = await engine.resume(rejected.run_id)
    finally:
        await workers.stop()
        engine.close()
    assert done.status == "completed", done.steps["gate"].error
    assert done.steps["gate"].output == {"shipped": {"v": 3}, "by": "ada"}
    assert failed.status == "failed"
    assert failed.steps["gate"].status == "failed"
    assert "rejected by bob" in (failed.steps["gate"].error or "")
    assert failed.steps["gate"].attempts == 1
