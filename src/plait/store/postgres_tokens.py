"""The tokens spent by a run's model calls on PostgreSQL (``Store.add_llm_tokens`` /
``llm_tokens``; the table is ``migrations/postgres/0014_run_tokens.sql``, the statements
``tokens_add`` and ``tokens_get`` of ``sql/postgres.sql``): every worker that runs one
of a run's calls adds to its count."""

from __future__ import annotations

from ..errors import RunNotFound
from .postgres_database import PostgresDatabase
from .sql import queries
from .sql.postgres_rows import text

_Q = queries("postgres")


async def tokens_add(db: PostgresDatabase, run_id: str, tokens: int) -> int:
    """One statement: concurrent adds of every process all count."""
    row = await db.fetchone(_Q["tokens_add"],
                            {"run_id": text(run_id), "tokens": tokens})
    if row is None:
        raise RunNotFound(run_id)
    return int(row[0])


async def tokens_get(db: PostgresDatabase, run_id: str) -> int:
    row = await db.fetchone(_Q["tokens_get"], {"run_id": text(run_id)})
    if row is None:
        raise RunNotFound(run_id)
    return int(row[0])
