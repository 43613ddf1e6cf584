"""The tokens model calls spent, on PostgreSQL (``Store.add_llm_tokens`` /
``llm_tokens``; the tables are ``migrations/postgres/0014_run_tokens.sql``, the
statements ``tokens_add`` and ``tokens_get`` of ``sql/postgres.sql``): every worker
that sends one of a run's calls adds to its counts."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RunNotFound
from .postgres_database import PostgresDatabase
from .records import TokenUsage
from .sql import queries
from .sql.postgres_rows import text

_Q = queries("postgres")


async def tokens_add(db: PostgresDatabase, run_id: str, step_id: str, usage: TokenUsage,
                     ancestors: Sequence[str]) -> int:
    """One statement, not repeated after a lost connection (an add that took effect
    would count twice)."""
    row = await db.fetchone(_Q["tokens_add"], {
        "run_id": text(run_id), "step_id": text(step_id), "prompt": usage.prompt,
        "completion": usage.completion, "total": usage.total,
        "ancestors": [text(a) for a in ancestors]}, idempotent=False)
    if row is None:
        raise RunNotFound(run_id)
    return int(row[0])


async def tokens_get(db: PostgresDatabase, run_id: str) -> int:
    row = await db.fetchone(_Q["tokens_get"], {"run_id": text(run_id)})
    if row is None:
        raise RunNotFound(run_id)
    return int(row[0])
