"""A prune on SQLite gives the space it freed back to the file system: a new database
uses auto_vacuum=INCREMENTAL and the prune ends with PRAGMA incremental_vacuum."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

from plait.core.states import RunStatus as R
from plait.store import open_store
from plait.store.base import RunChange, RunRecord, Store, WriteBatch


async def finished_run(store: Store) -> str:
    run_id = uuid.uuid4().hex
    await store.create_run(RunRecord(run_id=run_id, workflow="wf", version=1,
                                     fingerprint="0123456789ab", status=R.PENDING,
                                     input=None, created_at=1.0), ["a"])
    for source, target in ((R.PENDING, R.RUNNING), (R.RUNNING, R.COMPLETED)):
        await store.write(WriteBatch(run_id=run_id,
                                     run=RunChange(source=source, target=target, at=2.0)))
    return run_id


def pragma(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])
    finally:
        conn.close()


async def test_a_prune_shrinks_the_file(tmp_path: Path) -> None:
    path = tmp_path / "plait.db"
    store = open_store(f"sqlite:///{path}")
    await store.open()
    try:
        assert pragma(path, "auto_vacuum") == 2  # incremental
        for _ in range(200):
            run_id = await finished_run(store)
            await store.event_put(run_id, "blob", "x" * 4000, 1.0)
        full = pragma(path, "page_count")
        counts = await store.prune_runs(100.0)
        assert counts.runs == 200 and counts.rows["run_events"] == 200
        assert pragma(path, "freelist_count") == 0
        assert pragma(path, "page_count") < full / 4
    finally:
        await store.close()
