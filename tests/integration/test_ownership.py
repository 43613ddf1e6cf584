"""Who executes a run: taking over from a process that died, and what a process that
finds the run busy is told."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest

from plait import Workflow
from plait.errors import RunBusy
from plait.runtime.engine import Engine
from plait.store.memory import MemoryStore


def exited_process_owner() -> str:
    """An owner ("host:pid") naming a process of this host that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return f"{socket.gethostname()}:{child.pid}"


async def test_a_takeover_records_a_real_heartbeat() -> None:
    """The process that takes over a dead owner's run stores its own time as the
    heartbeat (not one in the future), so a third process is told an age >= 0."""
    store = MemoryStore()
    started, gate = asyncio.Event(), asyncio.Event()
    wf = Workflow("takeover")

    @wf.step()
    async def hold() -> int:
        started.set()
        await gate.wait()
        return 1

    checked = wf.validate()
    dead = exited_process_owner()
    run = await Engine(store, worker=dead).submit(checked, {})
    assert await store.claim_run(run.run_id, dead, now=900.0, lease=30.0) is not None

    taker = Engine(store, worker="host-b:1", clock=lambda: 1000.0)
    late = Engine(store, worker="host-c:1", clock=lambda: 1005.0)
    async with asyncio.TaskGroup() as tg:
        resumed = tg.create_task(taker.resume(run.run_id, checked))
        await started.wait()
        assert (await store.get_run(run.run_id)).heartbeat_at == 1000.0
        with pytest.raises(RunBusy) as busy:
            await late.resume(run.run_id, checked)
        gate.set()
    assert "being executed by host-b:1 (last heartbeat 5s ago)" in str(busy.value)
    assert busy.value.owner == "host-b:1"
    assert resumed.result().status == "completed"
    for engine in (taker, late):
        engine.close()
