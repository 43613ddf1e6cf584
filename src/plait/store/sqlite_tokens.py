"""The tokens spent by a run's model calls on SQLite (``Store.add_llm_tokens`` /
``llm_tokens``; the table is ``migrations/sqlite/0012_run_tokens.sql``, the statements
``tokens_add`` and ``tokens_get`` of ``sql/sqlite.sql``)."""

from __future__ import annotations

from ..errors import RunNotFound
from .sql import queries
from .sqlite_database import SqliteDatabase

_Q = queries("sqlite")


def tokens_add(db: SqliteDatabase, run_id: str, tokens: int) -> int:
    """A write job: the run's new count; RunNotFound."""
    row = db.conn.execute(_Q["tokens_add"], (tokens, run_id)).fetchone()
    if row is None:
        raise RunNotFound(run_id)
    return int(row[0])


def tokens_get(db: SqliteDatabase, run_id: str) -> int:
    row = db.conn.execute(_Q["tokens_get"], (run_id,)).fetchone()
    if row is None:
        raise RunNotFound(run_id)
    return int(row[0])
