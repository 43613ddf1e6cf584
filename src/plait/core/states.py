"""Step and run states, and the one transition table checked on every write."""

from __future__ import annotations

from enum import StrEnum

from ..errors import TransitionError


class StepStatus(StrEnum):
    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"
    CANCELLED = "cancelled"


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


S = StepStatus
R = RunStatus

# queued -> queued: a retry re-queued before it started (e.g. pool re-ordering) is not
# allowed; running -> queued is a retry (or an interrupted attempt found on resume);
# running -> waiting is a step parked on a person or a timer.
STEP_TRANSITIONS: dict[StepStatus, frozenset[StepStatus]] = {
    S.PENDING: frozenset({S.QUEUED, S.SKIPPED, S.UPSTREAM_FAILED, S.CANCELLED}),
    S.QUEUED: frozenset({S.RUNNING, S.SKIPPED, S.FAILED, S.CANCELLED}),
    S.RUNNING: frozenset({S.COMPLETED, S.FAILED, S.QUEUED, S.WAITING, S.CANCELLED}),
    S.WAITING: frozenset({S.RUNNING, S.QUEUED, S.COMPLETED, S.FAILED, S.CANCELLED}),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset(),
    S.SKIPPED: frozenset(),
    S.UPSTREAM_FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}

RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    R.PENDING: frozenset({R.RUNNING, R.CANCELLED, R.FAILED}),
    R.RUNNING: frozenset({R.WAITING, R.COMPLETED, R.FAILED, R.CANCELLED}),
    R.WAITING: frozenset({R.RUNNING, R.COMPLETED, R.FAILED, R.CANCELLED}),
    R.COMPLETED: frozenset(),
    R.FAILED: frozenset(),
    R.CANCELLED: frozenset(),
}

FINAL_STEP_STATES = frozenset({S.COMPLETED, S.FAILED, S.SKIPPED, S.UPSTREAM_FAILED,
                               S.CANCELLED})
FINAL_RUN_STATES = frozenset({R.COMPLETED, R.FAILED, R.CANCELLED})


def check_step_transition(step: str, source: StepStatus, target: StepStatus) -> None:
    """Raise TransitionError unless the table allows ``source -> target``."""
    if target not in STEP_TRANSITIONS[source]:
        raise TransitionError(f"step {step!r}", source, target)


def check_run_transition(run: str, source: RunStatus, target: RunStatus) -> None:
    """Raise TransitionError unless the table allows ``source -> target`` (a final run
    is never rewritten, not even to the same status)."""
    if target not in RUN_TRANSITIONS[source]:
        raise TransitionError(f"run {run!r}", source, target)
