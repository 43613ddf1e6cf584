"""The SQLite database behind ``SqliteStore``: its file and URL, its connections, and
every query run in one transaction (``SqliteDatabase``), each method called on whichever
thread ``SqliteStore`` chooses (see its module docstring).  Driver errors become plait
errors here, once (``translate``)."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..core.model import JSONDict
from ..core.states import (
    RunStatus,
    StepStatus,
)
from ..errors import (
    DecisionTaken,
    PlaitError,
    RunNotFound,
    SchemaVersionError,
    StaleWriteError,
    StoreError,
    UnstorableValue,
    VersionConflict,
    WorkflowNotFound,
)
from . import outbox, sqlite_claims
from .base import (
    AttemptRecord,
    EventRecord,
    Heartbeat,
    RunFilter,
    RunRecord,
    StepRecord,
    WorkflowRecord,
    WriteBatch,
    owner_refusal,
)
from .group_commit import WriteJob
from .sql import queries, rows, sqlite_rows
from .sql.rows import check_id as _check_id
from .sql.rows import check_name, valid_id, valid_name
from .sql.sqlite_schema import (
    check_plait_file,
    check_version,
    latest_version,
    migrate,
    schema_version,
)

T = TypeVar("T")

BUSY_TIMEOUT_S = 10.0  # how long a job waits for another process's write lock
GATE_TIMEOUT_S = 120.0  # how long a job waits for the other writers of this process
BUSY_RETRIES = 3  # jobs that met SQLITE_BUSY without waiting that long run again
CHECKPOINT_AFTER_JOBS = 256  # write jobs committed on the loop's thread between checkpoints
INLINE_AUTOCHECKPOINT = 4000  # pages: the loop's connection checkpoints only past this
_Q = queries("sqlite")
BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_log = logging.getLogger("plait.store.sqlite")


# ----------------------------------------------------------------- driver errors


def primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def translate(exc: sqlite3.Error, where: str) -> StoreError:
    """The one place a driver error becomes a plait error (the caller chains it)."""
    code = primary_code(exc)
    if code == sqlite3.SQLITE_FULL:
        return StoreError(f"database {where}: the disk is full; the transaction was "
                          f"rolled back and nothing of it was written ({exc})")
    if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        return StoreError(f"{where} is not a usable plait database: the file is "
                          f"corrupted or not an SQLite database ({exc}); move it away "
                          f"or point --db at another file")
    if code == sqlite3.SQLITE_CANTOPEN:
        return StoreError(f"cannot open database {where} ({exc}): does its directory "
                          f"exist, and may this user write there?")
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        return StoreError(f"database {where} is read-only for this process ({exc}); "
                          f"plait needs to write the file and its directory")
    if code in BUSY_CODES:  # this process's stores take turns at the gate: not one of them
        return StoreError(f"database {where} stayed locked for more than "
                          f"{BUSY_TIMEOUT_S:g}s by a connection outside this process's "
                          f"plait stores (another process, or a tool holding the file) "
                          f"({exc})")
    if code == sqlite3.SQLITE_IOERR:
        return StoreError(f"database {where}: I/O error ({exc})")
    return StoreError(f"database {where}: {exc}")


def _job_error(exc: PlaitError | UnicodeEncodeError) -> PlaitError:
    """A group commit job's own error (RunNotFound, VersionConflict...), as its
    caller gets it."""
    if isinstance(exc, PlaitError):
        return exc
    error = UnstorableValue(f"a value to store is not valid Unicode ({exc.reason}: "
                       f"{exc.object[exc.start:exc.end]!a}); nothing of it was stored")
    error.__cause__ = exc
    return error


# ------------------------------------------------------------- the write gate

_GATES: dict[str, threading.Lock] = {}
_GATES_LOCK = threading.Lock()


def write_gate(where: str) -> threading.Lock:
    """The one lock that every SQLite store of this process holds while it writes the
    file ``where``.  Stores of one process (many concurrent ``run_async`` calls each open
    one) take turns here, woken in turn, instead of in SQLite's busy handler, which
    polls with sleeps and lets a writer starve past its timeout under heavy
    contention; the busy timeout is left for other processes."""
    with _GATES_LOCK:
        gate = _GATES.get(where)
        if gate is None:
            gate = _GATES[where] = threading.Lock()
        return gate


# ------------------------------------------------------- the thread-confined database


INT64_MAX = 2**63 - 1  # SQLite's integers: a larger Python int cannot be bound


def int64(value: int, instead: int) -> int:
    """``value``, or ``instead`` when SQLite cannot hold it (no stored row can match)."""
    return value if -INT64_MAX <= value <= INT64_MAX else instead


class SqliteDatabase:
    """The connection and every job run on it; used only from the store's thread."""

    def __init__(self, path: Path, synchronous: str, *, read_only: bool = False) -> None:
        self.path = path
        self.where = str(path.absolute())  # for messages
        self.synchronous = synchronous
        self.read_only = read_only
        self._gate = write_gate(self.where)
        self._conn: sqlite3.Connection | None = None
        self._keys: dict[str, int] = {}  # run_id -> runs.id (runs are never deleted)

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"database {self.where} is not open")
        return self._conn

    def call(self, job: Callable[..., T], *args: Any) -> T:
        """Run one job: roll back and translate driver errors; run it again after an
        SQLITE_BUSY that came without the busy timeout's wait (WAL recovery, a journal
        mode change by another process opening the file)."""
        for attempt in range(BUSY_RETRIES + 1):
            start = time.monotonic()
            try:
                return job(*args)
            except sqlite3.Error as exc:
                self.rollback()
                quick = time.monotonic() - start < BUSY_TIMEOUT_S / 2
                if primary_code(exc) in BUSY_CODES and quick and attempt < BUSY_RETRIES:
                    time.sleep(0.02 * (attempt + 1))
                    continue
                raise translate(exc, self.where) from exc
        raise AssertionError("unreachable")

    def call_writing(self, job: Callable[..., T], *args: Any) -> T:
        """``call`` for a job that writes: holding this process's write gate."""
        if not self._gate.acquire(timeout=GATE_TIMEOUT_S):
            raise StoreError(f"database {self.where}: waited more than {GATE_TIMEOUT_S:g}s "
                             f"for the other writers of this process to this file (too "
                             f"many concurrent runs on one file: share one store, or "
                             f"run fewer at once)")
        try:
            return self.call(job, *args)
        finally:
            self._gate.release()

    def rollback(self) -> None:
        conn = self._conn
        if conn is not None and conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the error being handled is the one worth reporting

    # ------------------------------------------------------------- open and close

    def connect(self, *, inline: bool = False) -> None:
        """Open the connection.  ``inline``: the event loop's connection (see the module
        docstring): opened here, on the store's thread, but used on the loop's; it never
        waits for a lock."""
        if self.read_only:
            self._conn = self._connect_read_only()
            return
        self._prepare_directory()
        timeout = 0.0 if inline else BUSY_TIMEOUT_S
        conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None,
                               cached_statements=64, check_same_thread=not inline)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000):d}")
            self._check_file(conn)
            # freed pages go back to the file system (sqlite_prune.reclaim): takes
            # effect on a new file only; an older one needs one VACUUM (docs/retention.md)
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"database {self.where}: cannot use WAL journaling "
                                 f"(got {mode!r}); is it on a network filesystem?")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            if inline:  # the store's thread checkpoints (SqliteStore._commit_here)
                conn.execute(f"PRAGMA wal_autocheckpoint = {INLINE_AUTOCHECKPOINT:d}")
            else:  # the inline connection opens after the thread's migrated
                migrate(conn, self.where)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _check_file(self, conn: sqlite3.Connection) -> None:
        """Refuse a newer schema or a foreign file before anything changes it.  The
        version and the table list are read in ONE read transaction: another process
        migrating a new file between two separate reads would otherwise show tables at
        version 0, which looks like someone else's database."""
        conn.execute("BEGIN")
        try:
            version = schema_version(conn)  # the first read: a non-database fails here
            check_version(version, self.where)
            if version == 0:
                check_plait_file(conn, self.where)  # before WAL changes a foreign file
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that never writes the database (``mode=ro``): no directory is
        created, the journal mode is left as it is, nothing is migrated.  Like any
        reader of a WAL database, SQLite uses its -wal and -shm files, creating them
        when it may; when it may not (a read-only directory, no writer around: a
        writer would have created them), the file is read as it is (``immutable``)."""
        if not self.path.is_file():
            raise StoreError(f"database {self.where} does not exist"
                             + (" (it is a directory)" if self.path.is_dir() else ""))
        uri = self.path.absolute().as_uri()
        for options in ("mode=ro", "mode=ro&immutable=1"):
            conn = sqlite3.connect(f"{uri}?{options}", uri=True, timeout=BUSY_TIMEOUT_S,
                                   isolation_level=None, cached_statements=64)
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000):d}")
                self._check_file(conn)
                self._check_current(schema_version(conn))
            except sqlite3.OperationalError as exc:
                conn.close()
                if primary_code(exc) in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY) \
                        and "immutable" not in options:
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            return conn
        raise AssertionError("unreachable")

    def _check_current(self, version: int) -> None:
        """Read-only: a schema older than this plait's is not migrated here."""
        latest = latest_version()
        if version < latest:
            raise SchemaVersionError(
                f"database {self.where} has schema version {version}, older than this "
                f"plait's ({latest}), and is opened read-only here, so it is not "
                f"migrated: run a command that writes to it (plait run, plait resume) "
                f"as a user who may write the file and its directory, then read it again")

    def _prepare_directory(self) -> None:
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory {parent.absolute()} for "
                             f"database {self.where}: {exc.strerror or exc}") from exc
        if self.path.is_dir():
            raise StoreError(f"database path {self.where} is a directory, not a file")

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database file and sync it.  Run holding
        this process's write gate, so that the copy catches up with the log and the
        next write starts the log over (it stops growing); PASSIVE: it never waits
        for another process's writer or reader.  Meanwhile, this process's writes
        queue up for the store's thread (``GroupCommit``)."""
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # ------------------------------------------------------------ group commit

    def commit_group(self, jobs: Sequence[WriteJob]) -> None:
        """ONE transaction for the write jobs of many callers (``group_commit``).  Each
        job's result or error is its own: when a job is refused (a stale write, an
        unknown run, a value SQLite cannot hold), the transaction is rolled back and
        the jobs run again, each in a savepoint, so the refused one is undone alone,
        its error becomes its outcome and the others commit.  (Savepoints for every
        job would cost two statements each on the common path, where none is
        refused.)  A driver error of the transaction itself (disk full, busy) is
        raised, after rolling everything back."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not self._apply_all(jobs):
                self.rollback()
                self._keys.clear()  # keys found inside the rolled-back transaction
                conn.execute("BEGIN IMMEDIATE")
                self._apply_each(jobs)
            conn.execute("COMMIT")
        except BaseException:
            self.rollback()
            self._keys.clear()
            raise

    def _apply_all(self, jobs: Sequence[WriteJob]) -> bool:
        """Every job in the open transaction; False when one is refused (what it
        changed before that is still in the transaction: roll it back)."""
        for job in jobs:
            try:
                job.value = job.apply(self, *job.args)
            except (rows.Refused, PlaitError, UnicodeEncodeError):
                return False
            job.ok = True
        return True

    def _apply_each(self, jobs: Sequence[WriteJob]) -> None:
        """Every job in a savepoint of its own: a refused one is undone alone."""
        conn = self.conn
        for job in jobs:
            conn.execute("SAVEPOINT job")
            try:
                job.value, job.ok = job.apply(self, *job.args), True
            except rows.Refused:
                conn.execute("ROLLBACK TO job")
                job.ok, job.value = False, self._refusal(*job.args)
            except (PlaitError, UnicodeEncodeError) as exc:
                conn.execute("ROLLBACK TO job")
                job.ok, job.value = False, _job_error(exc)
            conn.execute("RELEASE job")

    def try_commit_group(self, jobs: list[WriteJob]) -> bool:
        """``commit_group`` that gives up at once on a busy lock (the inline
        connection): False when the lock was taken, so nothing was written; other
        driver errors become a StoreError for the whole group."""
        if not self._gate.acquire(blocking=False):  # another store of this process writes
            return False
        try:
            self.commit_group(jobs)
        except sqlite3.Error as exc:
            if primary_code(exc) in BUSY_CODES:
                return False
            raise translate(exc, self.where) from exc
        finally:
            self._gate.release()
        return True

    def run_key(self, run_id: str) -> int:
        """The integer key of a run (RunNotFound when there is none)."""
        key = self._keys.get(run_id)
        if key is None:
            row = self.conn.execute(_Q["run_key"], (run_id,)).fetchone() \
                if valid_id(run_id) else None
            if row is None:
                raise RunNotFound(run_id)
            key = self._keys[run_id] = row[0]
        return key

    # ------------------------------------------------------------------ workflows

    def stored_workflow(self, name: str, fingerprint: str,
                        version: int | None) -> WorkflowRecord | None:
        """What ``save_workflow`` returns when it has nothing to store (the definition
        is stored already), read without the write lock; None when it would store."""
        if not valid_name(name):
            return None
        if version is None:
            row = self.conn.execute(_Q["workflow_by_fingerprint"], (name, fingerprint))
        else:
            row = self.conn.execute(_Q["workflow_version"], (name, version))
        found = row.fetchone()
        return rows.workflow_record(found) if found is not None and found[2] == fingerprint \
            else None

    def save_workflow(self, name: str, definition: JSONDict | str, fingerprint: str,
                      version: int | None) -> WorkflowRecord:
        """Inside a write transaction (a group commit's job)."""
        check_name(name)
        conn = self.conn
        if version is None:
            same = self.stored_workflow(name, fingerprint, None)
            if same is not None:
                return same
            row = conn.execute(_Q["latest_workflow"], (name,)).fetchone()
            version = row[1] + 1 if row is not None else 1
        else:
            row = conn.execute(_Q["workflow_version"], (name, version)).fetchone()
            if row is not None:
                if row[2] != fingerprint:
                    raise VersionConflict(name, version, row[2], fingerprint)
                return rows.workflow_record(row)
        # encoded only when a new version is stored (the same fingerprint is common)
        text = definition if isinstance(definition, str) else \
            rows.json_text(definition, f"the definition of workflow {name!r}")
        created = time.time()
        conn.execute(_Q["insert_workflow"], (name, version, fingerprint, text, created))
        return rows.workflow_record((name, version, fingerprint, text, created))

    def get_workflow(self, name: str, version: int | None) -> WorkflowRecord:
        row = None
        if valid_name(name):
            row = (self.conn.execute(_Q["latest_workflow"], (name,)) if version is None
                   else self.conn.execute(_Q["workflow_version"], (name, int64(version, -1)))
                   ).fetchone()
        if row is None:
            versions = [] if version is None or not valid_name(name) else \
                [r[0] for r in self.conn.execute(_Q["workflow_versions"], (name,))]
            raise WorkflowNotFound(name, version, versions)
        return rows.workflow_record(row)

    def list_workflows(self) -> list[WorkflowRecord]:
        return [rows.workflow_record(row) for row in self.conn.execute(_Q["list_workflows"])]

    # ----------------------------------------------------------------------- runs

    def create_run(self, run: RunRecord, step_ids: Sequence[str]) -> int:
        """Inside a write transaction (a group commit's job).  Returns the run's key."""
        _check_id("run id", run.run_id)
        check_name(run.workflow)
        _check_id("run id (retry_of)", run.retry_of)
        _check_id("run id (parent_run_id)", run.parent_run_id)
        for step_id in step_ids:
            _check_id("step id", step_id)
        values = sqlite_rows.run_values(run)
        pending = StepStatus.PENDING.value
        conn = self.conn
        try:
            key = conn.execute(_Q["insert_run"], values).lastrowid
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"run {run.run_id!r} already exists") from exc
        assert key is not None
        try:
            conn.executemany(_Q["insert_step"], [(key, step_id, position, pending)
                                                 for position, step_id
                                                 in enumerate(step_ids)])
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"run {run.run_id!r}: step ids are not unique") from exc
        conn.execute(_Q["insert_event"], (key, 1, run.created_at, "run", None, None,
                                          rows.TEXT[run.status], None, None))
        self._keys[run.run_id] = key  # forgotten if the group's transaction fails
        return key

    @staticmethod
    def _insert_steps(conn: sqlite3.Connection, key: int, batch: WriteBatch) -> None:
        """The batch's new steps (a map's items), pending, before its changes apply."""
        pending = StepStatus.PENDING.value
        try:
            conn.executemany(_Q["insert_step"], [(key, step_id, position, pending)
                                                 for step_id, position in batch.new_steps])
        except sqlite3.IntegrityError:
            raise StaleWriteError(f"run {batch.run_id!r}: a step of the batch's new steps "
                                  "exists already") from None

    def write(self, batch: WriteBatch) -> None:
        """Inside a write transaction (a group commit's job).  The step updates double
        as the stale-write check (each expects the status its change moves from: fewer
        rows changed = Refused, which ``commit_group`` explains with ``_refusal``)."""
        key = self.run_key(batch.run_id)
        if not batch:
            return
        if batch.owner is not None:  # the driver must still hold the run
            holder = self.conn.execute(_Q["run_owner"], (key,)).fetchone()[0]
            if holder != batch.owner:
                raise owner_refusal(batch.run_id, batch.owner, holder)
        if not rows.legal(batch):
            raise rows.Refused
        steps, notes = sqlite_rows.step_updates(key, batch)
        conn = self.conn
        try:
            if batch.new_steps:
                self._insert_steps(conn, key, batch)
            if steps and conn.executemany(_Q["update_step"], steps).rowcount != len(steps):
                raise rows.Refused
            if batch.run is not None:
                self._move_run(conn, key, batch)
            if batch.claims:
                sqlite_claims.apply_batch(conn, key, batch)
            last = conn.execute(_Q["last_seq"], (key,)).fetchone()[0]
            events, attempts = sqlite_rows.history(key, last, batch, notes)
            if attempts:
                conn.executemany(_Q["upsert_attempt"], attempts)
            conn.executemany(_Q["insert_event"], events)
            if batch.outbox:
                outbox.sqlite_enqueue(conn, batch.outbox)
        except UnicodeEncodeError as exc:  # a lone surrogate in a JSON value's text
            raise UnstorableValue(f"run {batch.run_id!r}: a value to store is not valid "
                             f"Unicode ({exc.reason}: {exc.object[exc.start:exc.end]!a}"
                             f"); nothing of the batch was stored") from exc

    def _move_run(self, conn: sqlite3.Connection, key: int, batch: WriteBatch) -> None:
        change = batch.run
        assert change is not None
        stored = conn.execute(_Q["run_status"], (key,)).fetchone()[0]
        if stored != rows.TEXT[change.source]:
            raise rows.Refused
        target = change.target
        if target in rows.FINAL_RUN:
            output = rows.json_or_null(change.output, f"the output of run {batch.run_id!r}")
            conn.execute(_Q["finish_run"], (rows.TEXT[target], change.at, output,
                                            rows.optional_text(change.error), key))
        else:
            first = change.at if target is RunStatus.RUNNING else None
            wake_at = change.wake_at if target is RunStatus.WAITING else None
            conn.execute(_Q["move_run"], (rows.TEXT[target], first, wake_at, key))

    def _refusal(self, batch: WriteBatch) -> StoreError:
        """Why a batch is refused (``rows.why_refused``), read inside the group's
        transaction, the batch rolled back."""
        key = self.run_key(batch.run_id)
        conn = self.conn

        def step_status(step: str) -> str | None:
            row = conn.execute(_Q["step_status"], (key, step)).fetchone()
            return None if row is None else str(row[0])

        def run_status() -> str:
            return str(conn.execute(_Q["run_status"], (key,)).fetchone()[0])

        return rows.why_refused(batch, step_status, run_status)

    def get_run(self, run_id: str) -> RunRecord:
        row = self.conn.execute(_Q["get_run"], (run_id,)).fetchone() \
            if valid_id(run_id) else None
        if row is None:
            raise RunNotFound(run_id)
        return rows.run_record(row)

    def list_runs(self, f: RunFilter) -> list[RunRecord]:
        status = None if f.status is None else rows.TEXT[f.status]
        top = int(f.top_level)
        found = (self.conn.execute(_Q["list_runs"],
                                   (status, f.since, f.limit, f.before, top))
                 if f.workflow is None else
                 self.conn.execute(_Q["list_workflow_runs"],
                                   (f.workflow, status, f.since, f.limit, f.before, top)))
        return [rows.run_record(row) for row in found]

    def get_steps(self, run_id: str) -> list[StepRecord]:
        return rows.step_records(run_id, self.conn.execute(_Q["get_steps"],
                                                           (self.run_key(run_id),)))

    def get_steps_by_id(self, run_id: str, step_ids: list[str]) -> list[StepRecord]:
        return rows.step_records(run_id, self.conn.execute(
            _Q["get_steps_by_id"], (self.run_key(run_id), json.dumps(step_ids))))

    def get_attempts(self, run_id: str) -> list[AttemptRecord]:
        return rows.attempt_records(run_id, self.conn.execute(_Q["get_attempts"],
                                                              (self.run_key(run_id),)))

    def get_events(self, run_id: str, after: int) -> list[EventRecord]:
        found = self.conn.execute(_Q["get_events"], (self.run_key(run_id),
                                                    max(-INT64_MAX, min(after, INT64_MAX))))
        return rows.event_records(run_id, found, after)

    def parents_to_wake(self, limit: int) -> list[str]:
        return [row[0] for row in self.conn.execute(_Q["parents_to_wake"],
                                                    (max(limit, 0),))]

    def record_decision(self, run_id: str, step_id: str, decision: JSONDict) -> None:
        """A compare-and-set inside a write transaction (a group commit's job, under
        the write lock): no other connection, of this process or another, stores a
        decision in between."""
        key = self.run_key(run_id)
        data = rows.json_text({"approval": decision},
                              f"the decision on step {step_id!r} of run {run_id!r}")
        conn = self.conn
        row = conn.execute(_Q["step_status"], (key, step_id)).fetchone()
        if row is None:
            raise StoreError(f"run {run_id!r} has no step {step_id!r}")
        standing = conn.execute(_Q["standing_decision"], (key, step_id)).fetchone()
        if standing is not None:
            raise DecisionTaken(run_id, step_id, json.loads(standing[0])["approval"])
        if row[0] != StepStatus.WAITING.value:
            raise StaleWriteError(f"step {step_id!r} of run {run_id!r} is {row[0]}, "
                                  f"not waiting for a decision")
        last = conn.execute(_Q["last_seq"], (key,)).fetchone()[0]
        conn.execute(_Q["insert_event"], (key, last + 1, time.time(), "note", step_id,
                                          None, None, None, data))

    def request_cancel(self, run_id: str) -> None:
        if self.conn.execute(_Q["request_cancel"], (run_id,)).rowcount == 0:
            raise RunNotFound(run_id)

    def claim_run(self, run_id: str, owner: str, now: float, lease: float,
                  dead_owner: str | None) -> RunRecord | None:
        self.run_key(run_id)  # RunNotFound
        conn = self.conn  # inside a write transaction (a group commit's job)
        claimed = conn.execute(_Q["claim_run"], (owner, now, run_id, now - lease,
                                                 dead_owner))
        if not claimed.rowcount:
            return None
        return rows.run_record(conn.execute(_Q["get_run"], (run_id,)).fetchone())

    def heartbeat(self, run_id: str, owner: str, now: float) -> Heartbeat:
        row = self.conn.execute(_Q["heartbeat"], (now, run_id, owner)).fetchone() \
            if valid_id(run_id) else None
        if row is None:
            raise RunNotFound(run_id)
        return Heartbeat(held=bool(row[0]), owner=row[1], cancel_requested=bool(row[2]))

    def release_run(self, run_id: str, owner: str) -> None:
        self.conn.execute(_Q["release_run"], (run_id, owner))
