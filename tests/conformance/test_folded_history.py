"""A run's history reads back event for event as it was written, whatever rows hold it:
the SQL stores write a step's changes and its attempt's first change of one batch as
ONE row of ``events`` (``store/sql/rows.py``), and give every event back with its own
seq, so ``get_events(after=seq)`` cursors work at any event.  Rows written one per
event (by earlier versions) read as they did."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plait.core.runstate import AttemptChange
from plait.core.states import RunStatus as R
from plait.core.states import StepStatus as S
from plait.store import Store
from plait.store.base import EventRecord, RunChange, WriteBatch

from .conftest import Backend, backend_params, backend_url, open_backend
from .test_store import UID, change, new_run

Shown = tuple[Any, ...]


def _batches(run_id: str) -> list[WriteBatch]:
    """What a driver writes for steps a and b started and completed on their first
    attempt, and c failing its first attempt and starting its second in one batch."""
    return [
        WriteBatch(run_id=run_id, steps=[
            change("a", S.PENDING, S.QUEUED, 1.0), change("a", S.QUEUED, S.RUNNING, 1.5),
            change("b", S.PENDING, S.QUEUED, 1.0), change("c", S.PENDING, S.QUEUED, 1.0),
            change("c", S.QUEUED, S.RUNNING, 1.5)],
            attempts=[AttemptChange("a", 1, 1.5, False, "running"),
                      AttemptChange("c", 1, 1.5, False, "running")],
            run=RunChange(source=R.PENDING, target=R.RUNNING, at=1.0)),
        WriteBatch(run_id=run_id, steps=[
            change("a", S.RUNNING, S.COMPLETED, 2.0, attempts=1, output={"n": 1}),
            change("b", S.QUEUED, S.RUNNING, 2.5),
            change("c", S.RUNNING, S.QUEUED, 2.0), change("c", S.QUEUED, S.RUNNING, 2.0)],
            attempts=[AttemptChange("a", 1, 2.0, True, "completed"),
                      AttemptChange("b", 1, 2.5, False, "running", worker="w-1"),
                      AttemptChange("c", 1, 2.0, True, "failed", error="boom"),
                      AttemptChange("c", 2, 2.0, False, "running")],
            notes=[("a", {"log": {"message": "done"}})]),
        WriteBatch(run_id=run_id, steps=[
            change("b", S.RUNNING, S.COMPLETED, 3.0, attempts=1),
            change("c", S.RUNNING, S.COMPLETED, 3.5, attempts=2)],
            attempts=[AttemptChange("b", 1, 3.0, True, "completed"),
                      AttemptChange("c", 2, 3.5, True, "completed")],
            run=RunChange(source=R.RUNNING, target=R.COMPLETED, at=4.0)),
    ]


def _appended(batches: list[WriteBatch]) -> list[Shown]:
    """The events the batches append, in the store's order (steps, attempts, run,
    notes), as (kind, step, data, at); a note's time is the store's (None here)."""
    out: list[Shown] = []
    for b in batches:
        out += [("step", ch.step, {"from": str(ch.source), "to": str(ch.target)}, ch.at)
                for ch in b.steps]
        out += [("attempt", a.step, {"attempt": a.attempt, "status": a.status}, a.at)
                for a in b.attempts]
        if b.run is not None:
            out.append(("run", None, {"from": str(b.run.source), "to": str(b.run.target)},
                        b.run.at))
        out += [("note", step, data, None) for step, data in b.notes]
    return out


def _shown(events: list[EventRecord]) -> list[Shown]:
    return [(e.kind, e.step_id, {k: str(v) if k in ("from", "to") else v
                                 for k, v in e.data.items()},
             None if e.kind == "note" else e.at) for e in events]


async def test_a_runs_history_reads_back_as_appended(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    created = await store.get_events(run_id)
    batches = _batches(run_id)
    for batch in batches:
        await store.write(batch)
    events = await store.get_events(run_id)
    assert events[:len(created)] == created
    assert _shown(events[len(created):]) == _appended(batches)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert all(e.run_id == run_id for e in events)
    # a cursor at any event gives exactly the events after it
    for n, event in enumerate(events):
        assert await store.get_events(run_id, after=event.seq) == events[n + 1:]
    assert (await store.read_run(run_id)).events == events
    # the attempts keep their start order (their start is their own event's seq)
    assert [(a.step_id, a.attempt, a.status) for a in await store.get_attempts(run_id)] \
        == [("a", 1, "completed"), ("c", 1, "failed"), ("c", 2, "completed"),
            ("b", 1, "completed")]
    # events written after the batches (a note) are numbered after them
    await store.write(WriteBatch(run_id=run_id, notes=[("b", {"why": "checked"})]))
    last = (await store.get_events(run_id, after=events[-1].seq))
    assert [(e.seq, e.kind, e.data) for e in last] == \
        [(events[-1].seq + 1, "note", {"why": "checked"})]


# ------------------------------------------------------ rows (the SQL stores only)


class _Rows:
    """Counts and writes the ``events`` rows of a SQL store's database directly."""

    def __init__(self, backend: str, url: str) -> None:
        self.backend, self.url = backend, url

    def _run(self, sql: str, params: tuple[Any, ...], fetch: bool) -> list[Any]:
        if self.backend == "sqlite":
            conn = sqlite3.connect(self.url.removeprefix("sqlite:///"))
            try:
                found = conn.execute(sql.replace("%s", "?"), params).fetchall() \
                    if fetch else conn.execute(sql.replace("%s", "?"), params) and []
                conn.commit()
                return found
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as pg:
            cursor = pg.execute(sql, params)
            return cursor.fetchall() if fetch else []

    def count(self, run_id: str) -> int:
        return int(self._run("SELECT count(*) FROM events AS e JOIN runs AS r "
                             "ON e.run = r.id WHERE r.run_id = %s", (run_id,), True)[0][0])

    def insert(self, run_id: str, values: tuple[Any, ...]) -> None:
        """One row as written before rows were folded: (seq, at, kind, step_id, source,
        target, attempt)."""
        self._run("INSERT INTO events (run, seq, at, kind, step_id, source, target, "
                  "attempt) SELECT id, %s, %s, %s, %s, %s, %s, %s FROM runs "
                  "WHERE run_id = %s", (*values, run_id), False)


