"""The records a ``Store`` keeps and hands back (``store.base`` is the protocol that
stores them): workflows, runs, steps, attempts, history events, cached results, journal
entries, claim tickets and leases, inbox outcomes, and the ``WriteBatch`` the run loop
commits in one transaction, with the helpers that build the errors and notes every
backend stores the same way."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..core.model import JSON, JSONDict
from ..core.runstate import AttemptChange, StepChange, StepRuntime
from ..core.states import RunStatus
from ..errors import StaleWriteError, StoreError
from .outbox import OutboxRow


@dataclass(slots=True, kw_only=True)
class WorkflowRecord:
    """A stored definition.  It is kept as its JSON text and decoded on each access of
    ``definition``, so every caller owns what it gets and nobody pays for decoding a
    large definition it does not read."""

    name: str
    version: int
    fingerprint: str
    definition_json: str
    created_at: float

    @property
    def definition(self) -> JSONDict:
        value = json.loads(self.definition_json)
        assert isinstance(value, dict)
        return value


@dataclass(slots=True, kw_only=True)
class RunRecord:
    run_id: str
    workflow: str
    version: int
    fingerprint: str
    status: RunStatus
    input: JSON
    created_at: float
    output: JSON = None
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    retry_of: str | None = None  # the run this one was retried or forked from
    parent_run_id: str | None = None  # the run whose `workflow` step started this one
    sla: float | None = None
    cancel_requested: bool = False
    owner: str | None = None  # the process executing the run (see claim_run)
    heartbeat_at: float | None = None
    # concurrency keys (docs/schedules.md): the run's key rendered from its input when
    # it was created, and how many runs of that key may execute at once (both None: no
    # key; see claim_run)
    concurrency_key: str | None = None
    max_runs_per_key: int | None = None
    # a ``waiting`` run whose steps wait for a time: the earliest (epoch seconds), when
    # it continues by itself (None: it waits for a person, an event or a child run)
    wake_at: float | None = None


@dataclass(slots=True, kw_only=True)
class StepRecord(StepRuntime):
    """One stored step: the core's row (``StepRuntime``, every field of it) with the
    run and the step it belongs to.  A record is a row: it restores a run as it is."""

    run_id: str
    step_id: str

    @classmethod
    def of(cls, run_id: str, step_id: str, row: StepRuntime) -> StepRecord:
        """A record of ``row``'s values (a copy: the row may change afterwards)."""
        return row.copy_as(cls, run_id=run_id, step_id=step_id)


@dataclass(slots=True, kw_only=True)
class AttemptRecord:
    run_id: str
    step_id: str
    attempt: int
    fallback: bool
    status: str  # running | completed | failed | cancelled
    started_at: float
    finished_at: float | None = None
    error: str | None = None
    worker: str | None = None


@dataclass(slots=True, kw_only=True)
class EventRecord:
    run_id: str
    seq: int
    at: float
    kind: str  # step | attempt | run | note
    step_id: str | None
    data: JSONDict


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedResult:
    """A step result kept by the step cache (``Store.get_cached``)."""

    output: JSON
    run_id: str  # the run whose step completed with it
    created_at: float


def cache_key_hash(key: str) -> str:
    """What the stores index a rendered cache key by (fixed size, however long it is)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Journaled:
    """The stored result of one journaled call of a step (``Store.journal_get``)."""

    value: JSON
    attempt: int  # the attempt of the step whose call stored it
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalEntry:
    """One row of a run's step journal as listed (``Store.journal``): no value."""

    step: str
    name: str
    attempt: int
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    """What ``Store.heartbeat`` found, in the one statement that refreshed the lease:
    whether the caller still held the run (its lease refreshed only then), who holds
    it now (None: nobody), and whether a cancel was requested."""

    held: bool
    owner: str | None
    cancel_requested: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RunDocument:
    """A run with everything stored under it that its document shows, read at once
    (``Store.read_run``): the run, its steps (definition order), attempts (start
    order), history (in order), journal (in the order stored) and the workflow version
    it runs (None when that version is not stored)."""

    run: RunRecord
    steps: list[StepRecord]
    attempts: list[AttemptRecord]
    events: list[EventRecord]
    journal: list[JournalEntry]
    workflow: WorkflowRecord | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Signal:
    """An event sent to a run by name (``Store.event_put``): what waits for that name
    gets ``data``; ``at``: when it was stored (epoch seconds)."""

    name: str
    data: JSON
    at: float


