"""Steps added to a run by a batch (a map step's items, ``WriteBatch.new_steps``): stored
pending in the same transaction as the batch's changes, listed after the run's steps,
and refused when the run has them already (another driver expanded the map)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from plait.core.states import StepStatus
from plait.errors import StaleWriteError, StoreError
from plait.store.base import Store, WriteBatch

from .test_store import change, new_run, statuses

S = StepStatus
UID = Callable[[str], str]


async def test_new_steps_are_stored_with_the_changes_of_their_batch(store: Store,
                                                                    uid: UID) -> None:
    run_id = await new_run(store, uid, steps=("make", "fetch", "after"))
    await store.write(WriteBatch(run_id, [change("fetch", S.PENDING, S.QUEUED)]))
    await store.write(WriteBatch(run_id, [change("fetch", S.QUEUED, S.RUNNING,
                                                 attempts=1)]))
    items = [(f"fetch[{k}]", 3 + k) for k in range(3)]
    await store.write(WriteBatch(
        run_id, [change("fetch", S.RUNNING, S.WAITING, attempts=1, output=[1, 2, 3]),
                 change("fetch[0]", S.PENDING, S.QUEUED),
                 change("fetch[1]", S.PENDING, S.QUEUED)],
        new_steps=items))
    assert await statuses(store, run_id) == {
        "make": "pending", "fetch": "waiting", "after": "pending",
        "fetch[0]": "queued", "fetch[1]": "queued", "fetch[2]": "pending"}
    steps = await store.get_steps(run_id)
    assert [s.step_id for s in steps][-3:] == ["fetch[0]", "fetch[1]", "fetch[2]"]
    await store.write(WriteBatch(run_id, [change("fetch[2]", S.PENDING, S.QUEUED)]))
    assert (await statuses(store, run_id))["fetch[2]"] == "queued"


async def test_new_steps_the_run_has_already_refuse_the_batch(store: Store,
                                                              uid: UID) -> None:
    run_id = await new_run(store, uid, steps=("fetch",))
    await store.write(WriteBatch(run_id, [change("fetch", S.PENDING, S.QUEUED)],
                                 new_steps=[("fetch[0]", 1)]))
    with pytest.raises((StaleWriteError, StoreError)):
        await store.write(WriteBatch(run_id, [change("fetch", S.QUEUED, S.RUNNING,
                                                     attempts=1)],
                                     new_steps=[("fetch[0]", 1)]))
    # nothing of the refused batch was stored
    assert await statuses(store, run_id) == {"fetch": "queued", "fetch[0]": "pending"}
