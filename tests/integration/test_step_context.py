"""What a step's ``ctx`` gives it beyond data: a logger whose records are redacted and
kept in the run's history, and ``cancelled`` for sync bodies that cannot be interrupted."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plait import StepContext, Workflow
from plait.runtime.engine import Engine
from plait.store import MemoryStore, open_store
from plait.store.base import EventRecord, RunFilter

from .conftest import run_with

SECRET = "hunter2/s3cret+value"
WAIT_S = 10.0  # a bound on waiting for a thread, never a claim about speed


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    memory = MemoryStore()
    await memory.open()
    yield memory
    await memory.close()


def logs(events: list[EventRecord]) -> list[tuple[str | None, dict[str, Any]]]:
    return [(e.step_id, e.data["log"]) for e in events
            if e.kind == "note" and isinstance(e.data.get("log"), dict)]


# ------------------------------------------------------------------ ctx.logger


async def test_log_records_are_redacted_stored_and_passed_on(
        store: MemoryStore, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("PLAIT_SECRET_Y", SECRET)

    def sync_step(token: str, ctx: StepContext) -> int:  # runs in a worker thread
        ctx.logger.info("using token %s", token)
        ctx.logger.warning("token %s looks old", token)
        ctx.logger.debug("not stored: %s", token)
        return 1

    async def async_step(token: str, ctx: StepContext) -> int:
        try:
            raise ValueError(f"bad token {token}")
        except ValueError:
            ctx.logger.exception("failed with %(what)s", {"what": "a secret"})
        return 2

    wf = Workflow("logging")
    wf.add_step("sync", sync_step, with_={"token": "{{ secrets.Y }}"})
    wf.add_step("async", async_step, with_={"token": "{{ secrets.Y }}"})
    engine = Engine(store)
    try:
        with caplog.at_level(logging.INFO, logger="plait.step"):
            result = await run_with(engine, wf)
    finally:
        engine.close()

    assert result.status == "completed"
    stored = logs(await store.get_events(result.run_id))
    by_step = {step: [(r["level"], r["message"].splitlines()[0], r["attempt"])
                      for r in records]
               for step, records in _grouped(stored).items()}
    assert by_step == {
        "sync": [("INFO", "using token ***", 1), ("WARNING", "token *** looks old", 1)],
        "async": [("ERROR", "failed with a secret", 1)],
    }
    traceback = next(r["message"] for s, r in stored if s == "async")
    assert "ValueError: bad token ***" in traceback
    assert all(isinstance(r["at"], float) for _, r in stored)
    shown = [r.getMessage() for r in caplog.records if r.name == "plait.step"]
    assert "step sync (attempt 1): token *** looks old" in shown
    assert SECRET not in repr(stored) + "\n".join(shown) + caplog.text


async def test_a_secret_step_code_reads_from_the_environment_is_redacted(
        store: MemoryStore, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """No template reads it: the step takes PLAIT_SECRET_Y itself, logs it, returns it
    and fails with it.  None of it is stored or shown."""
    monkeypatch.setenv("PLAIT_SECRET_Y", SECRET)

    def leaky(ctx: StepContext) -> dict[str, str]:
        token = os.environ["PLAIT_SECRET_Y"]
        ctx.logger.warning("token %s", token)
        return {"echo": f"Bearer {token}"}

    def failing() -> None:
        raise RuntimeError(f"rejected {os.environ['PLAIT_SECRET_Y']}")

    wf = Workflow("leaky")
    wf.add_step("leaky", leaky)
    wf.add_step("failing", failing, retry=0)
    engine = Engine(store)
    try:
        with caplog.at_level(logging.INFO, logger="plait.step"):
            result = await run_with(engine, wf)
    finally:
        engine.close()

    assert result.steps["leaky"].output == {"echo": "Bearer ***"}
    assert result.steps["failing"].error == "RuntimeError: rejected ***"
    stored = await store.get_events(result.run_id)
    attempts = await store.get_attempts(result.run_id)
    assert SECRET not in repr(stored) + repr(attempts) + caplog.text


def _grouped(records: list[tuple[str | None, dict[str, Any]]]
             ) -> dict[str | None, list[dict[str, Any]]]:
    out: dict[str | None, list[dict[str, Any]]] = {}
    for step, record in records:
        out.setdefault(step, []).append(record)
    return out


async def test_records_of_each_attempt_are_kept(store: MemoryStore) -> None:
    def flaky(ctx: StepContext) -> str:
        ctx.logger.info("attempt %d starting", ctx.attempt)
        if ctx.attempt < 2:
            raise RuntimeError("try again")
        return "done"

    wf = Workflow("attempts")
    wf.add_step("flaky", flaky, retry={"max_retries": 2, "initial_delay": 0.001})
    engine = Engine(store)
    try:
        result = await run_with(engine, wf)
    finally:
        engine.close()

    assert result.steps["flaky"].attempts == 2
    assert [(s, r["attempt"], r["message"]) for s, r in
            logs(await store.get_events(result.run_id))] == [
        ("flaky", 1, "attempt 1 starting"), ("flaky", 2, "attempt 2 starting")]


# ------------------------------------------------------------------ ctx.cancelled


class Spinner:
    """A sync step body that spins until ``ctx.cancelled``, saying when it starts and
    when it stops."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.saw_cancelled = False

    def __call__(self, ctx: StepContext) -> str:
        self.started.set()
        while not ctx.cancelled:
            if self.stopped.wait(0.005):  # the test gave up: do not spin forever
                return "abandoned"
        self.saw_cancelled = True
        self.stopped.set()
        return "stopped"