@dataclass(slots=True, kw_only=True)
class RunChange:
    source: RunStatus
    target: RunStatus
    at: float
    output: JSON = None
    error: str | None = None
    # a move to ``waiting``: when the run continues by itself (its parked steps'
    # earliest due time; None: never by itself).  Every move of the run stores it
    # (null unless the run waits)
    wake_at: float | None = None


OutcomeKind = Literal["ok", "error", "interrupted", "cancelled"]
OUTCOME_KINDS: frozenset[str] = frozenset({"ok", "error", "interrupted", "cancelled"})

AttemptKey = tuple[str, int, bool]
"""(step_id, attempt, fallback): one attempt of one step of a batch's run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ticket:
    """A claimable attempt, stored by the driver with ``WriteBatch.dispatch`` in the
    transaction that stores the step ``running`` with this attempt counted.

    ``priority``: lower is claimed first (the driver combines the run's priority and the
    step's critical-path rank into it); tickets of equal priority are claimed in the
    order they were stored.  ``pool`` / ``pool_limit``: at most ``pool_limit`` tickets of
    ``pool`` are claimed at once across the whole store (cluster-wide admission; no
    pool, or no limit: unbounded).  ``rate_count`` / ``rate_period``: the pool's rate
    (``core.model.Rate``): a ticket of ``pool`` is claimed only while fewer than
    ``rate_count`` tickets of ``pool`` that carried a rate were claimed in the last
    ``rate_period`` seconds of store time, across the whole store (the rule of
    ``core.guards.RateWindow``; both None: no rate; ignored without a pool).  Every
    ticket of a pool should carry the pool's one rate: a claim judges the window with
    the period of the ticket it admits.  ``payload``: what a worker needs to run the
    attempt; opaque to the store, stored and returned as given (JSON)."""

    run_id: str
    step_id: str
    attempt: int
    fallback: bool = False
    priority: float = 0.0
    pool: str | None = None
    pool_limit: int | None = None
    payload: JSONDict = field(default_factory=dict)
    rate_count: int | None = None
    rate_period: float | None = None

    @property
    def key(self) -> AttemptKey:
        return (self.step_id, self.attempt, self.fallback)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """A ticket claimed by a worker (``Store.claim_attempts``).  ``token`` fences the
    claim: only a completion carrying it counts, and only while the ticket exists.
    ``expires_at`` is in store time (see the module docstring): informative only."""

    run_id: str
    workflow: str
    version: int
    step_id: str
    attempt: int
    fallback: bool
    token: str
    payload: JSONDict
    expires_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TicketRecord:
    """A stored ticket as ``Store.tickets`` reports it: what a driver taking a run over
    needs to know is in flight.  ``claimed_by`` and ``expires_at`` (store time) are None
    while nobody holds it.  The claim's token is not reported: it is the claimer's."""

    ticket: Ticket
    created_at: float  # store time
    claimed_by: str | None = None
    expires_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InboxOutcome:
    """How one attempt ended, as it waits in the run's inbox for the driver.

    ``kind``: ``ok`` (``output`` is the step's return value), ``error`` (the attempt
    failed: ``error`` describes it), ``interrupted`` (its worker stopped: a reaped lease
    or a drained worker; it counts as a failed attempt that retries under the step's
    policy), ``cancelled`` (the attempt obeyed a cancellation).  ``error``: a JSON
    object such as ``{"type", "message", "retryable", "retry_after"}``.  ``worker``:
    who ran the attempt; the store sets it (the completing worker, or for a reaped
    ticket the one that held it): what a caller of ``complete_attempts`` puts there is
    ignored.  ``at``: when it ended, by the completing worker's clock (store time for a
    reaped ticket); history only, never compared.  ``logs``: the records the attempt
    wrote through ``ctx.logger``, each ``{"level", "message", "attempt", "at"}``, oldest
    first; the driver stores each as a history note ``{"log": record}`` of the step with
    the batch that applies the outcome (what a local run stores)."""

    run_id: str
    step_id: str
    attempt: int
    fallback: bool = False
    kind: OutcomeKind
    output: JSON = None
    error: JSONDict | None = None
    worker: str | None = None
    at: float
    logs: tuple[JSONDict, ...] = ()

    @property
    def key(self) -> AttemptKey:
        return (self.step_id, self.attempt, self.fallback)


def reaped_error(holder: str | None, step_id: str, attempt: int) -> JSONDict:
    """The ``error`` of the ``interrupted`` outcome that ``reap_expired`` stores for an
    expired lease (every backend stores this, so a driver reads one shape)."""
    return {"type": "LeaseExpired",
            "message": f"the worker {holder} stopped heartbeating for longer than its "
                       f"lease on attempt {attempt} of step {step_id!r}, before it stored "
                       f"the attempt's outcome (the process was killed, paused, or a step "
                       f"held the GIL: see executor: process); the attempt counts as "
                       f"failed and retries under the step's retry policy",
            "retryable": True}


def owner_refusal(run_id: str, owner: str, holder: str | None) -> StaleWriteError:
    """A batch refused because its writer no longer drives the run (``WriteBatch.owner``)."""
    return StaleWriteError(f"run {run_id!r} is driven by {holder or 'nobody'}, not by "
                           f"{owner}: its batch was refused (the run was taken over or "
                           f"released)")


def late_result_note(step_id: str, attempt: int, fallback: bool,
                     worker: str) -> JSONDict:
    """The history note a discarded completion leaves (``complete_attempts``)."""
    return {"late_result_discarded": {"step": step_id, "attempt": attempt,
                                      "fallback": fallback, "worker": worker}}


@dataclass(slots=True)
class WriteBatch:
    """Everything that happened together in one run, committed in one transaction.

    The claims lists (see the module docstring) are applied after the step and run
    changes, in this order, and each can refuse the whole batch:

    - ``consumed``: inbox outcomes of this run deleted, because this batch applies
      them.  One that is not in the inbox refuses the batch (StaleWriteError): another
      driver applied it already.
    - ``withdrawn``: tickets of this run deleted whether claimed or not (the driver
      cancelled the step): a worker holding one loses its lease (``extend_leases`` no
      longer returns its token; its completion is discarded).  Absent ones are ignored.
    - ``dispatch``: tickets stored, unclaimed, for this run (each ``run_id`` must be the
      batch's and ``step_id`` one of the run's steps, else StoreError).  A ticket whose
      key is already a ticket or an inbox outcome of the run refuses the batch
      (StaleWriteError).
    """

    run_id: str
    steps: list[StepChange] = field(default_factory=list)
    attempts: list[AttemptChange] = field(default_factory=list)
    run: RunChange | None = None
    notes: list[tuple[str | None, JSONDict]] = field(default_factory=list)
    # Empty tuples by default, not lists: a local run's batches (the memory store's
    # per-step cost) never carry these, and three lists each would cost a measurable
    # share of it.  Give a list to build one up.
    dispatch: Sequence[Ticket] = ()
    consumed: Sequence[AttemptKey] = ()
    withdrawn: Sequence[AttemptKey] = ()
    # Steps added to the run by this batch (the items of an expanded map step: ids
    # ``ID[INDEX]``), each with its position in the run's step order, stored pending
    # before the batch's step changes apply.  An id the run has already refuses the
    # batch (StaleWriteError): it was expanded by another driver.
    new_steps: Sequence[tuple[str, int]] = ()
    # The driver writing the batch (the run loop's worker id), when it must still hold
    # the run: a batch whose run is owned by anyone else (taken over after this
    # driver's lease ran out, or released) is refused whole (StaleWriteError), so a
    # driver paused past its lease can never apply an outcome after another took the
    # run over.  None: no such check (a fork's first batch, a note).
    owner: str | None = None
    # Notifications this batch's events cause (``store.outbox``), stored in its
    # transaction, each unless a row of its id is stored already: a committed event
    # has its notifications committed with it.
    outbox: Sequence[OutboxRow] = ()

    def __bool__(self) -> bool:
        return bool(self.steps or self.attempts or self.run or self.notes or self.dispatch
                    or self.consumed or self.withdrawn or self.new_steps or self.outbox)

    @property
    def claims(self) -> bool:
        """Whether the batch changes tickets or the inbox (a local run's never do)."""
        return bool(self.dispatch or self.consumed or self.withdrawn)


@dataclass(slots=True, kw_only=True)
class RunFilter:
    workflow: str | None = None
    status: RunStatus | None = None
    since: float | None = None  # created_at >= since
    before: float | None = None  # created_at <= before (a page cursor's time)
    limit: int = 50
    # only runs without a parent (``parent_run_id`` None): what `plait runs` and
    # GET /api/runs list unless asked for child runs too
    top_level: bool = False


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """The tokens of one model call (its ``usage``), as ``Store.add_llm_tokens`` adds
    them: each a whole number of at least 0."""

    prompt: int = 0
    completion: int = 0
    total: int = 0

    def checked(self) -> TokenUsage:
        """This usage, or StoreError naming the count that is not a whole number >= 0."""
        for name in ("prompt", "completion", "total"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise StoreError(f"a count of tokens ({name}) must be a whole number of "
                                 f"at least 0, got {value!r}")
        return self
