"""plait's side of ``journal_cost.py`` and ``agent_loop.py``: workflows whose python
steps live in this module (not in ``__main__``), so that ``plait.resume`` in another
process imports them, as docs/python-api.md asks of durable runs.

- ``cost_workflow()``: one step that makes ``input["n"]`` calls of ``ping``, journaled
  (``await ctx.run(f"c{i}", ping)``) or plain (``await ping()``) as ``input["journal"]``
  says, and returns the seconds the calls took, on the clock and of the process's CPU
  (measured inside the step).
- ``agent_workflow()``: one step running the agent loop of ``agent_calls``: each turn
  a journaled model call and a journaled tool call; ``opened(url)`` gives the runner
  ``agent_loop.py`` drives (start a run, resume one).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from agent_calls import TURNS, model, tool

import plait
from plait import StepContext, Workflow


async def ping() -> dict[str, int]:
    """The call whose cost is not measured: an async function returning a small dict."""
    return {"ok": 1}


async def calls(ctx: StepContext, input: dict[str, Any]) -> dict[str, Any]:
    n, journal = int(input["n"]), bool(input["journal"])
    started, cpu = time.perf_counter(), time.process_time()
    if journal:
        for i in range(n):
            await ctx.run(f"c{i}", ping)
    else:
        for _ in range(n):
            await ping()
    return {"n": n, "journal": journal, "seconds": time.perf_counter() - started,
            "cpu_seconds": time.process_time() - cpu}


def cost_workflow() -> Workflow:
    wf = Workflow("journal-cost")
    wf.add_step("calls", calls)
    return wf


async def agent(ctx: StepContext, input: dict[str, Any]) -> dict[str, Any]:
    """Ten turns: ask the model, run the tool it names; each call journaled."""
    turns = int(input.get("turns", TURNS))
    total = 0
    for turn in range(1, turns + 1):
        reply = await ctx.run(f"model-{turn}", model, turn, total)
        total = (await ctx.run(f"tool-{turn}", tool, turn, reply))["total"]
    return {"turns": turns, "total": total}


def agent_workflow() -> Workflow:
    wf = Workflow("agent-loop")
    wf.add_step("agent", agent)
    return wf


class Runner:
    """``agent_loop.py``'s view of plait: a run started with ``wf.run_async`` on a
    ``plait.connect`` handle, continued with ``plait.resume_async``."""

    def __init__(self, db: Any) -> None:
        self._db, self._wf = db, agent_workflow()

    async def start(self, run_id: str, inputs: dict[str, Any]) -> Any:
        return _output(await self._wf.run_async(inputs, db=self._db, run_id=run_id))

    async def resume(self, run_id: str) -> Any:
        return _output(await plait.resume_async(run_id, db=self._db))


def _output(result: plait.RunResult) -> Any:
    if result.status != "completed":
        raise RuntimeError(f"run {result.run_id} ended {result.status}: {result.error}")
    return (result.output or {}).get("agent")


@contextlib.asynccontextmanager
async def opened(db: str) -> AsyncIterator[Runner]:
    """``db``: a store URL, held open (one ``plait.connect`` handle) while in use."""
    async with plait.connect(db) as handle:
        yield Runner(handle)
