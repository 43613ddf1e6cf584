"""Steps that wait holding nothing (no task, no slot), and the decisions that move
them on.

An approval step is parked as it starts and ends with the decision: approved, it
completes with ``{"approved", "by", "at", "data"}``; rejected, it fails.  A Python step
that asked for approval (``ctx.wait_for_approval``) is parked when its attempt ends;
approved, it is queued again and its next attempt finds the decision; rejected, it
fails.  It waits at most once: asking again after its approval was given fails it.
A deadline (the step's ``timeout``, or the request's) decides as its ``on_timeout``
says, as a decision by ``timeout``; a decision stored first still stands.

A step that waits for an event or a time from its code (``ctx.wait_for_event``,
``ctx.sleep``, an ``event`` step: a *code wait*) is parked when its attempt ends, as
often as it asks; once the event is there or the time has come (``WaitEnded``) it is
queued again and its next attempt finds it.

A Python step may wait for both, in any order, across attempts.  A decision that comes
while its step waits for something else (an event, a time) or runs is kept, as an
event sent before anyone waits for it is kept: when the step then asks for approval,
the kept decision answers at once (approved, it runs again; rejected, it fails).

A parked step may have a time at which it moves on by itself (``due``: a sleep's end,
an event's or an approval's deadline), told by the runtime that read it (``set_due``).
When nothing else can happen (``waits_only``), the run waits: it is stored ``waiting``
with the earliest of those times (``wake_at``), and any process continues it at that
time.  A process that executes the run locally keeps it until then only when a step
sleeps (``sleeps_until``: the run goes on by itself for sure); a run that waits for a
person or an event, even with a deadline, is let go (``plait run`` exits 3).
"""

from __future__ import annotations

from dataclasses import replace

from .effects import Park, ParkReason
from .events import DecisionMade, WaitEnded
from .model import JSON, StepSpec
from .runrows import QUEUED, RUNNING, WAITING, RunRows, heappush
from .states import FINAL_STEP_STATES


def approval_deadline(step: StepSpec, started_at: float) -> float | None:
    """When an approval step that started waiting at ``started_at`` times out."""
    return None if step.timeout is None else started_at + step.timeout


def timeout_approves(on_timeout: JSON) -> bool:
    """Whether a deadline that passed approves (``on_timeout: approve``) or rejects."""
    return on_timeout == "approve"


def rejection(by: JSON) -> str:
    """The error of a step whose approval was refused (by a person or its deadline)."""
    return "approval timed out (rejected)" if by == "timeout" else f"rejected by {by}"


class Parking(RunRows):
    """A run's parked steps and their decisions (see the module docstring)."""

    __slots__ = ()

    def park(self, i: int, reason: ParkReason, now: float, *,
             resumed: bool = False) -> None:
        """Step ``i`` waits: an approval step as it starts, or (``resumed``) a step
        that was waiting when the run stopped."""
        if not resumed:
            self.wait(i, now)
        self.parked[i] = reason

    def set_due(self, i: int, due: float | None, *, sleep: bool = False) -> None:
        """Parked step ``i`` moves on by itself at ``due`` (None: only when told);
        ``sleep``: that time ends its wait (a sleep), not a deadline (a wait for an
        event or a person that may come first)."""
        if due is None:
            self.due.pop(i, None)
        else:
            self.due[i] = (due, sleep)

    def waits_only(self) -> bool:
        """Whether the run has nothing to do but wait for its parked steps: something
        is parked, and nothing runs, is ready, queued for later or being judged."""
        if not self.parked or self.running or self._ready or self.when_due \
                or self.halting or self.done:
            return False
        return not any(row.status is QUEUED for row in self.rows)

    def wake_at(self) -> float | None:
        """When a run that ``waits_only`` continues by itself: the earliest due time of
        its parked steps (None: none has one; it waits to be told)."""
        parked = self.parked
        return min((d for i, (d, _) in self.due.items() if i in parked), default=None)

    def sleeps_until(self) -> float | None:
        """The earliest end of a parked sleep (None: no step sleeps): a run that
        ``waits_only`` surely goes on by itself then, so a local process keeps it."""
        parked = self.parked
        return min((d for i, (d, sleep) in self.due.items() if sleep and i in parked),
                   default=None)

    def wait(self, i: int, now: float) -> None:
        """RUNNING -> WAITING: the step holds no concurrency slot."""
        self._move(i, WAITING, now)
        self.running.discard(i)
        self._record(i, RUNNING, WAITING, now)

    def refuse_wait(self, i: int, reason: str, now: float) -> None:
        """What an approval step asks cannot be shown (it does not render, or is too
        big): it fails, its attempt closed."""
        self.parked.pop(i, None)
        self.end_attempt(i, "failed", now, reason)
        self.fail(i, reason, now)

    def _park_code(self, i: int, now: float, park: Park) -> None:
        """A Python step asked for approval: its attempt ends (``waiting``) and the
        step waits, once; asked again after its approval was given, it fails.  A step
        that waits for an event or a time waits as often as it asks."""
        # (asked again: its next attempt did not see the decision)
        if park.reason == "code_approval" and i in self.given_approval:
            self.end_attempt(i, "failed", now)
            self.fail(i, "the step asked for approval again after its approval was "
                         "given (a step waits at most once)", now)
            return
        self.end_attempt(i, "waiting", now)
        self.park(i, park.reason, now)
        kept = self.kept_decisions.pop(i, None) if park.reason == "code_approval" \
            else None
        if kept is None:
            self._effects.append(park)
        else:  # decided before it asked: the decision answers now
            self._decided(replace(kept, at=now))

    def waits_for(self, i: int, reason: ParkReason) -> None:
        """What resumed code wait ``i`` waits for, once the runtime read its request
        back (it was parked as a code approval until then)."""
        if self.parked.get(i) in ("code_wait", "code_approval"):
            self.parked[i] = reason

    def _wait_ended(self, e: WaitEnded) -> None:
        """What parked code wait ``e.i`` waits for is there: it runs again (a step
        resumed while waiting is parked before its request is read back, as a code
        approval: the runtime tells which it is)."""
        i, now = e.i, e.at
        if self.parked.get(i) not in ("code_wait", "code_approval"):
            return
        del self.parked[i]
        self.due.pop(i, None)
        self._move(i, QUEUED, now)
        self._record(i, WAITING, QUEUED, now)
        heappush(self._ready, self._rank[i])

    def _decided(self, e: DecisionMade) -> None:
        """A decision on parked step ``e.i``; none when it has ended; kept when it
        has not asked for it yet (see the module docstring)."""
        i, now = e.i, e.at
        reason = self.parked.get(i)
        if reason is None or reason == "code_wait":  # (not asked yet: kept)
            if self.rows[i].status not in FINAL_STEP_STATES:
                self.kept_decisions[i] = e
            return
        del self.parked[i]
        self.due.pop(i, None)
        if reason == "code_approval":
            if e.approved:
                self.given_approval.add(i)
                self._move(i, QUEUED, now)
                self._record(i, WAITING, QUEUED, now)
                heappush(self._ready, self._rank[i])
            else:  # (its waiting attempt is closed already)
                self.fail(i, rejection(e.by), now)
        elif e.approved:
            self.succeed(i, {"approved": True, "by": e.by, "at": e.decided_at,
                             "data": e.data}, now)
        else:
            self.end_attempt(i, "failed", now, rejection(e.by))
            self.fail(i, rejection(e.by), now)
