"""The memory store's tickets and outcome inbox (the claims capability of
``store.base``, whose docstring is the contract).

Nothing here awaits, so each method runs whole between two turns of the event loop:
that is the memory store's transaction.  Store time is ``time.time()`` at the call.

Unclaimed tickets wait in a heap ordered by (priority, stored order); a ticket that
leaves the heap other than by a claim (withdrawn) is marked gone and skipped when it
surfaces.  Claimed tickets are found by token; each pool counts its claimed tickets
and, when its tickets carry a rate, keeps the core's ``RateWindow`` of its claims.
"""

from __future__ import annotations

import copy
import heapq
import time
import uuid
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field, replace

from ..core.guards import RateWindow
from ..core.model import JSONDict, Rate
from ..core.runstate import StepRuntime
from ..errors import StaleWriteError, StoreError
from .base import (
    AttemptKey,
    InboxOutcome,
    Lease,
    RunRecord,
    Ticket,
    TicketRecord,
    WriteBatch,
    late_result_note,
    reaped_error,
)
from .json_copy import copy_json, owned_json
from .records import OUTCOME_KINDS

Note = Callable[[str, str, JSONDict], None]  # (run_id, step_id, data): a history note


@dataclass(slots=True, eq=False)
class _Held:
    """One stored ticket (its payload the store's own copy) and its claim, if any."""

    ticket: Ticket
    created_at: float
    token: str | None = None
    claimed_by: str | None = None
    expires_at: float | None = None
    gone: bool = False  # deleted: its heap entry, if any, is skipped


@dataclass(slots=True)
class ClaimsPlan:
    """What a checked batch changes in the tickets and the inbox (applied after the
    batch's other changes, when nothing can refuse it any more)."""

    run_id: str
    consumed: list[AttemptKey] = field(default_factory=list)
    withdrawn: list[_Held] = field(default_factory=list)
    dispatched: list[_Held] = field(default_factory=list)


