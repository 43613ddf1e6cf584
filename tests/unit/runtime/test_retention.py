"""PLAIT_RETENTION (runtime.retention): the setting, one prune per turn across every
process sharing a store, and the loop a worker or the server runs."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from plait.core.states import RunStatus
from plait.errors import RunNotFound
from plait.runtime.retention import (
    Retention,
    RetentionSettingError,
    prune_turn,
    retention_from_environment,
    retention_loop,
)
from plait.store import open_store
from plait.store.base import RunChange, RunRecord, Store, WriteBatch

R = RunStatus


async def finished_run(store: Store, at: float = 2.0) -> str:
    run_id = uuid.uuid4().hex
    await store.create_run(RunRecord(run_id=run_id, workflow="wf", version=1,
                                     fingerprint="0123456789ab", status=R.PENDING,
                                     input=None, created_at=1.0), ["a"])
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=R.PENDING, target=R.RUNNING, at=at)))
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=R.RUNNING, target=R.COMPLETED, at=at)))
    return run_id


async def exists(store: Store, run_id: str) -> bool:
    try:
        await store.get_run(run_id)
    except RunNotFound:
        return False
    return True


def test_the_setting_is_read_from_the_environment() -> None:
    assert retention_from_environment({}) is None
    assert retention_from_environment({"PLAIT_RETENTION": " "}) is None
    assert retention_from_environment({"PLAIT_RETENTION": "30d"}) == Retention(
        keep=30 * 86400.0, every=3600.0)
    assert retention_from_environment({"PLAIT_RETENTION": "2h",
                                       "PLAIT_RETENTION_EVERY": "5m"}) == Retention(
        keep=7200.0, every=300.0)
    for env, named in (({"PLAIT_RETENTION": "a month"}, "PLAIT_RETENTION"),
                       ({"PLAIT_RETENTION": "0s"}, "PLAIT_RETENTION"),
                       ({"PLAIT_RETENTION": "1d", "PLAIT_RETENTION_EVERY": "-1"},
                        "PLAIT_RETENTION_EVERY")):
        with pytest.raises(RetentionSettingError) as bad:
            retention_from_environment(env)
        assert bad.value.variable == named and str(bad.value).startswith(f"{named}: ")


async def test_one_process_of_many_prunes_each_turn(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    stores = [open_store(url) for _ in range(3)]
    for store in stores:
        await store.open()
    try:
        first = await finished_run(stores[0])
        retention = Retention(keep=10.0, every=60.0)
        now = 1_000.0
        turns = await asyncio.gather(*(prune_turn(s, retention, now) for s in stores))
        pruned = [counts for counts, _ in turns if counts is not None]
        assert len(pruned) == 1 and pruned[0].runs == 1
        assert {next_at for _, next_at in turns} == {now + 60.0}
        assert not await exists(stores[1], first)

        second = await finished_run(stores[1])
        assert (await prune_turn(stores[2], retention, now + 59.0))[0] is None
        assert await exists(stores[2], second)
        counts, next_at = await prune_turn(stores[2], retention, now + 60.0)
        assert counts is not None and counts.runs == 1 and next_at == now + 120.0
    finally:
        for store in stores:
            await store.close()


async def test_the_loop_prunes_at_each_turn() -> None:
    store = open_store("memory://")
    await store.open()
    old = await finished_run(store, at=time.time() - 100.0)
    recent = await finished_run(store, at=time.time())
    loop = asyncio.create_task(retention_loop(store, Retention(keep=50.0, every=0.05)))
    try:
        deadline = time.monotonic() + 10.0
        while await exists(store, old):
            assert time.monotonic() < deadline, "the loop never pruned"
            await asyncio.sleep(0.01)
        later = await finished_run(store, at=time.time() - 100.0)
        while await exists(store, later):  # the next turn
            assert time.monotonic() < deadline, "the loop pruned once only"
            await asyncio.sleep(0.01)
        assert await exists(store, recent)
    finally:
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop
        await store.close()


async def test_a_turn_logs_one_line_when_it_deleted_something(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="plait.retention")
    store = open_store("memory://")
    await store.open()
    loop = asyncio.create_task(retention_loop(store, Retention(keep=50.0, every=0.05),
                                              name="plait serve"))
    try:
        await asyncio.sleep(0.2)  # turns with nothing to delete: no line
        assert [r for r in caplog.records if r.name == "plait.retention"] == []
        old = await finished_run(store, at=time.time() - 100.0)
        deadline = time.monotonic() + 10.0
        while await exists(store, old):
            assert time.monotonic() < deadline, "the loop never pruned"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # more turns, nothing more deleted
        lines = [r for r in caplog.records if r.name == "plait.retention"]
        assert len(lines) == 1, [r.getMessage() for r in lines]
        assert lines[0].getMessage().startswith(
            "plait serve: retention: pruned 1 run(s) (")
        assert "that finished more than 50s ago, in " in lines[0].getMessage()
        assert lines[0].pruned_runs == 1  # type: ignore[attr-defined]
    finally:
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop
        await store.close()
