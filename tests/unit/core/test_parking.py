"""Parked steps and the decisions that move them on, decided by the core alone."""

from __future__ import annotations

from typing import Any

from plait.core.effects import CancelRunning, Park
from plait.core.events import AttemptEnded, DecisionMade, WaitEnded
from plait.core.parking import approval_deadline, rejection, timeout_approves
from plait.core.retry import ErrorInfo
from plait.core.runstate import RunState
from plait.core.states import StepStatus

from .helpers import load, t, wf

S = StepStatus
ASKS = ErrorInfo(type="ApprovalRequested", message="", names=("ApprovalRequested",))


def parked(reason: str, *steps: dict[str, Any], **top: Any) -> RunState:
    """A run whose first step waits: an approval step, or a step that asked."""
    state = RunState(load(wf(t("a"), *steps, **top)), run_id="r", input={})
    state.start(0.0)
    assert state.pop_ready() == 0
    state.begin(0, 1.0)
    if reason == "approval":
        state.park(0, "approval", 1.0)
    else:
        assert state.apply(AttemptEnded(i=0, kind="error", at=1.5, error=ASKS)) \
            == [Park(i=0, reason="code_approval")]
    assert state.rows[0].status is S.WAITING and state.parked == {0: reason}
    return state


def decide(state: RunState, approved: bool, by: Any = "ann", **more: Any) -> Any:
    return state.apply(DecisionMade(i=0, approved=approved, by=by, at=5.0, **more))


def test_an_approved_approval_step_completes_with_the_decision() -> None:
    state = parked("approval", t("b", "a"))
    assert decide(state, True, decided_at="2024-01-01T00:00:00Z", data={"n": 1}) == ()
    assert state.rows[0].status is S.COMPLETED
    assert state.rows[0].output == {"approved": True, "by": "ann",
                                    "at": "2024-01-01T00:00:00Z", "data": {"n": 1}}
    assert state.pop_ready() == 1  # its child goes on
    assert not state.parked


def test_a_rejected_approval_step_fails_and_closes_its_attempt() -> None:
    state = parked("approval")
    decide(state, False)
    assert state.rows[0].status is S.FAILED and state.rows[0].error == "rejected by ann"
    ended = [(c.status, c.error) for c in state.drain()[1] if c.ended]
    assert ended == [("failed", "rejected by ann")]


def test_a_rejection_under_fail_fast_cancels_what_runs() -> None:
    state = parked("approval", t("b"), on_failure="fail_fast")
    assert decide(state, False, by="timeout") == [
        CancelRunning(reason="step 'a' failed (on_failure: fail_fast)")]
    assert state.rows[0].error == "approval timed out (rejected)"


def test_an_approved_code_wait_runs_again_once() -> None:
    state = parked("code_approval")
    assert decide(state, True) == ()
    assert state.rows[0].status is S.QUEUED and state.pop_ready() == 0
    state.begin(0, 6.0)
    # the next attempt asks again instead of finding the decision: it fails
    assert state.apply(AttemptEnded(i=0, kind="error", at=7.0, error=ASKS)) == ()
    assert state.rows[0].status is S.FAILED


def test_a_rejected_code_wait_fails() -> None:
    state = parked("code_approval")
    decide(state, False, by="bob")
    assert state.rows[0].status is S.FAILED and state.rows[0].error == "rejected by bob"


def test_a_decision_on_a_step_that_no_longer_waits_changes_nothing() -> None:
    state = parked("approval")
    decide(state, True)
    assert decide(state, False) == ()
    assert state.rows[0].status is S.COMPLETED


def test_a_resumed_wait_is_parked_without_moving() -> None:
    state = parked("approval")
    rows = {ch.step: ch.row for ch in state.drain()[0]}
    restored = RunState.restore(load(wf(t("a"))), run_id="r", input={}, rows=rows,
                                now=2.0)
    restored.park(0, "approval", 2.0, resumed=True)
    assert restored.drain()[0] == []
    decide(restored, True)
    assert restored.rows[0].status is S.COMPLETED


def test_deadlines_and_what_they_decide() -> None:
    step = load(wf(t("a", timeout=30))).spec.steps[0]
    assert approval_deadline(step, 100.0) == 130.0
    assert approval_deadline(load(wf(t("a"))).spec.steps[0], 100.0) is None
    assert timeout_approves("approve") and not timeout_approves("reject")
    assert rejection("timeout") == "approval timed out (rejected)"
    assert rejection("ann") == "rejected by ann"


WAITS = ErrorInfo(type="EventRequested", message="",
                  names=("EventRequested", "WaitRequested"))


