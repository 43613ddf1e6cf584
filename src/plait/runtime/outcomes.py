"""Feeding a run's attempt outcomes to its state, and carrying out what it decides.

The state decides what an outcome means for its step (``core.policy``: retry, then
fallback, then fail, or park a Python step that asked for approval) and returns
effects; this carries them out, whatever ran the attempt: a retry's timer, the
fallback's start (a fallback ``output:`` of cheap templates is rendered here, at
once), a parked step's deadline, and cancelling what runs when the run halted.  (A
circuit breaker is told of the attempts it let through where they run:
``runtime.runner``.)

What the runtime adds before the state sees an outcome: secrets are redacted from
outputs and error messages, and a retry's jitter is drawn.  (``cancelled`` needs none
of this: the state cancels the step for the reason the run halted.)

Nothing here refers to the loop: a finished run's objects are freed by reference
counting, without waiting for the cyclic garbage collector (see ``runtime.gctune``).
"""

from __future__ import annotations

from collections.abc import Callable

from ..core import expressions
from ..core.effects import CancelRunning, Effects, Park, RetryStep, RunFallback, SetTimer
from ..core.events import AttemptEnded
from ..core.jsoncheck import ensure_json
from ..core.model import JSON
from ..core.retry import ErrorInfo
from ..core.runstate import RunState
from ..core.validate import CheckedWorkflow
from ..errors import OutputError, TemplateError
from ..steps.registry import RunAccess, StepCall
from ..steps.secrets import Secrets
from .approvals import Approvals
from .halt import Halt
from .runner import error_info
from .timers import Timers
from .worksource import OutcomeKind


class OutcomeEffects:
    """One run's outcomes into its state, and the state's effects carried out (see the
    module docstring)."""

    __slots__ = ("_approvals", "_clock", "_halt", "_max_output_bytes", "_out", "_rand",
                 "_secrets", "_start", "_state", "_steps", "_timers", "_view")

    def __init__(self, checked: CheckedWorkflow, state: RunState, secrets: Secrets,
                 view: RunAccess, timers: Timers, clock: Callable[[], float],
                 rand: Callable[[], float], approvals: Approvals, halt: Halt,
                 out: dict[int, object], start: Callable[[StepCall, bool], object]) -> None:
        self._approvals = approvals  # parks Python steps that wait for approval
        self._steps = state.steps  # map items included (a list that grows)
        self._max_output_bytes = checked.spec.limits.max_output_bytes
        self._state = state
        self._secrets = secrets
        self._view = view  # what the fallback's call reads of the run
        self._timers = timers
        self._clock = clock
        self._rand = rand  # retry jitter
        self._halt = halt
        self._out = out  # the loop's attempts out: step -> the work source's handle
        self._start = start  # WorkSource.start

    def apply(self, i: int, kind: OutcomeKind, output: JSON, error: ErrorInfo | None,
              fallback: bool, now: float) -> None:
        """An attempt's outcome: the state judges it, its effects are carried out."""
        if kind == "ok":
            if self._secrets.redacting:
                output = self._secrets.redact(output)
            effects = self._state.attempt_ok(i, output, now, self._rand(),
                                             fallback=fallback)
        else:
            effects = self._state.apply(AttemptEnded(
                i=i, kind=kind, at=now, error=self._redacted(error), fallback=fallback,
                rand=self._rand()))
        if effects:
            self.carry_out(effects, now)

    def _redacted(self, error: ErrorInfo | None) -> ErrorInfo | None:
        if error is None:
            return None
        return ErrorInfo(type=error.type, message=self._secrets.redact_text(error.message)
                         or "", names=error.names, retryable=error.retryable,
                         retry_after=error.retry_after)

    def carry_out(self, effects: Effects, now: float) -> None:
        """Do what the state asked, in order."""
        for effect in effects:
            if isinstance(effect, RetryStep):
                self._timers.add(effect.due, "retry", effect.i)
            elif isinstance(effect, SetTimer):
                self._timers.add(effect.due, effect.kind, effect.i)
            elif isinstance(effect, RunFallback):
                self._run_fallback(effect.i, now)
            elif isinstance(effect, Park):
                self._approvals.park_code(effect.i, now)
            elif isinstance(effect, CancelRunning):
                self._halt.cancel_running()

    def _run_fallback(self, i: int, now: float) -> None:
        step, row = self._steps[i], self._state.rows[i]
        call = StepCall(step, i, row.attempts, row.started_at or self._clock(), self._view)
        fb = step.fallback
        assert fb is not None
        if fb.call is None and fb.func is None and expressions.is_cheap(fb.output):
            self._cheap_fallback(call, now)
        else:
            self._out[i] = self._start(call, True)

    def _cheap_fallback(self, call: StepCall, now: float) -> None:
        """A fallback ``output:`` of cheap templates, rendered at once on the loop."""
        fb = call.step.fallback
        assert fb is not None
        try:
            value = ensure_json(call.render(fb.output, "fallback.output"), step=call.step.id,
                                max_bytes=self._max_output_bytes)
        except (TemplateError, OutputError) as exc:
            self.apply(call.index, "error", None, error_info(exc), True, now)
            return
        self.apply(call.index, "ok", value, None, True, now)
