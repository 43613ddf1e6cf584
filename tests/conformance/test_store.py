"""The Store conformance suite: every backend must pass it unchanged.

Written only against the ``Store`` protocol (``plait.store.base``) and the change values
of ``plait.core.runstate``; the ``store`` fixture (conftest.py) supplies each backend.
"""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Callable

import pytest

from plait.core.runstate import AttemptChange, StepChange, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.errors import (
    DecisionTaken,
    RunNotFound,
    StaleWriteError,
    StoreError,
    TransitionError,
    VersionConflict,
    WorkflowNotFound,
)
from plait.store.base import (
    RunChange,
    RunFilter,
    RunRecord,
    Store,
    WriteBatch,
)

S = StepStatus
R = RunStatus
UID = Callable[[str], str]

DEFINITION = {"name": "x", "steps": [{"id": "a", "type": "transform", "value": 1}]}


# ---------------------------------------------------------------- builders


def new_run_id() -> str:
    return uuid.uuid4().hex


def run_record(run_id: str, workflow: str, *, created_at: float = 1_000.0,
               input: object = None, version: int = 1,
               fingerprint: str = "0123456789ab") -> RunRecord:
    return RunRecord(run_id=run_id, workflow=workflow, version=version,
                     fingerprint=fingerprint, status=R.PENDING,
                     input={"n": 1} if input is None else input, created_at=created_at)


def row(status: StepStatus, **fields: object) -> StepRuntime:
    r = StepRuntime(status=status)
    for key, value in fields.items():
        setattr(r, key, value)
    return r


def change(step: str, source: StepStatus, target: StepStatus, at: float = 1.0,
           **fields: object) -> StepChange:
    return StepChange(step, source, target, at, row(target, **fields))


async def new_run(store: Store, uid: UID, steps: tuple[str, ...] = ("a", "b", "c"),
                  **kwargs: object) -> str:
    run_id = new_run_id()
    await store.create_run(run_record(run_id, uid("wf"), **kwargs), list(steps))  # type: ignore[arg-type]
    return run_id


async def statuses(store: Store, run_id: str) -> dict[str, str]:
    return {s.step_id: str(s.status) for s in await store.get_steps(run_id)}


# ---------------------------------------------------------------- workflows


async def test_same_fingerprint_keeps_the_version(store: Store, uid: UID) -> None:
    name = uid("wf")
    first = await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", None)
    again = await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", None)
    assert first.version == 1
    assert again.version == 1
    assert [w.version for w in await store.list_workflows() if w.name == name] == [1]


async def test_a_definition_given_as_json_text_reads_back_as_the_same_dict(
        store: Store, uid: UID) -> None:
    import json
    name = uid("wf")
    saved = await store.save_workflow(name, json.dumps(DEFINITION), "aaaaaaaaaaaa", None)
    assert saved.definition == DEFINITION
    assert (await store.get_workflow(name)).definition == DEFINITION
    # the same fingerprint given as a dict later is the same version
    again = await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", None)
    assert again.version == saved.version == 1


async def test_changed_fingerprint_without_version_is_the_next_version(
        store: Store, uid: UID) -> None:
    name = uid("wf")
    v1 = await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", None)
    v2 = await store.save_workflow(name, {**DEFINITION, "description": "b"},
                                   "bbbbbbbbbbbb", None)
    v3 = await store.save_workflow(name, DEFINITION, "cccccccccccc", None)
    assert (v1.version, v2.version, v3.version) == (1, 2, 3)
    assert v2.fingerprint == "bbbbbbbbbbbb"
    assert v2.definition == {**DEFINITION, "description": "b"}
    latest = await store.get_workflow(name)
    assert (latest.version, latest.fingerprint) == (3, "cccccccccccc")


async def test_returning_to_an_older_definition_reuses_its_version(
        store: Store, uid: UID) -> None:
    # A, B, A: the same fingerprint is the same version, whichever version is the
    # latest; nothing new is stored and the latest stays B's.
    name = uid("wf")
    other = {**DEFINITION, "description": "b"}
    await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", None)
    await store.save_workflow(name, other, "bbbbbbbbbbbb", None)
    back = await store.save_workflow(name, json.dumps(DEFINITION), "aaaaaaaaaaaa", None)
    assert (back.version, back.fingerprint, back.definition) == (1, "aaaaaaaaaaaa",
                                                                 DEFINITION)
    assert [w.version for w in await store.list_workflows() if w.name == name] == [1, 2]
    assert (await store.get_workflow(name)).version == 2
    # a new definition after that is the next version, 3
    third = await store.save_workflow(name, DEFINITION, "cccccccccccc", None)
    assert third.version == 3


async def test_a_stated_version_keeps_its_own_rules_after_a_reuse(
        store: Store, uid: UID) -> None:
    # version: N is N or a refusal naming both fingerprints, even when the
    # definition is stored already under another version.
    name = uid("wf")
    await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", None)
    await store.save_workflow(name, DEFINITION, "bbbbbbbbbbbb", None)
    with pytest.raises(VersionConflict) as caught:
        await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", 2)
    assert (caught.value.stored, caught.value.given) == ("bbbbbbbbbbbb", "aaaaaaaaaaaa")
    stated = await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", 7)
    assert stated.version == 7


async def test_stated_version_with_same_fingerprint_is_accepted(
        store: Store, uid: UID) -> None:
    name = uid("wf")
    stored = await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", 5)
    again = await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", 5)
    assert stored.version == again.version == 5
    assert (await store.get_workflow(name, 5)).fingerprint == "aaaaaaaaaaaa"


async def test_stated_version_with_other_fingerprint_is_refused_naming_both(
        store: Store, uid: UID) -> None:
    name = uid("wf")
    await store.save_workflow(name, DEFINITION, "aaaaaaaaaaaa", 2)
    with pytest.raises(VersionConflict) as info:
        await store.save_workflow(name, {**DEFINITION, "description": "x"},
                                  "bbbbbbbbbbbb", 2)
    assert "aaaaaaaaaaaa" in str(info.value)
    assert "bbbbbbbbbbbb" in str(info.value)
    assert (info.value.stored, info.value.given) == ("aaaaaaaaaaaa", "bbbbbbbbbbbb")
    # the stored version is unchanged
    kept = await store.get_workflow(name, 2)
    assert kept.fingerprint == "aaaaaaaaaaaa"
    assert kept.definition == DEFINITION


