"""The one persistence protocol.  Every backend (memory, SQLite, PostgreSQL) implements
``Store`` and passes the one conformance suite in ``tests/conformance``.

Contract highlights:
- ``write(batch)`` is atomic: every change in the batch is stored, or none is.
- Each step change names the status it moves *from*; a backend refuses (StaleWriteError)
  a change whose source is not the stored status, and (TransitionError) one the
  transition table forbids.  This is how persist-before-execute and fencing hold.
- Stored values are JSON only.
- Schedules (SPEC 7): ``claim_fire`` creates the run of one fire of a schedule exactly
  once across every process sharing the store (the fire is a unique row, recorded in
  the transaction that creates the run); ``last_fire`` tells a scheduler where a
  schedule stopped, recording its first sighting so that every scheduler starts from
  the same time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..core.model import JSON, JSONDict
from ..core.runstate import AttemptChange, StepChange, StepRuntime
from ..core.states import RunStatus, StepStatus


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


@dataclass(slots=True, kw_only=True)
class StepRecord:
    run_id: str
    step_id: str
    status: StepStatus
    attempts: int = 0
    output: JSON = None
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    skip_reason: str | None = None
    fallback_used: bool = False
    next_attempt_at: float | None = None
    worker: str | None = None

    @classmethod
    def from_runtime(cls, run_id: str, step_id: str, row: StepRuntime) -> StepRecord:
        return cls(run_id=run_id, step_id=step_id, status=row.status, attempts=row.attempts,
                   output=row.output, error=row.error, started_at=row.started_at,
                   finished_at=row.finished_at, skip_reason=row.skip_reason,
                   fallback_used=row.fallback_used, next_attempt_at=row.next_attempt_at,
                   worker=row.worker)


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


@dataclass(slots=True, kw_only=True)
class RunChange:
    source: RunStatus
    target: RunStatus
    at: float
    output: JSON = None
    error: str | None = None


@dataclass(slots=True)
class WriteBatch:
    """Everything that happened together in one run, committed in one transaction."""

    run_id: str
    steps: list[StepChange] = field(default_factory=list)
    attempts: list[AttemptChange] = field(default_factory=list)
    run: RunChange | None = None
    notes: list[tuple[str | None, JSONDict]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.steps or self.attempts or self.run or self.notes)


@dataclass(slots=True, kw_only=True)
class RunFilter:
    workflow: str | None = None
    status: RunStatus | None = None
    since: float | None = None  # created_at >= since
    limit: int = 50


class Store(Protocol):
    """Async persistence for workflows, runs, steps, attempts and history."""

    url: str

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def save_workflow(self, name: str, definition: JSONDict | str, fingerprint: str,
                            version: int | None) -> WorkflowRecord:
        """Store a definition (a dict, or its JSON text when the caller has it already
        encoded: it is stored as given).  Without ``version``: the latest version when its
        fingerprint matches, else the next version.  With ``version``: that version,
        refusing (VersionConflict) one stored with another fingerprint."""
        ...

    async def get_workflow(self, name: str, version: int | None = None) -> WorkflowRecord:
        """The given version, or the latest; WorkflowNotFound otherwise."""
        ...

    async def list_workflows(self) -> list[WorkflowRecord]: ...

    async def create_run(self, run: RunRecord, step_ids: Sequence[str]) -> None:
        """Store a new run with every step ``pending``."""
        ...

    async def write(self, batch: WriteBatch) -> None:
        """Commit a batch atomically (see the module docstring)."""
        ...

    async def get_run(self, run_id: str) -> RunRecord:
        """RunNotFound when absent."""
        ...

    async def list_runs(self, filter: RunFilter) -> list[RunRecord]:
        """Newest first."""
        ...

    async def get_steps(self, run_id: str) -> list[StepRecord]:
        """In definition order."""
        ...

    async def get_attempts(self, run_id: str) -> list[AttemptRecord]:
        """Ordered by start time."""
        ...

    async def get_events(self, run_id: str, after: int = 0) -> list[EventRecord]:
        """The run's history with ``seq > after``, in order.  ``seq`` increases within a
        run (backends may number per run or globally)."""
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
        whose clocks disagree agree on when a lease ran out."""
        ...

    async def heartbeat(self, run_id: str, owner: str, now: float) -> bool:
        """Refresh ownership; False when ``owner`` no longer holds the run."""
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
        ...
