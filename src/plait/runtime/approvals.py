"""A run's approval steps while they wait for a person (SPEC 8).

An approval step is parked without a task.  Decisions reach the run through the store
(a person approves from another process, or this one): each is stored once, as a
compare-and-set, and read back here as a history note.  A deadline (the step's
``timeout``) is decided the same way, as a decision by ``timeout``, so a person's
decision stored first still stands.

A Python step waits the same way (``ctx.wait_for_approval``, docs/waiting.md): its
attempt ends with ``ApprovalRequested``, the step is parked here as a *code wait*
(``park_code``), and an approval puts the step back in the queue with the decision
in the run's journal (``StepLog.decisions``), where its next attempt finds it; a
rejection fails it as it fails an approval step.

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
from ..core.jsoncheck import NotJSON, checked_json
from ..core.model import JSON, JSONDict
from ..core.runstate import RunState
from ..core.validate import CheckedWorkflow
from ..errors import DecisionTaken
from ..steps.context import StepLog
from ..store.base import Store
from .results import iso
from .timers import Timers


class Approvals:
    """The parked approval steps of one run and their deadlines."""

    __slots__ = ("_checked", "_clock", "_delivered", "_journal", "_notes_seen", "_run_id",
                 "_state", "_store", "_timers", "code", "parked")

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
        self.parked: dict[int, float | None] = {}  # step -> its deadline
        # the parked steps that are code waits -> their on_timeout
        self.code: dict[int, str] = {}
        self._journal = journal if journal is not None else StepLog(lambda t: t)
        self._delivered: set[int] = set()  # code waits given their approval

    def park_code(self, i: int, now: float, *, resumed: bool = False) -> None:
        """Step ``i`` (a Python step) asked for approval: its attempt ended (closed in
        history as ``waiting``) and it waits.  ``resumed``: it was waiting when the run
        stopped; its deadline is read back from its ``wait`` note in ``apply``."""
        step_id = self._checked.spec.steps[i].id
        request = self._journal.wait_requests.pop(step_id, None) or {}
        if i in self._delivered:  # its next attempt did not see the decision
            self._state.end_attempt(i, "failed", now)
            self._state.fail(i, "the step asked for approval again after its approval "
                                "was given (a step waits at most once)", now)
            return
        if not resumed:
            self._state.end_attempt(i, "waiting", now)
            self._state.wait(i, now)
        on_timeout = request.get("on_timeout")
        self.code[i] = on_timeout if isinstance(on_timeout, str) else "reject"
        deadline = None
        timeout = request.get("timeout")
        if isinstance(timeout, int | float):
            deadline = now + timeout
            self._timers.add(deadline, "approval_timeout", i)
        self.parked[i] = deadline

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
            reason = f"step {step.id!r}: {why}"
            self._state.end_attempt(i, "failed", now, reason)
            self._state.fail(i, reason, now)
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
            self.parked[i] = at + timeout
            self._timers.add(at + timeout, "approval_timeout", i)

    def park(self, i: int, *, resumed: bool = False) -> None:
        """Step ``i`` waits; its deadline (the step's timeout) is a timer.  A step that
        starts waiting (not ``resumed``) first stores what it asks (``_announce``); a
        prompt or ``show`` that does not render fails it instead."""
        if not resumed and not self._announce(i):
            return
        step, row = self._state.steps[i], self._state.rows[i]
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
            wait = event.data.get("wait") if event.kind == "note" else None
            if isinstance(wait, dict) and i is not None and i in self.code:
                self._restore_deadline(i, wait, event.at)
            if isinstance(decision, dict) and i is not None and i in self.parked:
                self._decide(i, decision, now, failed)
        for i, deadline in list(self.parked.items()):
            if deadline is not None and deadline <= now:
                await self._time_out(i, now, failed)

    async def _time_out(self, i: int, now: float, failed: Callable[[], None]) -> None:
        step = self._checked.spec.steps[i]
        choice = self.code[i] if i in self.code else step.config.get("on_timeout", "reject")
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
        if self.code.pop(i, None) is not None:
            self._decide_code(i, decision, now, failed)
            return
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

    def _decide_code(self, i: int, decision: JSONDict, now: float,
                     failed: Callable[[], None]) -> None:
        """A code wait's decision: approved, the step runs again and finds it;
        rejected, the step fails (its waiting attempt is closed already)."""
        by = decision.get("by")
        if decision.get("decision") == "approved":
            self._journal.decisions[self._checked.spec.steps[i].id] = decision
            self._delivered.add(i)
            self._state.requeue(i, now)
            return
        reason = f"rejected by {by}" if by != "timeout" else "approval timed out (rejected)"
        self._state.fail(i, reason, now)
        failed()
