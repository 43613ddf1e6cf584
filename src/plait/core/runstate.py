"""The live state of one run: a driven state machine (graphlib-shaped).

The run loop owns the clock, the randomness and the I/O.  It asks ``pop_ready()`` for
the next step to start and ``begin``s it; everything else that happens to the run is
an event (``core.events``) it hands to ``apply``, which moves the rows as the rules
say and returns what the runtime must do (``core.effects``).  The loop drains the
changes (``drain``) and persists them before acting on the effects.

Every rule of a run is decided here and in the modules this one is built from:
``runrows`` (the rows, the ready heap, the changes to persist), ``judging`` (trigger
rules, guards and ``when`` of a step whose parents are final), ``mapitems`` (a map
step's items), ``parking`` (waiting steps and decisions) and ``policy`` (what follows
an attempt).  Here: an attempt's end, halting (fail-fast, cancel, the run's timeout)
and the run's end (``finish``).  Each event costs O(1) plus the step's children.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import OutputError, TransitionError
from .effects import NO_EFFECTS, CancelRunning, Effects, Finish, Park, RetryStep
from .events import (
    AttemptEnded,
    AttemptKind,
    CancelRequested,
    DecisionMade,
    Event,
    TimerFired,
    WaitEnded,
)
from .judging import Judging
from .mapitems import MapRows
from .model import JSON
from .parking import Parking
from .policy import Fail, after_attempt, refused_output
from .retry import ErrorInfo
from .rows import AttemptChange, MapItems, StepChange, StepRuntime, StepsView, new_change
from .runrows import (
    CANCELLED,
    COMPLETED,
    FAILED,
    PENDING,
    QUEUED,
    RUNNING,
    WAITING,
    heappush,
)
from .states import FINAL_STEP_STATES, STEP_TRANSITIONS, RunStatus
from .validate import CheckedWorkflow

_UNSAID = ErrorInfo(type="RunError", message="the work source reported no error info")

__all__ = ["AttemptChange", "MapItems", "RunState", "StepChange", "StepRuntime",
           "StepsView"]


class RunState(MapRows, Judging, Parking):
    """One run's state and the rules of what happens to its steps and to it (see the
    module docstring)."""

    __slots__ = ()

    @classmethod
    def restore(cls, checked: CheckedWorkflow, *, run_id: str, input: JSON,
                rows: Mapping[str, StepRuntime], now: float,
                secrets: Mapping[str, str] | None = None) -> RunState:
        """Rebuild the state of a stored run (resume).  Steps stored ``running`` were
        interrupted: they stay running here and are listed in ``interrupted`` for the
        loop to count as failed attempts.  Shared state is replayed from completed
        outputs in completion order."""
        state = cls(checked, run_id=run_id, input=input, secrets=secrets)
        graph = checked.graph
        for i, sid in enumerate(graph.ids):
            stored = rows.get(sid)
            if stored is not None:
                state.rows[i] = stored.copy()
        final_items = 0
        for i in range(graph.size):  # stored items of expanded map steps
            if state.spec.steps[i].item is not None:
                final_items += state._restore_items(i, rows)
        done = [i for i in range(graph.size) if state.rows[i].status in FINAL_STEP_STATES]
        state._unfinished = len(state.rows) - len(done) - final_items
        for i in done:
            for child in graph.children[i]:
                state._waiting_parents[child] -= 1
        completed = sorted((i for i in done if state.rows[i].status is COMPLETED),
                           key=lambda i: (state.rows[i].finished_at or 0.0,
                                          graph.position[i]))
        for i in completed:
            step = state.spec.steps[i]
            if step.outputs:
                state.state.update(state._reduced(
                    state._state_writes(step, state.rows[i].output)))
        state.new_rows.clear()  # restored rows are stored already
        for i, row in enumerate(state.rows):
            if row.status is RUNNING:
                state.running.add(i)
                state.interrupted.append(i)
            elif row.status is QUEUED and (row.next_attempt_at is None
                                             or row.next_attempt_at <= now):
                heappush(state._ready, state._rank[i])
        return state

    # ----------------------------------------------------------------- the end

    def run_status(self) -> RunStatus:
        """The run's final status once ``done``: cancelled if cancelled; failed if a
        step failed without allow_failure or the run halted on a failure; else
        completed."""
        if self.cancelled:
            return RunStatus.CANCELLED
        for i, row in enumerate(self.rows):
            if row.status is FAILED and not self.steps[i].allow_failure:
                return RunStatus.FAILED
        if self.failure_reason:
            return RunStatus.FAILED
        return RunStatus.COMPLETED

    def finish(self, *, refused: str | None = None,
               output_error: str | None = None) -> Finish:
        """How the run ends once ``done`` (or interrupted): its status and why.
        ``refused``: the engine's rules refuse the definition, so the run never
        completes.  ``output_error``: its output could not be rendered, which fails a
        run that would complete."""
        status = self.run_status()
        if status is RunStatus.COMPLETED:
            if refused is not None:
                return Finish(status=RunStatus.FAILED, error=refused)
            if output_error is not None:
                return Finish(status=RunStatus.FAILED, error=f"run output: {output_error}")
            return Finish(status=status)
        if status is RunStatus.CANCELLED:
            return Finish(status=status, error=self.halt_reason or "cancelled")
        failed = [s.id for s, r in zip(self.steps, self.rows, strict=True)
                  if r.status is FAILED and not s.allow_failure]
        return Finish(status=status,
                      error=self.failure_reason or "failed steps: " + ", ".join(failed))

    # ----------------------------------------------------------------- events

    def start(self, now: float) -> None:
        """Judge every step whose parents are all final (the roots, on a new run)."""
        for i in range(self.graph.size):
            if self.rows[i].status is PENDING and self._waiting_parents[i] == 0:
                self._judge(i, now)

    def begin(self, i: int, now: float, worker: str | None = None) -> int:
        """The step's next attempt starts now; returns its number (1-based)."""
        row = self.rows[i]
        if row.status is not QUEUED:
            raise TransitionError(f"step {self.ids[i]!r}", row.status, RUNNING)
        row.status = RUNNING
        attempt = row.attempts = row.attempts + 1
        row.next_attempt_at = None
        row.worker = worker
        if row.started_at is None:
            row.started_at = now
        self.running.add(i)
        self._transitions.append((i, QUEUED, RUNNING, now))
        self.attempt_changes.append(new_change(AttemptChange, (
            self.ids[i], attempt, now, False, "running", None, worker, False)))
        return attempt

    def succeed(self, i: int, output: JSON, now: float, *, fallback: bool = False) -> None:
        """The step completed with ``output`` (already checked to be JSON).

        Raises OutputError, changing nothing, when declared output keys are missing or
        a reducer cannot combine a value (everything is computed before anything moves)."""
        step = self.steps[i]
        row = self.rows[i]
        if step.item is not None and row.status is RUNNING and not fallback:
            # a map step's attempt rendered its items (steps.map)
            self.expand(i, output if isinstance(output, list) else [output], now)
            return
        writes = self._reduced(self._state_writes(step, output)) if step.outputs else None
        source = row.status
        if COMPLETED not in STEP_TRANSITIONS[source]:
            raise TransitionError(f"step {step.id!r}", source, COMPLETED)
        row.status = COMPLETED
        # a fallback's success keeps the error that made it necessary
        row.output, row.finished_at = output, now
        if not fallback:
            row.error = None
        row.fallback_used = fallback
        self.running.discard(i)
        if writes:
            self.state.update(writes)
        self.attempt_changes.append(new_change(AttemptChange, (
            step.id, row.attempts, now, True, "completed", None, row.worker, fallback)))
        self._transitions.append((i, source, COMPLETED, now))
        self._finished(i, now)

    # ----------------------------------------------------------------- attempts

    def apply(self, event: Event) -> Effects:
        """Judge ``event``: move the run's rows as its rules say, and return what the
        runtime must do about it (``core.effects``; most events: ``NO_EFFECTS``)."""
        if isinstance(event, AttemptEnded):
            if event.kind == "cancelled":  # the run halted (or the step was cancelled)
                self.cancel_step(event.i, event.at, self.stop_reason())
                return NO_EFFECTS
            if event.kind == "ok":
                return self.attempt_ok(event.i, event.output, event.at, event.rand,
                                       fallback=event.fallback)
            return self._attempt_failed(event.i, event.kind, event.error or _UNSAID,
                                        event.fallback, event.at, event.rand)
        if isinstance(event, DecisionMade):
            self._decided(event)
            return self.take_effects()
        if isinstance(event, WaitEnded):
            self._wait_ended(event)
            return self.take_effects()
        if isinstance(event, TimerFired):
            return self._timer_fired(event)
        if isinstance(event, CancelRequested):
            return self._cancel_requested(event)
        raise TypeError(f"RunState cannot apply {type(event).__name__}: a child run's "
                        "end is its step's outcome (the step waits in an attempt)")

    def attempt_ok(self, i: int, output: JSON, now: float, rand: float, *,
                   fallback: bool = False) -> Effects:
        """``AttemptEnded(kind="ok")`` without building the event (every step's path).
        An output the state refuses (declared keys missing, a reducer that cannot
        combine it) fails the attempt instead."""
        try:
            self.succeed(i, output, now, fallback=fallback)
        except (OutputError, TransitionError) as refused:
            return self._attempt_failed(i, "ok", refused_output(refused), fallback, now,
                                        rand)
        return self.take_effects() if self._effects else NO_EFFECTS

    def _attempt_failed(self, i: int, kind: AttemptKind, error: ErrorInfo,
                        fallback: bool, now: float, rand: float) -> Effects:
        """Retry, run the fallback, fail, or park (``policy.after_attempt``)."""
        step, row = self.steps[i], self.rows[i]
        verdict = after_attempt(step, i, kind=kind, error=error, attempts=row.attempts,
                                fallback=fallback, first_error=row.error,
                                halting=self.halting, at=now, rand=rand)
        if isinstance(verdict, Park):
            self._park_code(i, now, verdict)
        elif fallback and isinstance(verdict, Fail):  # (its attempt is closed already)
            self.fail(i, verdict.reason, now)
        else:
            row.error = str(error)
            self.end_attempt(i, "failed", now, row.error)
            if isinstance(verdict, Fail):
                self.fail(i, verdict.reason, now)
            else:
                if isinstance(verdict, RetryStep):
                    self._queue_again(i, verdict.due, now)
                self._effects.append(verdict)
        return self.take_effects()

    def _queue_again(self, i: int, due: float, now: float) -> None:
        """RUNNING -> QUEUED, ready at ``due`` (the runtime's timer says when)."""
        self.running.discard(i)
        self.rows[i].next_attempt_at = due
        self._move(i, QUEUED, now)
        self._record(i, RUNNING, QUEUED, now)

    def take_effects(self) -> Effects:
        """What the rules fired since the last event asked the runtime to do (a step
        failed by its ``when``, settled off the loop, may halt the run)."""
        effects = self._effects
        if not effects:
            return NO_EFFECTS
        self._effects = []
        return effects

    def retry_due(self, i: int) -> None:
        """A retry's delay has passed: the step is ready again."""
        heappush(self._ready, self._rank[i])

    def fail(self, i: int, error: str, now: float) -> None:
        """The step failed for good (retries and fallback spent, or not retryable)."""
        row = self.rows[i]
        source = row.status
        self._move(i, FAILED, now)
        row.error, row.finished_at = error, now
        self.running.discard(i)
        self._record(i, source, FAILED, now)
        step = self.steps[i]
        if self.spec.on_failure == "fail_fast" and not step.allow_failure:
            if not self.halting:  # what runs is cancelled once, as the run halts
                self.halt_reason = f"step {step.id!r} failed (on_failure: fail_fast)"
                self._effects.append(CancelRunning(reason=self.halt_reason))
            self.halting = True
            self.failure_reason = f"step {step.id!r} failed (on_failure: fail_fast)"
        self._finished(i, now)

    def end_attempt(self, i: int, status: str, now: float, error: str | None = None) -> None:
        """Close the step's current attempt in history without moving the step."""
        row = self.rows[i]
        self.attempt_changes.append(AttemptChange(self.ids[i], row.attempts, now, True,
                                                  status, error=error, worker=row.worker))

    def waiting_steps(self) -> list[int]:
        """Steps parked when the run stopped (not map steps, which wait on their
        items)."""
        return [i for i, r in enumerate(self.rows) if r.status is WAITING
                and i not in self.maps]

    def cancel_step(self, i: int, now: float, reason: str) -> None:
        row = self.rows[i]
        if row.status in FINAL_STEP_STATES:
            return
        source = row.status
        if source is RUNNING or source is WAITING:
            self.attempt_changes.append(AttemptChange(self.ids[i], row.attempts, now, True,
                                              "cancelled", error=reason, worker=row.worker))
        self._move(i, CANCELLED, now)
        row.finished_at, row.skip_reason = now, reason
        self.running.discard(i)
        self._record(i, source, CANCELLED, now)
        # when the run goes on (a single step was cancelled), dependants are judged
        self._finished(i, now, propagate=not self.halting)

    # ----------------------------------------------------------------- halting

    def _timer_fired(self, e: TimerFired) -> Effects:
        """A retry's delay (or a pool's rate window) passed: the step is ready again if
        it is still queued.  The run's timeout halts it.  (An approval's deadline is
        decided as a ``DecisionMade`` by ``timeout``, once the runtime stored it; a code
        wait's time as a ``WaitEnded``.)"""
        if e.kind == "run_timeout":
            timeout = self.spec.timeout or 0.0
            return self._halt(f"run timed out after {timeout:g}s", cancelled=False)
        if e.kind in ("retry", "ready") and self.rows[e.i].status is QUEUED:
            self.retry_due(e.i)
        return NO_EFFECTS

    def _cancel_requested(self, e: CancelRequested) -> Effects:
        """Cancel the run (once).  ``interrupted``: nothing will report any more, so
        every step that has not ended is cancelled now."""
        if e.interrupted:
            self.halt(e.reason, cancelled=True)
            for i in list(self.running):
                self.cancel_step(i, e.at, e.reason)
            self.cancel_unstarted(e.at, e.reason)
            return NO_EFFECTS
        if self.cancelled:
            return NO_EFFECTS
        return self._halt(e.reason, cancelled=True)

    def _halt(self, reason: str, *, cancelled: bool) -> Effects:
        self.halt(reason, cancelled=cancelled)
        return [CancelRunning(reason=reason)]

    def halt(self, reason: str, *, cancelled: bool) -> None:
        """Start nothing new (fail-fast, cancel, run timeout).  A cancel or a timeout
        gives the run the reason it stops for; a timeout is its failure."""
        self.halting = True
        self.halt_reason = reason
        self.cancelled = self.cancelled or cancelled
        if not cancelled and self.failure_reason is None:
            self.failure_reason = reason

    def stop_reason(self) -> str:
        """Why the run starts nothing new: what is cancelled is cancelled for it."""
        return self.halt_reason or self.failure_reason or "run stopped"

    def cancel_unstarted(self, now: float, reason: str) -> None:
        """Once halting and nothing runs: every step not final is cancelled."""
        for i, row in enumerate(self.rows):
            if row.status not in FINAL_STEP_STATES and i not in self.running:
                self.cancel_step(i, now, reason)
        self._ready.clear()
        self.when_due.clear()
        self.parked.clear()

    # ----------------------------------------------------------------- rules

    def _finished(self, i: int, now: float, *, propagate: bool = True) -> None:
        self._unfinished -= 1
        if i >= self._static:
            self._item_finished(i, now, propagate)
            return
        if not propagate:
            return
        waiting = self._waiting_parents
        rows = self.rows
        for child in self.graph.children[i]:
            left = waiting[child] = waiting[child] - 1
            if left == 0 and rows[child].status is PENDING:
                self._judge(child, now)

