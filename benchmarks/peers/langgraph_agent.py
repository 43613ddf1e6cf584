"""LangGraph's side of ``agent_loop.py``: the agent loop in the functional API, an
``@entrypoint`` whose model and tool calls are ``@task``s, checkpointed by LangGraph's
SQLite checkpointer (``AsyncSqliteSaver``, langgraph-checkpoint-sqlite).

A run is a thread (``configurable.thread_id``); a task's result is saved with the
thread's checkpoint when the task completes, and a run that stopped is continued by
invoking the entrypoint again with ``None`` on the same thread: it runs again, and the
tasks that completed return their saved results.  Every invoke uses
``durability="sync"`` (each save is written before the run goes on), the mode that
keeps a result whatever the moment the process is killed; the default, "async", writes
while the next step runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from agent_calls import TURNS, model, tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.func import entrypoint, task

ENGINE = "LangGraph functional API (SQLite checkpointer)"


@task
async def call_model(turn: int, total: int) -> dict[str, Any]:
    return await model(turn, total)


@task
async def call_tool(turn: int, reply: dict[str, Any]) -> dict[str, Any]:
    return await tool(turn, reply)


async def agent_loop(inputs: dict[str, Any]) -> dict[str, Any]:
    turns = int(inputs.get("turns", TURNS))
    total = 0
    for turn in range(1, turns + 1):
        reply = await call_model(turn, total)
        total = (await call_tool(turn, reply))["total"]
    return {"turns": turns, "total": total}


class Runner:
    def __init__(self, saver: AsyncSqliteSaver) -> None:
        self._agent = entrypoint(checkpointer=saver)(agent_loop)

    async def start(self, run_id: str, inputs: dict[str, Any]) -> Any:
        config = {"configurable": {"thread_id": run_id}}
        return await self._agent.ainvoke(inputs, config, durability="sync")

    async def resume(self, run_id: str) -> Any:
        config = {"configurable": {"thread_id": run_id}}
        return await self._agent.ainvoke(None, config, durability="sync")


@contextlib.asynccontextmanager
async def opened(db: str) -> AsyncIterator[Runner]:
    """``db``: the SQLite file of the checkpointer."""
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        yield Runner(saver)
