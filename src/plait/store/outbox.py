"""The notification outbox (docs/notifications.md): each notification a row, stored
with the event that causes it (``WriteBatch.outbox``, in the batch's transaction) or
alone (``Store.enqueue_notifications``: an SLA timer, an alert), then sent by whichever
process runs a sender: it claims due rows with a lease (one sender at a time per
row), sends, and settles each (sent, to retry at a time, or given up).  A row's id is
its idempotency key, stable across retries and senders.

Tables: ``migrations/sqlite/0016_notification_outbox.sql``,
``migrations/postgres/0018_notification_outbox.sql``.  The memory store's outbox is
``MemoryOutbox`` here; SQLite's and PostgreSQL's statements are ``SQLITE`` /
``POSTGRES``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the records import this module: `plait validate` loads no sqlite3)
    import sqlite3

from ..core.model import JSONDict
from ..errors import StoreError

__all__ = ["OUTBOX_STATES", "MemoryOutbox", "MemoryOutboxMethods", "OutboxRow"]

OUTBOX_STATES = ("pending", "sent", "given_up")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxRow:
    """One notification to one target.  ``id``: the idempotency key (receivers dedupe
    on it); ``target``: ``{"url": ...}`` or ``{"call": ...}``; ``shown``: the target as
    history shows it (a URL cut to scheme and host); ``body``: the payload."""

    id: str
    event: str
    target: JSONDict
    shown: str
    body: JSONDict
    run_id: str | None = None
    step: str = ""
    state: str = "pending"
    attempts: int = 0
    next_at: float = 0.0
    created_at: float = 0.0
    error: str | None = None
    claimed_by: str | None = None
    claimed_until: float | None = None


def check_state(state: str) -> None:
    if state not in OUTBOX_STATES:
        raise StoreError(f"unknown notification state {state!r}; known: "
                         f"{', '.join(OUTBOX_STATES)}")


class MemoryOutbox:
    """The outbox of the memory store (same rules as the SQL stores')."""

    def __init__(self) -> None:
        self._rows: dict[str, OutboxRow] = {}

    def enqueue(self, rows: Sequence[OutboxRow]) -> int:
        stored = 0
        for row in rows:
            if row.id not in self._rows:
                self._rows[row.id] = replace(row, state="pending", claimed_by=None,
                                             claimed_until=None)
                stored += 1
        return stored

    def claim(self, sender: str, now: float, lease: float, limit: int) -> list[OutboxRow]:
        due = sorted((r for r in self._rows.values() if r.state == "pending"
                      and r.next_at <= now
                      and (r.claimed_until is None or r.claimed_until <= now)),
                     key=lambda r: (r.next_at, r.id))[:limit]
        out = []
        for row in due:
            row = self._rows[row.id] = replace(row, claimed_by=sender,
                                               claimed_until=now + lease)
            out.append(row)
        return out

    def settle(self, row_id: str, sender: str, state: str, attempts: int, next_at: float,
               error: str | None) -> bool:
        check_state(state)
        row = self._rows.get(row_id)
        if row is None or row.claimed_by != sender or row.state != "pending":
            return False
        self._rows[row_id] = replace(row, state=state, attempts=attempts, next_at=next_at,
                                     error=error, claimed_by=None, claimed_until=None)
        return True

    def release(self, sender: str) -> int:
        mine = [r for r in self._rows.values() if r.claimed_by == sender]
        for row in mine:
            self._rows[row.id] = replace(row, claimed_by=None, claimed_until=None)
        return len(mine)

    def listed(self, state: str | None, limit: int) -> list[OutboxRow]:
        if state is not None:
            check_state(state)
        found = [r for r in self._rows.values() if state is None or r.state == state]
        found.sort(key=lambda r: (-r.created_at, r.id))
        return found[:limit]


class MemoryOutboxMethods:
    """The outbox's ``Store`` methods of the memory store (a base of ``MemoryStore``)."""

    _outbox: MemoryOutbox

    async def enqueue_notifications(self, rows: Sequence[OutboxRow]) -> int:
        return self._outbox.enqueue(rows)

    async def claim_notifications(self, sender: str, now: float, lease: float,
                                  limit: int = 20) -> list[OutboxRow]:
        return self._outbox.claim(sender, now, lease, limit)

    async def settle_notification(self, row_id: str, sender: str, *, state: str,
                                  attempts: int, next_at: float,
                                  error: str | None = None) -> bool:
        return self._outbox.settle(row_id, sender, state, attempts, next_at, error)

    async def release_notifications(self, sender: str) -> int:
        return self._outbox.release(sender)

    async def list_notifications(self, state: str | None = None,
                                 limit: int = 100) -> list[OutboxRow]:
        return self._outbox.listed(state, limit)


# ------------------------------------------------------------------------ SQL

_COLUMNS = ("id, run_id, event, step, target, shown, body, state, attempts, next_at,"
            " created_at, error, claimed_by, claimed_until")

_RETURNED = ", ".join("o." + c.strip() for c in _COLUMNS.split(","))

SQLITE = {
    "enqueue": f"INSERT INTO notification_outbox ({_COLUMNS}) VALUES"  # noqa: S608
               " (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, NULL, NULL)"
               " ON CONFLICT (id) DO NOTHING",
    "due": f"SELECT {_COLUMNS} FROM notification_outbox WHERE state = 'pending'"  # noqa: S608
           " AND next_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?)"
           " ORDER BY next_at, id LIMIT ?",
    "claim": "UPDATE notification_outbox SET claimed_by = ?, claimed_until = ?"
             " WHERE id = ?",
    "settle": "UPDATE notification_outbox SET state = ?, attempts = ?, next_at = ?,"
              " error = ?, claimed_by = NULL, claimed_until = NULL"
              " WHERE id = ? AND claimed_by = ? AND state = 'pending'",
    "release": "UPDATE notification_outbox SET claimed_by = NULL, claimed_until = NULL"
               " WHERE claimed_by = ?",
    "list": f"SELECT {_COLUMNS} FROM notification_outbox"  # noqa: S608
            " WHERE (? IS NULL OR state = ?) ORDER BY created_at DESC, id LIMIT ?",
}

POSTGRES = {
    "enqueue": f"INSERT INTO notification_outbox ({_COLUMNS})"  # noqa: S608
               " SELECT r.id, r.run_id, r.event, r.step, r.target, r.shown, r.body,"
               " 'pending', r.attempts, r.next_at, r.created_at, r.error, NULL, NULL"
               " FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(id text, run_id text,"
               " event text, step text, target text, shown text, body text,"
               " attempts integer, next_at double precision, created_at double precision,"
               " error text)"
               " ON CONFLICT (id) DO NOTHING",
    "claim": f"UPDATE notification_outbox AS o SET claimed_by = %(sender)s,"  # noqa: S608
             " claimed_until = %(until)s FROM (SELECT id FROM notification_outbox"
             " WHERE state = 'pending' AND next_at <= %(now)s"
             " AND (claimed_until IS NULL OR claimed_until <= %(now)s)"
             " ORDER BY next_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED) AS due"
             f" WHERE o.id = due.id RETURNING {_RETURNED}",
    "settle": "UPDATE notification_outbox SET state = %(state)s, attempts = %(attempts)s,"
              " next_at = %(next_at)s, error = %(error)s, claimed_by = NULL,"
              " claimed_until = NULL WHERE id = %(id)s AND claimed_by = %(sender)s"
              " AND state = 'pending' RETURNING 1",
    "release": "UPDATE notification_outbox SET claimed_by = NULL, claimed_until = NULL"
               " WHERE claimed_by = %(sender)s",
    "list": f"SELECT {_COLUMNS} FROM notification_outbox"  # noqa: S608
            " WHERE (%(state)s::text IS NULL OR state = %(state)s)"
            " ORDER BY created_at DESC, id LIMIT %(limit)s",
}


def _text(value: JSONDict, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON: {exc}") from exc


def params(row: OutboxRow) -> tuple[Any, ...]:
    """A row's values in ``SQLITE["enqueue"]`` order."""
    return (row.id, row.run_id, row.event, row.step,
            _text(row.target, f"the target of notification {row.id!r}"), row.shown,
            _text(row.body, f"the payload of notification {row.id!r}"), row.attempts,
            row.next_at, row.created_at, row.error)


def document(rows: Sequence[OutboxRow]) -> str:
    """Rows as the JSON array ``POSTGRES["enqueue"]`` reads."""
    names = ("id", "run_id", "event", "step", "target", "shown", "body", "attempts",
             "next_at", "created_at", "error")
    return json.dumps([dict(zip(names, params(r), strict=True)) for r in rows])


def decode(row: Sequence[Any]) -> OutboxRow:
    (row_id, run_id, event, step, target, shown, body, state, attempts, next_at,
     created_at, error, claimed_by, claimed_until) = row
    return OutboxRow(id=row_id, run_id=run_id, event=event, step=step,
                     target=json.loads(target), shown=shown, body=json.loads(body),
                     state=state, attempts=int(attempts), next_at=float(next_at),
                     created_at=float(created_at), error=error, claimed_by=claimed_by,
                     claimed_until=None if claimed_until is None else float(claimed_until))


def sqlite_enqueue(conn: sqlite3.Connection, rows: Sequence[OutboxRow]) -> int:
    """Inside a write transaction (a batch's, or a job of its own)."""
    stored = 0
    for row in rows:
        stored += conn.execute(SQLITE["enqueue"], params(row)).rowcount
    return stored


def sqlite_claim(conn: sqlite3.Connection, sender: str, now: float, lease: float,
                 limit: int) -> list[OutboxRow]:
    """A write job (SQLite serialises writers: no two senders claim one row)."""
    found = [decode(r) for r in conn.execute(SQLITE["due"], (now, now, limit)).fetchall()]
    until = now + lease
    conn.executemany(SQLITE["claim"], [(sender, until, r.id) for r in found])
    return [replace(r, claimed_by=sender, claimed_until=until) for r in found]


def sqlite_settle(conn: sqlite3.Connection, row_id: str, sender: str, state: str,
                  attempts: int, next_at: float, error: str | None) -> bool:
    check_state(state)
    return conn.execute(SQLITE["settle"], (state, attempts, next_at, error, row_id,
                                           sender)).rowcount == 1


def sqlite_release(conn: sqlite3.Connection, sender: str) -> int:
    return int(conn.execute(SQLITE["release"], (sender,)).rowcount)


def sqlite_list(conn: sqlite3.Connection, state: str | None, limit: int) -> list[OutboxRow]:
    if state is not None:
        check_state(state)
    return [decode(r) for r in conn.execute(SQLITE["list"], (state, state, limit))]
