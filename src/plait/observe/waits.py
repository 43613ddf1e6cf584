"""Compute time versus waits: which part of a run's history its steps spent working.

A step *waits* (it holds no worker and does no work of its own):

- while its status is ``waiting`` (an approval step or ``ctx.wait_for_approval`` waiting
  for a decision, a map step while its items run): read from the step's history
  events (``running -> waiting`` ... ``waiting -> *``);
- for the whole of each attempt of a step whose type only waits: ``approval``,
  ``delay``, and ``workflow`` and ``loop``, which wait for their child runs (a child
  run's compute time is counted under its own workflow).

An attempt's *compute time* is its duration minus the waits of its step within it.  A
run's compute time is the **union** of the compute intervals of all its attempts (two
steps working side by side for 1 s count 1 s), so it never exceeds the run's wall time.

Pure functions over stored records (no store, no clock): ``metrics.py`` calls them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..core.model import JSON
from ..steps.traits import traits
from ..store.base import AttemptRecord, EventRecord
from ..store.observations import item_pattern

__all__ = ["Interval", "compute_intervals", "covered", "step_waits", "waiting_steps"]

Interval = tuple[float, float]
_WAITING = "waiting"


def step_waits(events: Iterable[EventRecord], until: float) -> dict[str, list[Interval]]:
    """Per step, the intervals it spent ``waiting`` (in history order); one still open
    ends at ``until``."""
    opened: dict[str, float] = {}
    waits: dict[str, list[Interval]] = {}
    for event in events:
        if event.kind != "step" or event.step_id is None:
            continue
        if event.data.get("to") == _WAITING:
            opened.setdefault(event.step_id, event.at)
        elif event.data.get("from") == _WAITING and event.step_id in opened:
            start = opened.pop(event.step_id)
            waits.setdefault(event.step_id, []).append((start, max(start, event.at)))
    for step_id, start in opened.items():
        waits.setdefault(step_id, []).append((start, max(start, until)))
    return waits


def compute_intervals(attempt: AttemptRecord, waits: Sequence[Interval]) -> list[Interval]:
    """The parts of a finished attempt outside ``waits`` (sorted); none while it runs."""
    if attempt.finished_at is None:
        return []
    at, end = attempt.started_at, max(attempt.started_at, attempt.finished_at)
    parts: list[Interval] = []
    for start, stop in sorted(waits):
        if stop <= at or start >= end:
            continue
        if start > at:
            parts.append((at, start))
        at = max(at, stop)
    if at < end:
        parts.append((at, end))
    return parts


def covered(intervals: Iterable[Interval]) -> float:
    """The length of the union of ``intervals``."""
    total, reach = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= reach:
            continue
        total += stop - max(start, reach)
        reach = stop
    return total


def waiting_steps(definition: JSON) -> frozenset[str]:
    """The ids of a stored definition's steps whose type only waits; a map whose inline
    step is such a type contributes its items' name (``fetch[*]``)."""
    steps = definition.get("steps") if isinstance(definition, Mapping) else None
    found: set[str] = set()
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, Mapping):
            continue
        step_id, kind, inline = step.get("id"), traits(step.get("type")), step.get("step")
        if kind.only_waits:
            found.add(str(step_id))
        elif kind.expands and isinstance(inline, Mapping) \
                and traits(inline.get("type")).only_waits:
            found.add(item_pattern(f"{step_id}[0]"))
    return frozenset(found)
