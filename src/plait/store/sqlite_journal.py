"""The step journal on SQLite (``Store.journal_get`` / ``journal_step`` /
``journal_put`` / ``journal``; the table is ``migrations/sqlite/0010_step_journal.sql``,
the statements ``sql/sqlite.sql``), and the events sent to runs (``Store.event_put`` /
``event_get``, ``0011_run_events.sql``)."""

from __future__ import annotations

from ..core.model import JSON
from ..errors import EventTaken, RunNotFound
from .base import Journaled, JournalEntry, Signal
from .sql import queries, rows
from .sqlite_database import SqliteDatabase

_Q = queries("sqlite")


def journal_get(db: SqliteDatabase, run_id: str, step_id: str, name: str) -> Journaled | None:
    row = db.conn.execute(_Q["journal_get"], (run_id, step_id, name)).fetchone()
    return None if row is None else _journaled(row)


def journal_lookup(db: SqliteDatabase, run_id: str, step_id: str,
                   name: str) -> tuple[Journaled | None]:
    """``journal_get`` in a tuple, so that "no such call" is not None (what
    ``SqliteStore._read_here`` returns when it could not read)."""
    return (journal_get(db, run_id, step_id, name),)


def journal_step(db: SqliteDatabase, run_id: str, step_id: str) -> dict[str, Journaled]:
    found = db.conn.execute(_Q["journal_step"], (run_id, step_id)).fetchall()
    return {row[0]: _journaled(row[1:]) for row in found}


def journal_step_lookup(db: SqliteDatabase, run_id: str,
                        step_id: str) -> tuple[dict[str, Journaled]]:
    """``journal_step`` in a tuple (see ``journal_lookup``)."""
    return (journal_step(db, run_id, step_id),)


def journal_put(db: SqliteDatabase, run_id: str, step_id: str, name: str, value: JSON,
                attempt: int, at: float) -> Journaled:
    """A write job."""
    text = rows.json_text(value, f"the journaled call {name!r} of step {step_id!r}")
    row = db.conn.execute(_Q["journal_put"],
                          (step_id, name, text, attempt, at, run_id)).fetchone()
    if row is None:
        raise RunNotFound(run_id)
    return _journaled(row)


def journal(db: SqliteDatabase, run_id: str) -> list[JournalEntry]:
    found = db.conn.execute(_Q["journal_list"], (run_id,)).fetchall()
    if not found:
        raise RunNotFound(run_id)
    return [JournalEntry(step=r[0], name=r[1], attempt=r[2], at=r[3])
            for r in found if r[0] is not None]


def _journaled(row: tuple[object, ...]) -> Journaled:
    value, attempt, at = row
    assert isinstance(value, str) and isinstance(attempt, int)
    return Journaled(value=rows.decode(value), attempt=attempt, at=float(at))  # type: ignore[arg-type]


def event_get(db: SqliteDatabase, run_id: str, name: str) -> Signal | None:
    row = db.conn.execute(_Q["event_get"], (run_id, name)).fetchone()
    return None if row is None else _signal(name, row)


def event_put(db: SqliteDatabase, run_id: str, name: str, data: JSON, at: float) -> Signal:
    """A write job: EventTaken when one of that name is stored, RunNotFound."""
    text = rows.json_text(data, f"the data of event {name!r}")
    row = db.conn.execute(_Q["event_put"], (name, text, at, run_id)).fetchone()
    if row is not None:
        return _signal(name, row)
    standing = event_get(db, run_id, name)
    if standing is None:
        raise RunNotFound(run_id)
    raise EventTaken(run_id, name, standing.at)


def _signal(name: str, row: tuple[object, ...]) -> Signal:
    data, at = row
    assert isinstance(data, str) and isinstance(at, int | float)
    return Signal(name=name, data=rows.decode(data), at=float(at))
