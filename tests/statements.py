"""Counting the SQL statements plait sends to PostgreSQL, per asyncio task: every
statement goes through ``psycopg.AsyncCursor.execute`` (``AsyncConnection.execute``
opens a cursor and calls it), which ``count_statements`` wraps for the duration of a
``with`` block.  ``Statements.of_task_running(marker)``: the statements of the task that
sent one containing ``marker`` (a request's handler, say), whatever other tasks (a
worker's loops) sent meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg


@dataclass
class Statements:
    sent: list[tuple[int, str]] = field(default_factory=list)  # (task id, query)

    def queries(self) -> list[str]:
        return [query for _, query in self.sent]

    def of_task_running(self, marker: str) -> list[str]:
        tasks = {task for task, query in self.sent if marker in query}
        assert len(tasks) == 1, f"{len(tasks)} tasks sent {marker!r}"
        return [query for task, query in self.sent if task in tasks]


@contextmanager
def count_statements() -> Iterator[Statements]:
    counted = Statements()
    original = psycopg.AsyncCursor.execute

    async def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query if isinstance(query, str) else repr(query)
        counted.sent.append((id(asyncio.current_task()), text))
        return await original(self, query, *args, **kwargs)

    psycopg.AsyncCursor.execute = execute  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        psycopg.AsyncCursor.execute = original  # type: ignore[method-assign]