async def test_get_workflow_latest_specific_and_missing(store: Store, uid: UID) -> None:
    name = uid("wf")
    await store.save_workflow(name, {**DEFINITION, "description": "one"}, "a" * 12, None)
    await store.save_workflow(name, {**DEFINITION, "description": "two"}, "b" * 12, None)
    assert (await store.get_workflow(name)).definition["description"] == "two"
    first = await store.get_workflow(name, 1)
    assert (first.version, first.fingerprint) == (1, "a" * 12)
    assert first.definition["description"] == "one"
    with pytest.raises(WorkflowNotFound) as no_version:
        await store.get_workflow(name, 3)
    assert no_version.value.versions == (1, 2)  # it says which versions exist
    assert f"workflow {name!r} has versions 1, 2; no version 3" in str(no_version.value)
    with pytest.raises(WorkflowNotFound) as no_name:
        await store.get_workflow(uid("missing"))
    assert no_name.value.versions == ()
    with pytest.raises(WorkflowNotFound):
        await store.get_workflow(uid("missing"), 1)


async def test_list_workflows_lists_every_version(store: Store, uid: UID) -> None:
    a, b = uid("wfa"), uid("wfb")
    await store.save_workflow(a, DEFINITION, "a" * 12, None)
    await store.save_workflow(a, DEFINITION, "b" * 12, None)
    await store.save_workflow(b, DEFINITION, "c" * 12, None)
    mine = sorted((w.name, w.version, w.fingerprint)
                  for w in await store.list_workflows() if w.name in (a, b))
    assert mine == [(a, 1, "a" * 12), (a, 2, "b" * 12), (b, 1, "c" * 12)]


async def test_a_dotted_name_of_a_definition_written_at_run_time_is_stored(
        store: Store, uid: UID) -> None:
    """``PARENT.STEP`` (and deeper: ``a.b.c``) is a workflow name every store keeps,
    versions and runs of it included."""
    name = f"{uid('wf')}.execute.Inner_2"
    first = await store.save_workflow(name, DEFINITION, "a" * 12, None)
    second = await store.save_workflow(name, DEFINITION, "b" * 12, None)
    assert (first.version, second.version) == (1, 2)
    assert (await store.get_workflow(name, 1)).fingerprint == "a" * 12
    run_id = new_run_id()
    await store.create_run(run_record(run_id, name, version=2), ["a"])
    assert (await store.get_run(run_id)).workflow == name


async def test_workflow_records_are_copies(store: Store, uid: UID) -> None:
    name = uid("wf")
    definition = {"name": "x", "steps": [{"id": "a", "type": "transform", "value": [1]}]}
    saved = await store.save_workflow(name, definition, "a" * 12, None)
    definition["steps"][0]["value"].append(2)  # the caller's dict changes afterwards
    saved.definition["steps"].append({"id": "z"})
    got = await store.get_workflow(name)
    got.definition["name"] = "changed"
    got.definition["steps"][0]["value"].append(3)
    again = await store.get_workflow(name)
    assert again.definition == {"name": "x",
                                "steps": [{"id": "a", "type": "transform", "value": [1]}]}


# ---------------------------------------------------------------- runs and steps


async def test_create_run_then_get_run_and_steps(store: Store, uid: UID) -> None:
    run_id = new_run_id()
    name = uid("wf")
    rec = run_record(run_id, name, created_at=1234.5, input={"ticket": "t-1"},
                     version=3, fingerprint="fedcba987654")
    rec.sla = 30.0
    rec.retry_of = "older-run"
    await store.create_run(rec, ["zeta", "alpha", "mid"])
    got = await store.get_run(run_id)
    assert got.run_id == run_id
    assert got.workflow == name
    assert (got.version, got.fingerprint) == (3, "fedcba987654")
    assert got.status == R.PENDING
    assert got.input == {"ticket": "t-1"}
    assert got.created_at == 1234.5
    assert got.sla == 30.0
    assert got.retry_of == "older-run"
    assert got.cancel_requested is False
    assert (got.output, got.error, got.started_at, got.finished_at) == (None, None, None,
                                                                        None)
    steps = await store.get_steps(run_id)
    assert [s.step_id for s in steps] == ["zeta", "alpha", "mid"]  # definition order
    for s in steps:
        assert s.run_id == run_id
        assert s.status == S.PENDING
        assert s.attempts == 0
        assert s.output is None and s.error is None
        assert s.started_at is None and s.finished_at is None
        assert s.fallback_used is False
    assert await store.get_attempts(run_id) == []


async def test_create_run_twice_is_refused(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    with pytest.raises(StoreError):
        await store.create_run(run_record(run_id, uid("wf")), ["a"])


async def test_missing_run_raises_run_not_found(store: Store) -> None:
    missing = new_run_id()
    with pytest.raises(RunNotFound):
        await store.get_run(missing)
    with pytest.raises(RunNotFound):
        await store.get_steps(missing)
    with pytest.raises(RunNotFound):
        await store.get_attempts(missing)
    with pytest.raises(RunNotFound):
        await store.get_events(missing)
    with pytest.raises(RunNotFound):
        await store.request_cancel(missing)
    with pytest.raises(RunNotFound):
        await store.write(WriteBatch(run_id=missing,
                                     steps=[change("a", S.PENDING, S.QUEUED)]))


async def test_write_stores_step_rows_and_run_changes(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(
        run_id=run_id,
        steps=[change("a", S.PENDING, S.QUEUED, 10.0)],
        run=RunChange(source=R.PENDING, target=R.RUNNING, at=10.0)))
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.QUEUED, S.RUNNING, 11.0, attempts=1, started_at=11.0, worker="w1")]))
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.RUNNING, S.COMPLETED, 12.5, attempts=1, started_at=11.0,
               finished_at=12.5, output={"ok": True}, worker="w1", fallback_used=True),
        change("b", S.PENDING, S.SKIPPED, 12.5, finished_at=12.5,
               skip_reason="when was false"),
    ]))
    run = await store.get_run(run_id)
    assert run.status == R.RUNNING
    assert run.started_at == 10.0
    steps = {s.step_id: s for s in await store.get_steps(run_id)}
    a = steps["a"]
    assert a.status == S.COMPLETED
    assert (a.attempts, a.started_at, a.finished_at) == (1, 11.0, 12.5)
    assert a.output == {"ok": True}
    assert a.worker == "w1"
    assert a.fallback_used is True
    assert steps["b"].status == S.SKIPPED
    assert steps["b"].skip_reason == "when was false"
    assert steps["c"].status == S.PENDING

    await store.write(WriteBatch(run_id=run_id, run=RunChange(
        source=R.RUNNING, target=R.FAILED, at=20.0, output={"partial": [1]},
        error="failed steps: c")))
    run = await store.get_run(run_id)
    assert run.status == R.FAILED
    assert run.finished_at == 20.0
    assert run.output == {"partial": [1]}
    assert run.error == "failed steps: c"


