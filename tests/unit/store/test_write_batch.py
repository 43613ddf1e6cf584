"""``WriteBatch``: a batch is empty only when it changes nothing, claims lists
included (stores skip empty batches), and ``claims`` tells a local run's batches apart."""

from __future__ import annotations

import pytest

from plait.core.runstate import AttemptChange, StepChange, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.store.base import RunChange, Ticket, WriteBatch


def test_an_empty_batch_is_false() -> None:
    batch = WriteBatch("r")
    assert not batch
    assert not batch.claims


@pytest.mark.parametrize("field", ["dispatch", "consumed", "withdrawn"])
def test_a_batch_with_only_a_claims_list_is_true(field: str) -> None:
    value = {"dispatch": [Ticket(run_id="r", step_id="a", attempt=1)],
             "consumed": [("a", 1, False)], "withdrawn": [("a", 1, False)]}[field]
    batch = WriteBatch("r", **{field: value})  # type: ignore[arg-type]
    assert batch
    assert batch.claims


def test_a_local_runs_batch_has_no_claims() -> None:
    batch = WriteBatch("r", [StepChange("a", StepStatus.PENDING, StepStatus.QUEUED, 1.0,
                                        StepRuntime(StepStatus.QUEUED))],
                       [AttemptChange("a", 1, 1.0, False, "running")],
                       RunChange(source=RunStatus.PENDING, target=RunStatus.RUNNING,
                                 at=1.0), [(None, {"n": 1})])
    assert batch
    assert not batch.claims
    assert (batch.dispatch, batch.consumed, batch.withdrawn) == ((), (), ())
