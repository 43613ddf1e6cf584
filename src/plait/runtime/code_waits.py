"""The I/O of a run's steps parked while they wait for an event or a time from their
code (``ctx.wait_for_event``, ``ctx.sleep``, the ``event`` step; docs/waiting.md).

What a wait means is the core's (``core.parking``: the step runs again once what it
waits for is there, ``WaitEnded``); this keeps what each parked step waits for, read
from the request its attempt left (``{"wait": {"kind": "event" | "sleep", "event",
"due"}}``, also read back from the run's history on resume), sets the timer of its time
(a sleep's end keeps the loop alive; an event's timeout does not: the run waits,
stored ``waiting``) and looks in the store for the events.  A ``workflow`` or ``loop``
step on a worker waits for its child run's end (``{"kind": "child", "child_run_id"}``):
what is looked at is the child's stored status, so a parent looked at again (claimed,
resumed, swept) finds a child that ended even when nobody woke it.  ``runtime.approvals``
holds these steps with the approvals (their deadlines in its ``parked``).
"""

from __future__ import annotations

from ..core.child_ids import child_end_event, ended_child
from ..core.model import JSONDict
from ..core.states import FINAL_RUN_STATES
from ..errors import RunNotFound
from ..store.base import Store
from .timers import Timers

CODE_WAIT_KINDS = ("event", "sleep", "child")


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
        child = request.get("child_run_id")
        if kind == "child" and isinstance(child, str):
            name = child_end_event(child)
        self.events[i] = name if kind in ("event", "child") and isinstance(name, str) \
            else None
        if not isinstance(due, int | float):
            return None
        self._timers.add(float(due), "wake" if kind == "sleep" else "approval_timeout", i)
        return float(due)

    async def arrived(self, i: int) -> bool:
        """Whether the event step ``i`` waits for is stored (a child run's end: whether
        the child is stored final, or gone)."""
        name = self.events.get(i)
        if name is None:
            return False
        child = ended_child(name)
        if child is None:
            return await self._store.event_get(self._run_id, name) is not None
        try:
            return (await self._store.get_run(child)).status in FINAL_RUN_STATES
        except RunNotFound:  # (deleted: the step runs again and says so)
            return True
