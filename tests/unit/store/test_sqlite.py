"""What only the SQLite store has: its URL, its file, its pragmas, its refusals of bad
files and bad ids, a full disk, a locked database, and data kept across opens.  (The
Store protocol itself is checked by tests/conformance, which runs on SQLite too.)"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from plait import Workflow
from plait.core.runstate import AttemptChange, StepChange, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.errors import RunNotFound, StaleWriteError, StoreError, WorkflowNotFound
from plait.store import open_store
from plait.store import sqlite_database as sqlite_module
from plait.store.base import RunChange, RunRecord, WriteBatch
from plait.store.sqlite import SqliteStore
from plait.store.sqlite_database import valid_id
from plait.store.sqlite_url import parse_url

S, R = StepStatus, RunStatus


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(f"sqlite:///{tmp_path}/s.db")
    await s.open()
    try:
        yield s
    finally:
        await s.close()


def record(run_id: str = "run-1", workflow: str = "wf", **fields: object) -> RunRecord:
    rec = RunRecord(run_id=run_id, workflow=workflow, version=1, fingerprint="0" * 12,
                    status=R.PENDING, input={"n": 1}, created_at=1.0)
    for key, value in fields.items():
        setattr(rec, key, value)
    return rec


def change(step: str, source: StepStatus, target: StepStatus, **fields: object) -> StepChange:
    row = StepRuntime(status=target)
    for key, value in fields.items():
        setattr(row, key, value)
    return StepChange(step, source, target, 1.0, row)


async def pragma(store: SqliteStore, name: str) -> object:
    return await store._run(lambda: store._db.conn.execute(f"PRAGMA {name}").fetchone()[0])


async def set_pragma_everywhere(store: SqliteStore, setting: str) -> None:
    """A per-connection setting on both of the store's connections (the thread's and,
    with synchronous=NORMAL, the event loop's inline one)."""
    await pragma(store, setting)
    if store._inline is not None:
        store._inline.conn.execute(f"PRAGMA {setting}").fetchall()


# ---------------------------------------------------------------- URLs and files


@pytest.mark.parametrize(("url", "path", "sync"), [
    ("sqlite:///runs.db", "runs.db", "NORMAL"),
    ("sqlite:///./.plait/plait.db", ".plait/plait.db", "NORMAL"),
    ("sqlite:////abs/dir/x.db", "/abs/dir/x.db", "NORMAL"),
    ("sqlite:///x.db?synchronous=FULL", "x.db", "FULL"),
    ("sqlite:///x.db?synchronous=normal", "x.db", "NORMAL"),
])
def test_urls(url: str, path: str, sync: str) -> None:
    assert parse_url(url) == (Path(path), sync)


@pytest.mark.parametrize(("url", "complaint"), [
    ("sqlite://x.db", "three slashes"),
    ("sqlite:x.db", "three slashes"),
    ("sqlite:///", "names no database file"),
    ("sqlite:///:memory:", "memory://"),
    ("sqlite:///x.db?synchronous=OFF", "NORMAL or FULL"),
    ("sqlite:///x.db?journal=delete", "unknown option 'journal'"),
])
def test_bad_urls_are_refused(url: str, complaint: str) -> None:
    with pytest.raises(StoreError, match=complaint):
        open_store(url)


def test_open_store_knows_the_scheme() -> None:
    assert isinstance(open_store("sqlite:///x.db"), SqliteStore)


