"""DBOS's side of ``agent_loop.py``: the agent loop as a ``@DBOS.workflow`` whose model
and tool calls are ``@DBOS.step``s, on a SQLite system database (a file) or a
PostgreSQL one (a URL).

A run is a workflow id (``SetWorkflowID``).  A step's result is recorded in the
system database when the step returns; a workflow whose process died is taken up
again by ``DBOS.launch()`` in the next process (it recovers the pending workflows of
its executor), which replays the recorded steps.  ``resume`` launches and then waits
for that workflow's result through its handle.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from agent_calls import TURNS, model, tool
from dbos import DBOS, SetWorkflowID


@DBOS.step()
async def model_step(turn: int, total: int) -> dict[str, Any]:
    return await model(turn, total)


@DBOS.step()
async def tool_step(turn: int, reply: dict[str, Any]) -> dict[str, Any]:
    return await tool(turn, reply)


@DBOS.workflow()
async def agent_workflow(inputs: dict[str, Any]) -> dict[str, Any]:
    turns = int(inputs.get("turns", TURNS))
    total = 0
    for turn in range(1, turns + 1):
        reply = await model_step(turn, total)
        total = (await tool_step(turn, reply))["total"]
    return {"turns": turns, "total": total}


class Runner:
    async def start(self, run_id: str, inputs: dict[str, Any]) -> Any:
        with SetWorkflowID(run_id):
            return await agent_workflow(inputs)

    async def resume(self, run_id: str) -> Any:
        handle = await DBOS.retrieve_workflow_async(run_id)
        return await handle.get_result()


@contextlib.asynccontextmanager
async def opened(db: str) -> AsyncIterator[Runner]:
    """``db``: a SQLite file, or a PostgreSQL URL (a database of its own)."""
    url = db if "://" in db else f"sqlite:///{db}"
    DBOS(config={"name": "plait-agent-bench", "system_database_url": url,
                 "run_admin_server": False, "log_level": "WARNING"})
    DBOS.launch()
    try:
        yield Runner()
    finally:
        DBOS.destroy()