async def test_several_changes_of_one_step_in_one_batch(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.PENDING, S.QUEUED),
        change("a", S.QUEUED, S.RUNNING, attempts=1),
        change("a", S.RUNNING, S.COMPLETED, attempts=1, output=7),
    ]))
    steps = {s.step_id: s for s in await store.get_steps(run_id)}
    assert steps["a"].status == S.COMPLETED
    assert steps["a"].output == 7


async def test_a_stored_step_reads_back_as_the_row_written(store: Store, uid: UID) -> None:
    """Every field of the core's row is stored: the record is that row, with its run
    and step (``StepRecord`` is a ``StepRuntime``)."""
    run_id = await new_run(store, uid)
    written = row(S.QUEUED, attempts=2, output={"n": [1, 2]}, error="boom",
                  started_at=11.0, finished_at=12.5, skip_reason="why",
                  fallback_used=True, next_attempt_at=99.0, worker="w1")
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.PENDING, S.QUEUED), change("a", S.QUEUED, S.RUNNING, attempts=1),
        StepChange("a", S.RUNNING, S.QUEUED, 13.0, written)]))
    a = (await store.get_steps(run_id))[0]
    assert isinstance(a, StepRuntime)
    assert (a.run_id, a.step_id) == (run_id, "a")
    assert a.copy() == written


async def test_retry_path_running_to_queued_is_stored(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.PENDING, S.QUEUED), change("a", S.QUEUED, S.RUNNING, attempts=1)]))
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.RUNNING, S.QUEUED, attempts=1, error="boom", next_attempt_at=99.0)]))
    a = (await store.get_steps(run_id))[0]
    assert (a.status, a.attempts, a.error, a.next_attempt_at) == (S.QUEUED, 1, "boom",
                                                                   99.0)


# ---------------------------------------------------------------- refusals and atomicity


async def test_stale_source_is_refused(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, steps=[change("a", S.PENDING, S.QUEUED)]))
    with pytest.raises(StaleWriteError):  # another writer already moved it
        await store.write(WriteBatch(run_id=run_id,
                                     steps=[change("a", S.PENDING, S.QUEUED)]))
    with pytest.raises(StaleWriteError):
        await store.write(WriteBatch(run_id=run_id,
                                     steps=[change("a", S.RUNNING, S.COMPLETED)]))
    assert (await statuses(store, run_id))["a"] == "queued"


async def test_stale_run_source_is_refused(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    with pytest.raises(StaleWriteError):
        await store.write(WriteBatch(run_id=run_id, run=RunChange(
            source=R.RUNNING, target=R.COMPLETED, at=1.0)))
    assert (await store.get_run(run_id)).status == R.PENDING


@pytest.mark.parametrize(("path", "bad"), [
    ([], (S.PENDING, S.COMPLETED)),
    ([], (S.PENDING, S.RUNNING)),
    ([], (S.PENDING, S.FAILED)),
    ([(S.PENDING, S.QUEUED)], (S.QUEUED, S.COMPLETED)),
    ([(S.PENDING, S.QUEUED), (S.QUEUED, S.RUNNING), (S.RUNNING, S.COMPLETED)],
     (S.COMPLETED, S.RUNNING)),
    ([(S.PENDING, S.SKIPPED)], (S.SKIPPED, S.QUEUED)),
    ([(S.PENDING, S.CANCELLED)], (S.CANCELLED, S.QUEUED)),
])
async def test_forbidden_step_transition_is_refused(
        store: Store, uid: UID, path: list[tuple[StepStatus, StepStatus]],
        bad: tuple[StepStatus, StepStatus]) -> None:
    run_id = await new_run(store, uid)
    if path:
        await store.write(WriteBatch(run_id=run_id,
                                     steps=[change("a", s, t) for s, t in path]))
    with pytest.raises(TransitionError):
        await store.write(WriteBatch(run_id=run_id, steps=[change("a", *bad)]))
    assert (await statuses(store, run_id))["a"] == str(bad[0])


async def test_forbidden_run_transition_is_refused(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=R.PENDING, target=R.RUNNING, at=1.0)))
    await store.write(WriteBatch(run_id=run_id, run=RunChange(
        source=R.RUNNING, target=R.COMPLETED, at=2.0, output=1)))
    with pytest.raises(TransitionError):
        await store.write(WriteBatch(run_id=run_id, run=RunChange(
            source=R.COMPLETED, target=R.RUNNING, at=3.0)))
    with pytest.raises(TransitionError):
        await store.write(WriteBatch(run_id=run_id, run=RunChange(
            source=R.COMPLETED, target=R.FAILED, at=3.0, error="late")))
    run = await store.get_run(run_id)
    assert (run.status, run.output, run.error, run.finished_at) == (R.COMPLETED, 1, None,
                                                                    2.0)


async def test_unknown_step_in_a_batch_is_refused(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    with pytest.raises(StoreError):
        await store.write(WriteBatch(run_id=run_id, steps=[
            change("a", S.PENDING, S.QUEUED), change("nope", S.PENDING, S.QUEUED)]))
    assert (await statuses(store, run_id))["a"] == "pending"


async def _state_of(store: Store, run_id: str) -> tuple[object, ...]:
    run = await store.get_run(run_id)
    return (run.status, run.output, await statuses(store, run_id),
            [(a.step_id, a.attempt, a.status) for a in await store.get_attempts(run_id)],
            [e.seq for e in await store.get_events(run_id)])


@pytest.mark.parametrize("poison", ["illegal", "stale", "illegal_run", "stale_run"])
async def test_a_refused_batch_stores_nothing(store: Store, uid: UID, poison: str) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, steps=[change("c", S.PENDING, S.QUEUED)]))
    before = await _state_of(store, run_id)
    steps = [change("a", S.PENDING, S.QUEUED), change("a", S.QUEUED, S.RUNNING, attempts=1)]
    run = RunChange(source=R.PENDING, target=R.RUNNING, at=5.0)
    if poison == "illegal":
        steps.append(change("b", S.PENDING, S.COMPLETED, output=1))
    elif poison == "stale":
        steps.append(change("c", S.PENDING, S.SKIPPED))  # c is queued already
    elif poison == "illegal_run":
        run = RunChange(source=R.PENDING, target=R.WAITING, at=5.0)
    else:
        run = RunChange(source=R.RUNNING, target=R.COMPLETED, at=5.0)
    batch = WriteBatch(run_id=run_id, steps=steps, run=run,
                       attempts=[AttemptChange("a", 1, 5.0, False, "running")],
                       notes=[("a", {"note": "must not be stored"})])
    with pytest.raises((TransitionError, StaleWriteError)):
        await store.write(batch)
    assert await _state_of(store, run_id) == before
    assert all(e.data.get("note") is None for e in await store.get_events(run_id))


