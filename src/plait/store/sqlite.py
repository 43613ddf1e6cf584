"""The SQLite store: one database file, shared by every plait process of a host.

URLs: ``sqlite:///runs.db`` (relative to the current directory),
``sqlite:////abs/path/runs.db`` (absolute), with options as a query string:
``?synchronous=NORMAL`` (the default) or ``?synchronous=FULL``.  The file and its
directory are created on first use.

Durability (``synchronous``; the database always runs in WAL mode):

- ``NORMAL``: a commit is appended to the write-ahead log, which is synced to disk only
  at checkpoints.  A crash of the process (kill -9) loses nothing committed; a power
  loss or OS crash may lose the last transactions committed before it, but never
  corrupts the database.  Commits cost no fsync (about 37,000 single-row commits/s on
  the benchmark disk).
- ``FULL``: every commit is synced before ``write()`` returns, so a committed change
  survives a power loss too, at the cost of one fsync per commit (about 4,300
  commits/s on the same disk).

Threading: one dedicated thread owns the connection.  Each Store method is ONE hop to
that thread running one job (a whole transaction), never one hop per statement, and
the event loop never blocks on SQLite.  ``write(batch)`` is a single
``BEGIN IMMEDIATE ... COMMIT`` using ``executemany`` per kind of row; its values are
JSON-encoded once, before the write lock is taken, so transactions stay short.

Many processes: WAL lets readers proceed while one process writes.  Writers take the
write lock up front (``BEGIN IMMEDIATE``: a transaction never fails half-way on a lock
upgrade), wait up to ``busy_timeout`` (10 s) for it, and a job that still meets
SQLITE_BUSY is retried a few times before it fails.

Errors: every sqlite3 error becomes a StoreError naming the file once, at the thread
boundary (``_Database.call``), after the open transaction was rolled back: a full disk
or a refused batch leaves nothing half-written.

Schema: numbered migrations (``migrations/sqlite/NNNN_*.sql``) tracked by
``PRAGMA user_version``; a database of a newer schema is refused (SchemaVersionError).
Queries: named blocks of ``sql/sqlite.sql``.  Runs are never deleted, so the integer
key of a run, once found, is cached for the life of the store.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from ..core.model import JSON, JSONDict
from ..core.states import (
    RUN_TRANSITIONS,
    STEP_TRANSITIONS,
    RunStatus,
    StepStatus,
    check_run_transition,
    check_step_transition,
)
from ..errors import (
    RunNotFound,
    SchemaVersionError,
    StaleWriteError,
    StoreError,
    VersionConflict,
    WorkflowNotFound,
)
from .base import (
    AttemptRecord,
    EventRecord,
    RunFilter,
    RunRecord,
    StepRecord,
    WorkflowRecord,
    WriteBatch,
)
from .sql import migrations, queries

T = TypeVar("T")

BUSY_TIMEOUT_S = 10.0
_BUSY_RETRIES = 4  # jobs retried after the busy timeout already waited
SYNCHRONOUS_MODES = ("NORMAL", "FULL")
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # hyphenated UUIDs (36 characters) included
_Q = queries("sqlite")
_STEP_STATUS = {s.value: s for s in StepStatus}
_RUN_STATUS = {s.value: s for s in RunStatus}
_FINAL_RUN = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
# one encoder, built once: json.dumps(value, **options) would build one per call
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                           allow_nan=False).encode
_decode = json.loads


# --------------------------------------------------------------------------- the URL


def parse_url(url: str) -> tuple[Path, str]:
    """``sqlite:///path.db?synchronous=FULL`` -> (path, synchronous)."""
    if not url.startswith("sqlite:///"):
        raise StoreError(f"bad SQLite URL {url!r}: write sqlite:///relative/path.db or "
                         f"sqlite:////absolute/path.db (three slashes, then the path)")
    rest = url[len("sqlite:///"):]
    location, _, query = rest.partition("?")
    if location in ("", ":memory:"):
        raise StoreError(f"bad SQLite URL {url!r}: it names no database file "
                         f"(use memory:// for a store that is not kept)")
    synchronous = "NORMAL"
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key != "synchronous":
            raise StoreError(f"SQLite URL {url!r}: unknown option {key!r} "
                             f"(known: synchronous)")
        if value.upper() not in SYNCHRONOUS_MODES:
            raise StoreError(f"SQLite URL {url!r}: synchronous must be NORMAL or FULL, "
                             f"not {value!r}")
        synchronous = value.upper()
    return Path(location), synchronous


