"""Declared capabilities (``Store.capabilities``, ``plait.store.capabilities`` and ``ports``): each
backend declares what it does, and does what it declares.

- ``shared``: a second store of the same class on the same URL (what another process
  opens) sees a run created through the first, exactly when the backend declares it.
- ``in_process``: ``write_now`` stores a batch before it returns; a backend that does
  not declare it offers no ``write_now``.
- ``notify``: ``notify`` reaches a listener on another connection; a backend that does
  not declare it offers no ``notify``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import cast

import psycopg
import pytest

from plait.core.states import RunStatus, StepStatus
from plait.errors import RunNotFound, StaleWriteError
from plait.store.base import Store, WriteBatch
from plait.store.capabilities import Notifies, StoreCapabilities, WritesNow

from .test_store import change, new_run

UID = Callable[[str], str]
DECLARED = {  # what each backend of the suite must declare
    "MemoryStore": StoreCapabilities(shared=False, in_process=True, notify=False),
    "SqliteStore": StoreCapabilities(shared=True, in_process=False, notify=False),
    "PostgresStore": StoreCapabilities(shared=True, in_process=False, notify=True),
}


def test_each_backend_declares_its_capabilities_as_one_frozen_value(store: Store) -> None:
    declared = store.capabilities
    assert declared == DECLARED[type(store).__name__]
    with pytest.raises(dataclasses.FrozenInstanceError):
        declared.shared = not declared.shared  # type: ignore[misc]


async def test_another_store_on_the_url_sees_the_run_exactly_when_shared(
        store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    other = type(store)(store.url)  # type: ignore[call-arg]
    await other.open()
    try:
        if store.capabilities.shared:
            assert (await other.get_run(run_id)).run_id == run_id
        else:
            with pytest.raises(RunNotFound):
                await other.get_run(run_id)
    finally:
        await other.close()


async def test_write_now_stores_the_batch_before_it_returns_when_in_process(
        store: Store, uid: UID) -> None:
    if not store.capabilities.in_process:
        assert not hasattr(store, "write_now")
        return
    run_id = await new_run(store, uid)
    write_now = cast(WritesNow, store).write_now
    write_now(WriteBatch(run_id, [change("a", StepStatus.PENDING, StepStatus.QUEUED)]))
    assert {s.step_id: s.status for s in await store.get_steps(run_id)}["a"] \
        is StepStatus.QUEUED
    with pytest.raises(StaleWriteError):  # the checks of write, at once
        write_now(WriteBatch(run_id, [change("a", StepStatus.PENDING, StepStatus.QUEUED)]))
    assert (await store.get_run(run_id)).status is RunStatus.PENDING


async def test_notify_reaches_a_listener_on_another_connection_when_declared(
        store: Store, uid: UID) -> None:
    if not store.capabilities.notify:
        assert not hasattr(store, "notify")
        return
    channel = uid("chan").replace("-", "_")
    async with await psycopg.AsyncConnection.connect(store.url, autocommit=True) as conn:
        await conn.execute(f"LISTEN {channel}")
        await cast(Notifies, store).notify(channel, "hello")
        deadline = time.monotonic() + 10
        heard = []
        while not heard and time.monotonic() < deadline:
            heard = [n.payload async for n in conn.notifies(timeout=0.5, stop_after=1)]
            await asyncio.sleep(0)
    assert heard == ["hello"]
