"""The tokens model calls spent, on SQLite (``Store.add_llm_tokens`` / ``llm_tokens``;
the tables are ``migrations/sqlite/0012_run_tokens.sql``, the statements
``tokens_add_step``, ``tokens_add`` and ``tokens_get`` of ``sql/sqlite.sql``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RunNotFound
from .records import TokenUsage
from .sql import queries
from .sqlite_database import SqliteDatabase

_Q = queries("sqlite")


def tokens_add(db: SqliteDatabase, run_id: str, step_id: str, usage: TokenUsage,
               ancestors: Sequence[str]) -> int:
    """A write job (one transaction): the run's new count; RunNotFound."""
    conn = db.conn
    added = conn.execute(_Q["tokens_add_step"], (usage.prompt, usage.completion,
                                                 usage.total, step_id, run_id)).fetchone()
    if added is None:
        raise RunNotFound(run_id)
    row = conn.execute(_Q["tokens_add"], (usage.total, run_id)).fetchone()
    for ancestor in dict.fromkeys(a for a in ancestors if a != run_id):
        conn.execute(_Q["tokens_add"], (usage.total, ancestor)).fetchone()
    return int(row[0])


def tokens_get(db: SqliteDatabase, run_id: str) -> int:
    row = db.conn.execute(_Q["tokens_get"], (run_id,)).fetchone()
    if row is None:
        raise RunNotFound(run_id)
    return int(row[0])
