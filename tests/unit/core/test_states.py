"""The one transition table: every forbidden transition raises."""

from __future__ import annotations

import itertools

import pytest

from plait.core.states import (
    FINAL_RUN_STATES,
    FINAL_STEP_STATES,
    RUN_TRANSITIONS,
    STEP_TRANSITIONS,
    RunStatus,
    StepStatus,
    check_run_transition,
    check_step_transition,
)
from plait.errors import TransitionError

S, R = StepStatus, RunStatus

STEP_PAIRS = list(itertools.product(StepStatus, StepStatus))
FORBIDDEN_STEP = [(a, b) for a, b in STEP_PAIRS if b not in STEP_TRANSITIONS[a]]
ALLOWED_STEP = [(a, b) for a, b in STEP_PAIRS if b in STEP_TRANSITIONS[a]]
RUN_PAIRS = [(a, b) for a, b in itertools.product(RunStatus, RunStatus) if a != b]
FORBIDDEN_RUN = [(a, b) for a, b in RUN_PAIRS if b not in RUN_TRANSITIONS[a]]
ALLOWED_RUN = [(a, b) for a, b in RUN_PAIRS if b in RUN_TRANSITIONS[a]]


def test_state_names_are_the_spec_names() -> None:
    assert [str(s) for s in StepStatus] == [
        "pending", "queued", "running", "waiting", "completed", "failed", "skipped",
        "upstream_failed", "cancelled"]
    assert [str(s) for s in RunStatus] == [
        "pending", "running", "waiting", "completed", "failed", "cancelled"]


def test_table_covers_every_state() -> None:
    assert set(STEP_TRANSITIONS) == set(StepStatus)
    assert set(RUN_TRANSITIONS) == set(RunStatus)


def test_final_states_have_no_way_out() -> None:
    assert {S.COMPLETED, S.FAILED, S.SKIPPED, S.UPSTREAM_FAILED,
                                 S.CANCELLED} == FINAL_STEP_STATES
    assert {R.COMPLETED, R.FAILED, R.CANCELLED} == FINAL_RUN_STATES
    for state in FINAL_STEP_STATES:
        assert STEP_TRANSITIONS[state] == frozenset()
    for state in FINAL_RUN_STATES:
        assert RUN_TRANSITIONS[state] == frozenset()


def test_no_step_state_moves_to_itself_or_back_to_pending() -> None:
    for source, targets in STEP_TRANSITIONS.items():
        assert source not in targets
        assert S.PENDING not in targets


def test_every_non_final_step_state_can_reach_a_final_state() -> None:
    for state in StepStatus:
        seen, todo = {state}, [state]
        while todo:
            for nxt in STEP_TRANSITIONS[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert seen & FINAL_STEP_STATES, state


@pytest.mark.parametrize(("source", "target"), FORBIDDEN_STEP,
                         ids=[f"{a}->{b}" for a, b in FORBIDDEN_STEP])
def test_forbidden_step_transition_raises(source: StepStatus, target: StepStatus) -> None:
    with pytest.raises(TransitionError) as info:
        check_step_transition("fetch", source, target)
    err = info.value
    assert (err.source, err.target) == (source, target)
    assert "fetch" in str(err)
    assert f"{source} -> {target}" in str(err)


@pytest.mark.parametrize(("source", "target"), ALLOWED_STEP,
                         ids=[f"{a}->{b}" for a, b in ALLOWED_STEP])
def test_allowed_step_transition_passes(source: StepStatus, target: StepStatus) -> None:
    check_step_transition("fetch", source, target)


@pytest.mark.parametrize(("source", "target"), FORBIDDEN_RUN,
                         ids=[f"{a}->{b}" for a, b in FORBIDDEN_RUN])
def test_forbidden_run_transition_raises(source: RunStatus, target: RunStatus) -> None:
    with pytest.raises(TransitionError):
        check_run_transition("r1", source, target)


@pytest.mark.parametrize(("source", "target"), ALLOWED_RUN,
                         ids=[f"{a}->{b}" for a, b in ALLOWED_RUN])
def test_allowed_run_transition_passes(source: RunStatus, target: RunStatus) -> None:
    check_run_transition("r1", source, target)


def test_the_table_has_the_paths_the_engine_needs() -> None:
    assert S.QUEUED in STEP_TRANSITIONS[S.PENDING]
    assert S.RUNNING in STEP_TRANSITIONS[S.QUEUED]
    assert S.QUEUED in STEP_TRANSITIONS[S.RUNNING]  # a retry
    assert {S.COMPLETED, S.FAILED, S.CANCELLED} <= STEP_TRANSITIONS[S.RUNNING]
    assert {S.SKIPPED, S.UPSTREAM_FAILED, S.CANCELLED} <= STEP_TRANSITIONS[S.PENDING]
    assert S.CANCELLED in STEP_TRANSITIONS[S.QUEUED]
