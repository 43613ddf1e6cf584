"""The memory store's own copies: what it hands out is a full, independent copy."""

from __future__ import annotations

import dataclasses

from plait.core.states import RunStatus
from plait.store import MemoryStore
from plait.store.base import RunRecord


async def test_a_stored_run_reads_back_with_every_field_and_as_a_copy() -> None:
    # every field set to something other than its default, so a field the store
    # forgets to copy shows up as a difference
    run = RunRecord(run_id="r1", workflow="wf", version=3, fingerprint="0123456789ab",
                    status=RunStatus.RUNNING, input={"n": [1, 2]}, created_at=5.0,
                    output={"o": 1}, error="e", started_at=6.0, finished_at=7.0,
                    retry_of="r0", parent_run_id="p0", sla=60.0, cancel_requested=True,
                    owner="host:1", heartbeat_at=8.0, concurrency_key="acme",
                    max_runs_per_key=2, wake_at=9.0)
    defaults = RunRecord(run_id="x", workflow="x", version=1, fingerprint="x",
                         status=RunStatus.PENDING, input=None, created_at=0.0)
    for f in dataclasses.fields(RunRecord):
        assert getattr(run, f.name) != getattr(defaults, f.name), f.name
    store = MemoryStore()
    await store.create_run(run, ["a"])
    back = await store.get_run("r1")
    assert back == run
    assert back is not run
    back.input["n"].append(3)  # type: ignore[index]
    assert (await store.get_run("r1")).input == {"n": [1, 2]}
