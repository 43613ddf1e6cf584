"""An approval's deadline and a person's decision racing: the first stored stands.

The timeout's decision goes through the same compare-and-set as a person's
(``Store.record_decision``), so a decision another process stored just before the
deadline fired is the one the run follows, and the history holds exactly one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from plait import Workflow
from plait.core.states import StepStatus
from plait.runtime.engine import Engine
from plait.store import open_store
from plait.store.base import RunFilter, Store

from .conftest import run_with

WAIT_S = 10.0


async def _slow() -> str:
    await asyncio.sleep(0.8)  # keeps the run loop alive past the approval's deadline
    return "done"


async def _until_waiting(store: Store, step: str) -> str:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while asyncio.get_running_loop().time() < deadline:
        for run in await store.list_runs(RunFilter()):
            steps = {s.step_id: s for s in await store.get_steps(run.run_id)}
            if step in steps and steps[step].status is StepStatus.WAITING:
                return run.run_id
        await asyncio.sleep(0.01)
    raise AssertionError(f"step {step!r} never waited")


async def test_a_decision_stored_before_the_deadline_fires_stands(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plait.db'}"
    wf = Workflow("deadline-race")
    wf.add_step("slow", _slow)
    wf.add_step("gate", type="approval", prompt="ship?", timeout=0.3, on_timeout="approve")
    runner, person = open_store(url), open_store(url)
    await runner.open()
    await person.open()
    engine = Engine(runner)
    try:
        running = asyncio.create_task(run_with(engine, wf))
        run_id = await _until_waiting(person, "gate")
        # stored by "another process": the executing loop is not told, and its deadline
        # (0.3 s) fires before its next look at the store (every 0.5 s)
        await person.record_decision(run_id, "gate", {"decision": "rejected", "by": "ada",
                                                      "at": 0.0, "data": None})
        result = await running
        events = await person.get_events(run_id)
    finally:
        engine.close()
        await runner.close()
        await person.close()

    assert result.steps["gate"].status == "failed"
    assert result.steps["gate"].error == "rejected by ada"
    decisions = [e.data["approval"] for e in events
                 if e.kind == "note" and "approval" in e.data]
    assert [d["by"] for d in decisions] == ["ada"]
    assert result.status == "failed"


async def test_the_timeout_decision_is_stored_once_when_nobody_decided(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plait.db'}"
    wf = Workflow("deadline-alone")
    wf.add_step("slow", _slow)
    wf.add_step("gate", type="approval", prompt="ship?", timeout=0.2, on_timeout="approve")
    store = open_store(url)
    await store.open()
    engine = Engine(store)
    try:
        result = await run_with(engine, wf)
        events = await store.get_events(result.run_id)
    finally:
        engine.close()
        await store.close()

    assert result.status == "completed"
    assert result.steps["gate"].output["by"] == "timeout"
    decisions = [e.data["approval"] for e in events
                 if e.kind == "note" and "approval" in e.data]
    assert [(d["decision"], d["by"]) for d in decisions] == [("approved", "timeout")]
