"""The I/O of a run's parked approval steps while they wait for a person.

What a decision means is the core's (``core.parking``); this reads the decisions and
keeps the deadlines.  Decisions reach the run through the store (a person approves
from another process, or this one): each is stored once, as a compare-and-set, and
read back here as a history note, then told to the state as a ``DecisionMade``.  A deadline
(the step's ``timeout``) is stored the same way, as a decision by ``timeout``, so a
person's decision stored first still stands.

A Python step waits the same way (``ctx.wait_for_approval``, docs/waiting.md): the
state parks it when its attempt ends with ``ApprovalRequested`` (a *code wait*,
``park_code`` here keeps its deadline), and an approved one finds the decision in the
run's journal (``StepLog.decisions``) on its next attempt.

What the approver is asked is stored when the step starts waiting, as a history note
``{"wait": {"kind": "approval", "prompt", "show", "attempt"}}`` of the step: its
``prompt`` and ``show`` rendered once (so every process shows the same text), bounded
like an output and redacted like every note.  ``plait show``, the run document of the
API, the UI and the ``approval_waiting`` notification read it back (``waiting_entry``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from ..core import expressions
from ..core.effects import Effects
from ..core.events import DecisionMade, WaitEnded
from ..core.jsoncheck import NotJSON, checked_json
from ..core.model import JSON, JSONDict
from ..core.parking import approval_deadline, timeout_approves
from ..core.runstate import RunState
from ..core.validate import CheckedWorkflow
from ..errors import DecisionTaken
from ..steps.context import StepLog
from ..store.base import Store
from .code_waits import CODE_WAIT_KINDS, CodeWaits
from .results import iso
from .timers import Timers


class Approvals:
    """The parked approval steps of one run and their deadlines."""

    __slots__ = ("_checked", "_clock", "_ids", "_journal", "_notes_seen", "_run_id",
                 "_state", "_store", "_timers", "code", "parked", "waits")

    def __init__(self, checked: CheckedWorkflow, state: RunState, store: Store,
                 run_id: str, clock: Callable[[], float], timers: Timers,
                 journal: StepLog | None = None) -> None:
        self._checked = checked
        self._state = state
        self._store = store
        self._run_id = run_id
        self._clock = clock
        self._timers = timers
        self._notes_seen = 0
        self._ids: dict[str, int] = {}
        self.parked: dict[int, float | None] = {}  # step -> its deadline
        # the parked steps that are code waits -> their on_timeout
        self.code: dict[int, str] = {}
        self._journal = journal if journal is not None else StepLog(lambda t: t)
        self.waits = CodeWaits(store, run_id, timers)  # steps waiting for events, times

    def park_code(self, i: int, now: float) -> None:
        """Step ``i`` (a Python step) asked for approval and waits (its attempt closed
        by the state, ``Park``), or was waiting when the run stopped: its deadline is
        the request's (a resumed wait's is read back from its ``wait`` note in
        ``apply``).  A step that waits for an event or a time is kept in ``waits``."""
        step_id = self._state.steps[i].id
        request = self._journal.wait_requests.pop(step_id, None) or {}
        if request.get("kind") in CODE_WAIT_KINDS:
            self._keep(i, self.waits.park(i, request), sleep=request.get("kind") == "sleep")
            return
        on_timeout = request.get("on_timeout")
        self.code[i] = on_timeout if isinstance(on_timeout, str) else "reject"
        deadline = None
        timeout = request.get("timeout")
        if isinstance(timeout, int | float):
            deadline = now + timeout
            self._timers.add(deadline, "approval_timeout", i)
        self._keep(i, deadline)

    def _keep(self, i: int, deadline: float | None, *, sleep: bool = False) -> None:
        """Step ``i`` waits until ``deadline`` (None: until told; ``sleep``: the time
        ends a sleep), its due time told to the state, which decides when the run
        waits and until when (``RunState.wake_at``)."""
        self.parked[i] = deadline
        self._state.set_due(i, deadline, sleep=sleep)

    def _announce(self, i: int) -> bool:
        """Render step ``i``'s ``prompt`` and ``show`` and note them; False (the step
        failed, its attempt closed) when they do not render or are too big."""
        step, now = self._state.steps[i], self._clock()
        try:
            asked = checked_json(self._render(i),
                                 max_bytes=self._state.spec.limits.max_output_bytes)
        except (expressions.RenderError, NotJSON) as exc:
            why = exc.describe("what the approval shows") if isinstance(exc, NotJSON) \
                else str(exc)
            self._state.refuse_wait(i, f"step {step.id!r}: {why}", now)
            return False
        assert isinstance(asked, dict)
        asked["attempt"] = self._state.rows[i].attempts
        self._journal.note(step.id, {"wait": asked})
        return True

    def _render(self, i: int) -> JSONDict:
        config, names = self._state.steps[i].config, self._state.context(i)
        out: JSONDict = {"kind": "approval"}
        for field in ("prompt", "show"):
            raw: JSON = config.get(field)
            try:
                out[field] = expressions.render_value(raw, names)
            except expressions.RenderError as exc:
                raise expressions.RenderError(f"`{field}`: {exc}") from exc
        return out

    def _restore_deadline(self, i: int, request: JSONDict, at: float) -> None:
        """A resumed code wait's deadline, from the note its request left."""
        on_timeout = request.get("on_timeout")
        if isinstance(on_timeout, str):
            self.code[i] = on_timeout
        timeout = request.get("timeout")
        if isinstance(timeout, int | float) and self.parked.get(i) is None:
            self._keep(i, at + timeout)
            self._timers.add(at + timeout, "approval_timeout", i)

    def park(self, i: int, *, resumed: bool = False) -> None:
        """Step ``i`` waits; its deadline (the step's timeout) is a timer.  A step that
        starts waiting (not ``resumed``) first stores what it asks (``_announce``); a
        prompt or ``show`` that does not render fails it instead."""
        if not resumed and not self._announce(i):
            return
        step, row = self._state.steps[i], self._state.rows[i]
        deadline = approval_deadline(step, row.started_at or self._clock())
        if deadline is not None:
            self._timers.add(deadline, "approval_timeout", i)
        self._keep(i, deadline)

    async def recall(self, steps: list[int]) -> None:
        """A restored run (resumed, or taken over by another driver): each of ``steps``
        (attempts that died with their process) that a person already approved in
        ``ctx.wait_for_approval`` finds the decision on its next attempt, so it does
        not ask again."""
        if not steps:
            return
        ids = {self._state.steps[i].id for i in steps}
        for event in await self._store.get_events(self._run_id):
            decision = event.data.get("approval") if event.kind == "note" else None
            if event.step_id in ids and isinstance(decision, dict) \
                    and decision.get("decision") == "approved":
                self._journal.decisions[event.step_id] = decision

    async def apply(self, carry_out: Callable[[Effects], None]) -> None:
        """Apply the decisions stored since the last call, and deadlines that passed;
        ``carry_out`` does what the state asks after each (a rejection under fail-fast
        halts the run: what runs is cancelled before this goes on)."""
        events = await self._store.get_events(self._run_id, after=self._notes_seen)
        now = self._clock()
        index = self._index()
        decisions: list[tuple[int, JSONDict]] = []
        for event in events:
            self._notes_seen = max(self._notes_seen, event.seq)
            i = index.get(event.step_id or "")
            if event.kind != "note" or i is None:
                continue
            wait, decision = event.data.get("wait"), event.data.get("approval")
            if isinstance(wait, dict):
                self._restore(i, wait, event.at)
            if isinstance(decision, dict):
                decisions.append((i, decision))
        # (once every step's latest request is known: a decision stored while its step
        # waited for an event is kept by the state until the step asks)
        for i, decision in decisions:
            carry_out(self._decide(i, decision, now))
        for i in list(self.waits.events):
            if i in self.parked and await self.waits.arrived(i):
                carry_out(self._wake(i, now))
        for i, deadline in list(self.parked.items()):
            if deadline is not None and deadline <= now:
                carry_out(self._wake(i, now) if i in self.waits.events
                          else await self._time_out(i, now))

    def _index(self) -> dict[str, int]:
        """Step id -> its index, map items included (their rows follow the steps')."""
        ids = self._state.ids
        if len(self._ids) != len(ids):
            self._ids = {sid: i for i, sid in enumerate(ids)}
        return self._ids

    def _restore(self, i: int, wait: JSONDict, at: float) -> None:
        """A parked code wait's request, read back from the run's history (a resumed
        run learns here what its waiting Python steps wait for; the latest stands)."""
        if i not in self.code and i not in self.waits.events:
            return
        if wait.get("kind") in CODE_WAIT_KINDS:
            self.code.pop(i, None)
            self._keep(i, self.waits.park(i, wait), sleep=wait.get("kind") == "sleep")
            self._state.waits_for(i, "code_wait")
            return
        if self.waits.events.pop(i, 0) != 0:  # it waits for approval after all
            self.code[i] = "reject"
            self._keep(i, None)
        self._state.waits_for(i, "code_approval")
        self._restore_deadline(i, wait, at)

    def _wake(self, i: int, now: float) -> Effects:
        """What code wait ``i`` waits for is there: told to the state."""
        self.parked.pop(i, None)
        self.waits.events.pop(i, None)
        return self._state.apply(WaitEnded(i=i, at=now))

    async def _time_out(self, i: int, now: float) -> Effects:
        """A deadline passed: its decision is stored like a person's (a decision stored
        first stands) and applied."""
        step = self._state.steps[i]
        choice = self.code[i] if i in self.code else step.config.get("on_timeout", "reject")
        decision: JSONDict = {
            "decision": "approved" if timeout_approves(choice) else "rejected",
            "by": "timeout", "at": now, "data": None}
        try:
            await self._store.record_decision(self._run_id, step.id, decision)
        except DecisionTaken as taken:
            decision = cast(JSONDict, taken.decision)
        return self._decide(i, decision, now)

    def _decide(self, i: int, decision: JSONDict, now: float) -> Effects:
        """A stored decision, told to the state (which keeps it when its step has not
        asked yet); an approved Python step's next attempts find it in the run's
        journal."""
        approved = decision.get("decision") == "approved"
        if approved and self._state.parked.get(i) != "approval":
            self._journal.decisions[self._state.steps[i].id] = decision
        if i not in self.waits.events:
            self.parked.pop(i, None)
            self.code.pop(i, None)
        at = decision.get("at")
        return self._state.apply(DecisionMade(
            i=i, approved=approved, by=decision.get("by"), at=now,
            decided_at=iso(at) if isinstance(at, int | float) else at,
            data=decision.get("data")))