# ---------------------------------------------------------------- attempts


async def test_attempt_start_then_end(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, attempts=[
        AttemptChange("a", 1, 10.0, False, "running", worker="host:1")]))
    [started] = await store.get_attempts(run_id)
    assert (started.step_id, started.attempt, started.status) == ("a", 1, "running")
    assert started.started_at == 10.0
    assert started.finished_at is None
    assert started.worker == "host:1"
    assert started.fallback is False
    await store.write(WriteBatch(run_id=run_id, attempts=[
        AttemptChange("a", 1, 11.5, True, "failed", error="ValueError: boom",
                      worker="host:1"),
        AttemptChange("a", 2, 13.0, False, "running", worker="host:2")]))
    await store.write(WriteBatch(run_id=run_id, attempts=[
        AttemptChange("a", 2, 14.0, True, "completed", worker="host:2")]))
    attempts = await store.get_attempts(run_id)
    assert [(a.attempt, a.status, a.started_at, a.finished_at, a.error, a.worker)
            for a in attempts] == [
        (1, "failed", 10.0, 11.5, "ValueError: boom", "host:1"),
        (2, "completed", 13.0, 14.0, None, "host:2"),
    ]


async def test_an_attempts_end_names_the_worker_that_executed_it(store: Store,
                                                                 uid: UID) -> None:
    """On a cluster the driver begins an attempt (no worker yet, or its own name) and
    the end names the worker that executed it: history shows that one.  An
    end that names none keeps the start's."""
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, attempts=[
        AttemptChange("a", 1, 1.0, False, "running", worker="driver:1"),
        AttemptChange("b", 1, 2.0, False, "running"),
        AttemptChange("c", 1, 3.0, False, "running", worker="driver:1")]))
    await store.write(WriteBatch(run_id=run_id, attempts=[
        AttemptChange("a", 1, 4.0, True, "completed", worker="worker:7"),
        AttemptChange("b", 1, 5.0, True, "failed", error="boom", worker="worker:8"),
        AttemptChange("c", 1, 6.0, True, "cancelled", error="stop")]))
    assert [(a.step_id, a.status, a.started_at, a.finished_at, a.worker)
            for a in await store.get_attempts(run_id)] == [
        ("a", "completed", 1.0, 4.0, "worker:7"), ("b", "failed", 2.0, 5.0, "worker:8"),
        ("c", "cancelled", 3.0, 6.0, "driver:1")]


async def test_fallback_attempt_is_recorded_separately(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, attempts=[
        AttemptChange("a", 1, 1.0, False, "running"),
        AttemptChange("a", 1, 2.0, True, "failed", error="boom")]))
    await store.write(WriteBatch(run_id=run_id, attempts=[
        AttemptChange("a", 1, 3.0, True, "completed", fallback=True)]))
    attempts = await store.get_attempts(run_id)
    assert [(a.attempt, a.fallback, a.status, a.error) for a in attempts] == [
        (1, False, "failed", "boom"), (1, True, "completed", None)]


async def test_attempts_are_ordered_by_start_time(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, attempts=[
        AttemptChange("b", 1, 5.0, False, "running"),
        AttemptChange("a", 1, 3.0, False, "running"),
        AttemptChange("c", 1, 4.0, False, "running")]))
    assert [a.step_id for a in await store.get_attempts(run_id)] == ["a", "c", "b"]


# ---------------------------------------------------------------- history


async def test_events_keep_history_in_order(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, steps=[change("a", S.PENDING, S.QUEUED)],
                                 run=RunChange(source=R.PENDING, target=R.RUNNING, at=1.0)))
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.QUEUED, S.RUNNING, attempts=1)]))
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.RUNNING, S.COMPLETED, attempts=1),
        change("b", S.PENDING, S.SKIPPED)], notes=[("b", {"why": "guard"})]))
    events = await store.get_events(run_id)
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(e.run_id == run_id for e in events)
    step_moves = [(e.step_id, str(e.data["to"])) for e in events if e.kind == "step"]
    assert step_moves == [("a", "queued"), ("a", "running"), ("a", "completed"),
                          ("b", "skipped")]
    assert [str(e.data["from"]) for e in events if e.kind == "step"] == [
        "pending", "queued", "running", "pending"]
    run_moves = [str(e.data.get("to")) for e in events if e.kind == "run"]
    assert run_moves.count("running") == 1
    notes = [e for e in events if e.kind == "note"]
    assert [(n.step_id, n.data) for n in notes] == [("b", {"why": "guard"})]
    # the step events of a batch precede the batch after it
    assert events.index(notes[0]) > max(i for i, e in enumerate(events)
                                        if e.kind == "step" and e.step_id == "a")


async def test_get_events_after(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, steps=[change("a", S.PENDING, S.QUEUED)]))
    first = await store.get_events(run_id)
    mark = first[-1].seq
    await store.write(WriteBatch(run_id=run_id, steps=[change("b", S.PENDING, S.QUEUED)]))
    await store.write(WriteBatch(run_id=run_id, steps=[change("c", S.PENDING, S.QUEUED)]))
    later = await store.get_events(run_id, after=mark)
    assert [e.step_id for e in later] == ["b", "c"]
    assert all(e.seq > mark for e in later)
    assert await store.get_events(run_id, after=later[-1].seq) == []
    everything = await store.get_events(run_id, after=0)
    assert [e.seq for e in everything] == [e.seq for e in first] + [e.seq for e in later]


async def test_events_of_runs_are_separate(store: Store, uid: UID) -> None:
    one = await new_run(store, uid)
    two = await new_run(store, uid)
    await store.write(WriteBatch(run_id=one, steps=[change("a", S.PENDING, S.QUEUED)]))
    await store.write(WriteBatch(run_id=two, steps=[change("b", S.PENDING, S.QUEUED)]))
    assert [e.step_id for e in await store.get_events(one) if e.kind == "step"] == ["a"]
    assert [e.step_id for e in await store.get_events(two) if e.kind == "step"] == ["b"]


# ---------------------------------------------------------------- listing and cancel


async def _finish(store: Store, run_id: str, target: RunStatus) -> None:
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=R.PENDING, target=R.RUNNING, at=1.0)))
    await store.write(WriteBatch(run_id=run_id,
                                 run=RunChange(source=R.RUNNING, target=target, at=2.0)))