async def run_until_spin_stops(store: MemoryStore, wf: Workflow, spin: Spinner) -> Any:
    """Run ``wf`` and wait for its spinning sync step to notice ``ctx.cancelled``
    (asserted), then return the run's result."""
    engine = Engine(store)
    try:
        result = await run_with(engine, wf)
        stopped = await asyncio.to_thread(spin.stopped.wait, WAIT_S)
    finally:
        spin.stopped.set()
        engine.close()
    assert stopped and spin.saw_cancelled
    return result


async def test_a_cancel_request_through_the_store_stops_a_sync_step(tmp_path: Path) -> None:
    """What `plait cancel` does from another process: flag the run in the database."""
    url = f"sqlite:///{tmp_path / 'plait.db'}"
    spin = Spinner()
    wf = Workflow("spinning")
    wf.add_step("spin", spin)
    runner, canceller = open_store(url), open_store(url)
    await runner.open()
    await canceller.open()
    engine = Engine(runner)
    try:
        running = asyncio.create_task(run_with(engine, wf))
        assert await asyncio.to_thread(spin.started.wait, WAIT_S)
        [run] = await canceller.list_runs(RunFilter())
        await canceller.request_cancel(run.run_id)
        result = await running
        stopped = await asyncio.to_thread(spin.stopped.wait, WAIT_S)
        stored = await canceller.get_run(run.run_id)
    finally:
        spin.stopped.set()
        engine.close()
        await runner.close()
        await canceller.close()

    assert stopped and spin.saw_cancelled
    assert result.status == "cancelled" and str(stored.status) == "cancelled"
    assert result.steps["spin"].status == "cancelled"
    assert result.steps["spin"].output is None  # what it returned afterwards is discarded


async def test_a_timed_out_sync_step_sees_cancelled(store: MemoryStore) -> None:
    spin = Spinner()
    wf = Workflow("spinning")
    wf.add_step("spin", spin, timeout=0.05, retry=0)
    result = await run_until_spin_stops(store, wf, spin)
    assert result.steps["spin"].status == "failed"
    assert "timed out" in (result.steps["spin"].error or "")


async def test_fail_fast_tells_a_running_sync_sibling(store: MemoryStore) -> None:
    spin = Spinner()

    async def boom() -> None:
        await asyncio.to_thread(spin.started.wait, WAIT_S)
        raise RuntimeError("boom")

    wf = Workflow("fail-fast", on_failure="fail_fast")
    wf.add_step("spin", spin)
    wf.add_step("boom", boom, retry=0)
    result = await run_until_spin_stops(store, wf, spin)
    assert result.status == "failed"
    assert result.steps["spin"].status == "cancelled"
