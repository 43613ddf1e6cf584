"""The SQLite store's claims: tickets and the outcome inbox (the contract is
``store.base``'s docstring; the tables are ``migrations/sqlite/0003_attempt_tickets.sql``).

Every function here is a job of ``SqliteDatabase``: the writes run inside a group commit's
transaction (``BEGIN IMMEDIATE``: this process's and every other process's writers are
locked out until it commits), so a read followed by a write is a compare-and-set and two
claimers, completers or reapers can never interleave.  Store time is ``time.time()`` in
that transaction.  A refusal is raised as a PlaitError, which the group commit undoes
alone (its savepoint) and hands to its caller.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from ..core.guards import RateWindow
from ..core.model import Rate
from ..errors import RunNotFound, StaleWriteError, StoreError
from .base import (
    InboxOutcome,
    Lease,
    Ticket,
    TicketRecord,
    WriteBatch,
    late_result_note,
    reaped_error,
)
from .records import OUTCOME_KINDS
from .sql import queries, rows


class RunKeyedConnection(Protocol):
    """What these jobs use of ``sqlite_database.SqliteDatabase`` (which calls ``apply_batch``:
    named here as a protocol so the two modules do not import each other)."""

    @property
    def conn(self) -> sqlite3.Connection: ...

    def run_key(self, run_id: str) -> int: ...

_Q = queries("sqlite")


# --------------------------------------------------------------- in write()


def apply_batch(conn: sqlite3.Connection, key: int, batch: WriteBatch) -> None:
    """The claims lists of a batch, in their order (consumed, withdrawn, dispatch),
    after its step and run changes; raises what refuses it (the transaction, or the
    job's savepoint, is then rolled back by the caller)."""
    run_id = batch.run_id
    for step_id, attempt, fallback in batch.consumed:
        if conn.execute(_Q["delete_outcome"], (key, step_id, attempt, fallback)).rowcount != 1:
            raise StaleWriteError(f"run {run_id!r}: no outcome of attempt {attempt} of "
                                  f"step {step_id!r} (fallback {fallback}) is in the "
                                  f"inbox; another driver applied it already")
    if batch.withdrawn:
        conn.executemany(_Q["delete_ticket"], [(key, *k) for k in batch.withdrawn])
    now = time.time()
    for ticket in batch.dispatch:
        if conn.execute(_Q["insert_ticket"], _ticket_values(key, ticket, run_id, now)
                        ).rowcount != 1:
            raise _ticket_refusal(conn, key, ticket)


def _ticket_values(key: int, ticket: Ticket, run_id: str, now: float) -> rows.Row:
    if ticket.run_id != run_id:
        raise StoreError(f"a batch of run {run_id!r} dispatches a ticket of run "
                         f"{ticket.run_id!r}: a batch writes one run")
    payload = rows.json_text(ticket.payload, f"the payload of the ticket of step "
                                             f"{ticket.step_id!r} of run {run_id!r}")
    return (key, ticket.step_id, ticket.attempt, ticket.fallback, ticket.priority,
            ticket.pool, ticket.pool_limit, payload, now, ticket.rate_count,
            ticket.rate_period)


def _ticket_refusal(conn: sqlite3.Connection, key: int, ticket: Ticket) -> StoreError:
    if conn.execute(_Q["step_status"], (key, ticket.step_id)).fetchone() is None:
        return StoreError(f"run {ticket.run_id!r} has no step {ticket.step_id!r} "
                          f"(dispatched)")
    return StaleWriteError(f"run {ticket.run_id!r}: attempt {ticket.attempt} of step "
                           f"{ticket.step_id!r} (fallback {ticket.fallback}) is "
                           f"dispatched already")


# --------------------------------------------------------------- workers


def claim_attempts(db: RunKeyedConnection, worker: str, limit: int, lease: float) -> list[Lease]:
    """Walk the unclaimed tickets in claim order, skipping those of a pool at its
    limit or with its rate window full, until ``limit`` are picked; then claim them.
    (The walk reads to the end only when pools hold back the queue's head.)  The
    write lock of the transaction is the pools' lock: no other claim runs between a
    pool's count and its claims."""
    if limit <= 0:
        return []
    conn = db.conn
    now = time.time()
    picked: list[int] = []
    in_pool: dict[str, int] = {}  # claimed tickets per pool met, picks included
    windows: dict[str, RateWindow] = {}  # rate windows of the rated pools met
    started: list[str] = []  # the pool of each rated ticket picked
    walk = conn.execute(_Q["tickets_to_claim"])
    try:
        for rowid, pool, cap, rate_count, rate_period in walk:
            if pool is not None:
                count = in_pool.get(pool)
                if count is None:
                    count = conn.execute(_Q["pool_claimed"], (pool,)).fetchone()[0]
                window = None if rate_count is None or rate_period is None else \
                    _window(conn, windows, pool, Rate(count=rate_count, period=rate_period),
                            now)
                if (cap is not None and count >= cap) \
                        or (window is not None and window.wait(now) > 0):
                    in_pool[pool] = count
                    continue
                in_pool[pool] = count + 1
                if window is not None:
                    window.record(now)
                    started.append(pool)
            picked.append(rowid)
            if len(picked) == limit:
                break
    finally:
        walk.close()  # before the rows it walks change
    _record_starts(conn, windows, started, now)
    expires = now + lease
    return [_take(conn, rowid, worker, expires) for rowid in picked]


def _window(conn: sqlite3.Connection, windows: dict[str, RateWindow], pool: str,
            rate: Rate, now: float) -> RateWindow:
    """The rate window of ``pool`` (the core's rule) with the claims stored in it,
    read the first time this claim meets the pool."""
    window = windows.get(pool)
    if window is None:
        window = windows[pool] = RateWindow(rate)
        window.starts.extend(row[0] for row in conn.execute(
            _Q["pool_window"], (pool, now - rate.period)))
    else:
        window.rate = rate
    return window


def _record_starts(conn: sqlite3.Connection, windows: dict[str, RateWindow],
                   started: list[str], now: float) -> None:
    for pool, window in windows.items():
        conn.execute(_Q["prune_pool_starts"], (pool, now - window.rate.period))
    conn.executemany(_Q["insert_pool_start"], [(pool, now) for pool in started])


def _take(conn: sqlite3.Connection, rowid: int, worker: str, expires: float) -> Lease:
    token = uuid.uuid4().hex
    conn.execute(_Q["take_ticket"], (token, worker, expires, rowid))
    run_id, workflow, version, step_id, attempt, fallback, payload, key = conn.execute(
        _Q["taken_ticket"], (rowid,)).fetchone()
    conn.execute(_Q["set_step_worker"], (worker, key, step_id))
    return Lease(run_id=run_id, workflow=workflow, version=version, step_id=step_id,
                 attempt=attempt, fallback=bool(fallback), token=token,
                 payload=rows.decode(payload), expires_at=expires)


def extend_leases(db: RunKeyedConnection, worker: str, tokens: Sequence[str],
                  lease: float) -> set[str]:
    if not tokens:
        return set()
    conn = db.conn
    listed = json.dumps(list(tokens))
    conn.execute(_Q["extend_leases"], (time.time() + lease, worker, listed))
    return {row[0] for row in conn.execute(_Q["held_tokens"], (worker, listed))}


def complete_attempts(db: RunKeyedConnection, worker: str,
                      results: Sequence[tuple[str, InboxOutcome]]) -> list[bool]:
    conn = db.conn
    values = [_outcome_values(outcome) for _, outcome in results]  # may refuse: first
    done = []
    for (token, outcome), (kind, output, error, logs) in zip(results, values, strict=True):
        key = _existing_key(db, outcome.run_id)
        attempt = (outcome.step_id, outcome.attempt, outcome.fallback)
        if key is None:
            done.append(False)
        elif conn.execute(_Q["complete_ticket"], (key, *attempt, token, worker)).rowcount:
            conn.execute(_Q["insert_outcome"], (key, *attempt, kind, output, error,
                                                worker, outcome.at, logs))
            done.append(True)
        else:
            _note(conn, key, outcome.step_id, late_result_note(*attempt, worker))
            done.append(False)
    return done


def _outcome_values(outcome: InboxOutcome) -> tuple[str, str | None, str | None, str | None]:
    what = (f"the outcome of attempt {outcome.attempt} of step {outcome.step_id!r} of run "
            f"{outcome.run_id!r}")
    if outcome.kind not in OUTCOME_KINDS:
        raise StoreError(f"{what}: unknown kind {outcome.kind!r} (known: "
                         f"{', '.join(sorted(OUTCOME_KINDS))})")
    return (outcome.kind, rows.json_or_null(outcome.output, f"{what}: its output"),
            rows.json_or_null(outcome.error, f"{what}: its error"),
            rows.json_or_null(list(outcome.logs), f"{what}: its logs")
            if outcome.logs else None)


def _existing_key(db: RunKeyedConnection, run_id: str) -> int | None:
    try:
        return db.run_key(run_id)
    except RunNotFound:
        return None


def _note(conn: sqlite3.Connection, key: int, step_id: str, data: dict[str, Any]) -> None:
    last = conn.execute(_Q["last_seq"], (key,)).fetchone()[0]
    conn.execute(_Q["insert_event"], (key, last + 1, time.time(), "note", step_id, None,
                                      None, None, rows.encode(data)))


def reap_expired(db: RunKeyedConnection, limit: int) -> list[tuple[str, str, int]]:
    conn = db.conn
    now = time.time()
    reaped = []
    for rowid, run_id, key, step_id, attempt, fallback, holder in conn.execute(
            _Q["expired_tickets"], (now, max(limit, 0))).fetchall():
        conn.execute(_Q["delete_ticket_by_rowid"], (rowid,))
        error = rows.encode(reaped_error(holder, step_id, attempt))
        conn.execute(_Q["insert_outcome"], (key, step_id, attempt, fallback, "interrupted",
                                            None, error, holder, now, None))
        reaped.append((run_id, step_id, attempt))
    return reaped


# --------------------------------------------------------------- reads


def outcomes(db: RunKeyedConnection, run_id: str) -> list[InboxOutcome]:
    found = db.conn.execute(_Q["get_outcomes"], (db.run_key(run_id),))
    return [InboxOutcome(run_id=run_id, step_id=step_id, attempt=attempt,
                    fallback=bool(fallback), kind=kind,
                    output=None if output is None else rows.decode(output),
                    error=None if error is None else rows.decode(error), worker=worker,
                    at=at, logs=() if logs is None else tuple(rows.decode(logs)))
            for step_id, attempt, fallback, kind, output, error, worker, at, logs in found]


def tickets(db: RunKeyedConnection, run_id: str) -> list[TicketRecord]:
    found = db.conn.execute(_Q["get_tickets"], (db.run_key(run_id),))
    return [TicketRecord(ticket=Ticket(run_id=run_id, step_id=r[0], attempt=r[1],
                                       fallback=bool(r[2]), priority=r[3], pool=r[4],
                                       pool_limit=r[5], payload=rows.decode(r[6]),
                                       rate_count=r[10], rate_period=r[11]),
                         created_at=r[7], claimed_by=r[8], expires_at=r[9])
            for r in found]


def runs_to_drive(db: RunKeyedConnection, lease: float, limit: int) -> list[str]:
    now = time.time()
    found = db.conn.execute(_Q["runs_to_drive"], (now - lease, max(limit, 0), now))
    return [row[0] for row in found]


# --------------------------------------------------------------- breakers


def get_breaker(db: RunKeyedConnection, key: str) -> tuple[dict[str, Any] | None, int]:
    row = db.conn.execute(_Q["get_breaker"], (key,)).fetchone()
    if row is None:
        return None, 0
    state = rows.decode(row[0])
    assert isinstance(state, dict)
    return state, int(row[1])


def put_breaker(db: RunKeyedConnection, key: str, state: dict[str, Any], version: int) -> bool:
    """A write job: the compare-and-set of ``Store.put_breaker``."""
    text = rows.json_text(state, f"the state of circuit breaker {key!r}")
    if version == 0:
        return db.conn.execute(_Q["insert_breaker"], (key, text)).rowcount == 1
    return db.conn.execute(_Q["update_breaker"], (text, key, version)).rowcount == 1
