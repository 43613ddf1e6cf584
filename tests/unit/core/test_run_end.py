"""Halting (cancel, run timeout, fail-fast), timers, a child run's end and the run's
end, decided by the core alone."""

from __future__ import annotations

from typing import Any

from plait.core.effects import CancelRunning
from plait.core.events import AttemptEnded, CancelRequested, ChildEnded, TimerFired
from plait.core.policy import child_failure
from plait.core.retry import ErrorInfo
from plait.core.runstate import RunState
from plait.core.states import RunStatus, StepStatus

from .helpers import load, t, wf

S, R = StepStatus, RunStatus
FATAL = ErrorInfo(type="FatalError", message="no", names=("FatalError",), retryable=False)


def started(*steps: dict[str, Any], **top: Any) -> RunState:
    """A run whose first step runs."""
    state = RunState(load(wf(*steps, **top)), run_id="r", input={})
    state.start(0.0)
    assert state.pop_ready() == 0
    state.begin(0, 1.0)
    return state


def test_a_cancel_request_halts_once_and_cancels_what_runs() -> None:
    state = started(t("a"), t("b", "a"))
    assert state.apply(CancelRequested(reason="stop", at=2.0)) \
        == [CancelRunning(reason="stop")]
    assert state.apply(CancelRequested(reason="again", at=2.5)) == ()
    assert state.halting and state.pop_ready() is None
    state.apply(AttemptEnded(i=0, kind="cancelled", at=3.0))
    assert state.rows[0].status is S.CANCELLED and state.rows[0].skip_reason == "stop"
    state.cancel_unstarted(3.0, state.stop_reason())
    assert state.done
    assert state.finish().status is R.CANCELLED and state.finish().error == "stop"


def test_the_run_timeout_halts_and_fails_the_run() -> None:
    state = started(t("a"), timeout=5)
    assert state.apply(TimerFired(kind="run_timeout", i=-1, at=6.0)) \
        == [CancelRunning(reason="run timed out after 5s")]
    state.apply(AttemptEnded(i=0, kind="cancelled", at=6.5))
    assert state.done
    end = state.finish()
    assert (end.status, end.error) == (R.FAILED, "run timed out after 5s")


def test_an_interrupted_run_cancels_every_step_at_once() -> None:
    state = started(t("a"), t("b"), t("c", "a"))
    state.begin(state.pop_ready() or 0, 1.0)
    assert state.apply(CancelRequested(reason="ctrl-c", at=2.0, interrupted=True)) == ()
    assert [r.status for r in state.rows] == [S.CANCELLED] * 3
    assert state.done and state.finish().error == "ctrl-c"


def test_a_retry_timer_readies_a_step_only_while_it_is_queued() -> None:
    state = started(t("a", retry={"max_retries": 1}))
    state.apply(AttemptEnded(i=0, kind="error", at=2.0,
                             error=ErrorInfo(type="E", message="x")))
    assert state.pop_ready() is None  # due later
    assert state.apply(TimerFired(kind="retry", i=0, at=3.0)) == ()
    assert state.pop_ready() == 0
    state.begin(0, 3.0)
    state.apply(TimerFired(kind="retry", i=0, at=4.0))  # late: it runs already
    assert state.pop_ready() is None


def test_a_failed_step_fails_the_run_naming_it_unless_it_may_fail() -> None:
    state = started(t("a"), t("b", allow_failure=True))
    state.apply(AttemptEnded(i=0, kind="error", at=2.0, error=FATAL))
    b = state.pop_ready()
    assert b == 1
    state.begin(b, 2.0)
    state.apply(AttemptEnded(i=b, kind="error", at=3.0, error=FATAL))
    end = state.finish()
    assert (end.status, end.error) == (R.FAILED, "failed steps: a")


def test_a_completed_run_fails_when_refused_or_its_output_does_not_render() -> None:
    state = started(t("a"))
    state.attempt_ok(0, 1, 2.0, 0.0)
    assert state.finish().status is R.COMPLETED and state.finish().error is None
    assert state.finish(refused="untrusted").error == "untrusted"
    end = state.finish(output_error="boom")
    assert (end.status, end.error) == (R.FAILED, "run output: boom")


def test_fail_fast_names_the_step_the_run_failed_for() -> None:
    state = started(t("a"), t("b"), on_failure="fail_fast")
    state.apply(AttemptEnded(i=0, kind="error", at=2.0, error=FATAL))
    assert state.stop_reason() == "step 'a' failed (on_failure: fail_fast)"
    state.cancel_unstarted(2.0, state.stop_reason())
    assert state.finish().error == "step 'a' failed (on_failure: fail_fast)"


def test_a_child_run_that_did_not_complete_fails_its_step_naming_it() -> None:
    step = load(wf(t("a"))).spec.steps[0]
    done = ChildEnded(i=0, status=R.COMPLETED, at=1.0, output=5)
    assert child_failure(step, done, "r/a/0", "child") is None
    failed = ChildEnded(i=0, status=R.FAILED, at=1.0, error="bad input")
    assert child_failure(step, failed, "r/a/0", "child") == \
        "step 'a': child run r/a/0 of workflow 'child' failed: bad input"
    cancelled = ChildEnded(i=0, status=R.CANCELLED, at=1.0)
    assert "cancelled: no error recorded" in (child_failure(step, cancelled, "c", "w")
                                              or "")
