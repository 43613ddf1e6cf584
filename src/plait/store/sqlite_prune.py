"""Retention on SQLite (``Store.prune_runs``; the rules are ``store.prune``'s): one
write job per batch of root runs, so a batch is one transaction and other writers go
between batches; the freed pages go back to the file system with
``PRAGMA incremental_vacuum`` (the database is made with ``auto_vacuum=INCREMENTAL``;
``0015_prune_indexes.sql``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from .prune import ALERTS, FINAL, RUN_TABLES, Cursor, PruneCounts, prunable
from .sqlite_database import SqliteDatabase

_ROOTS = """
SELECT id, finished_at FROM runs
WHERE parent_run_id IS NULL AND finished_at < ? AND status IN (SELECT value FROM json_each(?))
  AND (? IS NULL OR workflow = ?) AND (finished_at, id) > (?, ?)
ORDER BY finished_at, id LIMIT ?"""
_TREE = """
WITH RECURSIVE tree (root, id, run_id, status) AS (
    SELECT id, id, run_id, status FROM runs WHERE id IN (SELECT value FROM json_each(?))
    UNION ALL
    SELECT tree.root, r.id, r.run_id, r.status
    FROM tree JOIN runs AS r ON r.parent_run_id = tree.run_id
)
SELECT root, id, run_id, status FROM tree"""
_RETRIED = ("SELECT retry_of FROM runs WHERE retry_of IN (SELECT value FROM json_each(?))"
            " AND status NOT IN (SELECT value FROM json_each(?))")
_SIGHTINGS = """
INSERT INTO schedule_sightings (workflow, schedule, first_seen)
SELECT workflow, schedule, max(fire_time) FROM schedule_fires
WHERE run IN (SELECT value FROM json_each(?))
GROUP BY workflow, schedule
ON CONFLICT (workflow, schedule) DO UPDATE
SET first_seen = max(first_seen, excluded.first_seen)"""
_TABLES = (*RUN_TABLES, ("schedule_fires", "run"), ("runs", "id"))
# per table: its rows of the runs, counted and deleted (names from the constants above)
_WHERE = {t: f"FROM {t} WHERE {c} IN (SELECT value FROM json_each(?))"  # noqa: S608
          for t, c in _TABLES}
_COUNT = {t: f"SELECT count(*) {w}" for t, w in _WHERE.items()}
_DELETE = {t: f"DELETE {w}" for t, w in _WHERE.items()}



def sqlite_batch(db: SqliteDatabase, cutoff: float, statuses: Sequence[str],
                workflow: str | None, after: Cursor, limit: int,
                dry_run: bool) -> tuple[PruneCounts, Cursor | None]:
    """A write job (a read when ``dry_run``): prune the trees of up to ``limit`` root
    runs after ``after``; the counts and where the next batch starts (None: done)."""
    conn = db.conn
    roots = conn.execute(_ROOTS, (cutoff, json.dumps(list(statuses)), workflow, workflow,
                                  after[0], after[1], limit)).fetchall()
    if not roots:
        return PruneCounts(), None
    tree = conn.execute(_TREE, (json.dumps([r[0] for r in roots]),)).fetchall()
    run_ids = json.dumps([row[2] for row in tree])
    retried = {r[0] for r in conn.execute(_RETRIED, (run_ids, json.dumps(FINAL)))}
    going = set(prunable(tree, retried))
    ids = [row[1] for row in tree if row[0] in going]
    names = [row[2] for row in tree if row[0] in going]
    counts = _delete(conn, ids, names, dry_run) if ids else PruneCounts()
    cursor = (float(roots[-1][1]), int(roots[-1][0]))
    return counts, (cursor if len(roots) == limit else None)


def _delete(conn: sqlite3.Connection, ids: list[int], names: list[str],
            dry_run: bool) -> PruneCounts:
    execute = conn.execute
    by = {"run": json.dumps(ids), "id": json.dumps(ids), "run_id": json.dumps(names)}
    if not dry_run:
        execute(_SIGHTINGS, (by["run"],))
    rows: dict[str, int] = {}
    for table, column in _TABLES:
        if dry_run:
            rows[table] = int(execute(_COUNT[table], (by[column],)).fetchone()[0])
        else:
            rows[table] = int(execute(_DELETE[table], (by[column],)).rowcount)
    runs = rows.pop("runs")
    return PruneCounts(runs, {t: n for t, n in rows.items() if n})


def sqlite_alerts(db: SqliteDatabase, cutoff: float, workflow: str | None,
                  dry_run: bool) -> PruneCounts:
    """A write job (a read when ``dry_run``): delete the alert rows that go
    (``prune.ALERTS``)."""
    args = (cutoff, workflow, workflow)
    if dry_run:
        found = int(db.conn.execute(f"SELECT count(*) {ALERTS['sqlite']}",
                                    args).fetchone()[0])
    else:
        found = int(db.conn.execute(f"DELETE {ALERTS['sqlite']}", args).rowcount)
    return PruneCounts(0, {"notification_outbox": found} if found else {})


def reclaim(db: SqliteDatabase) -> None:
    """Give the pages freed by deletes back to the file system (a no-op on a database
    without ``auto_vacuum=INCREMENTAL``): its own transaction, outside any group commit
    (``executescript``: the pragma frees one page per step, and only a script steps it
    to the end)."""
    db.conn.executescript("PRAGMA incremental_vacuum;")
