"""The step cache on PostgreSQL (``Store.get_cached`` / ``put_cached``; the table is
``migrations/postgres/0008_step_cache.sql``, the statements ``sql/postgres.sql``), and
the webhook deliveries (``Store.claim_delivery``; ``0010_hook_deliveries.sql``): both
keep what was done once so that it is not done again."""

from __future__ import annotations

from ..core.model import JSON
from .base import CachedResult, cache_key_hash
from .postgres_database import PostgresDatabase
from .sql import queries, rows
from .sql.postgres_rows import text

_Q = queries("postgres")


async def get_cached(db: PostgresDatabase, workflow: str, step_id: str, key: str,
                     since: float) -> CachedResult | None:
    row = await db.fetchone(_Q["get_cached"], {
        "workflow": text(workflow), "step_id": text(step_id),
        "key_hash": cache_key_hash(key), "since": since})
    if row is None:
        return None
    output = row[0]
    return CachedResult(output=rows.decode(output) if isinstance(output, str) else output,
                        run_id=row[1], created_at=float(row[2]))


async def put_cached(db: PostgresDatabase, workflow: str, step_id: str, key: str, output: JSON,
                     run_id: str, created_at: float) -> None:
    """One upsert; a repeat after a lost connection stores the same row again."""
    await db.execute(_Q["put_cached"], {
        "workflow": text(workflow), "step_id": text(step_id),
        "key_hash": cache_key_hash(key),
        "output": rows.json_text(output, f"the cached result of step {step_id!r}"),
        "run_id": text(run_id), "created_at": created_at})


async def claim_delivery(db: PostgresDatabase, hook: str, delivery_id: str, run_id: str,
                         at: float, forget_before: float) -> str:
    """Two statements; a repeat after a lost connection finds its own row."""
    await db.execute(_Q["forget_old_deliveries"], {"before": forget_before})
    row = await db.fetchone(_Q["claim_delivery"], {
        "hook": text(hook), "delivery_id": text(delivery_id), "run_id": text(run_id),
        "received_at": at})
    assert row is not None  # an upsert returns its row
    return str(row[0])


async def forget_delivery(db: PostgresDatabase, hook: str, delivery_id: str, run_id: str) -> None:
    await db.execute(_Q["forget_delivery"], {
        "hook": text(hook), "delivery_id": text(delivery_id), "run_id": text(run_id)})
