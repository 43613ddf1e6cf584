"""Many ``run_async`` calls at once in one process on one SQLite file: they share one
store (``plait.connect``), whose writes are grouped into transactions; and a call that
fails on the store leaves its run to whoever continues it, never owned by
nobody-that-runs-it."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from plait import Workflow
from plait.errors import RunLeftUnfinished, StoreError
from plait.runtime.engine import Engine
from plait.store import open_store
from plait.store import sqlite_database as sqlite_module
from plait.store.base import RunFilter, RunRecord


def small_workflow() -> Workflow:
    wf = Workflow("many-at-once")

    @wf.step()
    async def first() -> int:
        await asyncio.sleep(0)
        return 1

    @wf.step()
    def second(first: int) -> int:
        return first + 1

    return wf


async def stored_runs(url: str) -> list[RunRecord]:
    store = open_store(url)
    await store.open()
    try:
        return await store.list_runs(RunFilter(limit=10_000))
    finally:
        await store.close()


async def test_concurrent_runs_of_one_process_never_meet_a_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy timeout of 10 ms: writers of this process must not reach SQLite's busy
    handler (they wait their turn at the process's write gate), so none fails."""
    monkeypatch.setattr(sqlite_module, "BUSY_TIMEOUT_S", 0.01)
    url = f"sqlite:///{tmp_path}/many.db"
    wf = small_workflow()
    results = await asyncio.gather(*(wf.run_async({}, db=url) for _ in range(200)),
                                   return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert failures == []
    assert {r.status for r in results if not isinstance(r, BaseException)} == {"completed"}
    runs = await stored_runs(url)
    assert len(runs) == 200
    assert {(r.status, r.owner) for r in runs} == {("completed", None)}


def hold_lock(path: Path, held: threading.Event, seconds: float) -> None:
    """Another process, as far as plait can tell: a connection outside its stores."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    held.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


async def test_runs_failed_by_the_store_are_left_to_be_continued(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is locked from outside past the busy timeout while runs are started:
    calls fail with a message that does not blame this process, no run stays owned,
    and each one left unfinished is continued by ``resume``."""
    monkeypatch.setattr(sqlite_module, "BUSY_TIMEOUT_S", 0.1)
    path = tmp_path / "locked.db"
    url = f"sqlite:///{path}"
    wf = small_workflow()
    assert (await wf.run_async({}, db=url)).status == "completed"  # the file exists
    started = asyncio.Event()

    @wf.step()
    async def gate(second: int) -> int:
        started.set()
        await asyncio.to_thread(held.wait, 20)  # the file is locked from outside
        return second

    held = threading.Event()
    holder = threading.Thread(target=hold_lock, args=(path, held, 1.0))
    calls = [asyncio.ensure_future(wf.run_async({}, db=url)) for _ in range(5)]
    await started.wait()
    holder.start()
    try:
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
    finally:
        await asyncio.to_thread(holder.join)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert errors, "the lock was meant to outlast the busy timeout"
    runs = await stored_runs(url)
    for error in errors:
        assert isinstance(error, RunLeftUnfinished)
        assert isinstance(error.error, StoreError)
        assert "outside this process's plait stores" in str(error)
        assert f"`plait resume {error.run_id}` continues it" in str(error)
        assert error.run_id in {r.run_id for r in runs}
    assert all(r.owner is None for r in runs)  # released: nobody holds them
    unfinished = [r for r in runs if r.status not in ("completed", "failed")]
    assert len(unfinished) == len(errors)
    store = open_store(url)
    await store.open()
    engine = Engine(store)
    try:
        checked = wf.validate()
        resumed = await asyncio.gather(*(engine.resume(r.run_id, checked) for r in unfinished))
        assert {r.status for r in resumed} == {"completed"}
    finally:
        engine.close()
        await store.close()
