"""The waiting parents whose awaited child run has ended (``Store.parents_to_wake``):
a waiting run is listed when a step stored ``waiting`` has, as its latest wait note,
``{"kind": "child", "child_run_id"}`` naming a run stored final; never for a child that
still runs, for a child of a step that waits no more, for a step whose latest wait is
for something else, or for a parent that does not wait.  Oldest first, at most
``limit``."""

from __future__ import annotations

from collections.abc import Callable

from plait.core.states import RunStatus, StepStatus
from plait.store.base import RunChange, RunRecord, Store, WriteBatch

from .test_store import change, new_run_id

S = StepStatus
R = RunStatus
UID = Callable[[str], str]


async def _run(store: Store, uid: UID, steps: tuple[str, ...], *,
               parent: str | None = None, created_at: float = 1_000.0) -> str:
    run_id = new_run_id()
    await store.create_run(RunRecord(
        run_id=run_id, workflow=uid("wf"), version=1, fingerprint="0123456789ab",
        status=R.PENDING, input={}, created_at=created_at, parent_run_id=parent),
        list(steps))
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=R.PENDING, target=R.RUNNING, at=1.0)))
    return run_id


def _wait(kind: str, child: str | None = None) -> dict[str, object]:
    return {"wait": {"kind": kind, "event": "go" if kind == "event" else None,
                     "until": None, "due": None, "child_run_id": child, "attempt": 1}}


async def _park(store: Store, run_id: str, step: str, *notes: dict[str, object]) -> None:
    """Step ``step`` starts and waits, leaving ``notes`` (its wait requests)."""
    await store.write(WriteBatch(run_id=run_id, steps=[
        change(step, S.PENDING, S.QUEUED), change(step, S.QUEUED, S.RUNNING),
        change(step, S.RUNNING, S.WAITING)], notes=[(step, n) for n in notes]))


async def _end(store: Store, run_id: str, status: RunStatus = R.COMPLETED) -> None:
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=R.RUNNING, target=status, at=2.0)))


async def _wait_run(store: Store, run_id: str) -> None:
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=R.RUNNING, target=R.WAITING, at=2.0)))


async def _parent_waiting_for_child(store: Store, uid: UID, *,
                                    created_at: float = 1_000.0) -> tuple[str, str]:
    parent = await _run(store, uid, ("sub", "other"), created_at=created_at)
    child = await _run(store, uid, ("x",), parent=parent, created_at=created_at)
    await _park(store, parent, "sub", _wait("child", child))
    await _wait_run(store, parent)
    return parent, child


async def test_a_waiting_parent_is_listed_once_its_child_has_ended(store: Store,
                                                                   uid: UID) -> None:
    parent, child = await _parent_waiting_for_child(store, uid)
    assert parent not in await store.parents_to_wake(1000)  # the child still runs
    await _end(store, child)
    assert parent in await store.parents_to_wake(1000)


async def test_a_child_that_failed_or_was_cancelled_has_ended_too(store: Store,
                                                                  uid: UID) -> None:
    failed, child = await _parent_waiting_for_child(store, uid)
    await _end(store, child, R.FAILED)
    cancelled, other = await _parent_waiting_for_child(store, uid)
    await _end(store, other, R.CANCELLED)
    found = await store.parents_to_wake(1000)
    assert failed in found and cancelled in found


async def test_a_parent_that_does_not_wait_is_not_listed(store: Store, uid: UID) -> None:
    parent = await _run(store, uid, ("sub",))
    child = await _run(store, uid, ("x",), parent=parent)
    await _park(store, parent, "sub", _wait("child", child))
    await _end(store, child)
    assert parent not in await store.parents_to_wake(1000)  # running: its driver looks


async def test_only_the_latest_wait_of_a_waiting_step_counts(store: Store,
                                                             uid: UID) -> None:
    # a loop: its first child ended, its step now waits for the second
    loop = await _run(store, uid, ("each",))
    first = await _run(store, uid, ("x",), parent=loop)
    second = await _run(store, uid, ("x",), parent=loop)
    await _park(store, loop, "each", _wait("child", first), _wait("child", second))
    await _wait_run(store, loop)
    await _end(store, first)
    assert loop not in await store.parents_to_wake(1000)
    await _end(store, second)
    assert loop in await store.parents_to_wake(1000)
    # a step that waited for a child that ended, and now waits for an event
    agent = await _run(store, uid, ("step",))
    ended = await _run(store, uid, ("x",), parent=agent)
    await _end(store, ended)
    await _park(store, agent, "step", _wait("child", ended), _wait("event"))
    await _wait_run(store, agent)
    assert agent not in await store.parents_to_wake(1000)


async def test_the_ended_child_of_a_step_that_waits_no_more_does_not_count(
        store: Store, uid: UID) -> None:
    parent = await _run(store, uid, ("sub", "gate"))
    child = await _run(store, uid, ("x",), parent=parent)
    await store.write(WriteBatch(run_id=parent, steps=[
        change("sub", S.PENDING, S.QUEUED), change("sub", S.QUEUED, S.RUNNING),
        change("sub", S.RUNNING, S.WAITING)], notes=[("sub", _wait("child", child))]))
    await _end(store, child)
    await store.write(WriteBatch(run_id=parent, steps=[
        change("sub", S.WAITING, S.RUNNING), change("sub", S.RUNNING, S.COMPLETED)]))
    await _park(store, parent, "gate", _wait("approval"))
    await _wait_run(store, parent)
    assert parent not in await store.parents_to_wake(1000)


async def test_oldest_first_and_at_most_limit(store: Store, uid: UID) -> None:
    # older than every other parent of this module: first in the list
    made = []
    for created_at in (3.0, 1.0, 2.0):
        parent, child = await _parent_waiting_for_child(store, uid, created_at=created_at)
        await _end(store, child)
        made.append((created_at, parent))
    oldest = [parent for _, parent in sorted(made)]
    assert (await store.parents_to_wake(2)) == oldest[:2]
    assert (await store.parents_to_wake(1000))[:3] == oldest
    assert await store.parents_to_wake(0) == []
