"""``executor: process``: a sync python step's call runs in a child process (its value
is the child's, on two workers of each store); a timeout or a cancelled run kills the
child; the child's exception reaches ``retry_on`` by its class names.  A call holding
the GIL for longer than the lease of a worker process: tests/acceptance/
test_process_executor_workers.py (workers in one process stall together)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.runtime.engine import Engine
from plait.store import MemoryStore, Store

from .conftest import StepsModule, run_on_two_workers

_STEPS = '''
import os
import re
import time


class Flaky(Exception):
    pass


def hold_gil(marks):
    with open(marks, "a") as f:
        f.write(f"{os.getpid()}\\n")
    re.match(r"(a+)+$", "a" * 18 + "b")  # C code that keeps the GIL a moment
    return {"pid": os.getpid()}


def sleep_long(marks):
    with open(marks, "a") as f:
        f.write(f"{os.getpid()}\\n")
    time.sleep(120)
    return "never"


def flaky_then_ok(marks, fails):
    with open(marks, "a") as f:
        f.write("x\\n")
    with open(marks) as f:
        calls = len(f.read().split())
    if calls <= fails:
        raise Flaky(f"call {calls} fails")
    return {"calls": calls}


def fatal(marks):
    from plait.errors import FatalError

    with open(marks, "a") as f:
        f.write("x\\n")
    raise FatalError("give up")


def wrong_kind(marks):
    with open(marks, "a") as f:
        f.write("x\\n")
    raise ValueError("not the kind retry_on names")
'''


def _definition(module: str, function: str, marks: Path, **step: Any) -> dict[str, Any]:
    return {"name": "procexec", "steps": [{
        "id": "s", "type": "python", "call": f"{module}:{function}",
        "with": {"marks": str(marks), **step.pop("with", {})}, "executor": "process",
        **step}]}


def _lines(marks: Path) -> list[str]:
    return marks.read_text().split() if marks.exists() else []


async def _gone(pid: int, deadline_s: float = 10.0) -> bool:
    """Whether process ``pid`` is gone (reaped) within the deadline (polled)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while loop.time() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        await asyncio.sleep(0.02)
    return False


async def _started(marks: Path, deadline_s: float = 15.0) -> int:
    """The pid the step's child wrote, once it wrote it (polled)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not _lines(marks):
        assert loop.time() < end, "the step's child never started"
        await asyncio.sleep(0.02)
    return int(_lines(marks)[0])


async def test_a_process_step_runs_once_in_a_child_on_two_workers(
        store: Store, write_steps_module: StepsModule, tmp_path: Path) -> None:
    module = write_steps_module(_STEPS)
    marks = tmp_path / "marks"
    checked = check_definition(_definition(module, "hold_gil", marks,
                                           retry={"max_retries": 2, "initial_delay": "0s"}),
                               check_imports=True)
    run_id, status = await run_on_two_workers(store, checked)
    result = await Engine(store).result(run_id)
    assert status is RunStatus.COMPLETED, result.error
    assert result.steps["s"].attempts == 1
    assert len(_lines(marks)) == 1
    assert result.steps["s"].output == {"pid": int(_lines(marks)[0])}
    assert result.steps["s"].output["pid"] != os.getpid()


async def test_a_timeout_kills_the_child_process(write_steps_module: StepsModule,
                                                 tmp_path: Path) -> None:
    module = write_steps_module(_STEPS)
    marks = tmp_path / "marks"
    checked = check_definition(_definition(module, "sleep_long", marks, timeout="500ms",
                                           retry={"max_retries": 0}),
                               check_imports=True)
    engine = Engine(MemoryStore())
    try:
        result = await asyncio.wait_for(engine.run(checked, {}), 30)
    finally:
        engine.close()
    assert result.status == "failed"
    assert "StepTimeout" in str(result.steps["s"].error)
    assert await _gone(int(_lines(marks)[0]))


async def test_cancelling_the_run_kills_the_child_process(write_steps_module: StepsModule,
                                                          tmp_path: Path) -> None:
    module = write_steps_module(_STEPS)
    marks = tmp_path / "marks"
    checked = check_definition(_definition(module, "sleep_long", marks), check_imports=True)
    engine = Engine(MemoryStore())
    try:
        run = await engine.submit(checked, {})
        running = asyncio.create_task(engine.execute(checked, run))
        pid = await _started(marks)
        await engine.cancel(run.run_id)
        result = await asyncio.wait_for(running, 30)
    finally:
        engine.close()
    assert result.status == "cancelled"
    assert await _gone(pid)


async def test_the_child_exception_reaches_retry_on(write_steps_module: StepsModule,
                                                    tmp_path: Path) -> None:
    module = write_steps_module(_STEPS)
    retry = {"max_retries": 2, "initial_delay": "0s", "retry_on": ["Flaky", "FatalError"]}
    flaky, wrong = tmp_path / "flaky", tmp_path / "wrong"
    engine = Engine(MemoryStore())
    try:
        ok = await asyncio.wait_for(engine.run(check_definition(_definition(
            module, "flaky_then_ok", flaky, retry=retry, **{"with": {"fails": 2}}),
            check_imports=True), {}), 30)
        failed = await asyncio.wait_for(engine.run(check_definition(_definition(
            module, "wrong_kind", wrong, retry=retry), check_imports=True), {}), 30)
        fatal = await asyncio.wait_for(engine.run(check_definition(_definition(
            module, "fatal", tmp_path / "fatal", retry=retry), check_imports=True), {}), 30)
    finally:
        engine.close()
    assert (ok.status, ok.steps["s"].attempts, ok.steps["s"].output) == (
        "completed", 3, {"calls": 3})
    # a ValueError is not what retry_on names: one attempt, its type and message kept
    assert (failed.status, failed.steps["s"].attempts, len(_lines(wrong))) == (
        "failed", 1, 1)
    assert "ValueError" in str(failed.steps["s"].error)
    assert "not the kind retry_on names" in str(failed.steps["s"].error)
    # a FatalError raised in the child is never retried
    assert (fatal.status, fatal.steps["s"].attempts) == ("failed", 1)
    assert "FatalError: give up" in str(fatal.steps["s"].error)
