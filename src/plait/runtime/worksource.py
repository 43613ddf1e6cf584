"""The seam between the run loop and whatever executes its attempts.

The run loop (``runtime.loop``) makes every decision about a run: what may start, when
to retry, fall back or fail, what a cancel or an approval means, what is stored and
when.  A ``WorkSource`` only carries attempts out and their outcomes back, so the same
loop can drive a run whose attempts are tasks of this process (``LocalSource``, in
``runtime.local``) or rows that workers of a cluster claim and execute, whose outcomes
come back from an inbox table (``ClaimSource``, in ``runtime.claims``;
docs/design/workers.md).

The contract, from the loop's side:

1. ``open(spawn, report, log)`` is called once, inside the run's TaskGroup, before the
   first ``start``.  ``spawn`` starts a task that the run owns (the source's own
   helpers, or its attempts); ``report`` is how every outcome reaches the loop
   (``RunLoop.report``); ``log`` is the run's step log, where a source whose attempts
   run elsewhere puts what their notes ask of the run (``ctx.wait_for_approval``,
   cache hits).
2. ``start(call, fallback)`` hands over one attempt the loop has begun: RunState counts
   it and holds the step ``running``.  For an attempt of the step itself the start of
   the attempt is committed before ``start`` is called (persist before execute; a
   remote source is called just before that commit and runs nothing until it: point
   5); for the step's fallback (``fallback=True``, after its last attempt failed)
   nothing new is stored first.  ``start`` returns a handle of the source's choosing,
   which the loop keeps while the attempt is out and gives back to ``cancel``; it must
   not report from inside ``start``.
3. ``cancel(handle)`` asks the attempt to stop (the run halts: fail-fast, a cancel, a
   timeout).  It must not report from inside ``cancel`` either.
4. For every ``start`` the source reports exactly one ``Outcome`` naming the same step
   and attempt, later, on the loop's event loop: ``ok`` (the output, already checked to
   be JSON within the run's ``limits.max_output_bytes``), ``error`` or ``refused``
   (with ``error``: what went wrong), ``interrupted`` (the process running it stopped,
   or stopped heartbeating for longer than its lease), or ``cancelled`` (it stopped
   because it was cancelled).  An attempt that ended before its cancel reports how it
   ended.  ``report`` may do a whole turn of the
   loop before it returns, ``start`` calls included (``runtime.turns``).
5. A source is ``remote`` when its attempts run in other processes (``ClaimSource``,
   in ``runtime.claims``).  Then ``start`` only records the attempt and is called
   *before* the commit that stores it ``running``: each batch the loop commits takes
   what ``claims()`` returns (tickets to dispatch, inbox outcomes consumed, tickets
   withdrawn, history notes: the ``ctx.logger`` records the consumed outcomes carry),
   so an attempt and its ticket are stored together, and an outcome is consumed by the
   batch that writes what it caused.  A remote source may also run an attempt in this
   process (``ClaimSource``'s eager attempts): the loop asks its ``reserve(step)``
   before it begins the attempt, and the source starts it only once the batch storing
   it is committed (``committed()``, called by the writer after each commit).  After
   each turn that processed outcomes the loop calls ``applied(outcomes)`` with them
   (dropped ones too).  The loop asks ``remote`` once, when it is built, and ends its
   turns accordingly (``runtime.turns.RemoteTurn``).
   ``adopt(running)`` is asked once, when the loop starts, which of the steps stored
   ``running`` still have their attempt out (a run taken over): it returns their
   handles, and the loop waits for their outcomes instead of counting them
   interrupted.  A local source adopts none.
6. ``close()`` is called once when the loop ends, whatever ended it.  Outcomes reported
   after that are ignored (the TaskGroup's exit cancels attempts still running).

What the loop does with an outcome is the same for every source: it drops (and logs)
an outcome whose attempt is not the step's current one or whose step has no attempt
out (a late result, or one told twice), then gives it to the core (retry, then
fallback, then fail; circuit breakers; fail-fast; a run's end), commits the changes and
starts what became ready.  ``interrupted`` counts as a failed attempt and retries under
the step's policy, as an attempt that was running when a run resumed does.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

from ..core.model import JSON, JSONDict
from ..core.retry import ErrorInfo

if TYPE_CHECKING:
    import asyncio

    from ..steps.context import StepLog
    from ..steps.registry import StepCall
    from ..store.base import AttemptKey, Ticket

OutcomeKind = Literal["ok", "error", "refused", "interrupted", "cancelled"]


class Outcome(NamedTuple):
    """How one attempt ended, as the loop sees it (see the module docstring).

    ``report`` takes an Outcome or the same six values as a plain tuple, in this order
    (the type ``Reported``, of which Outcome is a named form): the loop only unpacks it.
    A source on the hot path reports plain tuples, as ``LocalSource`` does: a tuple
    subclass costs about 1,900 CPU instructions more per attempt to build, unpack and
    free (2% of a no-op step); a frozen dataclass, about four times a NamedTuple's
    cost to build."""

    step: int  # the step's index in the checked workflow
    attempt: int  # the attempt's number (1-based); a fallback has its step's last one
    kind: OutcomeKind
    output: JSON = None  # ok: the attempt's output
    # error, refused, interrupted: what went wrong (``refused``: the step's circuit
    # breaker refused the attempt, which fails it without counting against the breaker)
    error: ErrorInfo | None = None
    fallback: bool = False  # the attempt ran the step's fallback


Reported = tuple[int, int, OutcomeKind, JSON, ErrorInfo | None, bool]  # Outcome's fields
Spawn = Callable[[Coroutine[object, object, None]], "asyncio.Task[None]"]
Report = Callable[[Reported], None]


Claims = tuple[list["Ticket"], list["AttemptKey"], list["AttemptKey"],
               list[tuple[str | None, "JSONDict"]]]


class WorkSource(Protocol):
    """Starts the attempts of one run and brings their outcomes back (module docstring)."""

    @property
    def remote(self) -> bool: ...

    def adopt(self, running: list[int]) -> dict[int, object]: ...

    def claims(self) -> Claims | None: ...

    def applied(self, outcomes: list[Reported]) -> None: ...

    def open(self, spawn: Spawn, report: Report, log: StepLog) -> None: ...

    def start(self, call: StepCall, fallback: bool) -> object: ...

    def cancel(self, handle: object) -> None: ...

    def close(self) -> None: ...

    # remote sources only (the loop never calls these on a source that is not remote)
    def reserve(self, i: int) -> bool: ...  # step i's attempt runs in this process

    def committed(self) -> None: ...  # the batch storing the started attempts committed
