"""A real PostgreSQL restart and crash under an open store (a private server: the
shared one is never restarted): the pool reconnects, and later calls work on the same
store; a call made while the server is down waits for it within ``retry_for``."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

import pgutil
from plait.core.runstate import StepChange, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.store.base import RunRecord, WriteBatch
from plait.store.postgres import PostgresStore

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
S = StepStatus


@pytest.fixture(scope="module")
def server() -> Iterator[pgutil.PrivateServer]:
    made = pgutil.PrivateServer.make()
    try:
        made.start()
        yield made
    finally:
        made.remove()


def queued(run_id: str, step: str) -> WriteBatch:
    return WriteBatch(run_id=run_id, steps=[StepChange(step, S.PENDING, S.QUEUED, 1.0,
                                                       StepRuntime(S.QUEUED))])


async def test_the_store_works_on_after_a_restart_and_a_crash(
        server: pgutil.PrivateServer) -> None:
    store = PostgresStore(server.url() + "?pool_min=2&retry_for=30")
    await store.open()
    try:
        run_id = uuid.uuid4().hex
        await store.create_run(RunRecord(run_id=run_id, workflow="wf", version=1,
                                         fingerprint="0" * 12, status=RunStatus.PENDING,
                                         input={}, created_at=1.0), ["a", "b", "c"])
        await asyncio.to_thread(server.restart, "fast")
        await store.write(queued(run_id, "a"))  # a write first: told it never ran
        assert (await store.get_run(run_id)).run_id == run_id

        await asyncio.to_thread(server.restart, "immediate")  # a crash and recovery
        assert [s.status for s in await store.get_steps(run_id)] == [S.QUEUED, S.PENDING,
                                                                    S.PENDING]

        await asyncio.to_thread(server.stop, "fast")
        back = threading.Timer(1.5, server.start)  # the server is down for a while
        back.start()
        started = time.monotonic()
        steps = await store.get_steps(run_id)  # waits for it
        back.join()
        assert time.monotonic() - started >= 1.0 and len(steps) == 3
        await store.write(queued(run_id, "b"))
        assert [e.seq for e in await store.get_events(run_id)] == [1, 2, 3]
    finally:
        await store.close()
