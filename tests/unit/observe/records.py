"""Builders of store records (runs, steps, attempts) at exact times, for the observe tests."""

from __future__ import annotations

from plait.core.states import RunStatus, StepStatus
from plait.observe.metrics import RunHistory
from plait.store.base import AttemptRecord, RunRecord, StepRecord

T0 = 1_700_000_000.0


def run(run_id: str = "r1", *, workflow: str = "wf", status: str = "completed",
        start: float | None = 0.0, end: float | None = 10.0, created: float = 0.0,
        sla: float | None = None, error: str | None = None) -> RunRecord:
    """A run whose times are offsets (seconds) from T0."""
    return RunRecord(run_id=run_id, workflow=workflow, version=1, fingerprint="f" * 12,
                     status=RunStatus(status), input={}, created_at=T0 + created,
                     started_at=None if start is None else T0 + start,
                     finished_at=None if end is None else T0 + end, sla=sla, error=error)


def step(step_id: str, status: str = "completed", *, start: float | None = 0.0,
         end: float | None = 1.0, attempts: int = 1, fallback_used: bool = False,
         error: str | None = None, skip_reason: str | None = None,
         run_id: str = "r1") -> StepRecord:
    return StepRecord(run_id=run_id, step_id=step_id, status=StepStatus(status),
                      attempts=attempts, error=error, skip_reason=skip_reason,
                      started_at=None if start is None else T0 + start,
                      finished_at=None if end is None else T0 + end,
                      fallback_used=fallback_used)


def attempt(step_id: str, n: int, status: str, start: float, end: float | None, *,
            fallback: bool = False, error: str | None = None,
            run_id: str = "r1") -> AttemptRecord:
    return AttemptRecord(run_id=run_id, step_id=step_id, attempt=n, fallback=fallback,
                         status=status, started_at=T0 + start,
                         finished_at=None if end is None else T0 + end, error=error,
                         worker="test:1")


def history(r: RunRecord, steps: list[StepRecord] | None = None,
            attempts: list[AttemptRecord] | None = None) -> RunHistory:
    return RunHistory(run=r, steps=steps or [], attempts=attempts or [])


def nap(seconds: float) -> float:
    """A python step of the metrics tests that works for ``seconds``."""
    import time

    time.sleep(seconds)
    return seconds
