"""What follows an attempt, decided by the core alone: retry, fallback, fail, park for
approval (no runtime, no store)."""

from __future__ import annotations

from typing import Any

from plait.core.effects import CancelRunning, Park, RetryStep, RunFallback
from plait.core.events import AttemptEnded
from plait.core.retry import ErrorInfo
from plait.core.runstate import RunState
from plait.core.states import StepStatus

from .helpers import load, t, wf

S = StepStatus
FLAKY = ErrorInfo(type="ValueError", message="flaky", names=("ValueError",))
FATAL = ErrorInfo(type="FatalError", message="no", names=("FatalError",), retryable=False)
ASKS = ErrorInfo(type="ApprovalRequested", message="", names=("ApprovalRequested",))


def running(*steps: dict[str, Any], **top: Any) -> RunState:
    """A run whose first step's first attempt is running."""
    state = RunState(load(wf(*steps, **top)), run_id="r", input={})
    state.start(0.0)
    i = state.pop_ready()
    assert i == 0
    state.begin(0, 1.0)
    return state


def ended(state: RunState, kind: Any = "error", error: ErrorInfo | None = FLAKY,
          **fields: Any) -> Any:
    return state.apply(AttemptEnded(i=0, kind=kind, at=2.0, error=error, **fields))


def attempts(state: RunState) -> list[tuple[str, str | None]]:
    return [(c.status, c.error) for c in state.drain()[1] if c.ended]


def test_a_retryable_failure_queues_the_step_again_after_the_delay() -> None:
    state = running(t("a", retry={"max_retries": 1, "initial_delay": 3, "jitter": 0.5}))
    assert ended(state, rand=0.5) == [RetryStep(i=0, due=2.0 + 3 + 0.75)]
    assert state.rows[0].status is S.QUEUED and state.rows[0].next_attempt_at == 5.75
    assert state.rows[0].error == "ValueError: flaky"
    assert attempts(state) == [("failed", "ValueError: flaky")]


def test_spent_retries_fail_the_step() -> None:
    state = running(t("a", retry={"max_retries": 0}))
    assert ended(state) == ()
    assert state.rows[0].status is S.FAILED and state.rows[0].error == "ValueError: flaky"


def test_an_error_that_is_not_retryable_fails_at_once() -> None:
    state = running(t("a", retry={"max_retries": 5}))
    assert ended(state, error=FATAL) == ()
    assert state.rows[0].status is S.FAILED


def test_spent_retries_run_the_fallback_and_the_step_stays_running() -> None:
    state = running(t("a", fallback={"output": "plan b"}))
    assert ended(state, error=FATAL) == [RunFallback(i=0)]
    assert state.rows[0].status is S.RUNNING
    assert attempts(state) == [("failed", "FatalError: no")]
    assert state.attempt_ok(0, "plan b", 3.0, 0.0, fallback=True) == ()
    row = state.rows[0]
    assert (row.status, row.output, row.fallback_used) == (S.COMPLETED, "plan b", True)
    assert row.error == "FatalError: no"  # the error that made the fallback necessary


def test_a_failed_fallback_fails_the_step_with_both_errors() -> None:
    state = running(t("a", fallback={"output": "plan b"}))
    ended(state, error=FATAL)
    assert ended(state, error=FLAKY, fallback=True) == ()
    assert state.rows[0].status is S.FAILED
    assert state.rows[0].error == "FatalError: no; fallback failed: ValueError: flaky"


def test_a_halting_run_neither_retries_nor_runs_fallbacks() -> None:
    state = running(t("a", retry={"max_retries": 3}, fallback={"output": 1}))
    state.halt("cancelled on request", cancelled=True)
    assert ended(state) == ()
    assert state.rows[0].status is S.FAILED


def test_a_failure_under_fail_fast_cancels_what_runs_once() -> None:
    state = running(t("a"), t("b"), on_failure="fail_fast")
    state.begin(state.pop_ready() or 0, 1.0)
    cancel = CancelRunning(reason="step 'a' failed (on_failure: fail_fast)")
    assert ended(state, error=FATAL) == [cancel]
    assert state.apply(AttemptEnded(i=1, kind="error", at=2.0, error=FATAL)) == ()
    assert state.halting


def test_a_refused_output_fails_the_attempt() -> None:
    state = running(t("a", outputs=["k", "j"], fallback={"output": {"k": 1, "j": 2}}))
    assert state.attempt_ok(0, {"other": 1}, 2.0, 0.0) == [RunFallback(i=0)]
    assert state.rows[0].error is not None and "OutputError" in state.rows[0].error
    assert state.state == {}


def test_a_python_step_that_asks_for_approval_is_parked_not_failed() -> None:
    state = running(t("a", retry={"max_retries": 3}))
    assert ended(state, error=ASKS) == [Park(i=0, reason="code_approval")]
    assert state.rows[0].status is S.WAITING and 0 not in state.running
    assert attempts(state) == [("waiting", None)]


def test_asking_again_after_the_approval_was_given_fails_the_step() -> None:
    state = running(t("a"))
    state.given_approval.add(0)
    assert ended(state, error=ASKS) == ()
    assert state.rows[0].status is S.FAILED
    assert "asked for approval again" in (state.rows[0].error or "")
