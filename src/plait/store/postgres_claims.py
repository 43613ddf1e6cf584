"""The PostgreSQL store's claims: tickets and the outcome inbox (the contract is
``store.base``'s docstring; the tables and functions are
``migrations/postgres/0003_attempt_tickets.sql``, the statements ``sql/postgres.sql``).

Every call is ONE statement, so one round trip and one transaction, safe however many
processes of however many hosts run it at once: row locks taken with SKIP LOCKED where
a claimer or reaper may simply pass a row another holds, advisory locks per pool where
a pool's limit is admitted, and keys that exist at most once where two writers race
(an inbox key).  Store time is the database's (``clock_timestamp()``, and ``now()``
for the driver leases, as ``claim_run``).

Retried after a lost connection (``PostgresDatabase.run``): extending leases and the reads
always (repeating them changes nothing); reaping too (a repeat reaps what is expired
then, as the reaper's next tick would; the first call's list is lost, which only
reports); claiming and completing only when the server proves the first try did not
take effect, since a repeat would claim other tickets or note a completion as late.

The writes of a run's driver (``WriteBatch.consumed``, ``withdrawn``, ``dispatch``) go
through ``plait_write_batch`` with its step changes (``PostgresStore.write``); their
refusals are explained by ``batch_refusal``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.model import JSONDict
from ..errors import StaleWriteError, StoreError
from .base import InboxOutcome, Lease, Ticket, TicketRecord
from .postgres_database import PostgresDatabase, Row, ServerRefusal
from .sql import queries
from .sql import rows as rows
from .sql.postgres_rows import complete_params, reap_params, text

_Q = queries("postgres")
# the SQLSTATEs plait_write_batch raises for a batch's claims lists (0003)
CONSUMED_MISSING = "PL003"
DISPATCHED_ALREADY = "PL004"
TICKET_OF_NO_STEP = "PL005"
CLAIMS_REFUSALS = frozenset({CONSUMED_MISSING, DISPATCHED_ALREADY, TICKET_OF_NO_STEP})


def batch_refusal(run_id: str, refusal: ServerRefusal) -> StoreError:
    """The plait error of a batch refused for its claims lists (one of
    CLAIMS_REFUSALS); the server's DETAIL names the key, or the step."""
    if refusal.sqlstate == TICKET_OF_NO_STEP:
        return StoreError(f"run {run_id!r} has no step {refusal.detail!r} (dispatched)")
    step, attempt, fallback = rows.decode(refusal.detail or '[null, null, null]')
    if refusal.sqlstate == CONSUMED_MISSING:
        return StaleWriteError(f"run {run_id!r}: no outcome of attempt {attempt} of step "
                               f"{step!r} (fallback {fallback}) is in the inbox; another "
                               f"driver applied it already")
    return StaleWriteError(f"run {run_id!r}: attempt {attempt} of step {step!r} (fallback "
                           f"{fallback}) is dispatched already")


# --------------------------------------------------------------- workers


async def claim_attempts(db: PostgresDatabase, worker: str, limit: int,
                         lease: float) -> list[Lease]:
    if limit <= 0:
        return []
    found = await db.fetchall(_Q["claim_attempts"], {
        "worker": text(worker), "limit": min(limit, 2**31 - 1), "lease": lease},
        idempotent=False)
    found.sort(key=lambda r: (r[9], r[10]))  # claim order: priority, then stored order
    return [Lease(run_id=r[0], workflow=r[1], version=r[2], step_id=r[3], attempt=r[4],
                  fallback=r[5], token=r[6], payload=rows.decode(r[7]), expires_at=r[8])
            for r in found]


async def extend_leases(db: PostgresDatabase, worker: str, tokens: Sequence[str],
                        lease: float) -> set[str]:
    if not tokens:
        return set()
    found = await db.fetchall(_Q["extend_leases"], {
        "worker": text(worker), "tokens": [text(t) for t in tokens], "lease": lease})
    return {r[0] for r in found}


async def complete_attempts(db: PostgresDatabase, worker: str,
                            results: Sequence[tuple[str, InboxOutcome]]) -> list[bool]:
    params = complete_params(worker, results)  # may refuse: before anything is sent
    if not results:
        return []
    row = await db.fetchone(_Q["complete_attempts"], params, idempotent=False)
    assert row is not None
    return list(row[0])


async def reap_expired(db: PostgresDatabase, limit: int) -> list[tuple[str, str, int]]:
    if limit <= 0:
        return []
    found = await db.fetchall(_Q["reap_expired"], reap_params(limit))
    return [(r[0], r[1], r[2]) for r in found]


# --------------------------------------------------------------- reads


def outcome_records(run_id: str, found: list[Row]) -> list[InboxOutcome]:
    return [InboxOutcome(run_id=run_id, step_id=step_id, attempt=attempt, fallback=fallback,
                    kind=kind, output=None if output is None else rows.decode(output),
                    error=None if error is None else rows.decode(error), worker=worker,
                    at=at, logs=() if logs is None else tuple(rows.decode(logs)))
            for step_id, attempt, fallback, kind, output, error, worker, at, logs in found]


def ticket_records(run_id: str, found: list[Row]) -> list[TicketRecord]:
    return [TicketRecord(ticket=Ticket(run_id=run_id, step_id=r[0], attempt=r[1],
                                       fallback=r[2], priority=r[3], pool=r[4],
                                       pool_limit=r[5], payload=rows.decode(r[6]),
                                       rate_count=r[10], rate_period=r[11]),
                         created_at=r[7], claimed_by=r[8], expires_at=r[9])
            for r in found]


async def runs_to_drive(db: PostgresDatabase, lease: float, limit: int) -> list[str]:
    if limit <= 0:
        return []
    found = await db.fetchall(_Q["runs_to_drive"], {"lease": lease, "limit": limit})
    return [r[0] for r in found]


# --------------------------------------------------------------- breakers


async def get_breaker(db: PostgresDatabase, key: str) -> tuple[JSONDict | None, int]:
    row = await db.fetchone(_Q["get_breaker"], {"key": text(key)})
    if row is None:
        return None, 0
    state = rows.decode(row[0])
    assert isinstance(state, dict)
    return state, int(row[1])


async def put_breaker(db: PostgresDatabase, key: str, state: JSONDict, version: int) -> bool:
    """One statement: the first state (version 0) or a compare-and-set.  Retried after
    a lost connection only when the first try provably did not commit: a repeat of one
    that did would answer False and make its caller apply its rule twice."""
    params = {"key": text(key), "version": version,
              "state": rows.json_text(state, f"the state of circuit breaker {key!r}")}
    query = _Q["insert_breaker"] if version == 0 else _Q["update_breaker"]
    return await db.fetchone(query, params, idempotent=False) is not None
