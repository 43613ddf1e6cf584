"""What follows an attempt that did not succeed: pure decisions of the step's policy.

After a failed attempt the step is retried after its policy's delay (unless the run is
halting or the policy says no); else its fallback runs; else it fails for good.  A
fallback's own failure fails the step, keeping the error that made the fallback
necessary.  A Python step that asked for approval (``ctx.wait_for_approval``) did not
fail: it is parked until a person decides; nor did one that waits for an event or a
time (``ctx.wait_for_event``, ``ctx.sleep``): it is parked until that is there.

A ``workflow`` or ``loop`` step whose child run did not complete fails for good,
naming the child (``child_failure``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import OutputError, StepError
from .effects import Park, RetryStep, RunFallback
from .events import AttemptKind, ChildEnded
from .jsoncheck import clean_text
from .model import StepSpec
from .retry import ErrorInfo, next_delay
from .states import RunStatus

# the class name of the exception a step raises to wait for approval
APPROVAL_REQUESTED = "ApprovalRequested"
# ...and for an event or a time (the base class of EventRequested, SleepRequested)
WAIT_REQUESTED = "WaitRequested"


@dataclass(frozen=True, slots=True, kw_only=True)
class Fail:
    """The step fails for good, ``reason`` stored as its error."""

    reason: str


AfterAttempt = RetryStep | RunFallback | Park | Fail


def after_attempt(step: StepSpec, i: int, *, kind: AttemptKind, error: ErrorInfo,
                  attempts: int, fallback: bool, first_error: str | None,
                  halting: bool, at: float, rand: float) -> AfterAttempt:
    """The decision after attempt number ``attempts`` of ``step`` (row ``i``) failed
    with ``error`` at ``at``.  ``first_error``: the error stored on the step before
    its fallback ran; ``rand`` in [0, 1): the retry's jitter."""
    if fallback:
        return Fail(reason=f"{first_error}; fallback failed: {error}")
    if kind == "error" and APPROVAL_REQUESTED in error.names:
        return Park(i=i, reason="code_approval")
    if kind == "error" and WAIT_REQUESTED in error.names:
        return Park(i=i, reason="code_wait")
    delay = None if halting else next_delay(step.retry, attempts, error, rand)
    if delay is not None:
        return RetryStep(i=i, due=at + delay)
    if step.fallback is not None and not halting:
        return RunFallback(i=i)
    return Fail(reason=str(error))


def refused_output(exc: OutputError | Exception) -> ErrorInfo:
    """What the state tells of an output it refused (declared keys missing, a reducer
    that cannot combine): a failure of the attempt like any other."""
    names = tuple(clean_text(c.__name__) for c in type(exc).__mro__
                  if c not in (object, BaseException, Exception))
    retryable = bool(getattr(exc, "retryable", True)) if isinstance(exc, StepError) \
        else True
    return ErrorInfo(type=names[0], message=clean_text(str(exc)), names=names,
                     retryable=retryable)


def child_failure(step: StepSpec, child: ChildEnded, run_id: str, workflow: str) -> str | None:
    """Why step ``step`` fails because its child run ``run_id`` (of ``workflow``)
    ended as it did; None when the child completed (its output is the step's)."""
    if child.status is RunStatus.COMPLETED:
        return None
    return (f"step {step.id!r}: child run {run_id} of workflow {workflow!r} "
            f"{child.status}: {child.error or 'no error recorded'}")