async def test_list_runs_newest_first_with_filters_and_limit(store: Store,
                                                           uid: UID) -> None:
    wf, other = uid("wfl"), uid("other")
    ids = []
    for n in range(5):
        run_id = new_run_id()
        await store.create_run(run_record(run_id, wf, created_at=1_000.0 + n), ["a"])
        ids.append(run_id)
    foreign = new_run_id()
    await store.create_run(run_record(foreign, other, created_at=2_000.0), ["a"])
    await _finish(store, ids[1], R.COMPLETED)
    await _finish(store, ids[3], R.COMPLETED)
    await _finish(store, ids[4], R.FAILED)

    listed = await store.list_runs(RunFilter(workflow=wf))
    assert [r.run_id for r in listed] == ids[::-1]
    assert all(r.workflow == wf for r in listed)
    assert [r.run_id for r in await store.list_runs(RunFilter(workflow=wf, limit=2))] == \
        [ids[4], ids[3]]
    done = await store.list_runs(RunFilter(workflow=wf, status=R.COMPLETED))
    assert [r.run_id for r in done] == [ids[3], ids[1]]
    assert [r.run_id for r in await store.list_runs(
        RunFilter(workflow=wf, status=R.PENDING))] == [ids[2], ids[0]]
    recent = await store.list_runs(RunFilter(workflow=wf, since=1_002.0))
    assert [r.run_id for r in recent] == [ids[4], ids[3], ids[2]]
    assert [r.run_id for r in await store.list_runs(RunFilter(workflow=other))] == [foreign]
    assert await store.list_runs(RunFilter(workflow=uid("nothing"))) == []


async def test_list_runs_before_is_an_inclusive_upper_bound(store: Store, uid: UID) -> None:
    """``before`` (a page cursor's time) keeps runs created at or before it, newest
    first, ties in creation order; with or without a workflow and a status."""
    wf = uid("page")
    ids = []
    for at in (1_000.0, 1_001.0, 1_001.0, 1_002.0):
        run_id = new_run_id()
        await store.create_run(run_record(run_id, wf, created_at=at), ["a"])
        ids.append(run_id)
    await _finish(store, ids[2], R.COMPLETED)
    page = await store.list_runs(RunFilter(workflow=wf, before=1_001.0))
    assert [r.run_id for r in page] == [ids[1], ids[2], ids[0]]
    assert [r.run_id for r in await store.list_runs(
        RunFilter(workflow=wf, before=1_001.0, limit=1))] == [ids[1]]
    assert [r.run_id for r in await store.list_runs(
        RunFilter(workflow=wf, before=1_001.5, status=R.PENDING))] == [ids[1], ids[0]]
    everywhere = await store.list_runs(RunFilter(before=1_000.5, limit=1000))
    assert ids[0] in [r.run_id for r in everywhere]
    assert all(r.created_at <= 1_000.5 for r in everywhere)
    assert await store.list_runs(RunFilter(workflow=wf, before=999.0)) == []


