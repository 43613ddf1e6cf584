"""What an attempt's outcome means for its step (SPEC 5), whatever ran the attempt.

``ok``: the core takes the output (it may refuse it: declared keys missing, a reducer
that cannot combine, which fails the attempt instead).  Any failure (``error``, ``refused``,
``interrupted``, a refused output) is retried after the policy's delay; else the step's
fallback runs; else the step fails, which under fail-fast halts the run.  (A circuit
breaker is told of the attempts it let through where they run: ``runtime.runner``.)
Error messages are redacted before the core sees them.
(``cancelled`` needs none of this: the loop cancels the step with its halt reason.)

What the loop must do next is returned, not called back, so nothing here refers to the
loop: a finished run's objects are freed by reference counting, without waiting for
the cyclic garbage collector (see ``runtime.gctune``).
"""

from __future__ import annotations

from collections.abc import Callable

from ..core import expressions
from ..core.jsoncheck import ensure_json
from ..core.model import JSON
from ..core.retry import ErrorInfo
from ..core.runstate import RunState
from ..core.validate import CheckedWorkflow
from ..errors import OutputError, TemplateError, TransitionError
from ..steps.registry import RunAccess, StepCall
from ..steps.secrets import Secrets
from .approvals import Approvals
from .runner import error_info
from .timers import Timers
from .worksource import OutcomeKind

_UNSAID = ErrorInfo(type="RunError", message="the work source reported no error info")

# What the loop does after an outcome: nothing (None); cancel what runs, since a step
# failed for good and under fail-fast the run halted (True); or hand the step's fallback
# to the work source (its StepCall).
FollowUp = StepCall | bool | None


class OutcomeRules:
    """Applies one run's outcomes to its RunState (see the module docstring)."""

    __slots__ = ("_approvals", "_clock", "_max_output_bytes", "_rand", "_secrets", "_state",
                 "_steps", "_timers", "_view")

    def __init__(self, checked: CheckedWorkflow, state: RunState, secrets: Secrets,
                 view: RunAccess, timers: Timers, clock: Callable[[], float],
                 rand: Callable[[], float], approvals: Approvals | None = None) -> None:
        self._approvals = approvals  # parks Python steps that wait for approval
        self._steps = state.steps  # map items included (a list that grows)
        self._max_output_bytes = checked.spec.limits.max_output_bytes
        self._state = state
        self._secrets = secrets
        self._view = view  # what the fallback's call reads of the run
        self._timers = timers
        self._clock = clock
        self._rand = rand  # retry jitter

    def apply(self, i: int, kind: OutcomeKind, output: JSON, error: ErrorInfo | None,
              fallback: bool, now: float) -> FollowUp:
        """Any outcome but ``cancelled``; returns what the loop does next (FollowUp)."""
        state = self._state
        if kind == "ok":
            if self._secrets.redacting:
                output = self._secrets.redact(output)
            try:
                state.succeed(i, output, now, fallback=fallback)
            except (OutputError, TransitionError) as refused:
                error = error_info(refused)
            else:
                return None
        elif (kind == "error" and not fallback and error is not None
              and "ApprovalRequested" in error.names and self._approvals is not None):
            self._approvals.park_code(i, now)  # ctx.wait_for_approval: not a failure
            return None
        return self._fail(i, kind, error or _UNSAID, fallback, now)

    def _fail(self, i: int, kind: OutcomeKind, error: ErrorInfo, fallback: bool,
              now: float) -> FollowUp:
        state, step = self._state, self._steps[i]
        info = ErrorInfo(type=error.type, message=self._secrets.redact_text(error.message)
                         or "", names=error.names, retryable=error.retryable,
                         retry_after=error.retry_after)
        if fallback:
            original = state.rows[i].error
            state.fail(i, f"{original}; fallback failed: {info}", now)
            return True
        delay = state.fail_attempt(i, info, now, self._rand())
        if delay is not None:
            self._timers.add(now + delay, "retry", i)
            return None
        if step.fallback is not None and not state.halting:
            row = state.rows[i]
            call = StepCall(step, i, row.attempts, row.started_at or self._clock(),
                            self._view)
            fb = step.fallback
            if fb.call is None and fb.func is None and expressions.is_cheap(fb.output):
                return self._cheap_fallback(call, now)
            return call
        state.fail(i, str(info), now)
        return True

    def _cheap_fallback(self, call: StepCall, now: float) -> FollowUp:
        """A fallback ``output:`` of cheap templates, rendered at once on the loop."""
        fb = call.step.fallback
        assert fb is not None
        try:
            value = ensure_json(call.render(fb.output, "fallback.output"), step=call.step.id,
                                max_bytes=self._max_output_bytes)
        except (TemplateError, OutputError) as exc:
            return self.apply(call.index, "error", None, error_info(exc), True, now)
        return self.apply(call.index, "ok", value, None, True, now)

