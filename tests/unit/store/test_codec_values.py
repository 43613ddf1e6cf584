"""The stores' second line of defence (the run loop checks outputs first): a value the
codec cannot encode is refused with a StoreError and nothing of the batch is stored; an
error text with a lone surrogate is stored with U+FFFD instead of crashing the write."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plait.core.runstate import StepChange, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.errors import StoreError
from plait.store import open_store
from plait.store.base import RunRecord, Store, WriteBatch

S = StepStatus


@pytest.fixture(params=["memory", "sqlite",
                        pytest.param("postgresql", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "postgresql":  # a database of the test's own: run ids repeat
        databases = request.getfixturevalue("pg_databases")
        url = databases.create()
        request.addfinalizer(lambda: databases.drop(url))
    else:
        url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/c.db"
    s = open_store(url)
    await s.open()
    await s.create_run(RunRecord(run_id="run-1", workflow="wf", version=1,
                                 fingerprint="0" * 12, status=RunStatus.PENDING,
                                 input={}, created_at=1.0), ["a", "b"])
    try:
        yield s
    finally:
        await s.close()


def ended(step: str, target: StepStatus, output: object = None,
          error: str | None = None) -> list[StepChange]:
    """The step's changes pending -> queued -> running -> ``target`` (one batch)."""
    row = StepRuntime(status=target, attempts=1, output=output,  # type: ignore[arg-type]
                      error=error)
    return [StepChange(step, S.PENDING, S.QUEUED, 1.0, StepRuntime(status=S.QUEUED)),
            StepChange(step, S.QUEUED, S.RUNNING, 1.0, StepRuntime(status=S.RUNNING)),
            StepChange(step, S.RUNNING, target, 1.0, row)]


@pytest.mark.parametrize("output", [{"f": math.nan}, {"s": {1, 2}}, {"n": 10**5000}])
async def test_a_value_that_is_not_json_is_refused_and_nothing_is_stored(
        store: Store, output: object) -> None:
    batch = WriteBatch(run_id="run-1", steps=[*ended("b", S.COMPLETED, 1), *ended("a", S.COMPLETED, output)])

    with pytest.raises(StoreError, match="not JSON"):
        await store.write(batch)

    assert {s.step_id: s.status for s in await store.get_steps("run-1")} == \
        {"a": S.PENDING, "b": S.PENDING}


async def test_sqlite_refuses_a_lone_surrogate_in_a_value_and_stores_nothing(
        tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/c.db")
    await store.open()
    try:
        await store.create_run(RunRecord(run_id="run-1", workflow="wf", version=1,
                                         fingerprint="0" * 12, status=RunStatus.PENDING,
                                         input={}, created_at=1.0), ["a", "b"])
        batch = WriteBatch(run_id="run-1", steps=[*ended("b", S.COMPLETED, 1),
                                                  *ended("a", S.COMPLETED, {"s": "x\ud800"})])
        with pytest.raises(StoreError, match="not valid Unicode"):
            await store.write(batch)
        assert [s.status for s in await store.get_steps("run-1")] == [S.PENDING, S.PENDING]
        with pytest.raises(StoreError, match="not valid Unicode"):
            await store.create_run(RunRecord(run_id="run-2", workflow="wf", version=1,
                                             fingerprint="0" * 12, status=RunStatus.PENDING,
                                             input={"s": "\udfff"}, created_at=1.0), ["a"])
    finally:
        await store.close()


async def test_an_error_with_a_lone_surrogate_is_stored_with_a_replacement(
        store: Store) -> None:
    await store.write(WriteBatch(run_id="run-1", steps=ended("a", S.FAILED, error="bad \ud800 value")))

    (a, _b) = await store.get_steps("run-1")
    assert a.status is S.FAILED
    assert a.error in ("bad \ufffd value", "bad \ud800 value")  # memory keeps the text
    if not store.url.startswith("memory:"):
        assert a.error == "bad \ufffd value"
