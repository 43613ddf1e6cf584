"""The step journal on SQLite (``Store.journal_get`` / ``journal_put`` / ``journal``;
the table is ``migrations/sqlite/0010_step_journal.sql``, the statements
``sql/sqlite.sql``)."""

from __future__ import annotations

from ..core.model import JSON
from ..errors import RunNotFound
from .base import Journaled, JournalEntry
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