def _check_id(kind: str, value: str | None) -> None:
    if value is not None and not (isinstance(value, str) and _ID.fullmatch(value)):
        raise StoreError(f"invalid {kind} {value!r}: an id is 1 to 64 letters, digits, "
                         f"'_' or '-'")


def _valid_id(value: str) -> bool:
    return isinstance(value, str) and _ID.fullmatch(value) is not None


# ------------------------------------------------------------------- schema upkeep


def _statements(script: str) -> Iterator[str]:
    """The statements of a migration script, one at a time (``executescript`` would
    commit the migration's transaction half-way)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""
    leftover = "\n".join(ln for ln in pending.splitlines()
                         if ln.strip() and not ln.strip().startswith("--"))
    if leftover:
        raise StoreError(f"incomplete SQL statement at the end of a migration: {leftover!r}")


def schema_version(conn: sqlite3.Connection) -> int:
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    return version


def migrate(conn: sqlite3.Connection, where: str, target: int | None = None) -> int:
    """Bring the schema of ``conn`` (in autocommit mode) up to ``target`` (default: the
    latest) in one transaction; returns the version reached.  Refuses a database of a
    newer schema, and a database that holds tables but is not plait's."""
    steps = migrations("sqlite")
    latest = steps[-1].version
    goal = latest if target is None else target
    current = schema_version(conn)
    _check_version(current, latest, where)
    if current >= goal:
        return current
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = schema_version(conn)  # another process may have migrated meanwhile
        _check_version(current, latest, where)
        if current == 0:
            _check_empty(conn, where)
        for step in steps[current:goal]:
            for statement in _statements(step.sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {step.version:d}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return max(current, goal)


def _check_version(current: int, latest: int, where: str) -> None:
    if current > latest:
        raise SchemaVersionError(
            f"database {where} has schema version {current}, written by a newer plait; "
            f"this plait knows schema versions up to {latest}: upgrade plait to use it")


def _check_empty(conn: sqlite3.Connection, where: str) -> None:
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' LIMIT 5")]
    if names:
        raise StoreError(f"database {where} is not a plait database (it holds "
                         f"{', '.join(names)}); point --db at a new file")


# ----------------------------------------------------------------- driver errors

_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def translate(exc: sqlite3.Error, path: Path) -> StoreError:
    """The one place a driver error becomes a plait error (the caller chains it)."""
    code = _primary_code(exc)
    where = str(path)
    if code == sqlite3.SQLITE_FULL:
        return StoreError(f"database {where}: the disk is full; the transaction was "
                          f"rolled back and nothing of it was written ({exc})")
    if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        return StoreError(f"{where} is not a usable plait database: the file is "
                          f"corrupted or not an SQLite database ({exc}); move it away "
                          f"or point --db at another file")
    if code == sqlite3.SQLITE_CANTOPEN:
        return StoreError(f"cannot open database {where}: {exc} (does its directory "
                          f"exist, and may this user write there?)")
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        return StoreError(f"database {where} is read-only for this process ({exc}); "
                          f"plait needs to write the file and its directory")
    if code in _BUSY:
        return StoreError(f"database {where} stayed locked by another process for more "
                          f"than {BUSY_TIMEOUT_S:g}s ({exc})")
    if code == sqlite3.SQLITE_IOERR:
        return StoreError(f"database {where}: I/O error ({exc})")
    return StoreError(f"database {where}: {exc}")


class _Refused(Exception):
    """A step update matched no row: the batch is refused; explain why afterwards."""


# ------------------------------------------------------- the thread-confined database


class _Database:
    """The connection and every job run on it; used only from the store's thread."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.path = path
        self.synchronous = synchronous
        self._conn: sqlite3.Connection | None = None
        self._keys: dict[str, int] = {}  # run_id -> runs.id (runs are never deleted)

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"database {self.path} is not open")
        return self._conn

    def call(self, job: Callable[..., T], *args: Any) -> T:
        """Run one job; retry it on SQLITE_BUSY; roll back and translate driver errors."""
        for attempt in range(_BUSY_RETRIES + 1):
            try:
                return job(*args)
            except sqlite3.Error as exc:
                self._rollback()
                if _primary_code(exc) in _BUSY and attempt < _BUSY_RETRIES:
                    time.sleep(0.05 * (attempt + 1))
                    continue
                raise translate(exc, self.path) from exc
        raise AssertionError("unreachable")

    def _rollback(self) -> None:
        conn = self._conn
        if conn is not None and conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the original error is the one worth reporting

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE``: take the write lock first, then commit or roll back."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            self._rollback()
            raise
        conn.execute("COMMIT")

    # ------------------------------------------------------------- open and close

    def connect(self) -> None:
        self._prepare_directory()
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               cached_statements=64)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000):d}")
            _check_version(schema_version(conn), migrations("sqlite")[-1].version,
                           str(self.path))
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"database {self.path}: cannot use WAL journaling "
                                 f"(got {mode!r}); is it on a network filesystem?")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn, str(self.path))
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _prepare_directory(self) -> None:
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory {parent} for database "
                             f"{self.path}: {exc.strerror or exc}") from exc
        if self.path.is_dir():
            raise StoreError(f"database path {self.path} is a directory, not a file")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.execute("PRAGMA optimize")
            finally:
                conn.close()

    def _key(self, run_id: str) -> int:
        key = self._keys.get(run_id)
        if key is None:
            row = self.conn.execute(_Q["run_key"], (run_id,)).fetchone() \
                if _valid_id(run_id) else None
            if row is None:
                raise RunNotFound(run_id)
            key = self._keys[run_id] = row[0]
        return key

    # ------------------------------------------------------------------ workflows

    def save_workflow(self, name: str, definition: JSONDict, fingerprint: str,
                      version: int | None) -> WorkflowRecord:
        _check_id("workflow name", name)
        text = _json_text(definition, f"the definition of workflow {name!r}")
        with self._transaction() as conn:
            if version is None:
                row = conn.execute(_Q["latest_workflow"], (name,)).fetchone()
                if row is not None and row[2] == fingerprint:
                    return _workflow(row)
                version = row[1] + 1 if row is not None else 1
            else:
                row = conn.execute(_Q["workflow_version"], (name, version)).fetchone()
                if row is not None:
                    if row[2] != fingerprint:
                        raise VersionConflict(name, version, row[2], fingerprint)
                    return _workflow(row)
            created = time.time()
            conn.execute(_Q["insert_workflow"], (name, version, fingerprint, text, created))
        return _workflow((name, version, fingerprint, text, created))

    def get_workflow(self, name: str, version: int | None) -> WorkflowRecord:
        row = None
        if _valid_id(name):
            row = (self.conn.execute(_Q["latest_workflow"], (name,)) if version is None
                   else self.conn.execute(_Q["workflow_version"], (name, version))
                   ).fetchone()
        if row is None:
            raise WorkflowNotFound(name, version)
        return _workflow(row)

    def list_workflows(self) -> list[WorkflowRecord]:
        return [_workflow(row) for row in self.conn.execute(_Q["list_workflows"])]

    # ----------------------------------------------------------------------- runs

    def create_run(self, run: RunRecord, step_ids: Sequence[str]) -> None:
        _check_id("run id", run.run_id)
        _check_id("workflow name", run.workflow)
        _check_id("run id (retry_of)", run.retry_of)
        _check_id("run id (parent_run_id)", run.parent_run_id)
        for step_id in step_ids:
            _check_id("step id", step_id)
        what = f"run {run.run_id!r}"
        values = (run.run_id, run.workflow, run.version, run.fingerprint, run.status,
                  _json_or_null(run.input, what), _json_or_null(run.output, what),
                  run.error, run.created_at, run.started_at, run.finished_at,
                  run.retry_of, run.parent_run_id, run.sla, run.cancel_requested,
                  run.owner, run.heartbeat_at)
        with self._transaction() as conn:
            try:
                key = conn.execute(_Q["insert_run"], values).lastrowid
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"run {run.run_id!r} already exists") from exc
            assert key is not None
            pending = StepStatus.PENDING.value
            try:
                conn.executemany(_Q["insert_step"], [(key, step_id, position, pending)
                                                     for position, step_id
                                                     in enumerate(step_ids)])
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"run {run.run_id!r}: step ids are not unique") from exc
            conn.execute(_Q["insert_event"], (key, run.created_at, "run", None, None,
                                              run.status, None, None))
        self._keys[run.run_id] = key

    def write(self, batch: WriteBatch) -> None:
        key = self._key(batch.run_id)
        if not _legal(batch):
            raise self._refusal(key, batch)
        steps, attempts, events = _rows(key, batch)
        try:
            with self._transaction() as conn:
                if steps:
                    updated = conn.executemany(_Q["update_step"], steps).rowcount
                    if updated != len(steps):
                        raise _Refused
                if batch.run is not None:
                    self._move_run(conn, key, batch)
                if attempts:
                    conn.executemany(_Q["upsert_attempt"], attempts)
                conn.executemany(_Q["insert_event"], events)
        except _Refused:
            raise self._refusal(key, batch) from None

    def _move_run(self, conn: sqlite3.Connection, key: int, batch: WriteBatch) -> None:
        change = batch.run
        assert change is not None
        stored = conn.execute("SELECT status FROM runs WHERE id = ?", (key,)).fetchone()[0]
        if stored != change.source:
            raise _Refused
        target = change.target
        if target in _FINAL_RUN:
            conn.execute(_Q["finish_run"], (target, change.at, _json_or_null(
                change.output, f"the output of run {batch.run_id!r}"), change.error, key))
        else:
            first = change.at if target is RunStatus.RUNNING else None
            conn.execute(_Q["move_run"], (target, first, key))

    def _refusal(self, key: int, batch: WriteBatch) -> StoreError:
        """Why a batch is refused: the memory store's checks, in its order, on the
        stored state (read in a transaction of its own: the refused one rolled back)."""
        run_id = batch.run_id
        conn = self.conn
        conn.execute("BEGIN")
        try:
            expected: dict[str, str] = {}
            for ch in batch.steps:
                current = expected.get(ch.step)
                if current is None:
                    row = conn.execute(_Q["step_status"], (key, ch.step)).fetchone()
                    if row is None:
                        return StoreError(f"run {run_id!r} has no step {ch.step!r}")
                    current = row[0]
                if current != ch.source:
                    return StaleWriteError(f"step {ch.step!r} of run {run_id!r} is "
                                           f"{current}, not {ch.source}")
                if ch.target not in STEP_TRANSITIONS[ch.source]:
                    check_step_transition(ch.step, ch.source, ch.target)
                expected[ch.step] = ch.target
            change = batch.run
            if change is not None:
                stored = conn.execute(_Q["run_key"], (run_id,)).fetchone()[1]
                if stored != change.source:
                    return StaleWriteError(f"run {run_id!r} is {stored}, not "
                                           f"{change.source}")
                check_run_transition(run_id, change.source, change.target)
        except StoreError as exc:  # TransitionError from the checks above
            return exc
        finally:
            conn.execute("ROLLBACK")
        return StaleWriteError(f"run {run_id!r} changed while this batch was written; "
                               f"read it again")

    def get_run(self, run_id: str) -> RunRecord:
        row = self.conn.execute(_Q["get_run"], (run_id,)).fetchone() \
            if _valid_id(run_id) else None
        if row is None:
            raise RunNotFound(run_id)
        return _run(row)

    def list_runs(self, f: RunFilter) -> list[RunRecord]:
        rows = self.conn.execute(_Q["list_runs"], (f.workflow, f.status, f.since, f.limit))
        return [_run(row) for row in rows]

    def get_steps(self, run_id: str) -> list[StepRecord]:
        status, decode = _STEP_STATUS, _decode
        return [StepRecord(run_id=run_id, step_id=r[0], status=status[r[1]],
                           attempts=r[2], output=None if r[3] is None else decode(r[3]),
                           error=r[4], started_at=r[5], finished_at=r[6],
                           skip_reason=r[7], fallback_used=bool(r[8]),
                           next_attempt_at=r[9], worker=r[10])
                for r in self.conn.execute(_Q["get_steps"], (self._key(run_id),))]

    def get_attempts(self, run_id: str) -> list[AttemptRecord]:
        return [AttemptRecord(run_id=run_id, step_id=r[0], attempt=r[1],
                              fallback=bool(r[2]), status=r[3], started_at=r[4],
                              finished_at=r[5], error=r[6], worker=r[7])
                for r in self.conn.execute(_Q["get_attempts"], (self._key(run_id),))]

    def get_events(self, run_id: str, after: int) -> list[EventRecord]:
        rows = self.conn.execute(_Q["get_events"], (self._key(run_id), after))
        return [_event(run_id, row) for row in rows]

    def request_cancel(self, run_id: str) -> None:
        if self.conn.execute(_Q["request_cancel"], (run_id,)).rowcount == 0:
            raise RunNotFound(run_id)

    def claim_run(self, run_id: str, owner: str, now: float,
                  lease: float) -> RunRecord | None:
        self._key(run_id)  # RunNotFound
        with self._transaction() as conn:
            claimed = conn.execute(_Q["claim_run"], (owner, now, run_id, now - lease))
            row = conn.execute(_Q["get_run"], (run_id,)).fetchone()
        return _run(row) if claimed.rowcount else None

    def heartbeat(self, run_id: str, owner: str, now: float) -> bool:
        self._key(run_id)  # RunNotFound
        return self.conn.execute(_Q["heartbeat"], (now, run_id, owner)).rowcount == 1

    def release_run(self, run_id: str, owner: str) -> None:
        self.conn.execute(_Q["release_run"], (run_id, owner))


# ------------------------------------------------------------- rows and records


def _legal(batch: WriteBatch) -> bool:
    """Every change allowed by the transition tables (checked before any I/O)."""
    for ch in batch.steps:
        if ch.target not in STEP_TRANSITIONS[ch.source]:
            return False
    change = batch.run
    return change is None or change.source == change.target \
        or change.target in RUN_TRANSITIONS[change.source]


_Row = tuple[Any, ...]


def _rows(key: int, batch: WriteBatch) -> tuple[list[_Row], list[_Row], list[_Row]]:
    """The parameters of every statement of a batch, JSON encoded once."""
    encode = _encode
    steps: list[_Row] = []
    events: list[_Row] = []
    try:
        for ch in batch.steps:
            r = ch.row
            output = None if r.output is None else encode(r.output)
            steps.append((ch.target, r.attempts, output, r.error, r.started_at,
                          r.finished_at, r.skip_reason, r.fallback_used,
                          r.next_attempt_at, r.worker, key, ch.step, ch.source))
            events.append((key, ch.at, "step", ch.step, ch.source, ch.target, None, None))
        attempts = [(key, a.step, a.attempt, a.fallback, a.status, a.at,
                     a.at if a.ended else None, a.error, a.worker)
                    for a in batch.attempts]
        events.extend((key, a.at, "attempt", a.step, None, a.status, a.attempt, None)
                      for a in batch.attempts)
        change = batch.run
        if change is not None:
            events.append((key, change.at, "run", None, change.source, change.target,
                           None, None))
        for step_id, data in batch.notes:
            events.append((key, time.time(), "note", step_id, None, None, None,
                           encode(data)))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"run {batch.run_id!r}: a value to store is not JSON "
                         f"({exc})") from exc
    return steps, attempts, events


def _json_text(value: JSON, what: str) -> str:
    try:
        return _encode(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON ({exc})") from exc


def _json_or_null(value: JSON, what: str) -> str | None:
    return None if value is None else _json_text(value, what)


def _workflow(row: _Row) -> WorkflowRecord:
    return WorkflowRecord(name=row[0], version=row[1], fingerprint=row[2],
                          definition=_decode(row[3]), created_at=row[4])


def _run(r: _Row) -> RunRecord:
    return RunRecord(run_id=r[0], workflow=r[1], version=r[2], fingerprint=r[3],
                     status=_RUN_STATUS[r[4]],
                     input=None if r[5] is None else _decode(r[5]),
                     output=None if r[6] is None else _decode(r[6]), error=r[7],
                     created_at=r[8], started_at=r[9], finished_at=r[10], retry_of=r[11],
                     parent_run_id=r[12], sla=r[13], cancel_requested=bool(r[14]),
                     owner=r[15], heartbeat_at=r[16])


def _event(run_id: str, r: _Row) -> EventRecord:
    seq, at, kind, step_id, source, target, attempt, data = r
    if kind == "attempt":
        body: JSONDict = {"attempt": attempt, "status": target}
    elif kind == "note":
        body = _decode(data)
    else:
        body = {"from": source, "to": target}
    return EventRecord(run_id=run_id, seq=seq, at=at, kind=kind, step_id=step_id,
                       data=body)


# ------------------------------------------------------------------- the Store


class SqliteStore:
    """The Store protocol on one SQLite file (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self.url = url
        path, synchronous = parse_url(url)
        self.path = path
        self.synchronous = synchronous
        self._db = _Database(path, synchronous)
        self._thread: ThreadPoolExecutor | None = None

    async def _run(self, job: Callable[..., T], *args: Any) -> T:
        """One hop to the store's thread: run ``job`` there and await its result."""
        thread = self._thread
        if thread is None:
            raise StoreError(f"store {self.url} is not open (call open() first)")
        return await asyncio.get_running_loop().run_in_executor(
            thread, self._db.call, job, *args)

    async def open(self) -> None:
        if self._thread is not None:
            return
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plait-sqlite")
        try:
            await self._run(self._db.connect)
        except BaseException:
            self._thread.shutdown(wait=True)
            self._thread = None
            raise

    async def close(self) -> None:
        thread = self._thread
        if thread is None:
            return
        try:
            await self._run(self._db.close)
        finally:
            self._thread = None
            thread.shutdown(wait=True)

    async def save_workflow(self, name: str, definition: JSONDict, fingerprint: str,
                            version: int | None) -> WorkflowRecord:
        return await self._run(self._db.save_workflow, name, definition, fingerprint,
                               version)

    async def get_workflow(self, name: str, version: int | None = None) -> WorkflowRecord:
        return await self._run(self._db.get_workflow, name, version)

    async def list_workflows(self) -> list[WorkflowRecord]:
        return await self._run(self._db.list_workflows)

    async def create_run(self, run: RunRecord, step_ids: Sequence[str]) -> None:
        await self._run(self._db.create_run, run, list(step_ids))

    async def write(self, batch: WriteBatch) -> None:
        await self._run(self._db.write, batch)

    async def get_run(self, run_id: str) -> RunRecord:
        return await self._run(self._db.get_run, run_id)

    async def list_runs(self, filter: RunFilter) -> list[RunRecord]:
        return await self._run(self._db.list_runs, filter)

    async def get_steps(self, run_id: str) -> list[StepRecord]:
        return await self._run(self._db.get_steps, run_id)

    async def get_attempts(self, run_id: str) -> list[AttemptRecord]:
        return await self._run(self._db.get_attempts, run_id)

    async def get_events(self, run_id: str, after: int = 0) -> list[EventRecord]:
        return await self._run(self._db.get_events, run_id, after)

    async def request_cancel(self, run_id: str) -> None:
        await self._run(self._db.request_cancel, run_id)

    async def claim_run(self, run_id: str, owner: str, now: float,
                        lease: float) -> RunRecord | None:
        return await self._run(self._db.claim_run, run_id, owner, now, lease)

    async def heartbeat(self, run_id: str, owner: str, now: float) -> bool:
        return await self._run(self._db.heartbeat, run_id, owner, now)

    async def release_run(self, run_id: str, owner: str) -> None:
        await self._run(self._db.release_run, run_id, owner)
