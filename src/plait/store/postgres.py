"""The PostgreSQL store: one database shared by every plait process of every host.

URLs: ``postgresql://user:password@host:5432/dbname`` (or ``postgres://``), libpq's URI
with any of its parameters (``sslmode``, ``options``...) and the ``PG*`` environment
variables, plus plait's own ``pool_min``, ``pool_max`` and ``retry_for``
(``postgres_url``).  The database must exist; plait creates its tables on first use.

One round trip per operation: every Store method is ONE statement, in autocommit, so
one transaction (named queries of ``sql/postgres.sql``).  The writes of a run that
need several steps are server functions created by the migrations (``write`` is
``plait_write_batch``, ``record_decision`` is ``plait_record_decision``): each locks the
run's row first, so writers of one run take turns, each step change is stored only if
the step still has the status the change moves it from (the fence), and event ``seq``
numbers each run's history from 1 without gaps (``runs.last_seq``).  A refused batch
raises inside the function, so nothing of it is stored; the store then reads the
stored state to say why, with the memory store's checks (``sql/rows.why_refused``).

Durability: a method returns once its transaction committed, and PostgreSQL's default
``synchronous_commit = on`` syncs every commit to disk first: a committed change
survives a crash of the server's host.  (A server set to ``synchronous_commit = off``
may lose its last commits on such a crash, never corrupting anything.)

Pooling: ``psycopg_pool.AsyncConnectionPool`` (``pool_min``..``pool_max``
connections) on the event loop that opened the store.  One process shares one store per
URL and event loop (``shared.py``, ``plait.connect``), so concurrent runs share its
pool.  A store is used from the loop that opened it only (StoreError otherwise).

Connection loss (a restart, a failover, a network cut): the pool drops its dead
connections and opens new ones when the server answers again; the operation that met
the loss runs again, with backoff, for up to ``retry_for`` seconds (default 30) when
it reads or repeating it changes nothing (``claim_run``, ``heartbeat``, ...), and a
write (``write``, ``create_run``, ``record_decision``) only when the server's error
proves it was not applied (the server ended the connection before or while it ran).
Otherwise the caller gets a StoreError: a running run stops as RunLeftUnfinished and
``plait resume`` (or a worker) continues it from what was committed.

Leases (``claim_run``, ``heartbeat``) are judged on the database's clock, not the
hosts': see ``PostgresStore.claim_run``.

Claims (tickets, leases, the outcome inbox: ``postgres_claims``): the claim, the
completion and the reap are server functions of migration 0003, one round trip each;
a batch's claims lists are applied by ``plait_write_batch`` with its step changes; and
the functions ``NOTIFY`` ``plait_work`` and ``plait_outcome`` inside the transaction
(docs/postgresql.md).

Reading only (``read_only=True``): every connection runs with
``default_transaction_read_only``, and nothing is migrated (an older schema is
refused).

Errors: every driver error becomes a StoreError naming the database (its password
redacted) once, in ``postgres_database``.  Schema: numbered migrations
(``migrations/postgres/NNNN_*.sql``, applied by ``sql/postgres_schema.py`` under an
advisory lock) tracked in ``plait_migrations``; a newer schema is refused
(SchemaVersionError).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from ..core.model import JSON, JSONDict
from ..errors import (
    DecisionTaken,
    PlaitError,
    RunNotFound,
    StaleWriteError,
    StoreError,
    VersionConflict,
    WorkflowNotFound,
)
from . import (
    observations,
    outbox,
    postgres_cache,
    postgres_claims,
    postgres_journal,
    postgres_prune,
    postgres_tokens,
)
from .base import (
    AttemptRecord,
    CachedResult,
    EventRecord,
    Heartbeat,
    InboxOutcome,
    Journaled,
    JournalEntry,
    Lease,
    RunDocument,
    RunFilter,
    RunRecord,
    Signal,
    StepRecord,
    TicketRecord,
    WorkflowRecord,
    WriteBatch,
    owner_refusal,
)
from .capabilities import StoreCapabilities
from .observations import MetricsSnapshot
from .outbox import OutboxRow
from .postgres_database import UNIQUE_VIOLATION, PostgresDatabase, Row, ServerRefusal
from .prune import BATCH, Cursor, PruneCounts, final_statuses, in_batches, takes_alerts
from .records import TokenUsage
from .sql import queries
from .sql import rows as rows
from .sql.postgres_rows import optional_text, run_params, shift, text, write_params
from .sql.rows import check_id, check_name, valid_id, valid_name

_Q = queries("postgres")
RUN_NOT_FOUND = "PL001"  # the SQLSTATEs of plait's functions (migrations)
NOT_THE_OWNER = "PL006"  # a batch whose run another driver holds (migration 0011)
SAVE_ATTEMPTS = 8  # stores of a new version that met another process's, before giving up


def _check_new_run(run: RunRecord, step_ids: Sequence[str]) -> None:
    check_id("run id", run.run_id)
    check_name(run.workflow)
    check_id("run id (retry_of)", run.retry_of)
    check_id("run id (parent_run_id)", run.parent_run_id)
    for step_id in step_ids:
        check_id("step id", step_id)
    if len(set(step_ids)) != len(step_ids):
        raise StoreError(f"run {run.run_id!r}: step ids are not unique")


INT32_MAX = 2**31 - 1  # versions are PostgreSQL integers: a larger one is no version

class PostgresStore:
    """The Store protocol on one PostgreSQL database (see the module docstring)."""

    # every process of every host shares it; NOTIFY wakes the listening workers
    capabilities = StoreCapabilities(shared=True, in_process=False, notify=True)

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        """``read_only``: for commands that only read; the server refuses every write."""
        self.url = url
        self.read_only = read_only
        self._db = PostgresDatabase(url, read_only=read_only)
        self.where = self._db.where  # the URL as messages show it (no password)
        self._opened = False

    async def open(self) -> None:
        """Connect, migrate (or check, read-only) the schema, and open the pool."""
        if not self._opened:
            await self._db.open()
            self._opened = True

    async def close(self) -> None:
        self._opened = False
        await self._db.close()

    async def notify(self, channel: str, payload: str = "") -> None:
        """``NOTIFY channel, payload`` on its own: a wake-up for the listening workers
        (``runtime.notify``) about something already committed."""
        await self._db.execute("SELECT pg_notify(%(channel)s, %(payload)s)",
                               {"channel": channel, "payload": payload})

    # ------------------------------------------------------------------ workflows

    async def save_workflow(self, name: str, definition: JSONDict | str, fingerprint: str,
                            version: int | None) -> WorkflowRecord:
        check_name(name)
        encoded: str | None = None
        for _ in range(SAVE_ATTEMPTS):
            # the definition is stored already: the common case, one read
            row = await self._stored_row(name, fingerprint, version)
            if row is not None and row[2] == fingerprint:
                return rows.workflow_record(row)
            if row is not None and version is not None:
                raise VersionConflict(name, version, row[2], fingerprint)
            if encoded is None:  # encoded only when a new version is stored
                encoded = definition if isinstance(definition, str) else \
                    rows.json_text(definition, f"the definition of workflow {name!r}")
            params = {"name": name, "version": version, "fingerprint": fingerprint,
                      "definition": encoded, "created_at": time.time()}
            query = _Q["add_next_workflow" if version is None else "add_workflow_version"]
            row = await self._db.fetchone(query, params)  # repeating it stores it once
            if row is not None:
                if row[2] != fingerprint:
                    assert version is not None  # the next version has ours
                    raise VersionConflict(name, version, row[2], fingerprint)
                return rows.workflow_record(row)
            # another process stored that version number meanwhile: read again
        raise StoreError(f"database {self.where}: workflow {name!r}: other processes kept "
                         f"storing new versions of it ({SAVE_ATTEMPTS} tries); try again")

    async def _stored_row(self, name: str, fingerprint: str,
                          version: int | None) -> Row | None:
        """The stated version, or without one the version with this fingerprint (any
        stored version, not only the latest: the same definition reuses its version)."""
        if version is not None:
            return await self._db.fetchone(_Q["get_workflow"],
                                           {"name": name, "version": version})
        return await self._db.fetchone(_Q["workflow_by_fingerprint"],
                                       {"name": name, "fingerprint": fingerprint})

    async def get_workflow(self, name: str, version: int | None = None) -> WorkflowRecord:
        if not valid_name(name):
            raise WorkflowNotFound(name, version)
        row = None
        if version is None or -INT32_MAX <= version <= INT32_MAX:  # a column's integer
            row = await self._db.fetchone(_Q["get_workflow"], {"name": name,
                                                               "version": version})
        if row is not None:
            return rows.workflow_record(row)
        versions = [] if version is None else \
            [r[0] for r in await self._db.fetchall(_Q["workflow_versions"], {"name": name})]
        raise WorkflowNotFound(name, version, versions)

    async def list_workflows(self) -> list[WorkflowRecord]:
        return [rows.workflow_record(r) for r in await self._db.fetchall(_Q["list_workflows"])]

    # ----------------------------------------------------------------------- runs

    async def create_run(self, run: RunRecord, step_ids: Sequence[str]) -> None:
        _check_new_run(run, step_ids)
        created = await self._db.execute(_Q["create_run"], run_params(run, list(step_ids)),
                                         idempotent=False)
        if created != 1:
            raise StoreError(f"run {run.run_id!r} already exists")

    async def write(self, batch: WriteBatch) -> None:
        if not valid_id(batch.run_id):
            raise RunNotFound(batch.run_id)
        if not batch:
            await self.get_run(batch.run_id)  # RunNotFound
            return
        try:
            if not rows.legal(batch):
                raise rows.Refused
            params = write_params(batch)
        except rows.Refused:
            raise await self._refusal(batch) from None
        try:
            if batch.new_steps or batch.outbox:
                await self._write_with_new_steps(batch, params)
            else:
                await self._db.execute(_Q["write_batch"], params, idempotent=False)
        except ServerRefusal as exc:
            if exc.sqlstate == UNIQUE_VIOLATION and batch.new_steps:
                raise StaleWriteError(f"run {batch.run_id!r}: a step of the batch's new "
                                      "steps exists already") from None
            if exc.sqlstate == RUN_NOT_FOUND:
                raise RunNotFound(batch.run_id) from None
            if exc.sqlstate == NOT_THE_OWNER and batch.owner is not None:
                raise owner_refusal(batch.run_id, batch.owner,
                                    exc.detail or None) from None
            if exc.sqlstate in postgres_claims.CLAIMS_REFUSALS:
                raise postgres_claims.batch_refusal(batch.run_id, exc) from None
            raise await self._refusal(batch) from None

    async def _write_with_new_steps(self, batch: WriteBatch, params: dict[str, Any]) -> None:
        """The batch's new steps (a map's items), the batch and its notifications
        (``store.outbox``), in one transaction."""
        added = {"run_id": batch.run_id, "step_ids": [s for s, _ in batch.new_steps],
                 "positions": [p for _, p in batch.new_steps]}

        async def job(conn: AsyncConnection[Any]) -> None:
            async with conn.transaction():
                if batch.new_steps:
                    await conn.execute(_Q["insert_new_steps"], added)
                await conn.execute(_Q["write_batch"], params)
                if batch.outbox:
                    await conn.execute(outbox.POSTGRES["enqueue"],
                                       {"rows": outbox.document(batch.outbox)})

        await self._db.run(job, idempotent=False)

    async def _refusal(self, batch: WriteBatch) -> PlaitError:
        """Why ``batch`` is refused, from the stored state read now."""
        found = await self._db.fetchall(_Q["stored_statuses"], {
            "run_id": batch.run_id, "steps": sorted({ch.step for ch in batch.steps})})
        if not found:
            return RunNotFound(batch.run_id)
        steps = {step: status for _, step, status in found if step is not None}
        return rows.why_refused(batch, steps.get, lambda: str(found[0][0]))

    async def get_run(self, run_id: str) -> RunRecord:
        row = await self._db.fetchone(_Q["get_run"], {"run_id": run_id}) \
            if valid_id(run_id) else None
        if row is None:
            raise RunNotFound(run_id)
        return rows.run_record(row)

    async def read_run(self, run_id: str) -> RunDocument:
        """ONE statement (``read_run``): the run's row with one array per column of its
        steps, attempts, events and journal, zipped back into their rows here, and its
        workflow's row."""
        row = await self._db.fetchone(_Q["read_run"], {"run_id": run_id}) \
            if valid_id(run_id) else None
        if row is None:
            raise RunNotFound(run_id)
        steps, attempts = _zipped(row, 20, 11), _zipped(row, 31, 8)
        events, journal = _zipped(row, 39, 8), _zipped(row, 47, 4)
        return RunDocument(
            run=rows.run_record(row), steps=rows.step_records(run_id, steps),
            attempts=rows.attempt_records(run_id, attempts),
            events=rows.event_records(run_id, events),
            journal=[JournalEntry(step=r[0], name=r[1], attempt=r[2], at=float(r[3]))
                     for r in journal],
            workflow=None if row[51] is None else rows.workflow_record(row[51:]))

    async def list_runs(self, filter: RunFilter) -> list[RunRecord]:
        params = {"workflow": filter.workflow, "limit": filter.limit, "since": filter.since,
                  "before": filter.before, "top_level": filter.top_level,
                  "status": None if filter.status is None else rows.TEXT[filter.status]}
        query = _Q["list_runs" if filter.workflow is None else "list_workflow_runs"]
        return [rows.run_record(r) for r in await self._db.fetchall(query, params)]

    async def _of_run(self, query: str, run_id: str, **params: Any) -> list[Row]:
        """The rows a ``LEFT JOIN`` query gives for one run: RunNotFound when there are
        none; a single row of NULLs (nothing joined) becomes no rows."""
        found = await self._db.fetchall(query, {"run_id": run_id, **params}) \
            if valid_id(run_id) else []
        if not found:
            raise RunNotFound(run_id)
        return [] if found[0][0] is None else found

    async def get_steps(self, run_id: str) -> list[StepRecord]:
        return rows.step_records(run_id, await self._of_run(_Q["get_steps"], run_id))

    async def get_steps_by_id(self, run_id: str,
                              step_ids: Sequence[str]) -> list[StepRecord]:
        return rows.step_records(run_id, await self._of_run(
            _Q["get_steps_by_id"], run_id, step_ids=list(step_ids)))

    async def get_attempts(self, run_id: str) -> list[AttemptRecord]:
        return rows.attempt_records(run_id, await self._of_run(_Q["get_attempts"], run_id))

    async def get_events(self, run_id: str, after: int = 0) -> list[EventRecord]:
        found = await self._of_run(_Q["get_events"], run_id, after=after)
        return rows.event_records(run_id, found, after)

    async def parents_to_wake(self, limit: int) -> list[str]:
        found = await self._db.fetchall(_Q["parents_to_wake"], {"limit": max(limit, 0)})
        return [row[0] for row in found]

    async def record_decision(self, run_id: str, step_id: str, decision: JSONDict) -> None:
        data = rows.json_text({"approval": decision},
                              f"the decision on step {step_id!r} of run {run_id!r}")
        if not valid_id(run_id):
            raise RunNotFound(run_id)
        if not valid_id(step_id):
            await self.get_run(run_id)  # RunNotFound first, as the other stores
            raise StoreError(f"run {run_id!r} has no step {step_id!r}")
        try:
            row = await self._db.fetchone(_Q["record_decision"], {
                "run_id": run_id, "step_id": step_id, "at": time.time(), "data": data},
                idempotent=False)
        except ServerRefusal:
            raise RunNotFound(run_id) from None
        assert row is not None
        outcome, detail = row
        if outcome == "taken":
            raise DecisionTaken(run_id, step_id, rows.decode(detail)["approval"])
        if outcome == "not_waiting":
            raise StaleWriteError(f"step {step_id!r} of run {run_id!r} is {detail}, not "
                                  f"waiting for a decision")
        if outcome == "no_step":
            raise StoreError(f"run {run_id!r} has no step {step_id!r}")

    async def request_cancel(self, run_id: str) -> None:
        changed = await self._db.execute(_Q["request_cancel"], {"run_id": run_id}) \
            if valid_id(run_id) else 0
        if changed == 0:
            raise RunNotFound(run_id)

    # --------------------------------------------------------------------- leases

    async def claim_run(self, run_id: str, owner: str, now: float, lease: float, *,
                        dead_owner: str | None = None) -> RunRecord | None:
        """Judged on the database's clock.  ``now`` is read as an instant relative to
        this process's clock: the store sends how far it is from the present
        (``now - time.time()``, measured just before the statement runs; zero when
        the caller passes ``time.time()``) and the server applies that to its own
        ``now()``.  The lease is then compared with the owner's last heartbeat as the
        server saw it (``runs.owner_seen_at``), so hosts whose clocks disagree still
        agree on when a lease ran out, while a caller that passes made-up times (a
        test's clock) sees them keep their order and distance.  ``heartbeat_at``
        records ``now`` as given."""
        if not valid_id(run_id):
            raise RunNotFound(run_id)
        owner = text(owner)
        dead = optional_text(dead_owner)

        async def job(conn: AsyncConnection[Row]) -> Row | None:
            params = {"run_id": run_id, "owner": owner, "now": now, "lease": lease,
                      "dead_owner": dead, "shift": shift(now)}
            return await (await conn.execute(_Q["claim_run"], params)).fetchone()

        row = await self._db.run(job)  # claiming again what one holds changes nothing
        assert row is not None
        if not row[0]:
            raise RunNotFound(run_id)
        return None if row[1] is None else rows.run_record(row[1:])

    async def heartbeat(self, run_id: str, owner: str, now: float) -> Heartbeat:
        """Refresh ownership; ``now`` is treated as in ``claim_run``.  One statement."""
        if not valid_id(run_id):
            raise RunNotFound(run_id)
        params = {"run_id": run_id, "owner": text(owner), "now": now, "shift": shift(now)}
        row = await self._db.fetchone(_Q["heartbeat"], params)
        if row is None:
            raise RunNotFound(run_id)
        return Heartbeat(held=bool(row[0]), owner=row[1], cancel_requested=bool(row[2]))

    async def release_run(self, run_id: str, owner: str) -> None:
        if valid_id(run_id):
            await self._db.execute(_Q["release_run"], {"run_id": run_id,
                                                       "owner": text(owner)})

    # ------------------------------------------------------------------ schedules

    async def claim_fire(self, workflow: str, schedule: str, fire_time: float,
                         run: RunRecord, step_ids: Sequence[str]) -> bool:
        """ONE statement: the fire's row (its primary key decides between concurrent
        claims, the losers' inserts doing nothing) and, only if it was inserted, the
        run, its steps, its creation event and the schedule note."""
        check_id("workflow name", workflow)
        check_id("schedule key", schedule)
        if run.workflow != workflow:
            raise StoreError(f"claim_fire: run {run.run_id!r} is of workflow "
                             f"{run.workflow!r}, not {workflow!r}")
        _check_new_run(run, step_ids)
        params = run_params(run, list(step_ids))
        params.update(schedule=schedule, fire_time=fire_time, note=rows.json_text(
            {"schedule": {"key": schedule, "fire_time": fire_time}},
            f"the schedule note of run {run.run_id!r}"))
        try:
            row = await self._db.fetchone(_Q["claim_fire"], params, idempotent=False)
        except ServerRefusal as exc:  # the run's id is taken: nothing was stored
            raise StoreError(f"run {run.run_id!r} already exists") from exc
        return bool(row and row[0])

    async def last_fire(self, workflow: str, schedule: str, *,
                        seen_at: float | None = None) -> float | None:
        if seen_at is not None:
            check_id("workflow name", workflow)
            check_id("schedule key", schedule)
        elif not (valid_id(workflow) and valid_id(schedule)):
            return None
        found = await self._latest(workflow, schedule)
        if found is not None or seen_at is None:
            return found
        # first seen: record it unless a concurrent caller did; either way it is
        # committed once the insert returns, so the next read sees it
        await self._db.execute(_Q["record_sighting"], {
            "workflow": workflow, "schedule": schedule, "first_seen": seen_at})
        found = await self._latest(workflow, schedule)
        assert found is not None
        return found

    async def _latest(self, workflow: str, schedule: str) -> float | None:
        row = await self._db.fetchone(_Q["last_fire"], {"workflow": workflow,
                                                        "schedule": schedule})
        return None if row is None or row[0] is None else float(row[0])

    # --------------------------------------------------------------------- claims
    # (postgres_claims.py) Each ONE statement; store time is the database's clock.

    async def claim_attempts(self, worker: str, limit: int, lease: float) -> list[Lease]:
        return await postgres_claims.claim_attempts(self._db, worker, limit, lease)

    async def extend_leases(self, worker: str, tokens: Sequence[str],
                            lease: float) -> set[str]:
        return await postgres_claims.extend_leases(self._db, worker, tokens, lease)

    async def complete_attempts(self, worker: str,
                                results: Sequence[tuple[str, InboxOutcome]]) -> list[bool]:
        return await postgres_claims.complete_attempts(self._db, worker, results)

    async def reap_expired(self, limit: int = 1000) -> list[tuple[str, str, int]]:
        return await postgres_claims.reap_expired(self._db, limit)

    async def outcomes(self, run_id: str) -> list[InboxOutcome]:
        found = await self._of_run(_Q["get_outcomes"], run_id)
        return postgres_claims.outcome_records(run_id, found)

    async def tickets(self, run_id: str) -> list[TicketRecord]:
        found = await self._of_run(_Q["get_tickets"], run_id)
        return postgres_claims.ticket_records(run_id, found)

    async def runs_to_drive(self, lease: float, limit: int) -> list[str]:
        return await postgres_claims.runs_to_drive(self._db, lease, limit)

    # ------------------------------------------------------------------ run events

    async def event_put(self, run_id: str, name: str, data: JSON, at: float) -> Signal:
        return await postgres_journal.event_put(self._db, run_id, name, data, at)

    async def event_get(self, run_id: str, name: str) -> Signal | None:
        return await postgres_journal.event_get(self._db, run_id, name)

    # ------------------------------------------------------------------ step journal

    async def journal_get(self, run_id: str, step_id: str, name: str) -> Journaled | None:
        return await postgres_journal.journal_get(self._db, run_id, step_id, name)

    async def journal_step(self, run_id: str, step_id: str) -> dict[str, Journaled]:
        return await postgres_journal.journal_step(self._db, run_id, step_id)

    async def journal_put(self, run_id: str, step_id: str, name: str, value: JSON,
                          attempt: int, at: float) -> Journaled:
        return await postgres_journal.journal_put(self._db, run_id, step_id, name, value,
                                                  attempt, at)

    async def journal(self, run_id: str) -> list[JournalEntry]:
        return await postgres_journal.journal(self._db, run_id)

    # ------------------------------------------------------------------ token budgets

    async def add_llm_tokens(self, run_id: str, step_id: str, usage: TokenUsage,
                             ancestors: Sequence[str] = ()) -> int:
        return await postgres_tokens.tokens_add(self._db, run_id, step_id, usage.checked(),
                                                tuple(ancestors))

    async def llm_tokens(self, run_id: str) -> int:
        return await postgres_tokens.tokens_get(self._db, run_id)

    # ------------------------------------------------------------------ retention

    async def prune_runs(self, cutoff: float, statuses: Sequence[str] | None = None,
                         workflow: str | None = None, *, batch: int = BATCH,
                         dry_run: bool = False) -> PruneCounts:
        chosen = final_statuses(statuses)

        async def one(after: Cursor) -> tuple[PruneCounts, Cursor | None]:
            return await postgres_prune.postgres_batch(self._db, cutoff, chosen, workflow,
                                                    after, batch, dry_run)

        counts = await in_batches(one)
        if takes_alerts(chosen):
            counts = counts.plus(await postgres_prune.postgres_alerts(
                self._db, cutoff, workflow, dry_run))
        return counts

    # ------------------------------------------------------------------ webhook deliveries

    async def claim_delivery(self, hook: str, delivery_id: str, run_id: str, at: float,
                             forget_before: float) -> str:
        return await postgres_cache.claim_delivery(self._db, hook, delivery_id, run_id, at,
                                                   forget_before)

    async def forget_delivery(self, hook: str, delivery_id: str, run_id: str) -> None:
        await postgres_cache.forget_delivery(self._db, hook, delivery_id, run_id)

    # ------------------------------------------------------------------ step cache

    async def get_cached(self, workflow: str, step_id: str, key: str,
                         since: float) -> CachedResult | None:
        return await postgres_cache.get_cached(self._db, workflow, step_id, key, since)

    async def put_cached(self, workflow: str, step_id: str, key: str, output: JSON,
                         run_id: str, created_at: float) -> None:
        await postgres_cache.put_cached(self._db, workflow, step_id, key, output, run_id,
                                        created_at)

    # ------------------------------------------------------------------ observability

    async def metrics_snapshot(self, bounds: Sequence[float]) -> MetricsSnapshot:
        async def job(conn: AsyncConnection[Row]) -> MetricsSnapshot:
            out = MetricsSnapshot()
            async with conn.transaction():
                asked: list[tuple[str, str, dict[str, Any] | None]] = [
                    ("runs", observations.POSTGRES["runs"], None),
                    ("steps", observations.POSTGRES["steps"], None),
                    ("durations", observations.postgres_durations(bounds),
                     {f"b{i}": b for i, b in enumerate(bounds)}),
                    ("tickets", observations.POSTGRES["tickets"], None),
                    ("reclaims", observations.POSTGRES["reclaims"],
                     {"pattern": observations.LEASE_EXPIRED + "%"}),
                    ("tokens", observations.POSTGRES["tokens"],
                     {"kinds": list(observations.TOKEN_KINDS)}),
                    ("step_tokens", observations.POSTGRES["step_tokens"], None)]
                for name, query, params in asked:
                    found = await (await conn.execute(query, params)).fetchall()
                    observations.postgres_fold(out, name, found)
            return out

        return await self._db.run(job)

    async def enqueue_notifications(self, rows: Sequence[OutboxRow]) -> int:
        if not rows:
            return 0
        return await self._db.execute(outbox.POSTGRES["enqueue"],
                                      {"rows": outbox.document(rows)}, idempotent=True)

    async def claim_notifications(self, sender: str, now: float, lease: float,
                                  limit: int = 20) -> list[OutboxRow]:
        found = await self._db.fetchall(outbox.POSTGRES["claim"], {
            "sender": sender, "now": now, "until": now + lease, "limit": limit},
            idempotent=False)
        return sorted((outbox.decode(r) for r in found), key=lambda r: (r.next_at, r.id))

    async def settle_notification(self, row_id: str, sender: str, *, state: str,
                                  attempts: int, next_at: float,
                                  error: str | None = None) -> bool:
        outbox.check_state(state)
        row = await self._db.fetchone(outbox.POSTGRES["settle"], {
            "id": row_id, "sender": sender, "state": state, "attempts": attempts,
            "next_at": next_at, "error": error}, idempotent=False)
        return row is not None

    async def release_notifications(self, sender: str) -> int:
        return await self._db.execute(outbox.POSTGRES["release"], {"sender": sender})

    async def list_notifications(self, state: str | None = None,
                                 limit: int = 100) -> list[OutboxRow]:
        if state is not None:
            outbox.check_state(state)
        found = await self._db.fetchall(outbox.POSTGRES["list"],
                                        {"state": state, "limit": limit})
        return [outbox.decode(r) for r in found]

    # ------------------------------------------------------------------ breakers

    async def get_breaker(self, key: str) -> tuple[JSONDict | None, int]:
        return await postgres_claims.get_breaker(self._db, key)

    async def put_breaker(self, key: str, state: JSONDict, version: int) -> bool:
        return await postgres_claims.put_breaker(self._db, key, state, version)


def _zipped(row: Row, start: int, width: int) -> list[Row]:
    """The rows of ``width`` columns aggregated as arrays from ``row[start]`` on (each
    NULL when there were none)."""
    return list(zip(*(column or () for column in row[start:start + width]), strict=True))
