"""Compute time versus waits (``observe.waits``): waiting intervals from step history,
the working parts of an attempt, their union, and the step types that only wait."""

from __future__ import annotations

import pytest

from plait.observe.waits import compute_intervals, covered, step_waits, waiting_steps
from plait.store.base import EventRecord

from .records import T0, attempt


def moved(step: str, source: str, target: str, at: float) -> EventRecord:
    return EventRecord(run_id="r1", seq=0, at=T0 + at, kind="step", step_id=step,
                       data={"from": source, "to": target})


def test_waiting_intervals_come_from_step_history_and_an_open_one_ends_at_until():
    events = [moved("gate", "queued", "running", 1.0), moved("gate", "running", "waiting", 1.5),
              moved("gate", "waiting", "completed", 9.0),
              moved("m", "running", "waiting", 2.0),
              EventRecord(run_id="r1", seq=0, at=T0 + 3.0, kind="note", step_id="m",
                          data={"to": "waiting"})]
    assert step_waits(events, until=T0 + 20.0) == {
        "gate": [(T0 + 1.5, T0 + 9.0)], "m": [(T0 + 2.0, T0 + 20.0)]}


def test_an_attempt_works_outside_the_waits_of_its_step():
    att = attempt("s", 1, "completed", 0.0, 10.0)
    assert compute_intervals(att, []) == [(T0, T0 + 10.0)]
    parts = compute_intervals(att, [(T0 + 2.0, T0 + 3.0), (T0 - 5, T0 + 1.0),
                                    (T0 + 9.0, T0 + 30.0)])
    assert parts == [(T0 + 1.0, T0 + 2.0), (T0 + 3.0, T0 + 9.0)]
    assert compute_intervals(att, [(T0, T0 + 10.0)]) == []
    assert compute_intervals(attempt("s", 1, "running", 0.0, None), []) == []


def test_covered_is_the_length_of_the_union():
    assert covered([]) == 0.0
    assert covered([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.7)]) == pytest.approx(4.0)


def test_waiting_steps_are_the_types_that_only_wait_and_map_items_of_them():
    definition = {"steps": [
        {"id": "gate", "type": "approval"}, {"id": "nap", "type": "delay"},
        {"id": "sub", "type": "workflow"}, {"id": "again", "type": "loop"},
        {"id": "work", "type": "python"},
        {"id": "each", "type": "map", "step": {"type": "workflow"}},
        {"id": "fetch", "type": "map", "step": {"type": "http"}}]}
    assert waiting_steps(definition) == {"gate", "nap", "sub", "again", "each[*]"}
    assert waiting_steps(None) == frozenset() and waiting_steps({"steps": 3}) == frozenset()
