"""The I/O of a run's steps parked while they wait for an event or a time from their
code (``ctx.wait_for_event``, ``ctx.sleep``, the ``event`` step; docs/waiting.md).

What a wait means is the core's (``core.parking``: the step runs again once what it
waits for is there, ``WaitEnded``); this keeps what each parked step waits for, read
from the request its attempt left (``{"wait": {"kind": "event" | "sleep", "event",
"due"}}``, also read back from the run's history on resume), sets the timer of its time
(a sleep's end keeps the loop alive; an event's timeout does not: the run waits,
stored ``waiting``) and looks in the store for the events.  ``runtime.approvals``
holds these steps with the approvals (their deadlines in its ``parked``).
"""

from __future__ import annotations

from ..core.model import JSONDict
from ..store.base import Store
from .timers import Timers

CODE_WAIT_KINDS = ("event", "sleep")


class CodeWaits:
    """Parked step -> the event it waits for (None: a sleep, which waits for a time)."""

    __slots__ = ("_run_id", "_store", "_timers", "events")

    def __init__(self, store: Store, run_id: str, timers: Timers) -> None:
        self._store, self._run_id, self._timers = store, run_id, timers
        self.events: dict[int, str | None] = {}

    def park(self, i: int, request: JSONDict) -> float | None:
        """Step ``i`` waits as ``request`` says; when its time comes (None: never by
        itself)."""
        kind, name, due = request.get("kind"), request.get("event"), request.get("due")
        self.events[i] = name if kind == "event" and isinstance(name, str) else None
        if not isinstance(due, int | float):
            return None
        self._timers.add(float(due), "wake" if kind == "sleep" else "approval_timeout", i)
        return float(due)

    async def arrived(self, i: int) -> bool:
        """Whether the event step ``i`` waits for is stored."""
        name = self.events.get(i)
        return name is not None and \
            await self._store.event_get(self._run_id, name) is not None
