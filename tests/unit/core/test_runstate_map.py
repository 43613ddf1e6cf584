"""RunState and map steps: expansion into item rows, the concurrency window, the
failure policy, and restore of a map that was running (pure core, no runtime)."""

from __future__ import annotations

from typing import Any

from plait.core.effects import RetryStep
from plait.core.events import AttemptEnded
from plait.core.retry import ErrorInfo
from plait.core.runstate import RunState, StepRuntime
from plait.core.states import StepStatus

from .helpers import load, t, wf

S = StepStatus


def mapping(**extra: Any) -> dict[str, Any]:
    return {"id": "m", "type": "map", "over": "{{ input.xs }}",
            "step": {"type": "transform", "value": "{{ item }}"}, **extra}


def started(state: RunState, now: float) -> list[int]:
    out = []
    while (i := state.pop_ready()) is not None:
        state.begin(i, now)
        out.append(i)
    return out


def test_expansion_adds_item_rows_and_releases_them_by_the_window() -> None:
    state = RunState(load(wf(mapping(concurrency=2), t("after", "m"))), run_id="r",
                     input={})
    state.start(0.0)
    [m] = started(state, 0.0)
    state.succeed(m, ["a", "b", "c"], 1.0)  # the map's attempt rendered its items
    assert state.rows[m].status is S.WAITING and m not in state.running
    assert state.new_rows == [("m[0]", 2), ("m[1]", 3), ("m[2]", 4)]
    assert [state.rows[j].status for j in (2, 3, 4)] == [S.QUEUED, S.QUEUED, S.PENDING]
    assert state.context(3)["item"] == "b" and state.context(3)["index"] == 1
    first = started(state, 1.0)
    assert first == [2, 3]
    state.succeed(3, "B", 2.0)
    assert state.rows[4].status is S.QUEUED  # the window moved on
    assert started(state, 2.0) == [4]
    state.succeed(4, "C", 3.0)
    state.succeed(2, "A", 3.5)
    assert state.rows[m].status is S.COMPLETED
    assert state.rows[m].output == ["A", "B", "C"]
    assert state.rows[1].status is S.QUEUED  # `after` is judged as for any step
    changes, _ = state.drain()
    assert {c.step for c in changes} >= {"m[0]", "m[1]", "m[2]", "m", "after"}


def test_a_failed_item_fails_the_map_once_started_items_end() -> None:
    state = RunState(load(wf(mapping(concurrency=2))), run_id="r", input={})
    state.start(0.0)
    [m] = started(state, 0.0)
    state.succeed(m, [1, 2, 3, 4], 1.0)
    assert started(state, 1.0) == [1, 2]
    state.fail(1, "ValueError: no", 2.0)
    assert state.rows[m].status is S.WAITING  # m[1] still runs
    assert state.pop_ready() is None  # and nothing new starts
    state.succeed(2, 20, 3.0)
    assert state.rows[m].status is S.FAILED
    assert "m[0]" in (state.rows[m].error or "")
    assert [state.rows[j].status for j in (3, 4)] == [S.CANCELLED, S.CANCELLED]
    assert state.done


def test_restore_of_a_waiting_map_keeps_finished_items() -> None:
    checked = load(wf(mapping(concurrency=1)))
    rows = {"m": StepRuntime(S.WAITING, 1, [5, 6, 7]),
            "m[0]": StepRuntime(S.COMPLETED, 1, 50),
            "m[1]": StepRuntime(S.RUNNING, 1),
            "m[2]": StepRuntime(S.PENDING)}
    state = RunState.restore(checked, run_id="r", input={}, rows=rows, now=10.0)
    assert state.interrupted == [2]  # m[1]: its attempt died with the process
    assert not state.new_rows  # the rows are stored already
    assert not state.done
    assert state.waiting_steps() == []  # the map waits on its items, not on a person
    lost = ErrorInfo(type="X", message="lost", names=("X",))
    assert state.apply(AttemptEnded(i=2, kind="interrupted", at=10.0, error=lost)) \
        == [RetryStep(i=2, due=11.0)]
    state.retry_due(2)
    assert started(state, 11.0) == [2]
    state.succeed(2, 60, 12.0)
    assert started(state, 12.0) == [3]
    state.succeed(3, 70, 13.0)
    assert state.rows[0].status is S.COMPLETED and state.rows[0].output == [50, 60, 70]
    assert state.done