def waiting_for_event() -> RunState:
    """A run whose Python step waits for an event from its code."""
    state = RunState(load(wf(t("a"))), run_id="r", input={})
    state.start(0.0)
    assert state.pop_ready() == 0
    state.begin(0, 1.0)
    assert state.apply(AttemptEnded(i=0, kind="error", at=1.5, error=WAITS)) \
        == [Park(i=0, reason="code_wait")]
    return state


def asks_after_the_event(state: RunState) -> Any:
    """The event came: the step runs again and now asks for approval."""
    assert state.apply(WaitEnded(i=0, at=6.0)) == ()
    assert state.pop_ready() == 0
    state.begin(0, 6.5)
    return state.apply(AttemptEnded(i=0, kind="error", at=7.0, error=ASKS))


def test_an_approval_given_while_the_step_waits_for_an_event_answers_when_it_asks() -> None:
    state = waiting_for_event()
    assert decide(state, True) == ()
    assert state.rows[0].status is S.WAITING and state.parked == {0: "code_wait"}
    # asked after the event: no park, the kept decision queues it again at once
    assert asks_after_the_event(state) == ()
    assert state.rows[0].status is S.QUEUED and not state.parked
    assert state.pop_ready() == 0
    state.begin(0, 8.0)
    state.attempt_ok(0, "done", 9.0, 0.0)
    assert state.rows[0].status is S.COMPLETED and state.rows[0].attempts == 3


def test_a_rejection_given_while_the_step_waits_for_an_event_fails_it_when_it_asks() -> None:
    state = waiting_for_event()
    decide(state, False, by="bob")
    assert state.rows[0].status is S.WAITING
    assert asks_after_the_event(state) == ()
    assert state.rows[0].status is S.FAILED and state.rows[0].error == "rejected by bob"


def test_a_resumed_step_told_it_waits_for_an_event_keeps_a_decision() -> None:
    state = waiting_for_event()
    rows = {ch.step: ch.row for ch in state.drain()[0]}
    restored = RunState.restore(load(wf(t("a"))), run_id="r", input={}, rows=rows,
                                now=2.0)
    restored.park(0, "code_approval", 2.0, resumed=True)  # until its request is read
    restored.waits_for(0, "code_wait")
    assert restored.parked == {0: "code_wait"}
    decide(restored, True)
    assert restored.rows[0].status is S.WAITING  # still waits for its event
    assert asks_after_the_event(restored) == ()
    assert restored.rows[0].status is S.QUEUED


def test_a_decision_on_a_step_that_ended_is_not_kept() -> None:
    state = parked("approval")
    decide(state, True)
    decide(state, False)
    assert state.kept_decisions == {}


WAITS = ErrorInfo(type="SleepRequested", message="", names=("SleepRequested",
                                                            "WaitRequested"))


def two_waits(*more: dict[str, Any]) -> RunState:
    """A run whose steps a and b both ended their attempts waiting (code waits)."""
    state = RunState(load(wf(t("a"), t("b"), *more)), run_id="r", input={})
    state.start(0.0)
    for i in (state.pop_ready(), state.pop_ready()):
        assert i is not None
        state.begin(i, 1.0)
    for i in (0, 1):
        assert state.apply(AttemptEnded(i=i, kind="error", at=1.5, error=WAITS)) == [
            Park(i=i, reason="code_wait")]
    return state


def test_a_run_that_only_waits_waits_until_its_earliest_due_time() -> None:
    state = two_waits()
    assert state.waits_only() and state.wake_at() is None  # no time told yet
    state.set_due(0, 50.0)  # a deadline (an event's timeout)
    state.set_due(1, 20.0, sleep=True)  # a sleep's end
    assert state.wake_at() == 20.0 and state.sleeps_until() == 20.0
    state.apply(WaitEnded(i=1, at=20.0))  # the sleep ended: b runs again
    assert not state.waits_only() and state.pop_ready() == 1
    state.begin(1, 21.0)
    state.apply(AttemptEnded(i=1, kind="ok", at=22.0, output=None))
    assert state.waits_only()
    assert state.wake_at() == 50.0 and state.sleeps_until() is None  # a deadline only


def test_a_run_with_something_to_do_does_not_wait() -> None:
    state = two_waits(t("c", "a"), t("d"))
    assert not state.waits_only()  # d is ready
    assert state.pop_ready() == 3
    state.begin(3, 2.0)
    assert not state.waits_only()  # d runs
    state.apply(AttemptEnded(i=3, kind="ok", at=3.0, output=None))
    assert state.waits_only()
