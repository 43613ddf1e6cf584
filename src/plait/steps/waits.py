"""Waiting from a step for an event or a time (docs/waiting.md): ``ctx.wait_for_event``,
``ctx.sleep`` and the ``event`` step.

Nothing waits in the attempt.  When the event is not there yet (or the time has not
come) the step notes what it waits for (a history note ``{"wait": {"kind": "event" |
"sleep", "event", "until", "due", "attempt"}}``, ``due`` in epoch seconds) and raises
``EventRequested`` / ``SleepRequested``: the attempt ends as ``waiting``, the run parks
the step (``core.parking``) and runs it again from the start once the event is stored
or the time has come.  The time a sleep ends, and the deadline of a wait with a
timeout, are journaled calls (``ctx.run``) of the step, so they are fixed by the first
attempt that asked and hold across attempts, resumes and workers.  The ``event`` step
counts its timeout from when the step first started.
"""

from __future__ import annotations

import hashlib
import time
from typing import Protocol

from ..core.durations import format_duration, parse_duration
from ..core.model import JSON, JSONDict
from ..core.signals import MAX_NAME_CHARS, event_name_problem
from ..core.timestamps import iso
from ..errors import EventRequested, FatalError, SleepRequested
from .journal import MAX_NAME, CallJournal


class WaitLog(Protocol):
    """Where a wait's request goes (``steps.context.StepLog``)."""

    wait_requests: dict[str, JSONDict]

    def note(self, step_id: str, data: JSONDict) -> None: ...


async def wait_for_event(calls: CallJournal, log: WaitLog | None, *, step: str,
                         attempt: int, name: object, timeout: object) -> JSON:
    """``ctx.wait_for_event``: the event's data, or None once ``timeout`` passed."""
    problem = event_name_problem(name)
    if problem is not None:
        raise FatalError(f"step {step!r}: wait_for_event: {problem}", step=step)
    assert isinstance(name, str)
    seconds = None if timeout is None else _seconds(step, "wait_for_event", "timeout",
                                                    timeout)
    found = await calls.store.event_get(calls.run_id, name)
    if found is not None:
        return found.data
    due = None
    if seconds is not None:
        due = await _due(calls, journal_key("wait_for_event", name), seconds)
        if time.time() >= due:
            return None
    note_wait(log, step, {"kind": "event", "event": name, "until": iso(due), "due": due,
                      "attempt": attempt})
    raise EventRequested(step, name, due)


async def sleep(calls: CallJournal, log: WaitLog | None, *, step: str, attempt: int,
                name: object, duration: object) -> None:
    """``ctx.sleep``: returns once the time has come (parking the step until then)."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
        shown = f"{len(name)} characters" if isinstance(name, str) and name else repr(name)
        raise FatalError(f"step {step!r}: sleep needs a name (non-empty text of at most "
                         f"{MAX_NAME_CHARS} characters), got {shown}", step=step)
    seconds = _seconds(step, "sleep", "duration", duration)
    due = await _due(calls, journal_key("sleep", name), seconds)
    if time.time() >= due:
        return None
    note_wait(log, step, {"kind": "sleep", "event": None, "until": iso(due), "due": due,
                      "attempt": attempt})
    raise SleepRequested(step, name, due)


def short_duration(seconds: float) -> str:
    """``3600`` -> ``1h``: the largest unit that divides ``seconds``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return format_duration(seconds)


def _seconds(step: str, call: str, field: str, value: object) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise FatalError(f"step {step!r}: {call}: `{field}`: {exc}", step=step) from None


def journal_key(call: str, name: str) -> str:
    """The journaled call that keeps the time of wait ``name``: ``CALL NAME``, or
    ``CALL #HASH`` when that would be over a journaled call name's length."""
    key = f"{call} {name}"
    if len(key) <= MAX_NAME:
        return key
    return f"{call} #{hashlib.sha256(name.encode()).hexdigest()[:32]}"


async def _due(calls: CallJournal, key: str, seconds: float) -> float:
    """When a wait of ``seconds`` that starts now ends: journaled under ``key``, so the
    first attempt that asked fixes it."""
    async def now_plus() -> float:
        return time.time() + seconds

    due = await calls.run(key, now_plus, (), {}, None)
    assert isinstance(due, int | float)
    return float(due)


def note_wait(log: WaitLog | None, step: str, request: JSONDict) -> None:
    """What the step waits for, read by the run when its attempt ends and kept in its
    history (``plait show``, the API and the UI show it)."""
    if log is not None:
        log.wait_requests[step] = request
        log.note(step, {"wait": request})

