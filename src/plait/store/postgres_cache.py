"""The step cache on PostgreSQL (``Store.get_cached`` / ``put_cached``; the table is
``migrations/postgres/0008_step_cache.sql``, the statements ``sql/postgres.sql``)."""

from __future__ import annotations

from ..core.model import JSON
from .base import CachedResult, cache_key_hash
from .postgres_database import Database
from .sql import queries, rows
from .sql.postgres_rows import text

_Q = queries("postgres")


async def get_cached(db: Database, workflow: str, step_id: str, key: str,
                     since: float) -> CachedResult | None:
    row = await db.fetchone(_Q["get_cached"], {
        "workflow": text(workflow), "step_id": text(step_id),
        "key_hash": cache_key_hash(key), "since": since})
    if row is None:
        return None
    output = row[0]
    return CachedResult(output=rows.decode(output) if isinstance(output, str) else output,
                        run_id=row[1], created_at=float(row[2]))


async def put_cached(db: Database, workflow: str, step_id: str, key: str, output: JSON,
                     run_id: str, created_at: float) -> None:
    """One upsert; a repeat after a lost connection stores the same row again."""
    await db.execute(_Q["put_cached"], {
        "workflow": text(workflow), "step_id": text(step_id),
        "key_hash": cache_key_hash(key),
        "output": rows.json_text(output, f"the cached result of step {step_id!r}"),
        "run_id": text(run_id), "created_at": created_at})
