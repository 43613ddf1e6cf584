"""The step cache on SQLite (``Store.get_cached`` / ``put_cached``; the table is
``migrations/sqlite/0008_step_cache.sql``, the statements ``sql/sqlite.sql``), and the
webhook deliveries (``Store.claim_delivery``; ``0009_hook_deliveries.sql``): both keep
what was done once so that it is not done again."""

from __future__ import annotations

from ..core.model import JSON
from .base import CachedResult, cache_key_hash
from .sql import queries, rows
from .sqlite_database import SqliteDatabase

_Q = queries("sqlite")


def get_cached(db: SqliteDatabase, workflow: str, step_id: str, key: str,
               since: float) -> CachedResult | None:
    row = db.conn.execute(_Q["get_cached"],
                          (workflow, step_id, cache_key_hash(key), since)).fetchone()
    if row is None:
        return None
    return CachedResult(output=rows.decode(row[0]), run_id=row[1], created_at=row[2])


def put_cached(db: SqliteDatabase, workflow: str, step_id: str, key: str, output: JSON,
               run_id: str, created_at: float) -> None:
    """A write job."""
    text = rows.json_text(output, f"the cached result of step {step_id!r}")
    db.conn.execute(_Q["put_cached"], (workflow, step_id, cache_key_hash(key), text,
                                       run_id, created_at))


def claim_delivery(db: SqliteDatabase, hook: str, delivery_id: str, run_id: str, at: float,
                   forget_before: float) -> str:
    """A write job."""
    db.conn.execute(_Q["forget_old_deliveries"], (forget_before,))
    row = db.conn.execute(_Q["claim_delivery"], (hook, delivery_id, run_id, at)).fetchone()
    return str(row[0])


def forget_delivery(db: SqliteDatabase, hook: str, delivery_id: str, run_id: str) -> None:
    """A write job."""
    db.conn.execute(_Q["forget_delivery"], (hook, delivery_id, run_id))
