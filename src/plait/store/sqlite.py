"""The SQLite store: one database file, shared by every plait process of a host.

URLs: ``sqlite:///runs.db`` (relative to the current directory),
``sqlite:////abs/path/runs.db`` (absolute), with options as a query string:
``?synchronous=NORMAL`` (the default) or ``?synchronous=FULL``.  The file and its
directory are created on first use.

Durability (``synchronous``; the database always runs in WAL mode):

- ``NORMAL``: a commit is appended to the write-ahead log, which is synced to disk only
  at checkpoints.  A crash of the process (kill -9) loses nothing committed; a power
  loss or OS crash may lose the last transactions committed before it, but never
  corrupts the database.  Commits cost no fsync (issue 4 measured about 37,000
  single-row commits/s on its benchmark disk).
- ``FULL``: every commit is synced before ``write()`` returns, so a committed change
  survives a power loss too, at the cost of one fsync per commit (about 4,300
  commits/s on the same disk).

Threading: one dedicated thread owns the connection.  Reads are ONE hop to that thread
running one job, never one hop per statement; the event loop never waits for a lock, a
sync or a large read.  Writes (``write``, ``create_run``, ``claim_run``, ``heartbeat``,
``release_run``, ``record_decision``, ``claim_fire``, a schedule's first sighting,
storing a new definition) are jobs of the store's
group commit (``group_commit.GroupCommit``): the jobs of many runs that are ready
together are committed as ONE ``BEGIN IMMEDIATE ... COMMIT``, each job's result or
error its own (``SqliteDatabase.commit_group``: a refused job is undone alone).
``release_run``, ``record_decision``, storing a new definition, and the claims writes
``claim_attempts``, ``extend_leases``, ``complete_attempts``, ``reap_expired`` of
``sqlite_claims.py``) are jobs of the store's group commit
(``group_commit.GroupCommit``): the jobs of many runs that are ready together are
committed as ONE ``BEGIN IMMEDIATE ... COMMIT``, each job's result or error its own
(``SqliteDatabase.commit_group``: a refused job is undone alone).

With ``synchronous=NORMAL`` a group is committed on the event loop's own thread (the
one that opened the store), through a second connection whose busy timeout is zero,
when the write lock is free at that instant.  Such a commit appends to the write-ahead
log without an fsync: it costs about what encoding the batch does, while the hop to
the thread and back cost more than the commit itself (chain-1000 in ``make bench`` on
a 2-core VM: 2,949 durable steps/s through the thread, 6,301 inline).  When the lock
is busy the group goes to the thread, which waits for it as above, and what arrives
meanwhile forms the next group.  The log is checkpointed (copied into the database and
synced) by the store's thread every CHECKPOINT_AFTER_JOBS inline jobs, holding the
write gate (``SqliteStore._commit_here``).  With ``synchronous=FULL`` every commit is
synced, so every group goes to the thread.  Point reads (the run's record, whether a
definition is stored already) are done on the loop's connection too.

One process, many runs: they share one store per file (``shared.py``,
``plait.connect``).  Stores of one process that still write the same file (other event
loops, another ``synchronous`` mode) take turns at one lock per file (``write_gate``),
so they never wait in SQLite's busy handler, which polls and can starve a writer.

Reading only (``read_only=True``: ``plait runs``, ``show``...): ``mode=ro``, no
directory created, no journal mode change, no migration; see ``_connect_read_only``.

Many processes: WAL lets readers proceed while one process writes.  Writers take the
write lock up front (``BEGIN IMMEDIATE``: a transaction never fails half-way on a lock
upgrade), wait up to ``busy_timeout`` (10 s) for it, and a job that still meets
SQLITE_BUSY is retried a few times before it fails.

Errors: every sqlite3 error becomes a StoreError naming the file once, at the thread
boundary (``SqliteDatabase.call``), after the open transaction was rolled back: a full disk
or a refused batch leaves nothing half-written.

Schema: numbered migrations (``migrations/sqlite/NNNN_*.sql``, applied by
``sql/sqlite_schema.py``) tracked by ``PRAGMA user_version``; a database of a newer
schema is refused (SchemaVersionError).  Queries: named blocks of ``sql/sqlite.sql``;
values to rows and rows to records: ``sql/sqlite_rows.py``.  Event ``seq`` numbers
each run's history from 1.  Runs are never deleted, so the integer key of a run, once
found, is cached for the life of the store.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from queue import SimpleQueue
from typing import Any

from ..core.model import JSON, JSONDict
from ..errors import StoreError, WorkflowNotFound
from . import outbox, sqlite_cache, sqlite_claims, sqlite_journal, sqlite_prune, sqlite_tokens
from . import sqlite_schedules as schedules
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
)
from .capabilities import StoreCapabilities
from .group_commit import GroupCommit, WriteJob
from .observations import (
    MetricsSnapshot,
    sqlite_snapshot,
)
from .outbox import OutboxRow
from .prune import BATCH, Cursor, PruneCounts, final_statuses, in_batches, takes_alerts
from .records import TokenUsage
from .sqlite_database import (
    BUSY_CODES,
    CHECKPOINT_AFTER_JOBS,
    SqliteDatabase,
    T,
    primary_code,
    translate,
)
from .sqlite_url import parse_url

_log = logging.getLogger("plait.store.sqlite")

# ------------------------------------------------------------------- the Store


_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any],
             tuple[Any, ...]]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if not future.done():  # the awaiting task may have been cancelled meanwhile
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


class _StoreThread:
    """The thread that owns the connection: runs jobs one at a time, in the order they
    were submitted, and settles each job's future on the loop that awaits it.  (Lighter
    than a ThreadPoolExecutor plus wrap_future: one queue put there, one
    call_soon_threadsafe back; that halves the hop, the largest cost of a small write
    after the commit itself.)"""

    def __init__(self, name: str) -> None:
        self._jobs: SimpleQueue[_Job | Callable[[], object]] = SimpleQueue()
        # daemon: a store never closed must not keep the interpreter from exiting
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, future, job, args))
        return future

    def stop(self, last: Callable[[], object]) -> None:
        """Run the jobs already submitted, then ``last`` (its driver errors ignored: it
        releases what the thread holds), then end the thread; waits for all that."""
        self._jobs.put(last)
        self._thread.join()

    def _serve(self) -> None:
        while True:
            item = self._jobs.get()
            if not isinstance(item, tuple):
                with suppress(sqlite3.Error):  # shutting down: nobody to tell
                    item()
                return
            loop, future, job, args = item
            try:
                ok, value = True, job(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                ok, value = False, exc
            try:
                loop.call_soon_threadsafe(_settle, future, ok, value)
            except RuntimeError:
                pass  # that loop is closed: nobody awaits this result any more


class SqliteStore:
    """The Store protocol on one SQLite file (see the module docstring)."""

    # every process opening the file shares it; nothing wakes another process
    capabilities = StoreCapabilities(shared=True, in_process=False, notify=False)

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        """``read_only``: for commands that only read (see ``_connect_read_only``);
        every write is refused."""
        self.url = url
        path, synchronous = parse_url(url)
        self.path = path
        self.synchronous = synchronous
        self.read_only = read_only
        self._db = SqliteDatabase(path, synchronous, read_only=read_only)
        self._thread: _StoreThread | None = None
        # the event loop's connection (NORMAL only), used on the loop that opened it
        self._inline: SqliteDatabase | None = None
        self._writes: GroupCommit | None = None  # the group commit of that loop
        self._unsynced_jobs = 0  # committed on the loop's thread since the last checkpoint
        self._checkpoint: asyncio.Future[None] | None = None  # at the store's thread
        self._checkpointing = False  # set here, cleared by the store's thread

    def _run(self, job: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """One hop to the store's thread: ``job`` runs there; await the result."""
        thread = self._thread
        if thread is None:
            raise StoreError(f"store {self.url} is not open (call open() first)")
        return thread.submit(self._db.call, job, *args)

    async def _write(self, apply: Callable[..., T], *args: Any) -> T:
        """A write job, committed by the group commit of the loop that opened the store
        (with the jobs of other runs that are ready together), or, from another event
        loop, as a group of its own on the store's thread."""
        writes = self._writes
        if writes is None:
            raise StoreError(f"store {self.url} is not open (call open() first)")
        job = WriteJob(apply, args)
        if asyncio.get_running_loop() is writes.loop:
            result: T = await writes.write(job)
            return result
        await self._commit_there([job])
        return job.outcome()  # type: ignore[no-any-return]

    def _commit_there(self, jobs: list[WriteJob]) -> asyncio.Future[None]:
        """A group committed on the store's thread, which waits for the write lock."""
        thread = self._thread
        if thread is None:
            raise StoreError(f"store {self.url} is not open (call open() first)")
        return thread.submit(self._db.call_writing, self._db.commit_group, jobs)

    def _commit_here(self, jobs: list[WriteJob]) -> bool:
        """A group committed on the loop's thread (False: the lock was busy).  Such
        commits append to the write-ahead log without a sync; the sync comes with a
        checkpoint, which the store's thread does every CHECKPOINT_AFTER_JOBS jobs
        (the loop's connection does it itself, a sync of the database file on the
        loop's thread, only past INLINE_AUTOCHECKPOINT pages: when another process
        keeps the checkpoints from catching up).  While a checkpoint is pending, groups
        go to the thread, after it: it is not starved of the write gate."""
        inline = self._inline
        if inline is None or self._checkpointing:  # the thread's turn (next in its queue)
            return False
        if not inline.try_commit_group(jobs):
            return False
        self._unsynced_jobs += len(jobs)
        if self._unsynced_jobs >= CHECKPOINT_AFTER_JOBS and self._thread is not None \
                and not self._checkpointing:  # (cleared by the thread: the loop may
            self._unsynced_jobs = 0           # not have run its callbacks since)
            self._checkpointing = True
            self._checkpoint = self._run(self._checkpoint_now)
        return True

    def _checkpoint_now(self) -> None:
        """On the store's thread.  A checkpoint that fails (the disk...) is tried again
        after the next jobs, and the loop's connection checkpoints past its limit:
        nobody waits for this one to tell them."""
        try:
            self._db.call_writing(self._db.checkpoint)
        except StoreError as exc:
            _log.warning("database %s: checkpoint failed (%s); it is retried", self._db.where,
                         exc)
        finally:
            self._checkpointing = False

    def _read_here(self, job: Callable[..., T], *args: Any) -> T | None:
        """A point read on the loop's own connection (no hop); None when it cannot be
        done here at once (another loop, FULL mode, a lock met): read on the thread."""
        inline, writes = self._inline, self._writes
        if inline is None or writes is None or asyncio.get_running_loop() is not writes.loop:
            return None
        try:
            return job(inline, *args)
        except sqlite3.Error as exc:
            inline.rollback()
            if primary_code(exc) in BUSY_CODES:
                return None
            raise translate(exc, inline.where) from exc

    async def open(self) -> None:
        """Create the file and its directory if needed, migrate, and be ready."""
        if self._thread is not None:
            return
        self._thread = _StoreThread(f"plait-sqlite:{self.path.name}")
        try:
            await self._thread.submit(self._db.call_writing, self._db.connect)
            if self.synchronous == "NORMAL" and not self.read_only:
                inline = SqliteDatabase(self.path, self.synchronous)
                try:
                    await self._run(lambda: inline.connect(inline=True))
                except StoreError:  # an optimisation only: every write takes the thread
                    inline.close()
                else:
                    self._inline = inline
        except BaseException:
            thread, self._thread = self._thread, None
            thread.stop(self._close_all)  # also when cancelled while connecting
            raise
        here = None if self._inline is None else self._commit_here
        self._writes = GroupCommit(asyncio.get_running_loop(), here, self._commit_there)

    def _close_all(self) -> None:
        inline, self._inline = self._inline, None
        if inline is not None:
            inline.close()
        self._db.close()

    async def close(self) -> None:
        writes, self._writes = self._writes, None
        if writes is not None:
            await writes.drain()  # what was written before close is committed
        checkpoint, self._checkpoint = self._checkpoint, None
        if checkpoint is not None:
            await checkpoint  # it never raises (see _checkpoint_now)
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            await thread.submit(self._db.call, self._close_all)
        finally:
            thread.stop(self._close_all)  # at once when the close above ran

    async def save_workflow(self, name: str, definition: JSONDict | str, fingerprint: str,
                            version: int | None) -> WorkflowRecord:
        # the same definition is stored already (the common case: every run of a
        # workflow stores it): read, without the write lock or a hop
        stored = self._read_here(SqliteDatabase.stored_workflow, name, fingerprint, version)
        if stored is not None:
            return stored
        return await self._write(SqliteDatabase.save_workflow, name, definition, fingerprint,
                                 version)

    async def get_workflow(self, name: str, version: int | None = None) -> WorkflowRecord:
        return await self._run(self._db.get_workflow, name, version)

    async def list_workflows(self) -> list[WorkflowRecord]:
        return await self._run(self._db.list_workflows)

    async def create_run(self, run: RunRecord, step_ids: Sequence[str]) -> None:
        await self._write(SqliteDatabase.create_run, run, list(step_ids))

    async def write(self, batch: WriteBatch) -> None:
        await self._write(SqliteDatabase.write, batch)

    async def get_run(self, run_id: str) -> RunRecord:
        found = self._read_here(SqliteDatabase.get_run, run_id)  # one row: read here
        return found if found is not None else await self._run(self._db.get_run, run_id)

    async def read_run(self, run_id: str) -> RunDocument:
        return await self._run(_read_run, self._db, run_id)

    async def list_runs(self, filter: RunFilter) -> list[RunRecord]:
        return await self._run(self._db.list_runs, filter)

    async def get_steps(self, run_id: str) -> list[StepRecord]:
        return await self._run(self._db.get_steps, run_id)

    async def get_steps_by_id(self, run_id: str,
                              step_ids: Sequence[str]) -> list[StepRecord]:
        return await self._run(self._db.get_steps_by_id, run_id, list(step_ids))

    async def get_attempts(self, run_id: str) -> list[AttemptRecord]:
        return await self._run(self._db.get_attempts, run_id)

    async def get_events(self, run_id: str, after: int = 0) -> list[EventRecord]:
        return await self._run(self._db.get_events, run_id, after)

    async def parents_to_wake(self, limit: int) -> list[str]:
        return await self._run(self._db.parents_to_wake, limit)

    async def record_decision(self, run_id: str, step_id: str, decision: JSONDict) -> None:
        await self._write(SqliteDatabase.record_decision, run_id, step_id, decision)

    async def request_cancel(self, run_id: str) -> None:
        await self._write(SqliteDatabase.request_cancel, run_id)

    async def claim_run(self, run_id: str, owner: str, now: float, lease: float, *,
                        dead_owner: str | None = None) -> RunRecord | None:
        return await self._write(SqliteDatabase.claim_run, run_id, owner, now, lease,
                                 dead_owner)

    async def heartbeat(self, run_id: str, owner: str, now: float) -> Heartbeat:
        return await self._write(SqliteDatabase.heartbeat, run_id, owner, now)

    async def release_run(self, run_id: str, owner: str) -> None:
        await self._write(SqliteDatabase.release_run, run_id, owner)

    async def claim_fire(self, workflow: str, schedule: str, fire_time: float,
                         run: RunRecord, step_ids: Sequence[str]) -> bool:
        return await self._write(schedules.claim_fire, workflow, schedule, fire_time, run,
                                 list(step_ids))

    async def last_fire(self, workflow: str, schedule: str, *,
                        seen_at: float | None = None) -> float | None:
        # a schedule seen before (every tick but its first): a read, without the lock
        found = self._read_here(schedules.last_fire, workflow, schedule)
        if found is None:
            found = await self._run(schedules.last_fire, self._db, workflow, schedule)
        if found is not None or seen_at is None:
            return found
        return await self._write(schedules.record_sighting, workflow, schedule, seen_at)
    # ------------------------------------------------------------------ claims
    # (sqlite_claims.py) Writes are jobs of the group commit, as every write; reads
    # take the store's thread.  Store time is read inside each job's transaction.

    async def claim_attempts(self, worker: str, limit: int, lease: float) -> list[Lease]:
        if limit <= 0:
            return []
        return await self._write(sqlite_claims.claim_attempts, worker, limit, lease)

    async def extend_leases(self, worker: str, tokens: Sequence[str],
                            lease: float) -> set[str]:
        return await self._write(sqlite_claims.extend_leases, worker, list(tokens), lease)

    async def complete_attempts(self, worker: str,
                                results: Sequence[tuple[str, InboxOutcome]]) -> list[bool]:
        return await self._write(sqlite_claims.complete_attempts, worker, list(results))

    async def reap_expired(self, limit: int = 1000) -> list[tuple[str, str, int]]:
        return await self._write(sqlite_claims.reap_expired, limit)

    async def outcomes(self, run_id: str) -> list[InboxOutcome]:
        return await self._run(sqlite_claims.outcomes, self._db, run_id)

    async def tickets(self, run_id: str) -> list[TicketRecord]:
        return await self._run(sqlite_claims.tickets, self._db, run_id)

    async def runs_to_drive(self, lease: float, limit: int) -> list[str]:
        return await self._run(sqlite_claims.runs_to_drive, self._db, lease, limit)

    # ------------------------------------------------------------------ run events

    async def event_put(self, run_id: str, name: str, data: JSON, at: float) -> Signal:
        return await self._write(sqlite_journal.event_put, run_id, name, data, at)

    async def event_get(self, run_id: str, name: str) -> Signal | None:
        return await self._run(sqlite_journal.event_get, self._db, run_id, name)

    # ------------------------------------------------------------------ step journal

    async def journal_get(self, run_id: str, step_id: str, name: str) -> Journaled | None:
        # one row: read here (a hop to the store's thread cost more than the read)
        here = self._read_here(sqlite_journal.journal_lookup, run_id, step_id, name)
        if here is not None:
            return here[0]
        return await self._run(sqlite_journal.journal_get, self._db, run_id, step_id, name)

    async def journal_step(self, run_id: str, step_id: str) -> dict[str, Journaled]:
        # the rows of one step, by the table's key: read here too
        here = self._read_here(sqlite_journal.journal_step_lookup, run_id, step_id)
        if here is not None:
            return here[0]
        return await self._run(sqlite_journal.journal_step, self._db, run_id, step_id)

    async def journal_put(self, run_id: str, step_id: str, name: str, value: JSON,
                          attempt: int, at: float) -> Journaled:
        return await self._write(sqlite_journal.journal_put, run_id, step_id, name, value,
                                 attempt, at)

    async def journal(self, run_id: str) -> list[JournalEntry]:
        return await self._run(sqlite_journal.journal, self._db, run_id)

    # ------------------------------------------------------------------ token budgets

    async def add_llm_tokens(self, run_id: str, step_id: str, usage: TokenUsage,
                             ancestors: Sequence[str] = ()) -> int:
        return await self._write(sqlite_tokens.tokens_add, run_id, step_id, usage.checked(),
                                 tuple(ancestors))

    async def llm_tokens(self, run_id: str) -> int:
        return await self._run(sqlite_tokens.tokens_get, self._db, run_id)

    # ------------------------------------------------------------------ retention

    async def prune_runs(self, cutoff: float, statuses: Sequence[str] | None = None,
                         workflow: str | None = None, *, batch: int = BATCH,
                         dry_run: bool = False) -> PruneCounts:
        chosen = final_statuses(statuses)

        async def one(after: Cursor) -> tuple[PruneCounts, Cursor | None]:
            args = (cutoff, chosen, workflow, after, batch, dry_run)
            if dry_run:
                return await self._run(sqlite_prune.sqlite_batch, self._db, *args)
            return await self._write(sqlite_prune.sqlite_batch, *args)

        counts = await in_batches(one)
        if takes_alerts(chosen):
            alerts = (cutoff, workflow, dry_run)
            counts = counts.plus(
                await self._run(sqlite_prune.sqlite_alerts, self._db, *alerts) if dry_run
                else await self._write(sqlite_prune.sqlite_alerts, *alerts))
        if (counts.runs or counts.rows) and not dry_run:
            await self._run(self._db.call_writing, sqlite_prune.reclaim, self._db)
        return counts

    # ------------------------------------------------------------------ webhook deliveries

    async def claim_delivery(self, hook: str, delivery_id: str, run_id: str, at: float,
                             forget_before: float) -> str:
        return await self._write(sqlite_cache.claim_delivery, hook, delivery_id, run_id,
                                 at, forget_before)

    async def forget_delivery(self, hook: str, delivery_id: str, run_id: str) -> None:
        await self._write(sqlite_cache.forget_delivery, hook, delivery_id, run_id)

    # ------------------------------------------------------------------ step cache

    async def get_cached(self, workflow: str, step_id: str, key: str,
                         since: float) -> CachedResult | None:
        return await self._run(sqlite_cache.get_cached, self._db, workflow, step_id, key,
                               since)

    async def put_cached(self, workflow: str, step_id: str, key: str, output: JSON,
                         run_id: str, created_at: float) -> None:
        await self._write(sqlite_cache.put_cached, workflow, step_id, key, output, run_id,
                          created_at)

    # ------------------------------------------------------------------ observability

    async def metrics_snapshot(self, bounds: Sequence[float]) -> MetricsSnapshot:
        return await self._run(_snapshot, self._db, list(bounds))

    async def enqueue_notifications(self, rows: Sequence[OutboxRow]) -> int:
        return await self._write(_outbox_job(outbox.sqlite_enqueue), list(rows))

    async def claim_notifications(self, sender: str, now: float, lease: float,
                                  limit: int = 20) -> list[OutboxRow]:
        return await self._write(_outbox_job(outbox.sqlite_claim), sender, now, lease, limit)

    async def settle_notification(self, row_id: str, sender: str, *, state: str,
                                  attempts: int, next_at: float,
                                  error: str | None = None) -> bool:
        return await self._write(_outbox_job(outbox.sqlite_settle), row_id, sender, state,
                                 attempts, next_at, error)

    async def release_notifications(self, sender: str) -> int:
        return await self._write(_outbox_job(outbox.sqlite_release), sender)

    async def list_notifications(self, state: str | None = None,
                                 limit: int = 100) -> list[OutboxRow]:
        return await self._run(_outbox_job(outbox.sqlite_list), self._db, state, limit)

    # ------------------------------------------------------------------ breakers

    async def get_breaker(self, key: str) -> tuple[JSONDict | None, int]:
        return await self._run(sqlite_claims.get_breaker, self._db, key)

    async def put_breaker(self, key: str, state: JSONDict, version: int) -> bool:
        return await self._write(sqlite_claims.put_breaker, key, state, version)


def _snapshot(db: SqliteDatabase, bounds: list[float]) -> MetricsSnapshot:
    return sqlite_snapshot(db.conn, bounds)


def _outbox_job(apply: Callable[..., T]) -> Callable[..., T]:
    """An outbox statement (``store.outbox``) as a job on the database."""
    def job(db: SqliteDatabase, *args: Any) -> T:
        return apply(db.conn, *args)
    return job


def _read_run(db: SqliteDatabase, run_id: str) -> RunDocument:
    """``Store.read_run``: six statements in one read transaction (one snapshot of
    the file, on the store's thread: one hop)."""
    conn = db.conn
    conn.execute("BEGIN")
    try:
        run = db.get_run(run_id)
        return RunDocument(run=run, steps=db.get_steps(run_id),
                           attempts=db.get_attempts(run_id),
                           events=db.get_events(run_id, 0),
                           journal=sqlite_journal.journal(db, run_id),
                           workflow=_workflow_of(db, run))
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def _workflow_of(db: SqliteDatabase, run: RunRecord) -> WorkflowRecord | None:
    try:
        return db.get_workflow(run.workflow, run.version)
    except WorkflowNotFound:
        return None
