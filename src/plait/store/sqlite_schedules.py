"""The SQLite store's schedule jobs (``Store.claim_fire``, ``Store.last_fire``), each
run on a ``SqliteDatabase`` like its methods: the writes as group commit jobs, inside the
group's ``BEGIN IMMEDIATE`` transaction, so a check and the insert after it are one
compare-and-set across every process sharing the file."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import StoreError
from .base import RunRecord
from .sql import queries, rows
from .sql.rows import valid_id
from .sqlite_database import SqliteDatabase

_Q = queries("sqlite")


def _check_schedule(workflow: str, schedule: str) -> None:
    for kind, value in (("workflow name", workflow), ("schedule key", schedule)):
        if not valid_id(value):
            raise StoreError(f"invalid {kind} {value!r}: 1 to 64 letters, digits, '_' "
                             f"or '-'")


def claim_fire(db: SqliteDatabase, workflow: str, schedule: str, fire_time: float,
               run: RunRecord, step_ids: Sequence[str]) -> bool:
    """A write job: the fire and its run, or nothing (False) when the fire is taken."""
    _check_schedule(workflow, schedule)
    if run.workflow != workflow:
        raise StoreError(f"claim_fire: run {run.run_id!r} is of workflow "
                         f"{run.workflow!r}, not {workflow!r}")
    conn = db.conn
    if conn.execute(_Q["fire_taken"], (workflow, schedule, fire_time)).fetchone():
        return False
    key = db.create_run(run, step_ids)
    conn.execute(_Q["insert_fire"], (workflow, schedule, fire_time, key))
    note = rows.json_text({"schedule": {"key": schedule, "fire_time": fire_time}},
                          f"the schedule note of run {run.run_id!r}")
    conn.execute(_Q["insert_event"], (key, 2, run.created_at, "note", None, None, None,
                                      None, note))  # (create_run wrote seq 1)
    return True


def last_fire(db: SqliteDatabase, workflow: str, schedule: str) -> float | None:
    """A read: the latest fire time or first sighting of the schedule."""
    if not (valid_id(workflow) and valid_id(schedule)):
        return None
    found: float | None = db.conn.execute(_Q["last_fire"], (workflow, schedule)).fetchone()[0]
    return found


def record_sighting(db: SqliteDatabase, workflow: str, schedule: str, seen_at: float) -> float:
    """A write job: the first sighting at ``seen_at`` unless one is recorded; then what
    ``last_fire`` reads."""
    _check_schedule(workflow, schedule)
    db.conn.execute(_Q["insert_sighting"], (workflow, schedule, seen_at))
    found = last_fire(db, workflow, schedule)
    assert found is not None
    return found