class MemoryClaims:
    """Tickets and inboxes of every run of one memory store."""

    def __init__(self, runs: dict[str, RunRecord],
                 rows: dict[str, dict[str, StepRuntime | None]], note: Note) -> None:
        self._runs = runs  # the store's own dicts, read (and step rows' worker set)
        self._rows = rows
        self._note = note
        self._tickets: dict[str, dict[AttemptKey, _Held]] = {}  # by run
        self._inbox: dict[str, dict[AttemptKey, InboxOutcome]] = {}  # by run, oldest first
        self._unclaimed: list[tuple[float, int, _Held]] = []  # heap
        self._claimed: dict[str, _Held] = {}  # by token
        self._pool_held: dict[str, int] = {}  # claimed tickets per pool
        self._windows: dict[str, RateWindow] = {}  # claims of rated tickets per pool
        self._stored = 0  # tickets ever stored: their order

    def ticket_counts(self) -> tuple[int, int]:
        """(unclaimed, claimed) tickets of every run."""
        total = sum(len(t) for t in self._tickets.values())
        return total - len(self._claimed), len(self._claimed)

    # ------------------------------------------------------------ in write()

    def check(self, batch: WriteBatch, steps: Container[str]) -> ClaimsPlan:
        """The batch's claims lists checked against the stored tickets and inbox, in the
        order they apply (consumed, withdrawn, dispatch); raises what refuses the batch
        and changes nothing."""
        run_id = batch.run_id
        plan = ClaimsPlan(run_id)
        inbox = self._inbox.get(run_id, {})
        tickets = self._tickets.get(run_id, {})
        consumed = set()
        for key in batch.consumed:
            if key not in inbox or key in consumed:
                raise StaleWriteError(f"run {run_id!r}: no outcome of attempt {key[1]} of "
                                      f"step {key[0]!r} (fallback {key[2]}) is in the "
                                      f"inbox; another driver applied it already")
            consumed.add(key)
            plan.consumed.append(key)
        gone = {key for key in batch.withdrawn if key in tickets}
        plan.withdrawn = [tickets[key] for key in gone]
        now = time.time()
        taken: set[AttemptKey] = set()
        for ticket in batch.dispatch:
            key = _checked_key(ticket, run_id, steps)
            if (key in tickets and key not in gone) or key in taken \
                    or (key in inbox and key not in consumed):
                raise StaleWriteError(f"run {run_id!r}: attempt {key[1]} of step "
                                      f"{key[0]!r} (fallback {key[2]}) is dispatched "
                                      f"already")
            taken.add(key)
            payload = owned_json(ticket.payload, f"the payload of the ticket of step "
                                                 f"{key[0]!r} of run {run_id!r}")
            plan.dispatched.append(_Held(replace(ticket, payload=payload), now))
        return plan

    def apply(self, plan: ClaimsPlan) -> None:
        inbox = self._inbox.get(plan.run_id)
        for key in plan.consumed:
            assert inbox is not None
            del inbox[key]
        for held in plan.withdrawn:
            self._drop(held)
        if plan.dispatched:
            tickets = self._tickets.setdefault(plan.run_id, {})
            for held in plan.dispatched:
                tickets[held.ticket.key] = held
                self._stored += 1
                heapq.heappush(self._unclaimed, (held.ticket.priority, self._stored, held))

    def _drop(self, held: _Held) -> None:
        """Delete a stored ticket, releasing its claim and its pool slot."""
        ticket = held.ticket
        held.gone = True
        del self._tickets[ticket.run_id][ticket.key]
        if held.token is not None:
            del self._claimed[held.token]
            if ticket.pool is not None:
                self._pool_held[ticket.pool] -= 1

    # ------------------------------------------------------------ workers

    def claim(self, worker: str, limit: int, lease: float) -> list[Lease]:
        heap = self._unclaimed
        picked: list[Lease] = []
        blocked: list[tuple[float, int, _Held]] = []  # pools at their limit: put back
        now = time.time()
        expires = now + lease
        while heap and len(picked) < limit:
            entry = heapq.heappop(heap)
            held = entry[2]
            if held.gone:
                continue
            pool, cap = held.ticket.pool, held.ticket.pool_limit
            if pool is not None:  # every claimed ticket of a pool counts, limited or not
                in_pool = self._pool_held.get(pool, 0)
                window = self._window(held.ticket)
                if (cap is not None and in_pool >= cap) \
                        or (window is not None and window.wait(now) > 0):
                    blocked.append(entry)
                    continue
                self._pool_held[pool] = in_pool + 1
                if window is not None:
                    window.record(now)
            picked.append(self._take(held, worker, expires))
        for entry in blocked:
            heapq.heappush(heap, entry)
        return picked

    def _window(self, ticket: Ticket) -> RateWindow | None:
        """The rate window of a rated ticket's pool (its rate the ticket's: the newest
        dispatched definition's, its claims so far kept)."""
        if ticket.pool is None or ticket.rate_count is None or ticket.rate_period is None:
            return None
        rate = Rate(count=ticket.rate_count, period=ticket.rate_period)
        window = self._windows.get(ticket.pool)
        if window is None:
            window = self._windows[ticket.pool] = RateWindow(rate)
        elif window.rate != rate:
            window.rate = rate
        return window

    def _take(self, held: _Held, worker: str, expires: float) -> Lease:
        ticket = held.ticket
        token = uuid.uuid4().hex
        held.token, held.claimed_by, held.expires_at = token, worker, expires
        self._claimed[token] = held
        rows = self._rows[ticket.run_id]
        row = rows.get(ticket.step_id)
        if row is not None:  # a copy: the core may still hold the stored row
            row = rows[ticket.step_id] = copy.copy(row)
            row.worker = worker
        run = self._runs[ticket.run_id]
        return Lease(run_id=ticket.run_id, workflow=run.workflow, version=run.version,
                     step_id=ticket.step_id, attempt=ticket.attempt,
                     fallback=ticket.fallback, token=token,
                     payload=copy_json(ticket.payload), expires_at=expires)

    def extend(self, worker: str, tokens: Sequence[str], lease: float) -> set[str]:
        expires = time.time() + lease
        held_still = set()
        for token in tokens:
            held = self._claimed.get(token)
            if held is not None and held.claimed_by == worker:
                held.expires_at = expires
                held_still.add(token)
        return held_still

    def complete(self, worker: str, results: Sequence[tuple[str, InboxOutcome]]) -> list[bool]:
        owned = [_owned_outcome(outcome, worker) for _, outcome in results]  # may refuse
        done = []
        for (token, _), outcome in zip(results, owned, strict=True):
            held = self._tickets.get(outcome.run_id, {}).get(outcome.key)
            if held is None or held.token != token or held.claimed_by != worker:
                if outcome.run_id in self._runs:
                    self._note(outcome.run_id, outcome.step_id, late_result_note(
                        outcome.step_id, outcome.attempt, outcome.fallback, worker))
                done.append(False)
                continue
            self._drop(held)
            self._inbox.setdefault(outcome.run_id, {})[outcome.key] = outcome
            done.append(True)
        return done

    def reap(self, limit: int) -> list[tuple[str, str, int]]:
        now = time.time()
        expired = [h for h in self._claimed.values()
                   if h.expires_at is not None and h.expires_at < now]
        expired.sort(key=lambda h: h.expires_at or 0.0)
        reaped = []
        for held in expired[:max(limit, 0)]:
            ticket = held.ticket
            self._drop(held)
            self._inbox.setdefault(ticket.run_id, {})[ticket.key] = InboxOutcome(
                run_id=ticket.run_id, step_id=ticket.step_id, attempt=ticket.attempt,
                fallback=ticket.fallback, kind="interrupted",
                error=reaped_error(held.claimed_by, ticket.step_id, ticket.attempt),
                worker=held.claimed_by, at=now)
            reaped.append((ticket.run_id, ticket.step_id, ticket.attempt))
        return reaped

    # ------------------------------------------------------------ reads

    def outcomes(self, run_id: str) -> list[InboxOutcome]:
        return [replace(o, output=copy_json(o.output), error=copy_json(o.error),
                        logs=tuple(copy_json(list(o.logs))))
                for o in self._inbox.get(run_id, {}).values()]

    def tickets(self, run_id: str) -> list[TicketRecord]:
        return [TicketRecord(ticket=replace(h.ticket, payload=copy_json(h.ticket.payload)),
                             created_at=h.created_at, claimed_by=h.claimed_by,
                             expires_at=h.expires_at)
                for h in self._tickets.get(run_id, {}).values()]


def _checked_key(ticket: Ticket, run_id: str, steps: Container[str]) -> AttemptKey:
    if ticket.run_id != run_id:
        raise StoreError(f"a batch of run {run_id!r} dispatches a ticket of run "
                         f"{ticket.run_id!r}: a batch writes one run")
    if ticket.step_id not in steps:
        raise StoreError(f"run {run_id!r} has no step {ticket.step_id!r} (dispatched)")
    return ticket.key


def _owned_outcome(outcome: InboxOutcome, worker: str) -> InboxOutcome:
    """The store's own copy of an outcome as completed by ``worker`` (StoreError when
    its kind is unknown or a value is not JSON)."""
    what = (f"the outcome of attempt {outcome.attempt} of step {outcome.step_id!r} of run "
            f"{outcome.run_id!r}")
    if outcome.kind not in OUTCOME_KINDS:
        raise StoreError(f"{what}: unknown kind {outcome.kind!r} (known: "
                         f"{', '.join(sorted(OUTCOME_KINDS))})")
    return replace(outcome, output=owned_json(outcome.output, f"{what}: its output"),
                   error=owned_json(outcome.error, f"{what}: its error"), worker=worker,
                   logs=tuple(owned_json(list(outcome.logs), f"{what}: its logs")))
