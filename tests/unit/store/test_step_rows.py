"""One step row type: the store's ``StepRecord`` is the core's ``StepRuntime`` with the
run and step it belongs to, and a row is copied by keyword, every field of it."""

from __future__ import annotations

import dataclasses

import pytest

from plait.core.rows import StepRuntime
from plait.core.states import StepStatus
from plait.runtime.results import StepResult
from plait.store.base import StepRecord


def full_row() -> StepRuntime:
    """A row whose every field differs from its default (so a field a copy forgets shows)."""
    return StepRuntime(status=StepStatus.FAILED, attempts=3, output={"n": [1, 2]},
                       error="boom", started_at=1.5, finished_at=2.5, skip_reason="why",
                       fallback_used=True, next_attempt_at=9.0, worker="w1")


def values(row: StepRuntime) -> dict[str, object]:
    return {f.name: getattr(row, f.name) for f in dataclasses.fields(StepRuntime)}


def test_every_field_differs_from_its_default():
    defaults = values(StepRuntime())
    assert all(v != defaults[k] for k, v in values(full_row()).items())


def test_copy_is_a_new_row_with_every_field():
    row = full_row()
    copy = row.copy()
    assert type(copy) is StepRuntime and copy is not row
    assert values(copy) == values(row)
    row.attempts, row.status = 4, StepStatus.RUNNING
    assert (copy.attempts, copy.status) == (3, StepStatus.FAILED)


def test_a_record_is_the_row_with_its_run_and_step():
    row = full_row()
    rec = StepRecord.of("r1", "s1", row)
    assert isinstance(rec, StepRuntime)
    assert (rec.run_id, rec.step_id) == ("r1", "s1")
    assert values(rec) == values(row)
    row.worker = "w2"
    assert rec.worker == "w1"
    assert type(rec.copy()) is StepRuntime and values(rec.copy()) == values(row) | {
        "worker": "w1"}


def test_a_record_needs_its_run_and_step():
    with pytest.raises(TypeError, match="run_id"):
        StepRecord(step_id="s1")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="step_id"):
        StepRecord(run_id="r1")  # type: ignore[call-arg]


def test_copy_as_refuses_a_field_the_class_does_not_have():
    with pytest.raises(TypeError, match="colour"):
        full_row().copy_as(StepRuntime, colour="red")


def test_a_step_result_reads_a_record_or_a_row_alike():
    row = full_row()
    from_row = StepResult.from_record(row, cached=True)
    assert from_row == StepResult.from_record(StepRecord.of("r1", "s1", row), cached=True)
    assert from_row.status == "failed" and from_row.cached
    assert from_row.to_json()["fallback_used"] is True