async def test_request_cancel_sets_the_flag(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    other = await new_run(store, uid)
    assert (await store.get_run(run_id)).cancel_requested is False
    await store.request_cancel(run_id)
    assert (await store.get_run(run_id)).cancel_requested is True
    assert (await store.get_run(other)).cancel_requested is False
    # flagging is not a transition: the run's status is unchanged
    assert (await store.get_run(run_id)).status == R.PENDING


# ---------------------------------------------------------------- values


JSON_VALUE = {
    "nested": {"list": [1, [2, [3, {"deep": [None, True, False]}]]], "empty": {},
               "empty_list": []},
    "unicode": "héllo wörld — 日本語 — עברית — 🚀🎉 — \"quotes\" \\ back\nnew\ttab",
    "big": 2**63 + 7,
    "negative_big": -(2**62),
    "float": 0.1,
    "huge_float": 1.5e300,
    "tiny_float": 5e-324,
    "negative": -12.25,
    "zero": 0,
    "null": None,
    "bools": [True, False],
    "ключ": "value with unicode key",
}


def _same_json(a: object, b: object) -> bool:
    """Equal with the same JSON types (an int stays an int, a float a float)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


async def test_json_values_round_trip_exactly(store: Store, uid: UID) -> None:
    name = uid("wf")
    await store.save_workflow(name, {"name": "x", "steps": [], "value": JSON_VALUE},
                              "a" * 12, None)
    run_id = new_run_id()
    await store.create_run(run_record(run_id, name, input=JSON_VALUE), ["a", "b"])
    await store.write(WriteBatch(
        run_id=run_id,
        steps=[change("a", S.PENDING, S.QUEUED),
               change("a", S.QUEUED, S.RUNNING, attempts=1),
               change("a", S.RUNNING, S.COMPLETED, attempts=1, output=JSON_VALUE)],
        run=RunChange(source=R.PENDING, target=R.RUNNING, at=1.0),
        notes=[("a", {"payload": JSON_VALUE})]))
    await store.write(WriteBatch(run_id=run_id, run=RunChange(
        source=R.RUNNING, target=R.COMPLETED, at=2.0, output=[JSON_VALUE, "x", 3])))
    run = await store.get_run(run_id)
    assert _same_json(run.input, JSON_VALUE)
    assert _same_json(run.output, [JSON_VALUE, "x", 3])
    a = (await store.get_steps(run_id))[0]
    assert _same_json(a.output, JSON_VALUE)
    [note] = [e for e in await store.get_events(run_id) if e.kind == "note"]
    assert _same_json(note.data, {"payload": JSON_VALUE})
    assert _same_json((await store.get_workflow(name)).definition["value"], JSON_VALUE)


@pytest.mark.parametrize("scalar", [None, 0, -1, 2**70, 3.25, "", "text ✓", True, False,
                                    [], {}])
async def test_scalar_outputs_round_trip(store: Store, uid: UID, scalar: object) -> None:
    run_id = await new_run(store, uid, input=[scalar])
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.PENDING, S.QUEUED), change("a", S.QUEUED, S.RUNNING, attempts=1),
        change("a", S.RUNNING, S.COMPLETED, attempts=1, output=scalar)]))
    assert _same_json((await store.get_steps(run_id))[0].output, scalar)
    assert _same_json((await store.get_run(run_id)).input, [scalar])


async def _run_with_values(store: Store, uid: UID, run_input: object,
                           output: object) -> str:
    run_id = new_run_id()
    await store.create_run(run_record(run_id, uid("wf"), input=run_input), ["a", "b"])
    await store.write(WriteBatch(
        run_id=run_id,
        steps=[change("a", S.PENDING, S.QUEUED),
               change("a", S.QUEUED, S.RUNNING, attempts=1),
               change("a", S.RUNNING, S.COMPLETED, attempts=1, output=output)],
        attempts=[AttemptChange("a", 1, 1.0, False, "running")],
        notes=[("a", {"tags": ["x"]})]))
    return run_id


async def test_returned_records_are_copies(store: Store, uid: UID) -> None:
    run_id = await _run_with_values(store, uid, {"n": 1}, 5)
    run = await store.get_run(run_id)
    run.status = R.FAILED
    run.cancel_requested = True
    steps = await store.get_steps(run_id)
    steps[0].status = S.FAILED
    steps[0].attempts = 9
    steps.pop()
    attempts = await store.get_attempts(run_id)
    attempts[0].status = "completed"
    events = await store.get_events(run_id)
    events[0].seq = -1
    events.clear()
    listed = await store.list_runs(RunFilter(workflow=run.workflow))
    listed[0].status = R.CANCELLED

    run2 = await store.get_run(run_id)
    assert (run2.status, run2.cancel_requested) == (R.PENDING, False)
    steps2 = await store.get_steps(run_id)
    assert len(steps2) == 2
    assert (steps2[0].status, steps2[0].attempts) == (S.COMPLETED, 1)
    assert (await store.get_attempts(run_id))[0].status == "running"
    events2 = await store.get_events(run_id)
    assert events2 and all(e.seq > 0 for e in events2)


async def test_json_values_in_returned_records_are_copies(store: Store, uid: UID) -> None:
    run_id = await _run_with_values(store, uid, {"items": [1, 2], "meta": {"k": "v"}},
                                    {"list": [1], "d": {"x": 1}})
    run = await store.get_run(run_id)
    run.input["items"].append(100)
    run.input["meta"]["k"] = "changed"
    step = (await store.get_steps(run_id))[0]
    step.output["list"].append(3)
    step.output["d"]["x"] = 2
    [note] = [e for e in await store.get_events(run_id) if e.kind == "note"]
    note.data["tags"].append("y")
    listed = await store.list_runs(RunFilter(workflow=run.workflow))
    listed[0].input["meta"]["k"] = "changed too"

    assert (await store.get_run(run_id)).input == {"items": [1, 2], "meta": {"k": "v"}}
    assert (await store.get_steps(run_id))[0].output == {"list": [1], "d": {"x": 1}}
    [note2] = [e for e in await store.get_events(run_id) if e.kind == "note"]
    assert note2.data == {"tags": ["x"]}


async def test_values_given_to_the_store_are_copied(store: Store, uid: UID) -> None:
    run_input = {"items": [1, 2]}
    output = {"list": [1]}
    run_id = await _run_with_values(store, uid, run_input, output)
    run_input["items"].append(99)  # the callers' values change after they were stored
    output["list"].append(2)
    assert (await store.get_run(run_id)).input == {"items": [1, 2]}
    assert (await store.get_steps(run_id))[0].output == {"list": [1]}


class _Color(enum.StrEnum):
    RED = "red"


def _nested(depth: int) -> object:
    value: object = {"leaf": [1.5, None]}
    for level in range(depth):
        value = {"level": level, "inner": [value]} if level % 2 else [value, "x"]
    return value


_SHARED = {"k": [1]}


@pytest.mark.parametrize("output", [
    {"pair": (1, "two"), "tags": ("a",)},  # tuples come back as lists
    {"color": _Color.RED, "flag": True},  # a str subclass comes back as str
    {"zero": -0.0, "big": 1e308, "tiny": 5e-324, "int": 10**4000, "neg": -(2**100)},
    {"text": "é ✓ \u0000", "": "empty key", "list": [[], {}, [[[]]]]},
    {"same": _SHARED, "again": _SHARED},  # one object twice: two separate copies
    _nested(180),  # 270 levels: deeper than the memory store walks plain values
])
async def test_outputs_read_back_as_their_json_text_gives_them(
        store: Store, uid: UID, output: object) -> None:
    expected = json.loads(json.dumps(output))
    run_id = await _run_with_values(store, uid, {"n": 1}, output)

    first = (await store.get_steps(run_id))[0].output
    assert _same_json(first, expected)
    assert json.dumps(first) == json.dumps(expected)
    if isinstance(first, dict) and "again" in first:
        first["same"]["k"].append(2)  # a reader changing one copy changes nothing else
        assert first["again"] == {"k": [1]}
    _SHARED["k"][:] = [1]
    assert _same_json((await store.get_steps(run_id))[0].output, expected)


async def test_an_output_changed_deep_inside_after_the_write_stays_as_written(
        store: Store, uid: UID) -> None:
    output = {"rows": [{"id": 1, "tags": ["a"]}], "meta": {"nested": {"n": 1}}}
    run_id = await _run_with_values(store, uid, {"n": 1}, output)
    output["rows"][0]["tags"].append("b")  # type: ignore[index]
    output["meta"]["nested"]["n"] = 2  # type: ignore[index]
    read = (await store.get_steps(run_id))[0].output
    read["rows"].append("reader's")  # type: ignore[index, union-attr]
    assert (await store.get_steps(run_id))[0].output == {
        "rows": [{"id": 1, "tags": ["a"]}], "meta": {"nested": {"n": 1}}}


# ---------------------------------------------------------------- ownership (leases)


async def test_claim_an_unowned_run(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    claimed = await store.claim_run(run_id, "host:1", now=100.0, lease=30.0)
    assert claimed is not None
    assert claimed.run_id == run_id
    assert claimed.owner == "host:1"
    assert claimed.heartbeat_at == 100.0
    again = await store.claim_run(run_id, "host:1", now=101.0, lease=30.0)
    assert again is not None and again.owner == "host:1"  # the owner may claim again
    stored = await store.get_run(run_id)
    assert (stored.owner, stored.heartbeat_at) == ("host:1", 101.0)


async def test_a_live_owner_keeps_the_run(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.claim_run(run_id, "host:1", now=100.0, lease=30.0)
    assert await store.claim_run(run_id, "host:2", now=110.0, lease=30.0) is None
    assert (await store.get_run(run_id)).owner == "host:1"


async def test_a_stale_owner_loses_the_run(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.claim_run(run_id, "host:1", now=100.0, lease=30.0)
    taken = await store.claim_run(run_id, "host:2", now=140.0, lease=30.0)
    assert taken is not None and taken.owner == "host:2"
    # the fenced owner learns it lost the run at its next heartbeat
    assert (await store.heartbeat(run_id, "host:1", now=141.0)).held is False
    assert (await store.heartbeat(run_id, "host:2", now=141.0)).held is True


async def test_a_batch_of_a_driver_that_lost_the_run_is_refused_whole(
        store: Store, uid: UID) -> None:
    """``WriteBatch.owner``: a batch written by a driver whose run was taken over (or
    released) is refused and stores nothing, even when its step changes would apply;
    the new driver's batches, and batches that name no owner, go through."""
    run_id = await new_run(store, uid)
    await store.claim_run(run_id, "host:1", now=100.0, lease=30.0)
    await store.write(WriteBatch(run_id=run_id, owner="host:1", steps=[
        change("a", S.PENDING, S.QUEUED), change("a", S.QUEUED, S.RUNNING, attempts=1)]))
    await store.claim_run(run_id, "host:2", now=140.0, lease=30.0)  # host:1 paused
    before = await _state_of(store, run_id)
    with pytest.raises(StaleWriteError, match=r"driven by host:2, not by host:1"):
        await store.write(WriteBatch(
            run_id=run_id, owner="host:1",
            steps=[change("a", S.RUNNING, S.COMPLETED, attempts=1, output=1)],
            notes=[("a", {"late": True})],
            run=RunChange(source=R.PENDING, target=R.RUNNING, at=141.0)))
    assert await _state_of(store, run_id) == before
    await store.write(WriteBatch(run_id=run_id, owner="host:2", steps=[
        change("a", S.RUNNING, S.COMPLETED, attempts=1, output=2)]))
    await store.write(WriteBatch(run_id=run_id, notes=[(None, {"ownerless": True})]))
    assert (await store.get_steps(run_id))[0].output == 2
    await store.release_run(run_id, "host:2")
    with pytest.raises(StaleWriteError, match="driven by nobody"):
        await store.write(WriteBatch(run_id=run_id, owner="host:2",
                                     notes=[(None, {"after release": True})]))
    assert [e.data for e in await store.get_events(run_id)
            if e.data and ("late" in e.data or "after release" in e.data)] == []


async def test_heartbeat_extends_the_lease(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.claim_run(run_id, "host:1", now=100.0, lease=30.0)
    assert (await store.heartbeat(run_id, "host:1", now=125.0)).held is True
    assert (await store.get_run(run_id)).heartbeat_at == 125.0
    assert await store.claim_run(run_id, "host:2", now=140.0, lease=30.0) is None
    assert await store.claim_run(run_id, "host:2", now=160.0, lease=30.0) is not None


async def test_heartbeat_of_a_non_owner_is_refused(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    assert (await store.heartbeat(run_id, "host:1", now=1.0)).held is False  # nobody owns it
    await store.claim_run(run_id, "host:1", now=1.0, lease=30.0)
    assert (await store.heartbeat(run_id, "host:2", now=2.0)).held is False
    assert (await store.get_run(run_id)).heartbeat_at == 1.0


async def test_release_frees_the_run_only_for_its_owner(store: Store, uid: UID) -> None:
    run_id = await new_run(store, uid)
    await store.claim_run(run_id, "host:1", now=100.0, lease=30.0)
    await store.release_run(run_id, "host:2")  # not the owner: no effect
    assert (await store.get_run(run_id)).owner == "host:1"
    await store.release_run(run_id, "host:1")
    assert (await store.get_run(run_id)).owner is None
    taken = await store.claim_run(run_id, "host:2", now=101.0, lease=30.0)
    assert taken is not None and taken.owner == "host:2"


async def test_a_dead_owner_is_taken_over_once(store: Store, uid: UID) -> None:
    """``dead_owner``: the caller knows that owner exited; the run is taken at once
    (its lease has not run out), by one caller only, with the caller's own time."""
    run_id = await new_run(store, uid)
    await store.claim_run(run_id, "host:dead", now=100.0, lease=30.0)
    first = await store.claim_run(run_id, "host:1", now=101.0, lease=30.0,
                                  dead_owner="host:dead")
    second = await store.claim_run(run_id, "host:2", now=102.0, lease=30.0,
                                   dead_owner="host:dead")
    assert first is not None and (first.owner, first.heartbeat_at) == ("host:1", 101.0)
    assert second is None
    stored = await store.get_run(run_id)
    assert (stored.owner, stored.heartbeat_at) == ("host:1", 101.0)


async def test_claiming_a_missing_run_raises_run_not_found(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.claim_run(new_run_id(), "host:1", now=1.0, lease=30.0)
    with pytest.raises(RunNotFound):
        await store.heartbeat(new_run_id(), "host:1", now=1.0)


async def test_concurrent_claims_have_one_winner(store: Store, uid: UID) -> None:
    import asyncio

    run_id = await new_run(store, uid)
    results = await asyncio.gather(*(store.claim_run(run_id, f"host:{n}", now=1.0,
                                                     lease=30.0) for n in range(5)))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert (await store.get_run(run_id)).owner == winners[0].owner


async def test_concurrent_writers_of_one_change_have_one_winner(store: Store,
                                                                uid: UID) -> None:
    import asyncio

    run_id = await new_run(store, uid)
    outcomes = await asyncio.gather(
        *(store.write(WriteBatch(run_id=run_id, steps=[
            change("a", S.PENDING, S.QUEUED, worker=f"w{n}")])) for n in range(4)),
        return_exceptions=True)
    assert sum(o is None for o in outcomes) == 1
    assert all(isinstance(o, StaleWriteError) for o in outcomes if o is not None)
    assert [e.step_id for e in await store.get_events(run_id) if e.kind == "step"] == ["a"]


# ---------------------------------------------------------------- approval decisions


def decision(verdict: str, by: str) -> dict[str, object]:
    return {"decision": verdict, "by": by, "at": 5.0, "data": {"who": by}}


async def waiting_run(store: Store, uid: UID) -> str:
    """A run whose step ``a`` waits for a decision (``b`` and ``c`` are pending)."""
    run_id = await new_run(store, uid)
    await store.write(WriteBatch(run_id=run_id, steps=[
        change("a", S.PENDING, S.QUEUED), change("a", S.QUEUED, S.RUNNING, attempts=1),
        change("a", S.RUNNING, S.WAITING, attempts=1)]))
    return run_id


async def stored_decisions(store: Store, run_id: str) -> list[object]:
    return [e.data["approval"] for e in await store.get_events(run_id)
            if e.kind == "note" and "approval" in e.data]


async def test_the_first_decision_stands(store: Store, uid: UID) -> None:
    run_id = await waiting_run(store, uid)
    await store.record_decision(run_id, "a", decision("approved", "ada"))
    with pytest.raises(DecisionTaken) as refused:
        await store.record_decision(run_id, "a", decision("rejected", "bob"))
    assert refused.value.decision == decision("approved", "ada")
    assert (refused.value.run_id, refused.value.step_id) == (run_id, "a")
    assert "already approved by ada" in str(refused.value)
    notes = [e for e in await store.get_events(run_id) if e.kind == "note"]
    assert [(e.step_id, e.data) for e in notes] == [
        ("a", {"approval": decision("approved", "ada")})]


async def test_a_decision_needs_a_waiting_step(store: Store, uid: UID) -> None:
    run_id = await waiting_run(store, uid)
    with pytest.raises(StaleWriteError, match="'b' .* is pending"):
        await store.record_decision(run_id, "b", decision("approved", "ada"))
    with pytest.raises(StoreError, match="no step 'zz'"):
        await store.record_decision(run_id, "zz", decision("approved", "ada"))
    with pytest.raises(RunNotFound):
        await store.record_decision(new_run_id(), "a", decision("approved", "ada"))
    assert await stored_decisions(store, run_id) == []
    # a decision taken stands even after the step moved on
    await store.record_decision(run_id, "a", decision("rejected", "bob"))
    await store.write(WriteBatch(run_id=run_id, steps=[change("a", S.WAITING, S.FAILED)]))
    with pytest.raises(DecisionTaken) as refused:
        await store.record_decision(run_id, "a", decision("approved", "ada"))
    assert refused.value.decision["decision"] == "rejected"


async def test_concurrent_decisions_have_one_winner(store: Store, uid: UID) -> None:
    """From one handle and from others on the same database (other connections, as
    other processes would have), at once: exactly one decision is stored."""
    import asyncio

    from plait.store import open_store

    run_id = await waiting_run(store, uid)
    # anonymous memory:// is private to its object: that object is its only handle
    others = [] if store.url == "memory://" else [open_store(store.url) for _ in range(3)]
    for other in others:
        await other.open()
    try:
        handles = [store, *others]
        verdicts = [("approved", "rejected")[n % 2] for n in range(8)]
        outcomes = await asyncio.gather(
            *(handles[n % len(handles)].record_decision(run_id, "a",
                                                        decision(v, f"p{n}"))
              for n, v in enumerate(verdicts)), return_exceptions=True)
    finally:
        for other in others:
            await other.close()
    winners = [n for n, o in enumerate(outcomes) if o is None]
    assert len(winners) == 1
    standing = decision(verdicts[winners[0]], f"p{winners[0]}")
    assert all(isinstance(o, DecisionTaken) and o.decision == standing
               for o in outcomes if o is not None)
    assert await stored_decisions(store, run_id) == [standing]


# ---------------------------------------------------------------- many writers at once


def _start_run_batch(run_id: str) -> WriteBatch:
    """A run starts: it is running, ``a`` is queued then running with an attempt."""
    return WriteBatch(run_id=run_id,
                      steps=[change("a", S.PENDING, S.QUEUED),
                             change("a", S.QUEUED, S.RUNNING, attempts=1)],
                      attempts=[AttemptChange("a", 1, 2.0, False, "running")],
                      run=RunChange(source=R.PENDING, target=R.RUNNING, at=2.0),
                      notes=[("a", {"started": run_id})])


async def test_many_runs_writing_at_once_all_commit(store: Store, uid: UID) -> None:
    """Many runs create, claim, write and release at the same time (as concurrent
    ``run_async`` calls on one shared store do): every change is stored, each run's
    history numbered from 1 without gaps."""
    import asyncio

    run_ids = [new_run_id() for _ in range(60)]
    workflow = uid("wf")
    await asyncio.gather(*(store.create_run(run_record(r, workflow), ["a", "b"])
                           for r in run_ids))
    claimed = await asyncio.gather(*(store.claim_run(r, f"owner-{r}", 1.0, 30.0)
                                     for r in run_ids))
    assert [c.run_id if c else None for c in claimed] == run_ids
    await asyncio.gather(*(store.write(_start_run_batch(r)) for r in run_ids))
    await asyncio.gather(*(store.write(WriteBatch(run_id=r, steps=[
        change("a", S.RUNNING, S.COMPLETED, attempts=1, output={"n": n})],
        attempts=[AttemptChange("a", 1, 3.0, False, "completed")]))
        for n, r in enumerate(run_ids)))
    await asyncio.gather(*(store.release_run(r, f"owner-{r}") for r in run_ids))
    for n, run_id in enumerate(run_ids):
        run = await store.get_run(run_id)
        assert (run.status, run.owner) == (R.RUNNING, None)
        steps = {s.step_id: (str(s.status), s.output) for s in await store.get_steps(run_id)}
        assert steps == {"a": ("completed", {"n": n}), "b": ("pending", None)}
        assert [(a.attempt, a.status) for a in await store.get_attempts(run_id)] == \
            [(1, "completed")]
        events = await store.get_events(run_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.data for e in events if e.kind == "note"] == [{"started": run_id}]


@pytest.mark.parametrize("poison", ["stale", "illegal", "unknown_run"])
async def test_a_refused_write_among_concurrent_ones_fails_alone(
        store: Store, uid: UID, poison: str) -> None:
    """Writes of many runs arrive together (a store may commit them as one group): the
    one that is refused raises for its caller only and stores nothing; every other is
    committed."""
    import asyncio

    run_ids = [await new_run(store, uid) for _ in range(12)]
    victim = run_ids[5]
    await store.write(WriteBatch(run_id=victim, steps=[change("b", S.PENDING, S.QUEUED)]))
    before = await _state_of(store, victim)
    bad = _start_run_batch(victim)
    if poison == "stale":
        bad.steps.append(change("b", S.PENDING, S.SKIPPED))  # b is queued already
    elif poison == "illegal":
        bad.steps.append(change("c", S.PENDING, S.COMPLETED))
    else:
        bad.run_id = new_run_id()
    batches = [bad if r == victim else _start_run_batch(r) for r in run_ids]
    outcomes = await asyncio.gather(*(store.write(b) for b in batches),
                                    return_exceptions=True)
    expected = {"stale": StaleWriteError, "illegal": (TransitionError, StaleWriteError),
                "unknown_run": RunNotFound}[poison]
    assert isinstance(outcomes[5], expected), outcomes[5]
    assert [o for n, o in enumerate(outcomes) if n != 5] == [None] * 11
    assert await _state_of(store, victim) == before
    for run_id in run_ids:
        if run_id != victim:
            assert (await store.get_run(run_id)).status == R.RUNNING
            assert (await statuses(store, run_id))["a"] == "running"
