"""A run's approval steps while they wait for a person (SPEC 8).

An approval step is parked without a task.  Decisions reach the run through the store
(a person approves from another process, or this one): each is stored once, as a
compare-and-set, and read back here as a history note.  A deadline (the step's
``timeout``) is decided the same way, as a decision by ``timeout``, so a person's
decision stored first still stands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from ..core.model import JSONDict
from ..core.runstate import RunState
from ..core.validate import CheckedWorkflow
from ..errors import DecisionTaken
from ..store.base import Store
from .results import iso
from .timers import Timers


class Approvals:
    """The parked approval steps of one run and their deadlines."""

    __slots__ = ("_checked", "_clock", "_notes_seen", "_run_id", "_state", "_store",
                 "_timers", "parked")

    def __init__(self, checked: CheckedWorkflow, state: RunState, store: Store,
                 run_id: str, clock: Callable[[], float], timers: Timers) -> None:
        self._checked = checked
        self._state = state
        self._store = store
        self._run_id = run_id
        self._clock = clock
        self._timers = timers
        self._notes_seen = 0
        self.parked: dict[int, float | None] = {}  # step -> its deadline

    def park(self, i: int) -> None:
        """Step ``i`` waits; its deadline (the step's timeout) is a timer."""
        step, row = self._checked.spec.steps[i], self._state.rows[i]
        deadline = None
        if step.timeout is not None:
            deadline = (row.started_at or self._clock()) + step.timeout
            self._timers.add(deadline, "approval_timeout", i)
        self.parked[i] = deadline

    async def apply(self, failed: Callable[[], None]) -> None:
        """Apply the decisions stored since the last call, and deadlines that passed.
        ``failed`` is called at once when a rejection fails a step (fail-fast halts the
        run: what runs is cancelled before this goes on)."""
        events = await self._store.get_events(self._run_id, after=self._notes_seen)
        now = self._clock()
        index = self._checked.graph.index
        for event in events:
            self._notes_seen = max(self._notes_seen, event.seq)
            decision = event.data.get("approval") if event.kind == "note" else None
            i = index.get(event.step_id or "")
            if isinstance(decision, dict) and i is not None and i in self.parked:
                self._decide(i, decision, now, failed)
        for i, deadline in list(self.parked.items()):
            if deadline is not None and deadline <= now:
                await self._time_out(i, now, failed)

    async def _time_out(self, i: int, now: float, failed: Callable[[], None]) -> None:
        step = self._checked.spec.steps[i]
        choice = step.config.get("on_timeout", "reject")
        decision: JSONDict = {"decision": "approved" if choice == "approve" else "rejected",
                              "by": "timeout", "at": now, "data": None}
        try:
            await self._store.record_decision(self._run_id, step.id, decision)
        except DecisionTaken as taken:
            decision = cast(JSONDict, taken.decision)
        self._decide(i, decision, now, failed)

    def _decide(self, i: int, decision: JSONDict, now: float,
                failed: Callable[[], None]) -> None:
        self.parked.pop(i, None)
        by = decision.get("by")
        if decision.get("decision") == "approved":
            at = decision.get("at")
            self._state.succeed(i, {"approved": True, "by": by,
                                    "at": iso(at) if isinstance(at, int | float) else at,
                                    "data": decision.get("data")}, now)
            return
        reason = f"rejected by {by}" if by != "timeout" else "approval timed out (rejected)"
        self._state.end_attempt(i, "failed", now, reason)
        self._state.fail(i, reason, now)
        failed()