def test_a_retried_map_reuses_the_items_that_completed_and_runs_the_others() -> None:
    state = RunState(load(wf(mapping(concurrency=1))), run_id="r", input={})
    state.reused_items[0] = (4, {0: "A", 2: "C"})  # m[1], m[3] failed or never ran
    state.start(0.0)
    [m] = started(state, 0.0)
    state.succeed(m, ["a", "b", "c", "d"], 1.0)
    assert [state.rows[j].status for j in (1, 2, 3, 4)] == \
        [S.COMPLETED, S.QUEUED, S.COMPLETED, S.PENDING]
    assert started(state, 1.0) == [2]  # the window skips what was reused
    state.succeed(2, "B", 2.0)
    assert started(state, 2.0) == [4]
    state.succeed(4, "D", 3.0)
    assert state.rows[m].status is S.COMPLETED
    assert state.rows[m].output == ["A", "B", "C", "D"]
    assert state.done
    changes, _ = state.drain()
    reused = [(c.source, c.target) for c in changes if c.step == "m[0]"]
    assert reused == [(S.PENDING, S.QUEUED), (S.QUEUED, S.RUNNING),
                      (S.RUNNING, S.COMPLETED)]  # stored like any completed row


def test_a_map_with_every_item_reused_completes_at_once() -> None:
    state = RunState(load(wf(mapping())), run_id="r", input={})
    state.reused_items[0] = (2, {0: 10, 1: 20})
    state.start(0.0)
    [m] = started(state, 0.0)
    state.succeed(m, ["x", "y"], 1.0)
    assert state.rows[m].status is S.COMPLETED and state.rows[m].output == [10, 20]
    assert state.pop_ready() is None and state.done


def test_items_are_not_reused_when_the_map_renders_another_number_of_them() -> None:
    state = RunState(load(wf(mapping(concurrency=5))), run_id="r", input={})
    state.reused_items[0] = (3, {0: "A"})  # the input changed: 2 items now
    state.start(0.0)
    [m] = started(state, 0.0)
    state.succeed(m, ["a", "b"], 1.0)
    assert started(state, 1.0) == [1, 2]  # both run
    assert state.reused_items == {}


def test_restore_of_a_retried_map_counts_reused_items_after_the_cursor() -> None:
    # concurrency 1, m[0] running again, m[1] not started, m[2] reused: the release
    # must still reach m[1] after the restore, and the map end once m[0], m[1] end
    checked = load(wf(mapping(concurrency=1)))
    rows = {"m": StepRuntime(S.WAITING, 1, [5, 6, 7]),
            "m[0]": StepRuntime(S.RUNNING, 1),
            "m[1]": StepRuntime(S.PENDING),
            "m[2]": StepRuntime(S.COMPLETED, 0, 70)}
    state = RunState.restore(checked, run_id="r", input={}, rows=rows, now=10.0)
    assert state.interrupted == [1] and not state.done
    lost = ErrorInfo(type="X", message="lost", names=("X",))
    state.apply(AttemptEnded(i=1, kind="interrupted", at=10.0, error=lost))
    state.retry_due(1)
    assert started(state, 11.0) == [1]
    state.succeed(1, 50, 12.0)
    assert started(state, 12.0) == [2]
    state.succeed(2, 60, 13.0)
    assert state.rows[0].status is S.COMPLETED and state.rows[0].output == [50, 60, 70]
    assert state.done
