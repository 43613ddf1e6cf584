"""The step journal on PostgreSQL (``Store.journal_get`` / ``journal_step`` /
``journal_put`` / ``journal``; the table is
``migrations/postgres/0012_step_journal.sql``, the statements ``sql/postgres.sql``):
the worker running an attempt writes its calls' results.  And the events sent to runs
(``Store.event_put`` / ``event_get``, ``0013_run_events.sql``)."""

from __future__ import annotations

from typing import Any

from ..core.model import JSON
from ..errors import EventTaken, RunNotFound
from .base import Journaled, JournalEntry, Signal
from .postgres_database import PostgresDatabase
from .sql import queries, rows
from .sql.postgres_rows import text

_Q = queries("postgres")


async def journal_get(db: PostgresDatabase, run_id: str, step_id: str,
                      name: str) -> Journaled | None:
    row = await db.fetchone(_Q["journal_get"], {
        "run_id": text(run_id), "step_id": text(step_id), "name": text(name)})
    return None if row is None else _journaled(row)


async def journal_step(db: PostgresDatabase, run_id: str,
                       step_id: str) -> dict[str, Journaled]:
    found = await db.fetchall(_Q["journal_step"], {"run_id": text(run_id),
                                                   "step_id": text(step_id)})
    return {row[0]: _journaled(row[1:]) for row in found}


async def journal_put(db: PostgresDatabase, run_id: str, step_id: str, name: str, value: JSON,
                      attempt: int, at: float) -> Journaled:
    """One statement; a repeat after a lost connection finds the stored row."""
    row = await db.fetchone(_Q["journal_put"], {
        "run_id": text(run_id), "step_id": text(step_id), "name": text(name),
        "value": rows.json_text(value, f"the journaled call {name!r} of step {step_id!r}"),
        "attempt": attempt, "at": at})
    if row is None:
        raise RunNotFound(run_id)
    return _journaled(row)


async def journal(db: PostgresDatabase, run_id: str) -> list[JournalEntry]:
    found = await db.fetchall(_Q["journal_list"], {"run_id": text(run_id)})
    if not found:
        raise RunNotFound(run_id)
    return [JournalEntry(step=r[0], name=r[1], attempt=r[2], at=float(r[3]))
            for r in found if r[0] is not None]


def _journaled(row: Any) -> Journaled:
    value = row[0]
    return Journaled(value=rows.decode(value) if isinstance(value, str) else value,
                     attempt=int(row[1]), at=float(row[2]))


async def event_get(db: PostgresDatabase, run_id: str, name: str) -> Signal | None:
    row = await db.fetchone(_Q["event_get"], {"run_id": text(run_id), "name": text(name)})
    return None if row is None else _signal(name, row)


async def event_put(db: PostgresDatabase, run_id: str, name: str, data: JSON,
                    at: float) -> Signal:
    """EventTaken when one of that name is stored (by anyone, first), RunNotFound."""
    row = await db.fetchone(_Q["event_put"], {
        "run_id": text(run_id), "name": text(name), "at": at,
        "data": rows.json_text(data, f"the data of event {name!r}")})
    if row is not None:
        return _signal(name, row)
    standing = await event_get(db, run_id, name)
    if standing is None:
        raise RunNotFound(run_id)
    raise EventTaken(run_id, name, standing.at)


def _signal(name: str, row: Any) -> Signal:
    data = row[0]
    return Signal(name=name, data=rows.decode(data) if isinstance(data, str) else data,
                  at=float(row[1]))
