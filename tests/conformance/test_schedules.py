"""The schedule capability of the Store protocol (``claim_fire``, ``last_fire``): every
backend must pass this unchanged.  A fire of a schedule creates its run exactly once,
however many schedulers claim it at once; ``last_fire`` records a schedule's first
sighting once and tells where it stands."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest

from plait.core.states import RunStatus
from plait.errors import RunNotFound, StoreError
from plait.store.base import RunFilter, RunRecord, Store

UID = Callable[[str], str]
STEPS = ("fetch", "report")
FIRE = 1_717_200_000.0  # 2024-06-01 00:00:00 UTC


def scheduled_run(workflow: str, *, run_id: str | None = None,
                  created_at: float = FIRE + 0.25) -> RunRecord:
    return RunRecord(run_id=run_id or uuid.uuid4().hex, workflow=workflow, version=1,
                     fingerprint="0123456789ab", status=RunStatus.PENDING,
                     input={"customer": "acme"}, created_at=created_at)


async def runs_of(store: Store, workflow: str) -> list[RunRecord]:
    return await store.list_runs(RunFilter(workflow=workflow, limit=1000))


async def test_a_fire_creates_its_run_with_every_step_pending(store: Store,
                                                              uid: UID) -> None:
    name = uid("wf")
    run = scheduled_run(name)
    assert await store.claim_fire(name, "a1b2c3d4e5f6", FIRE, run, STEPS) is True

    stored = await store.get_run(run.run_id)
    assert (stored.status, stored.input, stored.workflow) == (
        RunStatus.PENDING, {"customer": "acme"}, name)
    steps = await store.get_steps(run.run_id)
    assert [(s.step_id, str(s.status)) for s in steps] == [("fetch", "pending"),
                                                           ("report", "pending")]
    events = await store.get_events(run.run_id)
    assert [(e.seq, e.kind) for e in events] == [(1, "run"), (2, "note")]
    assert events[1].data == {"schedule": {"key": "a1b2c3d4e5f6", "fire_time": FIRE}}
    assert events[1].step_id is None
    assert events[1].at == run.created_at
    assert await store.last_fire(name, "a1b2c3d4e5f6") == FIRE


async def test_a_fire_taken_already_creates_nothing(store: Store, uid: UID) -> None:
    name = uid("wf")
    first, second = scheduled_run(name), scheduled_run(name)
    assert await store.claim_fire(name, "k", FIRE, first, STEPS) is True
    assert await store.claim_fire(name, "k", FIRE, second, STEPS) is False
    with pytest.raises(RunNotFound):
        await store.get_run(second.run_id)
    assert [r.run_id for r in await runs_of(store, name)] == [first.run_id]


async def test_concurrent_claims_of_one_fire_create_exactly_one_run(store: Store,
                                                                    uid: UID) -> None:
    name = uid("wf")
    runs = [scheduled_run(name) for _ in range(8)]
    won = await asyncio.gather(*(store.claim_fire(name, "k", FIRE, run, STEPS)
                                 for run in runs))
    assert sorted(won) == [False] * 7 + [True]
    winner = runs[won.index(True)]
    assert [r.run_id for r in await runs_of(store, name)] == [winner.run_id]
    for loser in (r for r, ok in zip(runs, won, strict=True) if not ok):
        with pytest.raises(RunNotFound):
            await store.get_run(loser.run_id)


async def test_each_fire_time_and_each_schedule_is_its_own_fire(store: Store,
                                                                uid: UID) -> None:
    name, other = uid("wf"), uid("other")
    claims = [(name, "k", FIRE), (name, "k", FIRE + 300), (name, "j", FIRE),
              (other, "k", FIRE)]
    for workflow, key, at in claims:
        assert await store.claim_fire(workflow, key, at, scheduled_run(workflow), STEPS)
    assert len(await runs_of(store, name)) == 3
    assert len(await runs_of(store, other)) == 1
    assert await store.last_fire(name, "k") == FIRE + 300
    assert await store.last_fire(name, "j") == FIRE
    # an older fire claimed after a newer one (catching up) does not move the latest
    assert await store.claim_fire(name, "k", FIRE - 300, scheduled_run(name), STEPS)
    assert await store.last_fire(name, "k") == FIRE + 300


async def test_last_fire_records_the_first_sighting_once(store: Store, uid: UID) -> None:
    name = uid("wf")
    assert await store.last_fire(name, "k") is None
    assert await store.last_fire(name, "k", seen_at=FIRE) == FIRE
    # seen again later: the first sighting stands
    assert await store.last_fire(name, "k", seen_at=FIRE + 50) == FIRE
    assert await store.last_fire(name, "k") == FIRE
    # a fire after it is the latest
    assert await store.claim_fire(name, "k", FIRE + 60, scheduled_run(name), STEPS)
    assert await store.last_fire(name, "k", seen_at=FIRE + 90) == FIRE + 60
    # other schedules are untouched
    assert await store.last_fire(name, "j") is None


async def test_concurrent_first_sightings_agree_on_one_time(store: Store,
                                                            uid: UID) -> None:
    name = uid("wf")
    times = [FIRE + i for i in range(8)]
    seen = await asyncio.gather(*(store.last_fire(name, "k", seen_at=t) for t in times))
    assert len(set(seen)) == 1
    assert seen[0] in times
    assert await store.last_fire(name, "k") == seen[0]


async def test_a_run_of_another_workflow_is_refused_with_nothing_stored(
        store: Store, uid: UID) -> None:
    name = uid("wf")
    run = scheduled_run(uid("other"))
    with pytest.raises(StoreError, match="not"):
        await store.claim_fire(name, "k", FIRE, run, STEPS)
    with pytest.raises(RunNotFound):
        await store.get_run(run.run_id)
    assert await store.last_fire(name, "k") is None


async def test_a_run_id_that_exists_is_refused_and_the_fire_stays_free(
        store: Store, uid: UID) -> None:
    name = uid("wf")
    existing = scheduled_run(name)
    await store.create_run(existing, STEPS)
    with pytest.raises(StoreError, match="already exists"):
        await store.claim_fire(name, "k", FIRE, scheduled_run(name, run_id=existing.run_id),
                               STEPS)
    assert await store.last_fire(name, "k") is None
    fresh = scheduled_run(name)
    assert await store.claim_fire(name, "k", FIRE, fresh, STEPS) is True
    assert (await store.get_run(fresh.run_id)).status == RunStatus.PENDING
