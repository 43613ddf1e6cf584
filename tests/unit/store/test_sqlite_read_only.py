"""The SQLite store opened for reading only (``plait runs``/``show`` on a database they
cannot write): it reads, and never writes the database, whoever runs it (these
tests hold as root too: SQLite's ``mode=ro`` refuses writes, not permission bits)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from plait.core.states import RunStatus, StepStatus
from plait.errors import SchemaVersionError, StoreError
from plait.store.base import RunFilter, RunRecord, WriteBatch
from plait.store.sqlite import SqliteStore


async def stored_run(path: Path) -> str:
    """A database holding one run, closed (so no -wal or -shm file is left)."""
    store = SqliteStore(f"sqlite:///{path}")
    await store.open()
    try:
        await store.create_run(RunRecord(run_id="run-1", workflow="wf", version=1,
                                         fingerprint="0" * 12, status=RunStatus.PENDING,
                                         input={"n": 1}, created_at=1.0), ["a"])
    finally:
        await store.close()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    return "run-1"


@contextmanager
def unwritable(path: Path) -> Iterator[None]:
    """The file and its directory without write permission (root ignores it; the
    assertions of these tests do not rely on it)."""
    path.chmod(0o444)
    path.parent.chmod(0o555)
    try:
        yield
    finally:
        path.parent.chmod(0o755)
        path.chmod(0o644)


async def test_reads_a_database_it_may_not_write_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "db" / "x.db"
    run_id = await stored_run(path)
    before = path.read_bytes()
    with unwritable(path):
        store = SqliteStore(f"sqlite:///{path}", read_only=True)
        await store.open()
        try:
            assert [r.run_id for r in await store.list_runs(RunFilter())] == [run_id]
            assert [s.status for s in await store.get_steps(run_id)] == [StepStatus.PENDING]
            with pytest.raises(StoreError, match="read-only") as refused:
                await store.write(WriteBatch(run_id=run_id, notes=[(None, {"x": 1})]))
            assert not isinstance(refused.value, sqlite3.Error)
        finally:
            await store.close()
    assert path.read_bytes() == before


async def test_reads_the_file_as_it_is_when_no_wal_can_be_made(tmp_path: Path) -> None:
    """When SQLite cannot create the -wal file (here: a directory stands in its way,
    which stops root too; a read-only directory does the same for anyone else)."""
    path = tmp_path / "x.db"
    run_id = await stored_run(path)
    (tmp_path / "x.db-wal").mkdir()
    store = SqliteStore(f"sqlite:///{path}", read_only=True)
    await store.open()
    try:
        assert (await store.get_run(run_id)).input == {"n": 1}
    finally:
        await store.close()


async def test_an_older_schema_is_named_not_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    path.write_bytes(b"")  # schema version 0: what plait migrates on its first write
    store = SqliteStore(f"sqlite:///{path}", read_only=True)
    with pytest.raises(SchemaVersionError, match="schema version 0, older than") as info:
        await store.open()
    assert "not migrated: run a command that writes to it" in str(info.value)
    assert path.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.db"]


async def test_a_missing_file_is_not_created(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/sub/none.db", read_only=True)
    with pytest.raises(StoreError, match="does not exist"):
        await store.open()
    assert list(tmp_path.iterdir()) == []
