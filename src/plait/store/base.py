"""The one persistence protocol.  Every backend (memory, SQLite, PostgreSQL) implements
``Store`` and passes the one conformance suite in ``tests/conformance``.

Contract highlights:
- ``write(batch)`` is atomic: every change in the batch is stored, or none is.
- Each step change names the status it moves *from*; a backend refuses (StaleWriteError)
  a change whose source is not the stored status, and (TransitionError) one the
  transition table forbids.  This is how persist-before-execute and fencing hold.
- Stored values are JSON only.  Capabilities: each backend declares what it does
  (``shared``, ``in_process``, ``notify``: ``store.capabilities``); the runtime asks
  that, never the store's class, and the conformance suite holds each to its answers.
- Schedules (docs/schedules.md): ``claim_fire`` creates the run of one fire of a
  schedule exactly once across every process sharing the store (the fire is a unique
  row, recorded in the transaction that creates the run); ``last_fire`` tells a
  scheduler where a schedule stopped, recording its first sighting for all of them.

Claims (``docs/design/workers.md``): how the attempts of a run are executed by any
number of processes while ONE process decides everything about the run.

- A run is driven by one process, its **driver**: the holder of the run lease
  (``claim_run`` / ``heartbeat`` / ``release_run``).  Only the driver moves the run's
  step rows (a claim only names its worker there), and it decides every rule (trigger
  rules, retries, fallbacks, the run's end) through the pure core.
- With the step change that stores a step ``running`` and counts its attempt, the
  driver's ``WriteBatch`` stores a **ticket** (``dispatch``): a claimable attempt.
  Unless the attempt is **eager**: the driving worker has a free slot and the step no
  store-wide limit (pool, breaker), so it runs the attempt itself once that batch is
  committed (``runtime.claims.ClaimSource.reserve``), reporting to its loop directly.
- Any process claims tickets (``claim_attempts``), keeps its leases alive
  (``extend_leases``) while it runs them, and completes them (``complete_attempts``) into
  the run's **outcome inbox**.  A ticket whose lease runs out is turned into an
  ``interrupted`` outcome by any process's reaper (``reap_expired``).
- The driver reads the inbox (``outcomes``), applies each outcome through the core, and
  deletes the inbox row in the same transaction that writes the changes it caused
  (``WriteBatch.consumed``).  A crash before that commit leaves the outcome in the inbox
  for the next driver; after it, the outcome is gone and its effects are stored: every
  outcome is applied exactly once.
- Fences: a ticket is keyed by (run, step, attempt, fallback) and, once claimed, carries
  a random token.  A completion counts only while the ticket with that key and token
  still exists (attempt n's token never completes attempt n + 1); an inbox row exists at
  most once per key, so a late result and the reaper's ``interrupted`` never both count;
  consuming an outcome that is not in the inbox refuses the whole batch, so two drivers
  never both apply one outcome.
- Invariant: a step stored ``running`` in a run driven on a cluster has a ticket or an
  inbox outcome for its current attempt, or is an eager attempt of its driver, from the
  transaction that started the attempt until the one that applied its outcome (a new
  driver counts an eager attempt of a dead one interrupted, as a resume does).  So
  "running with its attempt counted before the function is called" holds as locally.
- **Store time.**  Lease expiry and staleness are judged with the store's clock at the
  moment of the transaction, never with a worker's: the memory and SQLite stores use
  ``time.time()`` of the process running the transaction (one host), PostgreSQL uses
  ``clock_timestamp()`` in SQL.  ``Lease.expires_at`` and ``TicketRecord.expires_at``
  are in store time: a worker uses them for display, never to decide that it lost a
  lease (``extend_leases`` tells it).
- Every claims method is ONE transaction (one round trip on a server), atomic and safe
  when many processes call it at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..core.model import JSON, JSONDict
from .capabilities import StoreCapabilities
from .observations import MetricsSnapshot
from .outbox import OutboxRow
from .prune import BATCH, PruneCounts

# the records are part of this contract: importable from here as from records
from .records import (
    AttemptKey,
    AttemptRecord,
    CachedResult,
    EventRecord,
    Heartbeat,
    InboxOutcome,
    Journaled,
    JournalEntry,
    Lease,
    OutcomeKind,
    RunChange,
    RunDocument,
    RunFilter,
    RunRecord,
    Signal,
    StepRecord,
    Ticket,
    TicketRecord,
    TokenUsage,
    WorkflowRecord,
    WriteBatch,
    cache_key_hash,
    late_result_note,
    owner_refusal,
    reaped_error,
)

__all__ = [
    "AttemptKey", "AttemptRecord", "CachedResult", "EventRecord", "Heartbeat",
    "InboxOutcome", "JournalEntry", "Journaled", "Lease", "OutboxRow", "OutcomeKind",
    "RunChange", "RunDocument", "RunFilter", "RunRecord", "Signal", "StepRecord", "Store",
    "Ticket", "TicketRecord", "TokenUsage", "WorkflowRecord",
    "WriteBatch", "cache_key_hash", "late_result_note", "owner_refusal", "reaped_error",
]


class Store(Protocol):
    """Async persistence for workflows, runs, steps, attempts and history."""

    url: str
    capabilities: StoreCapabilities  # what the backend does (see the module docstring)

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def save_workflow(self, name: str, definition: JSONDict | str, fingerprint: str,
                            version: int | None) -> WorkflowRecord:
        """Store a definition (a dict, or its JSON text when the caller has it already
        encoded: it is stored as given).  Without ``version``: the stored version with
        this fingerprint (the highest, should several have it), else the next version,
        so a definition run again after another one reuses its version.  With
        ``version``: that version, refusing (VersionConflict) one stored with another
        fingerprint."""
        ...

    async def get_workflow(self, name: str, version: int | None = None) -> WorkflowRecord:
        """The given version, or the latest; WorkflowNotFound otherwise."""
        ...

    async def list_workflows(self) -> list[WorkflowRecord]: ...

    async def create_run(self, run: RunRecord, step_ids: Sequence[str]) -> None:
        """Store a new run with every step ``pending``."""
        ...

    async def write(self, batch: WriteBatch) -> None:
        """Commit a batch atomically (see the module docstring).  A run change stores
        the run's ``wake_at`` with its status: the change's for a move to ``waiting``,
        None for any other move."""
        ...

    async def get_run(self, run_id: str) -> RunRecord:
        """RunNotFound when absent."""
        ...

    async def list_runs(self, filter: RunFilter) -> list[RunRecord]:
        """Newest first."""
        ...

    async def read_run(self, run_id: str) -> RunDocument:
        """The run with its steps, attempts, history and journal, as ``get_run``,
        ``get_steps``, ``get_attempts``, ``get_events`` and ``journal`` give them, and
        its workflow version as ``get_workflow`` gives it (None when not stored), read
        at once: one statement on PostgreSQL, one read transaction on SQLite (a
        consistent snapshot either way).  RunNotFound when absent."""
        ...

    async def get_steps(self, run_id: str) -> list[StepRecord]:
        """In definition order: each step's row as last written (a step never written:
        ``pending``, nothing else set), every field of the core's ``StepRuntime`` (which
        a ``StepRecord`` is), with its run and step."""
        ...

    async def get_steps_by_id(self, run_id: str,
                              step_ids: Sequence[str]) -> list[StepRecord]:
        """The rows of the named steps, as ``get_steps`` gives them, in definition order;
        an id the run has no step of is left out.  One indexed read however many are
        named (what a worker reads of a run that its ticket left out).  RunNotFound
        when the run is absent."""
        ...

    async def get_attempts(self, run_id: str) -> list[AttemptRecord]:
        """Ordered by start time."""
        ...

    async def get_events(self, run_id: str, after: int = 0) -> list[EventRecord]:
        """The run's history with ``seq > after``, in order.  ``seq`` increases within a
        run (backends may number per run or globally)."""
        ...

    async def parents_to_wake(self, limit: int) -> list[str]:
        """Up to ``limit`` ids of ``waiting`` runs, oldest (``created_at``) first, with
        a step that waits for a child run that has ended: a step stored ``waiting``
        whose latest wait note (a note ``{"wait": {...}}`` of the step) is
        ``{"kind": "child", "child_run_id": ID}`` with run ID stored completed, failed
        or cancelled.  A parent whose step waits for anything else (a person, an
        event, a child still running), or whose ended children belong to steps that
        wait no more, is not listed."""
        ...

    async def record_decision(self, run_id: str, step_id: str, decision: JSONDict) -> None:
        """Store a person's decision on an approval step as a note of the step
        (``{"approval": decision}``), as ONE compare-and-set: only when no decision on
        the step is stored yet (DecisionTaken, carrying the standing decision,
        otherwise: the first stands, whichever process sent it) and the step is
        ``waiting`` (StaleWriteError otherwise).  RunNotFound for an unknown run,
        StoreError for an unknown step."""
        ...

    async def request_cancel(self, run_id: str) -> None:
        """Flag the run; whoever executes it notices and cancels it."""
        ...

    async def claim_run(self, run_id: str, owner: str, now: float, lease: float, *,
                        dead_owner: str | None = None) -> RunRecord | None:
        """Take ownership of a run to execute it: succeeds (returning the run) when it has
        no owner, is already ``owner``'s, is still ``dead_owner``'s (a process the
        caller knows has exited: taken over without waiting for its lease), or its
        owner's heartbeat is older than ``lease`` seconds; returns None when another
        live owner holds it.  The heartbeat becomes ``now``.  Atomic.  A store shared by
        hosts (PostgreSQL) judges the lease on the database's clock and reads ``now`` as
        a distance from the caller's present (``PostgresStore.claim_run``), so hosts
        whose clocks disagree agree on when a lease ran out.

        Concurrency keys (docs/schedules.md): a run with a ``concurrency_key`` that is ``pending``
        or ``waiting``, not already ``owner``'s and not asked to cancel (cancelling it
        needs the claim; it runs no step) is taken only while fewer than its
        ``max_runs_per_key`` OTHER runs of the key hold a slot; otherwise None, as for
        a held run.  A run holds a slot while it is ``running`` (whether or not its
        driver is alive: a takeover continues it), or ``pending`` / ``waiting`` with a
        live owner (claimed to start or continue: heartbeat within ``lease``).  A
        ``running`` run is never refused for its key.  The count and the claim are one
        atomic step: concurrent claimers never both take a key's last slot."""
        ...

    async def heartbeat(self, run_id: str, owner: str, now: float) -> Heartbeat:
        """Refresh ownership, when ``owner`` still holds the run (``held``), and say in
        the same statement who holds it and whether a cancel was requested: the one
        store call a driver makes per poll.  RunNotFound for an unknown run."""
        ...

    async def release_run(self, run_id: str, owner: str) -> None:
        """Give up ownership (no effect when ``owner`` does not hold the run)."""
        ...

    async def claim_fire(self, workflow: str, schedule: str, fire_time: float,
                         run: RunRecord, step_ids: Sequence[str]) -> bool:
        """Create the run of one fire of a schedule, once across every process.

        A fire is ``(workflow, schedule, fire_time)``: the workflow's name, the
        schedule's key within it (``core.schedule.schedule_key``: 1 to 64 of
        ``[A-Za-z0-9_-]``) and the fire time in seconds since the epoch, compared
        exactly (plait's fire times are whole seconds; store them losslessly: REAL,
        double precision).  In ONE transaction: record the fire, unique, with
        ``run.run_id``; create ``run`` exactly as ``create_run(run, step_ids)`` does;
        and append to the run's history, right after its creation event, a note (no
        step) ``{"schedule": {"key": schedule, "fire_time": fire_time}}`` at
        ``run.created_at``.

        Returns True when this call recorded the fire; False, storing nothing, when the
        fire is recorded already (by any process, at any time before).  Of concurrent
        calls for one fire, exactly one returns True and one run exists.  Raises
        StoreError, storing nothing, when ``run.workflow`` is not ``workflow`` or
        ``create_run`` would refuse the run (its id exists)."""
        ...

    async def last_fire(self, workflow: str, schedule: str, *,
                        seen_at: float | None = None) -> float | None:
        """Where a schedule stands: the latest of its recorded fire times and its first
        sighting, or None when neither is recorded.

        With ``seen_at``: a schedule that has no first sighting recorded gets one at
        ``seen_at`` (one row per schedule, unique on ``(workflow, schedule)``: a later
        call never moves it), and the latest time is returned, so never None.  Of
        concurrent first sightings one is recorded, and each call returns the time
        stored once its own transaction is done.  A scheduler fires only after what
        this returns, so nothing before a schedule was first seen is back-filled."""
    # ------------------------------------------------------------------ claims
    # See the module docstring for the model; "store time" is defined there.

    async def claim_attempts(self, worker: str, limit: int, lease: float) -> list[Lease]:
        """Claim up to ``limit`` unclaimed tickets (never more; none for ``limit <= 0``)
        in priority order (lower first, then the order they were stored), skipping a
        ticket whose pool already has ``pool_limit`` claimed tickets in the whole store,
        or whose pool's rate window is full: ``rate_count`` claims of rated tickets of
        the pool in the last ``rate_period`` seconds of store time, in the whole store
        (``Ticket``).  Admission is judged under the pool's lock: concurrent claimers
        never exceed a pool's limit nor its rate between them.
        Each claimed ticket gets a fresh random token (uuid4 hex), ``worker`` as its
        holder and an expiry of store time + ``lease`` seconds; its step row's
        ``worker`` becomes ``worker`` (history shows who ran it).  Returned in claim
        order.  Two concurrent claimers never get the same ticket."""
        ...

    async def extend_leases(self, worker: str, tokens: Sequence[str],
                            lease: float) -> set[str]:
        """Push the expiry of the tickets ``worker`` still holds with these tokens to
        store time + ``lease``; returns those tokens.  A token missing from the result
        is a lost lease (reaped, withdrawn, or never ``worker``'s): abandon its
        attempt.  A lease past its expiry that no reaper took yet is still held."""
        ...

    async def complete_attempts(self, worker: str,
                                results: Sequence[tuple[str, InboxOutcome]]) -> list[bool]:
        """For each (token, outcome), in order, in ONE transaction: when the ticket of
        the outcome's (run, step, attempt, fallback) still exists, is held by ``worker``
        and carries ``token``, the outcome goes to the run's inbox (its ``worker``: this
        ``worker``) and the ticket is deleted -> True.  Otherwise nothing of it is
        stored but a history note on the run (kind ``note``, the step's id,
        ``{"late_result_discarded": {"step", "attempt", "fallback", "worker"}}``; none
        when the run does not exist) -> False.  StoreError (and nothing stored) for an
        outcome whose kind is unknown or whose values are not JSON."""
        ...

    async def reap_expired(self, limit: int = 1000) -> list[tuple[str, str, int]]:
        """Turn up to ``limit`` claimed tickets whose expiry is past in store time into
        ``interrupted`` outcomes in their runs' inboxes (error ``{"type":
        "LeaseExpired", "message": "the worker <holder> stopped heartbeating ...",
        "retryable": true}``, ``worker``: the holder), deleting the tickets; returns
        their (run_id, step_id, attempt).  Concurrent reapers reap each ticket exactly
        once (an inbox key exists at most once).  Unclaimed tickets never expire."""
        ...

    async def outcomes(self, run_id: str) -> list[InboxOutcome]:
        """The run's inbox, oldest first (in the order the store received them).
        Reading deletes nothing: ``WriteBatch.consumed`` does.  RunNotFound."""
        ...

    async def tickets(self, run_id: str) -> list[TicketRecord]:
        """The run's tickets, claimed or not, in the order they were stored.
        RunNotFound."""
        ...

    async def runs_to_drive(self, lease: float, limit: int) -> list[str]:
        """Up to ``limit`` ids of runs that need a driver, oldest (``created_at``)
        first: ``pending`` or ``running`` runs that have no owner (never claimed, or
        released by a driver that stopped), or whose owner's heartbeat is more than
        ``lease`` seconds older than store time (``heartbeat_at`` is the ``now`` that
        ``claim_run`` and ``heartbeat`` were given: drivers pass ``time.time()``, and on
        a server the store's clock should write it too).  The caller then takes one
        with ``claim_run`` (which may still lose it to another worker).  A ``waiting``
        run is listed (on the same terms of ownership) once its ``wake_at`` is at or
        before store time: its steps' time has come, so it continues by itself; one
        with no ``wake_at`` (waiting for a person, an event, a child run) or a later
        one is not.  Runs that ended are never listed, nor is a ``pending`` run
        whose concurrency key has no slot free as ``claim_run`` counts them (judged
        without its lock: the claim decides), so runs held back by a full key never
        hide the runs created after them."""
        ...

    # ------------------------------------------------------------------ breakers
    # The state of circuit breakers (docs/semantics.md), for a store other processes
    # share (``capabilities.shared``: what must be one across them is kept in the
    # store; a store no other process sees leaves it to the process).  The store keeps
    # each breaker's state as an opaque JSON object with a version; the rules stay in
    # ``core.guards.CircuitBreaker`` (``runtime.breakers.StoreBreakers`` reads the
    # state, applies a rule, and writes it back with a compare-and-set).

    async def get_breaker(self, key: str) -> tuple[JSONDict | None, int]:
        """The stored state of breaker ``key`` and its version; ``(None, 0)`` when none
        is stored.  The state is the caller's own copy."""
        ...

    async def put_breaker(self, key: str, state: JSONDict, version: int) -> bool:
        """Compare-and-set: store ``state`` as breaker ``key``'s only when its stored
        version is still ``version`` (0: none stored yet), which then becomes
        ``version + 1``; True when stored.  False, storing nothing, when another writer
        got there first: read again and apply the rule again.  Of concurrent calls with
        one version exactly one succeeds.  StoreError when ``state`` is not JSON."""
        ...

    # ------------------------------------------------------------------ step cache
    # Results of steps with ``cache: {key, ttl}`` (docs/caching.md), keyed by workflow name,
    # step id and rendered key; only completed results are put.

    async def get_cached(self, workflow: str, step_id: str, key: str,
                         since: float) -> CachedResult | None:
        """The newest stored result of the key if it was created at or after ``since``
        (now minus the ttl), else None.  The output is the caller's own copy."""
        ...

    async def put_cached(self, workflow: str, step_id: str, key: str, output: JSON,
                         run_id: str, created_at: float) -> None:
        """Store a completed result; a result already stored for the key is replaced
        unless it is newer (the newest wins).  StoreError when ``output`` is not
        JSON."""
        ...

    # ------------------------------------------------------------------ step journal
    # The results of journaled calls inside steps (``ctx.run``; docs/python-api.md),
    # keyed by run, step and call name.  Deleting a run deletes its journal.

    async def journal_get(self, run_id: str, step_id: str, name: str) -> Journaled | None:
        """The stored result of call ``name`` of the step in the run, or None.  The
        value is the caller's own copy."""
        ...

    async def journal_step(self, run_id: str, step_id: str) -> dict[str, Journaled]:
        """Every stored result of the step's journaled calls in the run, by name, the
        caller's own copies (ONE read: what an attempt of the step finds at its first
        journaled call).  Empty for an unknown run or step."""
        ...

    async def journal_put(self, run_id: str, step_id: str, name: str, value: JSON,
                          attempt: int, at: float) -> Journaled:
        """Store ``value`` as call ``name``'s result unless one is stored already
        (insert-if-absent: the first stored wins, for every process on the store);
        returns what is stored, the caller's own copy.  Of concurrent calls for one
        name exactly one stores, and all return its value.  RunNotFound; StoreError
        when ``value`` is not JSON."""
        ...

    async def journal(self, run_id: str) -> list[JournalEntry]:
        """The run's journal, every step's, in the order stored.  RunNotFound."""
        ...

    # ------------------------------------------------------------------ token budgets
    # The tokens model calls spent (``limits.max_llm_tokens``; docs/limits.md): per step
    # its own calls' usage (what Prometheus counts), and per run a count of its calls'
    # and its child runs' total tokens (what its budget is judged by), added to by
    # every process that sends one of its calls.

    async def add_llm_tokens(self, run_id: str, step_id: str, usage: TokenUsage,
                             ancestors: Sequence[str] = ()) -> int:
        """One model call of step ``step_id`` of the run: add ``usage`` to the step's
        tokens, and ``usage.total`` to the count of the run and of each run of
        ``ancestors`` (the runs that started it), in one transaction; the run's new
        count.  Of concurrent adds, from any process on the store, every one counts.
        RunNotFound (the run; an ancestor that is gone is passed over); StoreError when
        a count is not a whole number of at least 0."""
        ...

    async def llm_tokens(self, run_id: str) -> int:
        """The run's count (0 before any add).  RunNotFound."""
        ...

    # ------------------------------------------------------------------ run events
    # Events sent to a run by name (``plait signal``; docs/waiting.md), kept whether
    # or not anything waits for them yet.  Deleting a run deletes its events.

    async def event_put(self, run_id: str, name: str, data: JSON, at: float) -> Signal:
        """Store event ``name`` of the run unless one is stored already
        (insert-if-absent: the first stored wins, for every process on the store); the
        stored event.  EventTaken (naming when the standing one was sent) when one is
        there; RunNotFound; StoreError when ``data`` is not JSON."""
        ...

    async def event_get(self, run_id: str, name: str) -> Signal | None:
        """The run's stored event ``name`` (its data the caller's own copy), or None."""
        ...

    # ------------------------------------------------------------------ webhook deliveries

    async def claim_delivery(self, hook: str, delivery_id: str, run_id: str, at: float,
                             forget_before: float) -> str:
        """Record that delivery ``delivery_id`` of hook ``hook``, received at ``at``,
        starts run ``run_id``, once: the run id stored for it, which is ``run_id`` when
        this call stored it and the first one's when any call, of any process, did
        already.  Of concurrent calls for one delivery exactly one stores.  Deliveries
        received before ``forget_before`` are deleted first."""
        ...

    async def forget_delivery(self, hook: str, delivery_id: str, run_id: str) -> None:
        """Delete the delivery if it still names ``run_id`` (its run could not start:
        a later delivery with that id may try again)."""
        ...

    # ------------------------------------------------------------------ observability
    # (``store.observations``; docs/observability.md, docs/notifications.md)

    async def metrics_snapshot(self, bounds: Sequence[float]) -> MetricsSnapshot:
        """Aggregates over the whole history for a Prometheus scrape: runs by
        (workflow, status), steps by (workflow, step, status), retries and finished
        step durations per (workflow, step) (``bounds``: ascending histogram bucket
        bounds in seconds; each bucket counts the steps that took at most its bound),
        tickets queued and claimed, lease reclaims (attempts whose error starts with
        ``LeaseExpired``) and token usage summed from step outputs.  Computed by the
        database (aggregates only cross the wire), one read."""
        ...

    # ------------------------------------------------------------------ notification outbox
    # (``store.outbox``; docs/notifications.md)

    async def enqueue_notifications(self, rows: Sequence[OutboxRow]) -> int:
        """Store each of ``rows`` pending unless a row of its id is stored (in any
        state); how many were stored.  (``WriteBatch.outbox`` does the same inside a
        run's batch.)"""
        ...

    async def claim_notifications(self, sender: str, now: float, lease: float,
                                  limit: int = 20) -> list[OutboxRow]:
        """Up to ``limit`` pending rows due at ``now`` (``next_at <= now``) that nobody
        holds (no claim, or one whose lease ran out), oldest due first, each now held by
        ``sender`` until ``now + lease``.  Of concurrent calls each row goes to one."""
        ...

    async def settle_notification(self, row_id: str, sender: str, *, state: str,
                                  attempts: int, next_at: float,
                                  error: str | None = None) -> bool:
        """Record an attempt of a row ``sender`` holds: its ``state`` (``sent``,
        ``pending`` to try again at ``next_at``, ``given_up``), attempt count and last
        error, and release it.  False (nothing changed) when ``sender`` no longer holds
        it (its lease ran out and another sender took it) or it is settled already."""
        ...

    async def release_notifications(self, sender: str) -> int:
        """Release every row ``sender`` holds, unchanged (a draining sender hands them
        to the next); how many."""
        ...

    async def list_notifications(self, state: str | None = None,
                                 limit: int = 100) -> list[OutboxRow]:
        """The newest ``limit`` rows (of ``state`` when given), newest first."""
        ...

    # ------------------------------------------------------------------ retention
    # (docs/retention.md; the rules are store.prune's)

    async def prune_runs(self, cutoff: float, statuses: Sequence[str] | None = None,
                         workflow: str | None = None, *, batch: int = BATCH,
                         dry_run: bool = False) -> PruneCounts:
        """Delete the finished runs with no parent that finished before ``cutoff``
        (seconds since the epoch) with a status of ``statuses`` (None: every final
        one) and, given, of ``workflow``, each with everything that belongs to it and
        with its child runs.  A tree of runs goes whole or stays: it stays while any
        run in it is unfinished or has an unfinished retry (``retry_of``).  At most
        ``batch`` root runs per transaction, so writers wait for one batch at most,
        never for the whole prune.  ``dry_run``: delete nothing, count what would go.
        The counts: runs deleted and rows per table.  StoreError, deleting nothing,
        for a status that is not final.  Alert notifications have no run: a prune of
        every final status also deletes those sent or given up before ``cutoff`` (of
        ``workflow`` when given; ``store.prune``)."""
        ...
