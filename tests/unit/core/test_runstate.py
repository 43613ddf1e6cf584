"""RunState by example: the driven state machine of a run and its restore after a crash."""

from __future__ import annotations

from typing import Any

import pytest

from plait.core.effects import CancelRunning, RetryStep
from plait.core.events import AttemptEnded
from plait.core.retry import ErrorInfo
from plait.core.runstate import RunState, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.errors import OutputError, TransitionError

from .helpers import load, t, wf

S = StepStatus
FLAKY = ErrorInfo(type="ValueError", message="flaky", names=("ValueError",))


def stored_rows(state: RunState) -> dict[str, StepRuntime]:
    """What a store holds after every drained change (the last row of each step)."""
    steps, _ = state.drain()
    rows: dict[str, StepRuntime] = {}
    for ch in steps:
        rows[ch.step] = ch.row
    return rows


def run_step(state: RunState, now: float, output: Any = None) -> int:
    i = state.pop_ready()
    assert i is not None
    state.begin(i, now)
    if output is not None:
        state.succeed(i, output, now + 0.5)
    return i


def test_roots_are_queued_on_start_and_pop_by_priority() -> None:
    state = RunState(load(wf(t("short"), t("a"), t("b", "a"), t("c", "b"))), run_id="r",
                     input={})
    state.start(0.0)
    assert [str(r.status) for r in state.rows] == ["queued", "queued", "pending", "pending"]
    assert state.pop_ready() == 1  # 'a' heads the longest path
    assert state.pop_ready() == 0
    assert state.pop_ready() is None


def test_succeed_refuses_a_reducer_error_without_changing_anything() -> None:
    checked = load(wf(t("a", outputs=["total"]), t("b", outputs=["total"]),
                      reducers={"total": "sum"}))
    state = RunState(checked, run_id="r", input={})
    state.start(0.0)
    a = run_step(state, 1.0, {"total": 1})
    assert state.state == {"total": 1}
    b = state.pop_ready()
    assert b is not None and b != a
    state.begin(b, 2.0)
    with pytest.raises(OutputError):
        state.succeed(b, {"total": "x"}, 3.0)
    assert state.rows[b].status is S.RUNNING
    assert state.state == {"total": 1}
    effects = state.apply(AttemptEnded(i=b, kind="error", at=3.0, error=FLAKY))
    assert effects == [RetryStep(i=b, due=4.0)]  # still retryable


def test_fail_fast_halts_and_cancel_unstarted_cancels_the_rest() -> None:
    checked = load(wf(t("bad"), t("other"), t("child", "other"), on_failure="fail_fast"))
    state = RunState(checked, run_id="r", input={})
    state.start(0.0)
    ids = checked.graph.index
    bad, other = ids["bad"], ids["other"]
    assert {state.pop_ready(), state.pop_ready()} == {bad, other}
    state.begin(bad, 1.0)
    state.begin(other, 1.0)
    effects = state.apply(AttemptEnded(i=bad, kind="error", at=2.0, error=ErrorInfo(
        type="FatalError", message="x", retryable=False)))
    assert effects == [CancelRunning(reason="step 'bad' failed (on_failure: fail_fast)")]
    assert state.halting
    state.cancel_step(other, 2.5, "fail_fast")  # the runtime cancelled it
    state.cancel_unstarted(3.0, "fail_fast")
    assert state.done
    assert [str(r.status) for r in state.rows] == ["failed", "cancelled", "cancelled"]
    assert state.run_status() is RunStatus.FAILED


def test_a_final_step_cannot_move_again() -> None:
    state = RunState(load(wf(t("a"))), run_id="r", input={})
    state.start(0.0)
    a = run_step(state, 1.0, 5)
    with pytest.raises(TransitionError):
        state.fail(a, "late", 2.0)


def test_restore_replays_shared_state_in_completion_order() -> None:
    checked = load(wf(t("a", outputs=["log"]), t("b", outputs=["log"]), t("gate"),
                      t("c", "a", "b", "gate", when="{{ state.log | length == 2 }}"),
                      reducers={"log": "append"}))
    state = RunState(checked, run_id="r", input={})
    state.start(0.0)
    first = run_step(state, 1.0)
    second = run_step(state, 1.0)
    gate = run_step(state, 1.0)
    state.succeed(second, {"log": "second"}, 2.0)
    state.succeed(first, {"log": "first"}, 3.0)
    assert state.state == {"log": ["second", "first"]}
    rows = stored_rows(state)
    restored = RunState.restore(checked, run_id="r", input={}, rows=rows, now=4.0)
    assert restored.state == {"log": ["second", "first"]}
    assert restored.interrupted == [gate]  # it was running: its attempt died
    restored.start(4.0)
    restored.succeed(gate, "ok", 5.0)  # the gate, still running after restore, ends
    c = restored.pop_ready()
    assert c == checked.graph.index["c"]  # `when` saw the replayed state


def test_restore_keeps_completed_steps_and_due_retries() -> None:
    checked = load(wf(t("done"), t("later", retry={"max_retries": 2}),
                      t("soon", retry={"max_retries": 2}), t("child", "done")))
    state = RunState(checked, run_id="r", input={})
    state.start(0.0)
    ids = checked.graph.index
    started = [run_step(state, 1.0) for _ in range(3)]
    assert sorted(started) == [0, 1, 2]
    state.succeed(ids["done"], "out", 1.5)
    for sid in ("later", "soon"):
        effects = state.apply(AttemptEnded(i=ids[sid], kind="error", at=2.0, error=FLAKY))
        assert effects == [RetryStep(i=ids[sid], due=3.0)]
    rows = stored_rows(state)
    # restored at 2.5: both retries are due at 3.0, so they wait as timers
    restored = RunState.restore(checked, run_id="r", input={}, rows=rows, now=2.5)
    assert restored.rows[ids["done"]].status is S.COMPLETED
    assert restored.rows[ids["done"]].output == "out"
    assert sorted(i for _, i in restored.queued_later()) == [ids["later"], ids["soon"]]
    assert restored.interrupted == []
    restored.start(2.5)
    assert restored.pop_ready() == ids["child"]  # queued when 'done' was judged earlier
    # restored after the due time: the retries are ready at once
    late = RunState.restore(checked, run_id="r", input={}, rows=rows, now=10.0)
    assert late.queued_later() == []
    ready = {late.pop_ready(), late.pop_ready(), late.pop_ready()}
    assert ready == {ids["later"], ids["soon"], ids["child"]}
