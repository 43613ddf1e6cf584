"""The ``event`` step (docs/waiting.md): it waits for the event ``event`` sent to its
run, as ``ctx.wait_for_event`` does (``steps.waits``); its output is the event's data.
Its ``timeout`` (the step's usual field) bounds the wait, counted from when the step
first started; then it fails, ``no event 'NAME' within 1h``."""

from __future__ import annotations

import time
from collections.abc import Mapping

from ..core.model import JSON
from ..core.signals import event_name_problem
from ..core.timestamps import iso
from ..errors import EventRequested, FatalError
from .registry import StepCall, StepType, register_step_type
from .waits import note_wait, short_duration


async def run_event(call: StepCall) -> JSON:
    """The ``event`` step: its output is the event's data; its ``timeout`` (counted
    from when the step first started) fails it, naming the event."""
    step, name = call.step.id, call.step.config.get("event")
    assert isinstance(name, str)
    store = call.run.services.store
    if store is None:
        raise FatalError(f"step {step!r}: an event step needs the run's store", step=step)
    found = await store.event_get(call.run_id, name)
    if found is not None:
        return found.data
    timeout = call.step.timeout
    due = None if timeout is None else call.started_at + timeout
    if due is not None and time.time() >= due:
        raise FatalError(f"no event {name!r} within {short_duration(timeout or 0.0)}",
                         step=step)
    note_wait(call.run.step_log, step, {"kind": "event", "event": name,
                                        "until": iso(due), "due": due,
                                        "attempt": call.attempt})
    raise EventRequested(step, name, due)


def _check(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    problem = event_name_problem(config.get("event"))
    return [] if problem is None else [(".event", problem)]


def register_event() -> None:
    register_step_type(StepType(name="event", run=run_event, fields=frozenset({"event"}),
                                required=frozenset({"event"}), check=_check,
                                literal_fields=frozenset({"event"}), only_waits=True))
