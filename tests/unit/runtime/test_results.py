"""``RunResult.steps``: a read-only mapping of step id -> StepResult, each built on
first read (a finished run builds nothing it is not asked for) and the same object on
every read; it compares equal to the dict of the same results."""

from __future__ import annotations

import pytest

from plait import StepResult, Workflow
from plait.core.states import StepStatus
from plait.runtime.results import RunResult, StepResults
from plait.store.base import RunRecord, StepRecord


def three_steps() -> Workflow:
    wf = Workflow("three")

    @wf.step()
    async def zeta() -> dict[str, int]:
        return {"z": 1}

    @wf.step()
    async def alpha(zeta: dict[str, int]) -> dict[str, int]:
        return {"a": zeta["z"] + 1}

    @wf.step(depends_on=["zeta"], when="{{ false }}")
    async def skipped() -> None:
        return None

    return wf


def test_steps_read_like_a_dict_in_definition_order() -> None:
    result = three_steps().run(None)

    steps = result.steps
    assert list(steps) == ["zeta", "alpha", "skipped"]
    assert len(steps) == 3
    assert "alpha" in steps and "nope" not in steps
    assert steps["alpha"] is steps["alpha"]  # built once, then kept
    assert steps["alpha"].output == {"a": 2}
    assert steps["skipped"].status == "skipped"
    assert steps.get("nope") is None
    with pytest.raises(KeyError):
        steps["nope"]
    assert dict(steps) == {sid: steps[sid] for sid in ["zeta", "alpha", "skipped"]}
    assert steps == {sid: StepResult(s.status, s.attempts, s.output, s.error, s.started_at,
                                     s.finished_at, s.skip_reason, s.fallback_used)
                     for sid, s in dict(steps).items()}
    assert result.to_json()["steps"]["alpha"]["output"] == {"a": 2}  # type: ignore[index]
    assert "alpha" in repr(steps)


def test_a_result_from_stored_records_equals_the_same_run_built_lazily() -> None:
    run = RunRecord(run_id="r", workflow="wf", version=1, fingerprint="f" * 12,
                    status="completed", input=None, created_at=1.0)  # type: ignore[arg-type]
    records = [StepRecord(run_id="r", step_id=sid, status=StepStatus.COMPLETED, attempts=1,
                          output={"n": n}, started_at=1.0, finished_at=2.0)
               for n, sid in enumerate(["b", "a"])]

    result = RunResult.from_records(run, records)

    assert isinstance(result.steps, StepResults)
    assert list(result.steps) == ["b", "a"]
    assert result.steps["a"].output == {"n": 1}
    assert result == RunResult.from_records(run, list(records))
    eager = RunResult.from_records(run, records)
    eager.steps = {sid: eager.steps[sid] for sid in eager.steps}
    assert result == eager
