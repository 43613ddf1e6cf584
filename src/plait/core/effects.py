"""What the run's state asks the runtime to do (returned by ``RunState.apply``).

The state decides; the runtime carries the effects out, in order, and decides
nothing: it sets the timers, starts fallbacks, parks steps and cancels what runs.  Most
events have no effect: they return ``NO_EFFECTS``, a shared empty tuple, so the
path of a step that succeeds allocates nothing.  Starting ready steps is not an
effect: the loop takes them from the ready heap (``pop_ready``) as slots allow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .events import TimerKind
from .states import RunStatus

# why a step is parked: an approval step waits for a person; a Python step asked for
# approval from its code (``ctx.wait_for_approval``) and runs again once approved; a
# step waits for an event or a time (``ctx.wait_for_event``, ``ctx.sleep``, an
# ``event`` step) and runs again once it is there or has come
ParkReason = Literal["approval", "code_approval", "code_wait"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryStep:
    """Step ``i`` is queued again, ready at ``due``: set a timer."""

    i: int
    due: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFallback:
    """Step ``i``'s retries are spent: run its fallback (it stays running meanwhile)."""

    i: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Park:
    """Step ``i`` waits, holding no slot and no task, until an event moves it on;
    ``until``: its deadline when the state knows it."""

    i: int
    reason: ParkReason
    until: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRunning:
    """The run halted: cancel every attempt out and every ``when`` being rendered."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SetTimer:
    """Tell the state ``TimerFired(kind, i)`` at ``due``."""

    kind: TimerKind
    i: int
    due: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Finish:
    """The run ends with ``status``; ``error`` says why when it did not complete."""

    status: RunStatus
    error: str | None = None


Effect = RetryStep | RunFallback | Park | CancelRunning | SetTimer | Finish
Effects = Sequence[Effect]
NO_EFFECTS: tuple[Effect, ...] = ()
