"""What observability asks of every store: ``metrics_snapshot`` (the aggregates a
Prometheus scrape reads).  (Notifications: test_notification_outbox.py.)
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from plait.core.runstate import AttemptChange
from plait.core.states import RunStatus, StepStatus
from plait.store.base import RunChange, Store, WriteBatch

from .test_claims import LEASE, Driver, sweep
from .test_store import change, run_record

S = StepStatus
R = RunStatus
UID = Callable[[str], str]
BOUNDS = (0.5, 2.0, 10.0)


async def _finished_run(store: Store, workflow: str, *, took: float, attempts: int,
                        output: object, status: StepStatus = S.COMPLETED,
                        run_status: RunStatus = R.COMPLETED) -> str:
    run_id = uuid.uuid4().hex
    await store.create_run(run_record(run_id, workflow), ["a", "b"])
    t0 = 1000.0
    await store.write(WriteBatch(
        run_id,
        steps=[change("a", S.PENDING, S.QUEUED, t0),
               change("a", S.QUEUED, S.RUNNING, t0, attempts=attempts, started_at=t0),
               change("a", S.RUNNING, status, t0 + took, attempts=attempts,
                      started_at=t0, finished_at=t0 + took, output=output)],
        attempts=[AttemptChange("a", attempts, t0, False, "running"),
                  AttemptChange("a", attempts, t0 + took, True,
                                "completed" if status is S.COMPLETED else "failed",
                                None if status is S.COMPLETED
                                else "LeaseExpired: the worker w stopped heartbeating")],
        run=RunChange(source=R.PENDING, target=R.RUNNING, at=t0)))
    await store.write(WriteBatch(run_id, run=RunChange(source=R.RUNNING, target=run_status,
                                                       at=t0 + took)))
    return run_id


async def test_a_snapshot_aggregates_runs_steps_durations_retries_and_tokens(
        store: Store, uid: UID) -> None:
    wf = uid("wf")
    usage = {"text": "hi", "usage": {"prompt_tokens": 7, "completion_tokens": 3,
                                     "total_tokens": 10}}
    await _finished_run(store, wf, took=0.25, attempts=1, output=usage)
    await _finished_run(store, wf, took=1.0, attempts=3, output={"usage": {
        "prompt_tokens": 1, "completion_tokens": "many", "total_tokens": 1.0}})
    await _finished_run(store, wf, took=5.0, attempts=2, output=None, status=S.FAILED,
                        run_status=R.FAILED)
    await _finished_run(store, wf, took=20.0, attempts=1, output=[1, {"usage": 3}])

    snap = await store.metrics_snapshot(BOUNDS)

    assert snap.runs[wf, "completed"] == 3
    assert snap.runs[wf, "failed"] == 1
    assert snap.steps[wf, "a", "completed"] == 3
    assert snap.steps[wf, "a", "failed"] == 1
    assert snap.steps[wf, "b", "pending"] == 4
    assert snap.retries[wf, "a"] == 2 + 1
    (durations,) = [d for d in snap.durations if d.workflow == wf]
    assert durations.step == "a"
    assert durations.count == 4
    assert abs(durations.total - 26.25) < 1e-9
    assert durations.buckets == [1, 2, 3]  # <=0.5, <=2, <=10 (cumulative)
    assert snap.tokens[wf, "a", "prompt_tokens"] == 8
    assert snap.tokens[wf, "a", "total_tokens"] == 11
    assert snap.tokens[wf, "a", "completion_tokens"] == 3  # "many" is not a number
    assert snap.lease_reclaims >= 1


async def test_a_snapshot_counts_queued_and_claimed_tickets(store: Store, uid: UID) -> None:
    await sweep(store)
    before = await store.metrics_snapshot(BOUNDS)
    driver = Driver(store, uid("wf"))
    try:
        run_id = await driver.run()
        for step in ("a", "b", "c"):
            await driver.start(run_id, step)
        claimed = await store.claim_attempts("w1", 1, LEASE)
        assert len(claimed) == 1
        snap = await store.metrics_snapshot(BOUNDS)
        assert snap.tickets_queued - before.tickets_queued == 2
        assert snap.tickets_claimed - before.tickets_claimed == 1
    finally:
        await driver.tidy()


async def test_map_items_are_aggregated_under_their_map_step(store: Store, uid: UID) -> None:
    """``fetch[3]`` counts as ``fetch`` (the rows sent back follow the definition, not
    the number of items); ids that merely end in digits keep them."""
    wf = uid("wf")
    run_id = uuid.uuid4().hex
    items = ["m1[0]", "m1[1]", "m1[10]"]
    await store.create_run(run_record(run_id, wf), ["m1", "step2"])
    t0, usage = 1000.0, {"usage": {"total_tokens": 5}}
    await store.write(WriteBatch(run_id, new_steps=[(s, 2 + k) for k, s in enumerate(items)],
                                 steps=[
        c for sid in items for c in (
            change(sid, S.PENDING, S.QUEUED, t0),
            change(sid, S.QUEUED, S.RUNNING, t0, attempts=2, started_at=t0),
            change(sid, S.RUNNING, S.COMPLETED, t0 + 1, attempts=2, started_at=t0,
                   finished_at=t0 + 1, output=usage))]))

    snap = await store.metrics_snapshot(BOUNDS)

    assert {k for k in snap.steps if k[0] == wf} == {(wf, "m1", "pending"),
                                                    (wf, "m1", "completed"),
                                                    (wf, "step2", "pending")}
    assert snap.steps[wf, "m1", "completed"] == 3
    assert snap.retries[wf, "m1"] == 3
    (durations,) = [d for d in snap.durations if d.workflow == wf]
    assert (durations.step, durations.count, durations.buckets) == ("m1", 3, [0, 3, 3])
    assert snap.tokens == {**snap.tokens, (wf, "m1", "total_tokens"): 15}
