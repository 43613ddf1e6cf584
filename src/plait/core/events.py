"""What happens to a run, told to its state (``RunState.apply``).

Everything that moves a run from the outside arrives as one of these: an attempt's
end, a person's decision, an awaited event or time, a timer, a child run's end, a
cancel request.  Each carries the time it is applied at (``at``) and whatever
randomness its rule needs (``rand``), so the state that judges it stays
deterministic.  Values are redacted by the runtime before it builds an event: the
core never sees a secret it would store.

The most frequent event, an attempt that succeeded, also has a direct entry
(``RunState.attempt_ok``) that takes the same fields without building the object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .model import JSON
from .retry import ErrorInfo
from .states import RunStatus

# how an attempt ended: ``refused`` is a circuit breaker's refusal to start it
AttemptKind = Literal["ok", "error", "refused", "interrupted", "cancelled"]
# the timers a run sets: a retry (or a rate window) is due, an approval's deadline
# passed (or an event's wait timed out), the run's own timeout passed, a sleep is over
TimerKind = Literal["retry", "ready", "approval_timeout", "run_timeout", "wake"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptEnded:
    """The current attempt of step ``i`` (or its fallback's, ``fallback``) ended.
    ``rand`` in [0, 1) is the jitter of a retry it may cause."""

    i: int
    kind: AttemptKind
    at: float
    output: JSON = None
    error: ErrorInfo | None = None
    fallback: bool = False
    rand: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionMade:
    """A person (or a deadline, ``by="timeout"``) decided on waiting step ``i``;
    ``decided_at`` is when, as stored; ``data`` what they gave with it."""

    i: int
    approved: bool
    by: JSON
    at: float
    decided_at: JSON = None
    data: JSON = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitEnded:
    """What step ``i`` waits for from its code (``ctx.wait_for_event`` / ``ctx.sleep``)
    is there: the event was sent, or the time came."""

    i: int
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TimerFired:
    """A timer the run set (``SetTimer``, ``Retry``) is due (``i`` -1: the run's own)."""

    kind: TimerKind
    i: int
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildEnded:
    """The child run that step ``i`` waits on ended with ``status``."""

    i: int
    status: RunStatus
    at: float
    output: JSON = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequested:
    """The run is cancelled on request; ``interrupted``: its own task was cancelled
    (Ctrl-C), so no attempt will report its end."""

    reason: str
    at: float
    interrupted: bool = False


Event = AttemptEnded | DecisionMade | WaitEnded | TimerFired | ChildEnded | CancelRequested