@pytest.fixture(params=backend_params("sqlite", "postgresql"))
async def sql_store(request: pytest.FixtureRequest,
                    tmp_path: Path) -> AsyncIterator[tuple[Store, _Rows]]:
    backend: Backend = request.param
    url = backend_url(backend, request, tmp_path)
    opened = await open_backend(backend, url)
    try:
        yield opened, _Rows(backend.name, url)
    finally:
        await opened.close()


async def test_a_step_completed_on_its_first_attempt_takes_two_rows(
        sql_store: tuple[Store, _Rows], uid: UID) -> None:
    """Its 5 events (queued, running, attempt running; completed, attempt completed)
    are 2 rows, one per batch (they were 5)."""
    store, rows = sql_store
    run_id = await new_run(store, uid, steps=("a",))
    before = rows.count(run_id)
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.PENDING, S.QUEUED, 1.0), change("a", S.QUEUED, S.RUNNING, 1.0)],
        attempts=[AttemptChange("a", 1, 1.0, False, "running")]))
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.RUNNING, S.COMPLETED, 2.0, attempts=1)],
        attempts=[AttemptChange("a", 1, 2.0, True, "completed")]))
    assert rows.count(run_id) - before == 2
    events = (await store.get_events(run_id))[-5:]
    assert [(e.kind, e.data) for e in events] == [
        ("step", {"from": "pending", "to": "queued"}),
        ("step", {"from": "queued", "to": "running"}),
        ("attempt", {"attempt": 1, "status": "running"}),
        ("step", {"from": "running", "to": "completed"}),
        ("attempt", {"attempt": 1, "status": "completed"})]


async def test_rows_written_one_per_event_read_as_before(
        sql_store: tuple[Store, _Rows], uid: UID) -> None:
    store, rows = sql_store
    run_id = await new_run(store, uid, steps=("a",))
    created = await store.get_events(run_id)
    seq = created[-1].seq
    for n, values in enumerate([(1.0, "step", "a", "pending", "running", None),
                                (1.0, "attempt", "a", None, "running", 1),
                                (2.0, "step", "a", "running", "completed", None),
                                (2.0, "attempt", "a", None, "completed", 1)], start=1):
        rows.insert(run_id, (seq + n, *values))
    assert [(e.seq, e.kind, e.data) for e in await store.get_events(run_id, after=seq)] == [
        (seq + 1, "step", {"from": "pending", "to": "running"}),
        (seq + 2, "attempt", {"attempt": 1, "status": "running"}),
        (seq + 3, "step", {"from": "running", "to": "completed"}),
        (seq + 4, "attempt", {"attempt": 1, "status": "completed"})]