async def test_relative_path_is_from_the_cwd_and_directories_are_created(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///./.plait/plait.db")
    await store.open()
    await store.close()
    assert (tmp_path / ".plait" / "plait.db").is_file()


@pytest.mark.parametrize("sync", ["NORMAL", "FULL"])
async def test_pragmas(tmp_path: Path, sync: str) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/p.db?synchronous={sync}")
    await store.open()
    try:
        assert await pragma(store, "journal_mode") == "wal"
        assert await pragma(store, "synchronous") == {"NORMAL": 1, "FULL": 2}[sync]
        assert await pragma(store, "foreign_keys") == 1
        assert await pragma(store, "busy_timeout") == 10_000
    finally:
        await store.close()


async def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/keep.db"
    first = SqliteStore(url)
    await first.open()
    await first.save_workflow("wf", {"name": "wf", "steps": []}, "a" * 12, None)
    await first.create_run(record(), ["a", "b"])
    await first.write(WriteBatch(run_id="run-1", steps=[change("a", S.PENDING, S.QUEUED)]))
    await first.close()
    again = SqliteStore(url)
    await again.open()
    try:
        assert (await again.get_workflow("wf")).fingerprint == "a" * 12
        assert [s.status for s in await again.get_steps("run-1")] == [S.QUEUED, S.PENDING]
        assert [e.seq for e in await again.get_events("run-1")] == [1, 2]
    finally:
        await again.close()


async def test_open_and_close_are_idempotent_and_use_before_open_is_refused(
        tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/i.db")
    with pytest.raises(StoreError, match="not open"):
        await store.get_run("x")
    await store.open()
    await store.open()
    await store.close()
    await store.close()
    with pytest.raises(StoreError, match="not open"):
        await store.list_workflows()


# ---------------------------------------------------------------- bad files


async def assert_refused(url: str, *words: str) -> StoreError:
    store = SqliteStore(url)
    with pytest.raises(StoreError) as info:
        await store.open()
    for word in words:
        assert word in str(info.value)
    assert not isinstance(info.value, sqlite3.Error)
    return info.value


async def test_a_directory_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    await assert_refused(f"sqlite:///{tmp_path}/file/sub/x.db", "cannot create the directory",
                         str(tmp_path / "file" / "sub"))


async def test_a_directory_in_proc_cannot_be_created() -> None:
    await assert_refused("sqlite:////proc/plait-no-such-dir/x.db", "/proc/plait-no-such-dir")


async def test_a_path_that_is_a_directory(tmp_path: Path) -> None:
    await assert_refused(f"sqlite:///{tmp_path}", "is a directory")


@pytest.mark.parametrize("content", [os.urandom(8192), b"not a database\n" * 300])
async def test_a_file_that_is_not_a_database(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(content)
    error = await assert_refused(f"sqlite:///{path}", str(path), "not a usable plait database")
    assert isinstance(error.__cause__, sqlite3.DatabaseError)
    assert path.read_bytes() == content  # left as it was


async def test_a_corrupted_database(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    store = SqliteStore(f"sqlite:///{path}")
    await store.open()
    await store.create_run(record(), [f"s{i}" for i in range(2000)])
    await store.close()
    data = bytearray(path.read_bytes())
    data[4096:len(data)] = os.urandom(len(data) - 4096)  # every page but the header's
    path.write_bytes(bytes(data))
    again = SqliteStore(f"sqlite:///{path}")
    with pytest.raises(StoreError, match="corrupted") as info:
        await again.open()
        try:
            await again.get_steps("run-1")
        finally:
            await again.close()
    assert str(path) in str(info.value)


# ---------------------------------------------------------------- full disk


async def test_a_full_disk_stores_nothing_of_the_batch(store: SqliteStore) -> None:
    await store.create_run(record(), ["a", "b"])
    before = (await store.get_steps("run-1"), await store.get_events("run-1"))
    pages = await pragma(store, "page_count")
    # the file may not grow any more
    await set_pragma_everywhere(store, f"max_page_count = {pages}")
    big = {"text": "x" * 500_000}
    batch = WriteBatch(run_id="run-1", run=RunChange(source=R.PENDING, target=R.RUNNING, at=2.0),
                       steps=[change("a", S.PENDING, S.QUEUED),
                              change("a", S.QUEUED, S.RUNNING, attempts=1),
                              change("a", S.RUNNING, S.COMPLETED, attempts=1, output=big)],
                       attempts=[AttemptChange("a", 1, 2.0, False, "running")],
                       notes=[("a", {"big": big})])
    with pytest.raises(StoreError, match="disk is full") as info:
        await store.write(batch)
    assert "rolled back" in str(info.value)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert (await store.get_steps("run-1"), await store.get_events("run-1")) == before
    assert (await store.get_run("run-1")).status == R.PENDING
    assert await store.get_attempts("run-1") == []
    # room again: the same batch goes through
    await set_pragma_everywhere(store, "max_page_count = 1000000")
    await store.write(batch)
    assert (await store.get_steps("run-1"))[0].output == big


# ---------------------------------------------------------------- ids


@pytest.mark.parametrize("good", ["a", "run-1", "A_b-9", "x" * 64, "3f2a" * 8,
                                  "0b1e6a4e-5d3c-4c4f-9f55-6f3ad6a1e2b7"])
def test_valid_ids(good: str) -> None:
    assert valid_id(good)


@pytest.mark.parametrize("bad", ["", "x" * 65, "../etc/passwd", "a b", "a;DROP TABLE runs",
                                 "x'--", "a/b", "é", "a\n", None, 7])
def test_invalid_ids(bad: object) -> None:
    assert not valid_id(bad)


async def test_invalid_ids_are_refused_when_storing(store: SqliteStore) -> None:
    with pytest.raises(StoreError, match="invalid run id"):
        await store.create_run(record(run_id="x'; DROP TABLE runs; --"), ["a"])
    with pytest.raises(StoreError, match="invalid step id"):
        await store.create_run(record(run_id="ok"), ["a", "../b"])
    with pytest.raises(StoreError, match="invalid workflow name"):
        await store.save_workflow("../../etc", {}, "a" * 12, None)
    with pytest.raises(StoreError, match="invalid run id"):
        await store.create_run(record(run_id="ok2", retry_of="a b"), ["a"])
    assert await store.list_workflows() == []


async def test_invalid_ids_are_not_found_when_reading(store: SqliteStore) -> None:
    await store.create_run(record(), ["a"])
    for bad in ["run-1' OR '1'='1", "../run-1", "run-1; DELETE FROM runs"]:
        with pytest.raises(RunNotFound):
            await store.get_run(bad)
        with pytest.raises(RunNotFound):
            await store.get_steps(bad)
        with pytest.raises(RunNotFound):
            await store.write(WriteBatch(run_id=bad, steps=[change("a", S.PENDING, S.QUEUED)]))
    with pytest.raises(WorkflowNotFound):
        await store.get_workflow("x' OR 1=1 --")
    assert (await store.get_run("run-1")).status == R.PENDING


# ---------------------------------------------------------------- writes


async def test_event_seq_numbers_each_run_from_one_without_gaps(store: SqliteStore) -> None:
    await store.create_run(record("one"), ["a", "b"])
    await store.create_run(record("two"), ["a"])
    await store.write(WriteBatch(run_id="one", steps=[change("a", S.PENDING, S.QUEUED),
                                                      change("b", S.PENDING, S.QUEUED)],
                                 notes=[(None, {"k": 1})]))
    await store.write(WriteBatch(run_id="two", steps=[change("a", S.PENDING, S.QUEUED)]))
    await store.write(WriteBatch(run_id="one", attempts=[AttemptChange("a", 1, 3.0, False,
                                                                       "running")]))
    assert [e.seq for e in await store.get_events("one")] == [1, 2, 3, 4, 5]
    assert [e.seq for e in await store.get_events("two")] == [1, 2]


async def test_changes_that_do_not_link_up_are_stale(store: SqliteStore) -> None:
    await store.create_run(record(), ["a"])
    with pytest.raises(StaleWriteError, match="is queued, not running"):
        await store.write(WriteBatch(run_id="run-1", steps=[
            change("a", S.PENDING, S.QUEUED), change("a", S.RUNNING, S.COMPLETED)]))
    assert (await store.get_steps("run-1"))[0].status == S.PENDING


async def test_a_value_that_is_not_json_stores_nothing(store: SqliteStore) -> None:
    await store.create_run(record(), ["a"])
    for bad in [{1, 2}, float("nan"), object()]:
        with pytest.raises(StoreError, match="not JSON"):
            await store.write(WriteBatch(run_id="run-1", steps=[
                change("a", S.PENDING, S.QUEUED, output=bad)]))
    with pytest.raises(StoreError, match="not JSON"):
        await store.create_run(record("r2", input={"x": {1}}), ["a"])
    assert (await store.get_steps("run-1"))[0].status == S.PENDING
    with pytest.raises(RunNotFound):
        await store.get_run("r2")


async def test_a_cancelled_caller_does_not_break_the_store(store: SqliteStore) -> None:
    await store.create_run(record(), ["a"])
    # another connection holds the write lock: the write cannot commit inline, so it
    # goes to the store's thread, which waits for the lock
    with write_lock_held(store.path, 0.3):
        task = asyncio.ensure_future(store.write(WriteBatch(
            run_id="run-1", steps=[change("a", S.PENDING, S.QUEUED)])))
        await asyncio.sleep(0.05)
        assert not task.done()  # waiting for the lock in the thread; the loop is free
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # the write was handed over before the cancel: it either happened or not, whole
    status = (await store.get_steps("run-1"))[0].status
    assert status in (S.PENDING, S.QUEUED)
    assert len(await store.get_events("run-1")) == (2 if status is S.QUEUED else 1)


# ---------------------------------------------------------------- locks


def hold_write_lock(path: Path, seconds: float, held: threading.Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    held.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


@contextmanager
def write_lock_held(path: Path, seconds: float) -> Iterator[None]:
    """Another connection, in another thread, holds the database's write lock for
    ``seconds`` from entry; leaving the block waits until it has let go."""
    held = threading.Event()
    holder = threading.Thread(target=hold_write_lock, args=(path, seconds, held))
    holder.start()
    held.wait()
    try:
        yield
    finally:
        holder.join()


async def test_a_writer_waits_for_another_connections_lock(tmp_path: Path) -> None:
    path = tmp_path / "lock.db"
    store = SqliteStore(f"sqlite:///{path}")
    await store.open()
    try:
        await store.create_run(record(), ["a"])
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        with write_lock_held(path, 0.5):
            ticking = asyncio.ensure_future(ticker())
            start = time.monotonic()
            await store.write(WriteBatch(run_id="run-1",
                                         steps=[change("a", S.PENDING, S.QUEUED)]))
            assert time.monotonic() - start >= 0.3  # it waited, then succeeded
            ticking.cancel()
            # ...in the store's thread: the event loop went on meanwhile
            assert ticks >= 10
        # reads never wait for a writer (WAL)
        with write_lock_held(path, 0.5):
            start = time.monotonic()
            assert (await store.get_steps("run-1"))[0].status == S.QUEUED
            assert time.monotonic() - start < 0.3
    finally:
        await store.close()


async def test_a_lock_held_past_the_busy_timeout_is_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_module, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "stuck.db"
    store = SqliteStore(f"sqlite:///{path}")
    await store.open()
    try:
        await store.create_run(record(), ["a"])
        with write_lock_held(path, 1.5), \
                pytest.raises(StoreError, match="stayed locked for more than 0.2s by a connection outside this process"):
            await store.write(WriteBatch(run_id="run-1",
                                         steps=[change("a", S.PENDING, S.QUEUED)]))
        await store.write(WriteBatch(run_id="run-1", steps=[change("a", S.PENDING, S.QUEUED)]))
    finally:
        await store.close()


async def test_claims_are_atomic_between_two_stores(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/claim.db"
    one, two = SqliteStore(url), SqliteStore(url)
    await one.open()
    await two.open()
    try:
        await one.create_run(record(), ["a"])
        results = await asyncio.gather(*(s.claim_run("run-1", f"host:{n}", 100.0, 30.0)
                                         for n, s in enumerate([one, two, one, two])))
        winners = {r.owner for r in results if r is not None}
        assert len(winners) == 1
        owner = winners.pop()
        assert (await two.get_run("run-1")).owner == owner
        assert (await one.heartbeat("run-1", owner, 110.0)).held is True
        assert (await two.heartbeat("run-1", "someone-else", 110.0)).held is False
        assert await two.claim_run("run-1", "late", 139.0, 30.0) is None  # lease alive
        taken = await two.claim_run("run-1", "late", 141.0, 30.0)  # lease ran out
        assert taken is not None and taken.owner == "late"
        await one.release_run("run-1", owner)  # no longer the owner: no effect
        assert (await one.get_run("run-1")).owner == "late"
    finally:
        await one.close()
        await two.close()


# ---------------------------------------------------------------- through the engine


async def noop() -> dict[str, int]:
    return {"ok": 1}


async def test_a_workflow_runs_on_sqlite_and_is_readable_afterwards(tmp_path: Path) -> None:
    wf = Workflow("fan")
    wf.add_step("src", noop)
    for i in range(20):
        wf.add_step(f"m{i}", noop, depends_on=["src"])
    wf.add_step("sink", noop, depends_on=[f"m{i}" for i in range(20)])
    url = f"sqlite:///{tmp_path}/run.db"
    result = await wf.run_async({}, db=url)
    assert result.status == "completed"
    store = open_store(url)
    await store.open()
    try:
        run = await store.get_run(result.run_id)
        assert run.status == R.COMPLETED and run.started_at and run.finished_at
        steps = await store.get_steps(result.run_id)
        assert [s.step_id for s in steps] == ["src", *[f"m{i}" for i in range(20)], "sink"]
        assert all(s.status == S.COMPLETED and s.output == {"ok": 1} for s in steps)
        attempts = await store.get_attempts(result.run_id)
        assert len(attempts) == 22 and all(a.status == "completed" for a in attempts)
        events = await store.get_events(result.run_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
    finally:
        await store.close()


async def test_close_waits_for_writes_already_handed_over(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/c.db"
    store = SqliteStore(url)
    await store.open()
    await store.create_run(record(), [f"s{i}" for i in range(50)])
    pending = [asyncio.ensure_future(store.write(WriteBatch(
        run_id="run-1", steps=[change(f"s{i}", S.PENDING, S.QUEUED)]))) for i in range(50)]
    await asyncio.sleep(0)  # every write is handed to the store's thread
    await store.close()
    await asyncio.gather(*pending)
    again = SqliteStore(url)
    await again.open()
    try:
        assert all(s.status == S.QUEUED for s in await again.get_steps("run-1"))
    finally:
        await again.close()


async def test_concurrent_tasks_share_one_store(store: SqliteStore) -> None:
    async def one_run(n: int) -> None:
        run_id = f"run-{n}"
        await store.create_run(record(run_id), ["a", "b"])
        for step in ("a", "b"):
            await store.write(WriteBatch(run_id=run_id, steps=[
                change(step, S.PENDING, S.QUEUED), change(step, S.QUEUED, S.RUNNING),
                change(step, S.RUNNING, S.COMPLETED, output=n)],
                attempts=[AttemptChange(step, 1, 1.0, False, "running")]))
            await store.write(WriteBatch(run_id=run_id, attempts=[
                AttemptChange(step, 1, 2.0, True, "completed")]))

    await asyncio.gather(*(one_run(n) for n in range(40)))
    for n in range(40):
        steps = await store.get_steps(f"run-{n}")
        assert [(s.status, s.output) for s in steps] == [(S.COMPLETED, n)] * 2
        assert [e.seq for e in await store.get_events(f"run-{n}")] == list(range(1, 12))


# ---------------------------------------------------------------- inline commits


@pytest.mark.parametrize("sync", ["NORMAL", "FULL"])
async def test_writes_are_readable_at_once_by_every_connection(tmp_path: Path,
                                                               sync: str) -> None:
    """NORMAL commits a free-lock write on the loop's thread, FULL in the store's: either
    way the store's own reads, and another store's, see it as soon as write returns."""
    url = f"sqlite:///{tmp_path}/seen.db?synchronous={sync}"
    store, other = SqliteStore(url), SqliteStore(url)
    await store.open()
    await other.open()
    try:
        await store.create_run(record(), ["a"])
        await store.write(WriteBatch(run_id="run-1", steps=[
            change("a", S.PENDING, S.QUEUED), change("a", S.QUEUED, S.RUNNING, attempts=1)],
            attempts=[AttemptChange("a", 1, 1.0, False, "running")]))
        for reader in (store, other):
            step = (await reader.get_steps("run-1"))[0]
            assert (step.status, step.attempts) == (S.RUNNING, 1)
        # a stale write is refused the same way on both paths, and changes nothing
        with pytest.raises(StaleWriteError):
            await store.write(WriteBatch(run_id="run-1",
                                         steps=[change("a", S.PENDING, S.QUEUED)]))
        assert [e.seq for e in await other.get_events("run-1")] == [1, 2, 3, 4]
    finally:
        await other.close()
        await store.close()


async def test_the_write_ahead_log_is_checkpointed_while_writes_commit_inline(
        tmp_path: Path) -> None:
    """Writes committed on the loop's connection still checkpoint the log (the store's
    thread does, every CHECKPOINT_AFTER_JOBS writes), so it stops growing."""
    path = tmp_path / "wal.db"
    store = SqliteStore(f"sqlite:///{path}")
    await store.open()
    try:
        await store.create_run(record(), ["a"])
        note = {"text": "x" * 3000}
        for _ in range(2500):
            await store.write(WriteBatch(run_id="run-1", notes=[("a", note)]))
        wal = path.with_name(path.name + "-wal").stat().st_size
        # 2,500 commits of about a page each would make a log of 10 MB or more unchecked
        assert wal < 6_000_000, wal
        assert len(await store.get_events("run-1")) == 2501
    finally:
        await store.close()
