"""Retention on PostgreSQL (``Store.prune_runs``; the rules are ``store.prune``'s): one
transaction per batch of root runs.  The roots are locked (``FOR UPDATE SKIP LOCKED``)
so two prunes never take one tree, and a root being written meanwhile waits for the
next prune.  Deleted rows are reclaimed by autovacuum (docs/retention.md);
``0017_prune_indexes.sql`` indexes what a run is deleted by."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from .postgres_database import PostgresDatabase, Row
from .prune import ALERTS, FINAL, RUN_TABLES, Cursor, PruneCounts, prunable

_ROOTS = """
SELECT id, finished_at FROM runs
WHERE parent_run_id IS NULL AND finished_at < %(cutoff)s
  AND status = ANY (%(statuses)s::text[])
  AND (%(workflow)s::text IS NULL OR workflow = %(workflow)s::text)
  AND (finished_at, id) > (%(after_at)s::double precision, %(after_id)s::bigint)
ORDER BY finished_at, id LIMIT %(limit)s"""
_LOCK = " FOR UPDATE SKIP LOCKED"
_TREE = """
WITH RECURSIVE tree (root, id, run_id, status) AS (
    SELECT id, id, run_id, status FROM runs WHERE id = ANY (%(ids)s::bigint[])
    UNION ALL
    SELECT tree.root, r.id, r.run_id, r.status
    FROM tree JOIN runs AS r ON r.parent_run_id = tree.run_id
)
SELECT root, id, run_id, status FROM tree"""
_RETRIED = """SELECT retry_of FROM runs WHERE retry_of = ANY (%(names)s::text[])
AND status <> ALL (%(final)s::text[])"""
_SIGHTINGS = """
INSERT INTO schedule_sightings (workflow, schedule, first_seen)
SELECT workflow, schedule, max(fire_time) FROM schedule_fires
WHERE run_id = ANY (%(run_id)s::text[]) GROUP BY workflow, schedule
ON CONFLICT (workflow, schedule) DO UPDATE
SET first_seen = GREATEST(schedule_sightings.first_seen, excluded.first_seen)"""
_TABLES = (*RUN_TABLES, ("schedule_fires", "run_id"), ("runs", "id"))
_TYPES = {"run": "bigint", "id": "bigint", "run_id": "text"}


async def postgres_batch(db: PostgresDatabase, cutoff: float, statuses: Sequence[str],
                      workflow: str | None, after: Cursor, limit: int,
                      dry_run: bool) -> tuple[PruneCounts, Cursor | None]:
    """One transaction: prune the trees of up to ``limit`` root runs after ``after``;
    the counts and where the next batch starts (None: done)."""
    params = {"cutoff": cutoff, "statuses": list(statuses), "workflow": workflow,
              "after_at": after[0], "after_id": after[1], "limit": limit}

    async def job(conn: AsyncConnection[Row]) -> tuple[PruneCounts, Cursor | None]:
        async with conn.transaction():
            roots = await (await conn.execute(
                _ROOTS + ("" if dry_run else _LOCK), params)).fetchall()
            if not roots:
                return PruneCounts(), None
            tree = await (await conn.execute(
                _TREE, {"ids": [r[0] for r in roots]})).fetchall()
            retried = {r[0] for r in await (await conn.execute(_RETRIED, {
                "names": [r[2] for r in tree], "final": list(FINAL)})).fetchall()}
            going = set(prunable([tuple(r) for r in tree], retried))  # type: ignore[misc]
            ids = [int(r[1]) for r in tree if r[0] in going]
            names = [str(r[2]) for r in tree if r[0] in going]
            counts = await _delete(conn, ids, names, dry_run) if ids else PruneCounts()
        cursor = (float(roots[-1][1]), int(roots[-1][0]))
        return counts, (cursor if len(roots) == limit else None)

    return await db.run(job)


async def _delete(conn: AsyncConnection[Row], ids: list[int], names: list[str],
                  dry_run: bool) -> PruneCounts:
    by: dict[str, Any] = {"run": ids, "id": ids, "run_id": names}
    if not dry_run:
        await conn.execute(_SIGHTINGS, {"run_id": names})
    rows: dict[str, int] = {}
    for table, column in _TABLES:
        # table and column names come from the constant list above
        where = f"FROM {table} WHERE {column} = ANY (%(v)s::{_TYPES[column]}[])"
        if dry_run:
            found = await (await conn.execute(f"SELECT count(*) {where}",
                                              {"v": by[column]})).fetchone()
            rows[table] = int(found[0]) if found else 0
        else:
            rows[table] = (await conn.execute(f"DELETE {where}", {"v": by[column]})).rowcount
    runs = rows.pop("runs")
    return PruneCounts(runs, {t: n for t, n in rows.items() if n})


async def postgres_alerts(db: PostgresDatabase, cutoff: float, workflow: str | None,
                          dry_run: bool) -> PruneCounts:
    """One statement: delete the alert rows that go (``prune.ALERTS``)."""
    params = {"cutoff": cutoff, "workflow": workflow}

    async def job(conn: AsyncConnection[Row]) -> int:
        if dry_run:
            row = await (await conn.execute(f"SELECT count(*) {ALERTS['postgres']}",
                                            params)).fetchone()
            return int(row[0]) if row else 0
        return (await conn.execute(f"DELETE {ALERTS['postgres']}", params)).rowcount

    found = await db.run(job)
    return PruneCounts(0, {"notification_outbox": found} if found else {})
