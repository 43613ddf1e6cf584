"""The in-memory store: fast, per process, gone at exit."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import NamedTuple

from ..core.model import JSON, JSONDict
from ..core.runstate import AttemptChange, StepChange, StepRuntime
from ..core.states import (
    FINAL_RUN_STATES,
    STEP_TRANSITIONS,
    RunStatus,
    StepStatus,
    check_run_transition,
    check_step_transition,
)
from ..errors import (
    DecisionTaken,
    RunNotFound,
    StaleWriteError,
    StoreError,
    VersionConflict,
    WorkflowNotFound,
)
from . import memory_prune
from .base import (
    AttemptRecord,
    CachedResult,
    EventRecord,
    Heartbeat,
    InboxOutcome,
    Lease,
    RunChange,
    RunDocument,
    RunFilter,
    RunRecord,
    Signal,
    StepRecord,
    TicketRecord,
    WorkflowRecord,
    WriteBatch,
    owner_refusal,
)
from .capabilities import StoreCapabilities
from .json_copy import copy_json, owned_output
from .memory_claims import MemoryClaims
from .memory_journal import MemoryJournal
from .memory_keyed import MemoryKeyedMethods
from .memory_tokens import MemoryTokens
from .observations import (
    LEASE_EXPIRED,
    DurationBuckets,
    MetricsSnapshot,
    fold_step,
)
from .outbox import MemoryOutbox, MemoryOutboxMethods
from .prune import BATCH, PruneCounts, final_statuses

_PENDING = StepStatus.PENDING
_DRIVEN = frozenset({RunStatus.PENDING, RunStatus.RUNNING})  # runs_to_drive
_GATED = frozenset({RunStatus.PENDING, RunStatus.WAITING})  # held back by a full key
_UNFINISHED = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING})


class MemoryStore(MemoryKeyedMethods, MemoryOutboxMethods):
    # this process's own: nobody else sees it or takes a run over; no I/O
    capabilities = StoreCapabilities(shared=False, in_process=True, notify=False)

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._workflows: dict[str, list[WorkflowRecord]] = {}
        self._runs: dict[str, RunRecord] = {}
        # step id -> its row as last written; None until the step's first write (pending)
        self._rows: dict[str, dict[str, StepRuntime | None]] = {}
        # step outputs: the store's own copies (callers' objects may change)
        self._outputs: dict[str, dict[str, JSON]] = {}  # None: no output
        self._events: dict[str, list[_Event]] = {}
        # schedules: (workflow, schedule key) -> its fires (time -> run id), its latest
        # fire, its first sighting
        self._fires: dict[tuple[str, str], dict[float, str]] = {}
        self._last_fire: dict[tuple[str, str], float] = {}
        self._sightings: dict[tuple[str, str], float] = {}
        self._claims_made: MemoryClaims | None = None  # made by the first claims call
        self._breakers: dict[str, tuple[JSONDict, int]] = {}  # key: (state, version)
        # (workflow, step_id, key hash): the newest cached result
        self._cache: dict[tuple[str, str, str], CachedResult] = {}
        self._keyed: dict[str, list[RunRecord]] = {}  # concurrency key -> unfinished runs
        self._outbox = MemoryOutbox()  # notifications to send (store.outbox)
        self._deliveries: dict[tuple[str, str], tuple[str, float]] = {}  # run id, at
        self._journal = MemoryJournal()  # ctx.run results
        self._tokens = MemoryTokens()  # what model calls spent
        self._signals: dict[tuple[str, str], Signal] = {}  # (run, name) -> its event

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def save_workflow(self, name: str, definition: JSONDict | str, fingerprint: str,
                            version: int | None) -> WorkflowRecord:
        versions = self._workflows.setdefault(name, [])
        if version is None:
            same = [rec for rec in versions if rec.fingerprint == fingerprint]
            if same:  # stored already (not only as the latest): that version again
                return _copy_workflow(same[-1])
            version = (versions[-1].version + 1) if versions else 1
        else:
            for rec in versions:
                if rec.version == version:
                    if rec.fingerprint != fingerprint:
                        raise VersionConflict(name, version, rec.fingerprint, fingerprint)
                    return _copy_workflow(rec)
        rec = WorkflowRecord(name=name, version=version, fingerprint=fingerprint,
                             definition_json=definition if isinstance(definition, str)
                             else json.dumps(definition), created_at=time.time())
        versions.append(rec)
        versions.sort(key=lambda r: r.version)
        return _copy_workflow(rec)

    async def get_workflow(self, name: str, version: int | None = None) -> WorkflowRecord:
        versions = self._workflows.get(name)
        if not versions:
            raise WorkflowNotFound(name, version)
        if version is None:
            return _copy_workflow(versions[-1])
        for rec in versions:
            if rec.version == version:
                return _copy_workflow(rec)
        raise WorkflowNotFound(name, version, [rec.version for rec in versions])

    async def list_workflows(self) -> list[WorkflowRecord]:
        return [_copy_workflow(v) for versions in self._workflows.values() for v in versions]

    async def create_run(self, run: RunRecord, step_ids: Sequence[str]) -> None:
        self._insert_run(run, step_ids)

    def _insert_run(self, run: RunRecord, step_ids: Sequence[str]) -> None:
        if run.run_id in self._runs:
            raise StoreError(f"run {run.run_id!r} already exists")
        stored = self._runs[run.run_id] = _copy_run(run)  # the store owns its copy
        if run.concurrency_key is not None:
            self._keyed.setdefault(run.concurrency_key, []).append(stored)
        self._rows[run.run_id] = dict.fromkeys(step_ids)
        self._outputs[run.run_id] = {}
        self._events[run.run_id] = [_Created(run.status, run.created_at)]

    async def write(self, batch: WriteBatch) -> None:
        self.write_now(batch)

    def write_now(self, batch: WriteBatch) -> None:
        """``write`` without a coroutine: this store's writes never wait for anything,
        so the run loop calls this directly."""
        run_id = batch.run_id
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        if batch.owner is not None and run.owner != batch.owner:
            raise owner_refusal(run_id, batch.owner, run.owner)
        rows = self._rows[run_id]
        steps, attempt_changes = batch.steps, batch.attempts
        # check everything first so a refused batch changes nothing (atomicity)
        expected: dict[str, StepStatus] = {}
        for step, _position in batch.new_steps:
            if step in rows:
                raise StaleWriteError(f"run {run_id!r} has a step {step!r} already")
            expected[step] = _PENDING
        latest: dict[str, StepRuntime] = {}  # each step's row at the end of the batch
        for step, source, target, _at, row in steps:
            current = expected.get(step)
            if current is None:
                if step not in rows:
                    raise StoreError(f"run {run_id!r} has no step {step!r}")
                stored = rows[step]
                current = _PENDING if stored is None else stored.status
            if current is not source:
                raise StaleWriteError(f"step {step!r} of run {run_id!r} is {current}, "
                                      f"not {source}")
            if target not in STEP_TRANSITIONS[source]:
                check_step_transition(step, source, target)
            expected[step] = target
            latest[step] = row
        if batch.run is not None:
            if run.status != batch.run.source:
                raise StaleWriteError(f"run {run_id!r} is {run.status}, not "
                                      f"{batch.run.source}")
            check_run_transition(run_id, batch.run.source, batch.run.target)
        # the store keeps its own copy of each step's last output (callers' objects may
        # change), made before anything moves: a value that is not JSON refuses the
        # whole batch.  One copy a step, as SQLite stores one row a step.
        owned = {step: None if row.output is None
                 else owned_output(row.output, run_id, step)
                 for step, row in latest.items()}
        for step, _position in batch.new_steps:  # in the run's step order (dict order)
            rows[step] = None
        try:
            plan = self._claims.check(batch, rows) \
                if batch.dispatch or batch.consumed or batch.withdrawn else None
        except BaseException:
            for step, _position in batch.new_steps:  # the batch changes nothing
                del rows[step]
            raise
        # History keeps the (immutable) change records themselves, in order; a run's
        # event seq is the position in its list, and records are built when read.
        events = self._events[run_id]
        if steps:
            rows.update(latest)  # rows the core no longer changes (see RunState.drain)
            self._outputs[run_id].update(owned)
            events += steps
        # attempts are read back from their changes in the history (get_attempts)
        events += attempt_changes
        if batch.run is not None:
            rc = batch.run
            run.status = rc.target
            run.wake_at = rc.wake_at if rc.target is RunStatus.WAITING else None
            if rc.target == "running" and run.started_at is None:
                run.started_at = rc.at
            if rc.target in ("completed", "failed", "cancelled"):
                run.finished_at, run.output, run.error = rc.at, copy_json(rc.output), rc.error
            events.append(RunChange(source=rc.source, target=rc.target, at=rc.at,
                                    error=rc.error))  # history keeps no output
        for step_id, data in batch.notes:
            events.append(_Note(step_id, copy_json(data), time.time()))
        if batch.outbox:
            self._outbox.enqueue(batch.outbox)
        if plan is not None:
            self._claims.apply(plan)

    async def get_run(self, run_id: str) -> RunRecord:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return _copy_run(run)

    async def read_run(self, run_id: str) -> RunDocument:
        run = await self.get_run(run_id)
        workflow = next((_copy_workflow(w) for w in self._workflows.get(run.workflow, ())
                         if w.version == run.version), None)
        return RunDocument(run=run, steps=await self.get_steps(run_id),
                           attempts=await self.get_attempts(run_id),
                           events=await self.get_events(run_id),
                           journal=await self.journal(run_id), workflow=workflow)

    async def list_runs(self, filter: RunFilter) -> list[RunRecord]:
        runs = [r for r in self._runs.values()
                if (filter.workflow is None or r.workflow == filter.workflow)
                and (filter.status is None or r.status == filter.status)
                and (filter.since is None or r.created_at >= filter.since)
                and (filter.before is None or r.created_at <= filter.before)
                and (not filter.top_level or r.parent_run_id is None)]
        runs.sort(key=lambda r: r.created_at, reverse=True)
        return [_copy_run(r) for r in runs[: filter.limit]]

    async def get_steps(self, run_id: str) -> list[StepRecord]:
        rows = self._rows.get(run_id)
        if rows is None:
            raise RunNotFound(run_id)
        outputs = self._outputs[run_id]
        out = []
        for sid, row in rows.items():
            rec = StepRecord.of(run_id, sid, row or StepRuntime())
            rec.output = copy_json(outputs.get(sid))
            out.append(rec)
        return out

    async def get_steps_by_id(self, run_id: str,
                              step_ids: Sequence[str]) -> list[StepRecord]:
        wanted = set(step_ids)
        return [rec for rec in await self.get_steps(run_id) if rec.step_id in wanted]

    async def get_attempts(self, run_id: str) -> list[AttemptRecord]:
        events = self._events.get(run_id)
        if events is None:
            raise RunNotFound(run_id)
        # (step, attempt, fallback) -> its record, built from the attempt's changes
        found: dict[tuple[str, int, bool], AttemptRecord] = {}
        for e in events:
            if type(e) is not AttemptChange:
                continue
            key = (e.step, e.attempt, e.fallback)
            rec = found.get(key)
            if rec is None:
                found[key] = AttemptRecord(
                    run_id=run_id, step_id=e.step, attempt=e.attempt, fallback=e.fallback,
                    status=e.status, started_at=e.at, finished_at=e.at if e.ended else None,
                    error=e.error, worker=e.worker)
            else:
                rec.status, rec.finished_at, rec.error = e.status, e.at, e.error
                if e.worker is not None:  # the end names who executed it (a worker)
                    rec.worker = e.worker
        out = list(found.values())
        out.sort(key=lambda a: a.started_at)
        return out

    async def get_events(self, run_id: str, after: int = 0) -> list[EventRecord]:
        found = self._events.get(run_id)
        if found is None:
            raise RunNotFound(run_id)
        return [_event(run_id, seq, e)
                for seq, e in enumerate(found[after:], start=after + 1)]

    async def parents_to_wake(self, limit: int) -> list[str]:
        ended = {r.parent_run_id for r in self._runs.values()
                 if r.parent_run_id is not None and r.status in FINAL_RUN_STATES}
        found = [r for r in self._runs.values()
                 if r.status is RunStatus.WAITING and r.run_id in ended
                 and self._waits_for_ended_child(r.run_id)]
        found.sort(key=lambda run: run.created_at)  # stable: ties in creation order
        return [run.run_id for run in found[:max(limit, 0)]]

    def _waits_for_ended_child(self, run_id: str) -> bool:
        """Whether a waiting step of the run waits (its latest wait note) for a child
        run stored final."""
        latest: dict[str, JSON] = {}
        for e in self._events[run_id]:
            if isinstance(e, _Note) and e.step is not None and "wait" in e.data:
                latest[e.step] = e.data["wait"]
        rows = self._rows[run_id]
        for step, wait in latest.items():
            row = rows.get(step)
            if row is None or row.status is not StepStatus.WAITING \
                    or not isinstance(wait, dict) or wait.get("kind") != "child":
                continue
            child = self._runs.get(str(wait.get("child_run_id")))
            if child is not None and child.status in FINAL_RUN_STATES:
                return True
        return False

    async def record_decision(self, run_id: str, step_id: str, decision: JSONDict) -> None:
        # no await in here: nothing else runs between the check and the append
        events = self._events.get(run_id)
        if events is None:
            raise RunNotFound(run_id)
        rows = self._rows[run_id]
        if step_id not in rows:
            raise StoreError(f"run {run_id!r} has no step {step_id!r}")
        for e in events:
            if isinstance(e, _Note) and e.step == step_id and "approval" in e.data:
                raise DecisionTaken(run_id, step_id, copy_json(e.data["approval"]))
        row = rows[step_id]
        status = _PENDING if row is None else row.status
        if status is not StepStatus.WAITING:
            raise StaleWriteError(f"step {step_id!r} of run {run_id!r} is {status}, not "
                                  f"waiting for a decision")
        events.append(_Note(step_id, {"approval": copy_json(decision)}, time.time()))

    async def request_cancel(self, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        run.cancel_requested = True


    async def claim_run(self, run_id: str, owner: str, now: float, lease: float, *,
                        dead_owner: str | None = None) -> RunRecord | None:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        free = run.owner is None or run.owner in (owner, dead_owner) or (
            run.heartbeat_at is not None and run.heartbeat_at < now - lease)
        if not free or not self._key_admits(run, owner, now - lease):
            return None
        run.owner, run.heartbeat_at = owner, now
        return _copy_run(run)

    def _key_admits(self, run: RunRecord, owner: str | None, stale_before: float) -> bool:
        """The concurrency-key rule of ``Store.claim_run``.  Runs that ended are
        dropped from the key's list as it is walked."""
        key = run.concurrency_key
        if key is None or run.status not in _GATED or run.cancel_requested or (
                owner is not None and run.owner == owner):
            return True
        unfinished = [r for r in self._keyed.get(key, ()) if r.status in _UNFINISHED]
        self._keyed[key] = unfinished
        taken = sum(1 for r in unfinished if r is not run and (
            r.status is RunStatus.RUNNING or (r.owner is not None and (
                r.heartbeat_at is None or r.heartbeat_at >= stale_before))))
        return taken < (run.max_runs_per_key or 1)

    async def heartbeat(self, run_id: str, owner: str, now: float) -> Heartbeat:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        held = run.owner == owner
        if held:
            run.heartbeat_at = now
        return Heartbeat(held=held, owner=run.owner, cancel_requested=run.cancel_requested)

    async def release_run(self, run_id: str, owner: str) -> None:
        run = self._runs.get(run_id)
        if run is not None and run.owner == owner:
            run.owner = None

    async def claim_fire(self, workflow: str, schedule: str, fire_time: float,
                         run: RunRecord, step_ids: Sequence[str]) -> bool:
        # no await in here: the check, the run and the fire are one atomic step
        if run.workflow != workflow:
            raise StoreError(f"claim_fire: run {run.run_id!r} is of workflow "
                             f"{run.workflow!r}, not {workflow!r}")
        key = (workflow, schedule)
        fires = self._fires.setdefault(key, {})
        if fire_time in fires:
            return False
        self._insert_run(run, step_ids)
        fires[fire_time] = run.run_id
        self._last_fire[key] = max(fire_time, self._last_fire.get(key, fire_time))
        self._events[run.run_id].append(_Note(None, {"schedule": {
            "key": schedule, "fire_time": fire_time}}, run.created_at))
        return True

    async def last_fire(self, workflow: str, schedule: str, *,
                        seen_at: float | None = None) -> float | None:
        key = (workflow, schedule)
        if seen_at is not None:
            self._sightings.setdefault(key, seen_at)
        times = [t for t in (self._last_fire.get(key), self._sightings.get(key))
                 if t is not None]
        return max(times) if times else None

    async def prune_runs(self, cutoff: float, statuses: Sequence[str] | None = None,
                         workflow: str | None = None, *, batch: int = BATCH,
                         dry_run: bool = False) -> PruneCounts:
        del batch  # one atomic step: nothing waits on the memory store meanwhile
        return memory_prune.prune_memory(self, cutoff, final_statuses(statuses), workflow, dry_run)

    # ------------------------------------------------------------------ claims
    # (memory_claims.py; no await in any of them: each is one transaction)

    @property
    def _claims(self) -> MemoryClaims:
        claims = self._claims_made
        if claims is None:  # a local run never needs one: not made with every store
            claims = self._claims_made = MemoryClaims(self._runs, self._rows, self._note)
        return claims

    async def claim_attempts(self, worker: str, limit: int, lease: float) -> list[Lease]:
        return self._claims.claim(worker, limit, lease) if limit > 0 else []

    async def extend_leases(self, worker: str, tokens: Sequence[str],
                            lease: float) -> set[str]:
        return self._claims.extend(worker, tokens, lease)

    async def complete_attempts(self, worker: str,
                                results: Sequence[tuple[str, InboxOutcome]]) -> list[bool]:
        return self._claims.complete(worker, results)

    async def reap_expired(self, limit: int = 1000) -> list[tuple[str, str, int]]:
        return self._claims.reap(limit)

    async def outcomes(self, run_id: str) -> list[InboxOutcome]:
        if run_id not in self._runs:
            raise RunNotFound(run_id)
        return self._claims.outcomes(run_id)

    async def tickets(self, run_id: str) -> list[TicketRecord]:
        if run_id not in self._runs:
            raise RunNotFound(run_id)
        return self._claims.tickets(run_id)

    async def runs_to_drive(self, lease: float, limit: int) -> list[str]:
        now = time.time()
        stale_before = now - lease
        found = [run for run in self._runs.values()
                 if (run.status in _DRIVEN or (run.status is RunStatus.WAITING
                                               and run.wake_at is not None
                                               and run.wake_at <= now)) and (
                     run.owner is None or (run.heartbeat_at is not None
                                           and run.heartbeat_at < stale_before))
                 and self._key_admits(run, None, stale_before)]
        found.sort(key=lambda run: run.created_at)  # stable: ties in creation order
        return [run.run_id for run in found[:max(limit, 0)]]

    # ------------------------------------------------------------------ observability

    async def metrics_snapshot(self, bounds: Sequence[float]) -> MetricsSnapshot:
        out = MetricsSnapshot()
        by_step: dict[tuple[str, str], DurationBuckets] = {}
        for run_id, run in self._runs.items():
            key = (run.workflow, str(run.status))
            out.runs[key] = out.runs.get(key, 0) + 1
            outputs = self._outputs.get(run_id, {})
            for step, row in self._rows.get(run_id, {}).items():
                if row is None:
                    fold_step(out, bounds, run.workflow, step, str(_PENDING), 0, None, None,
                              None, by_step)
                else:
                    used = None if self._tokens.sent_calls(run_id, step) \
                        else outputs.get(step)
                    fold_step(out, bounds, run.workflow, step, str(row.status), row.attempts,
                              row.started_at, row.finished_at, used, by_step)
            for e in self._events.get(run_id, ()):
                if (type(e) is AttemptChange and e.ended and e.error is not None
                        and e.error.startswith(LEASE_EXPIRED)):
                    out.lease_reclaims += 1
        self._tokens.fold(out, {run_id: run.workflow for run_id, run in self._runs.items()})
        claims = self._claims_made
        if claims is not None:
            out.tickets_queued, out.tickets_claimed = claims.ticket_counts()
        return out

    def _note(self, run_id: str, step_id: str | None, data: JSONDict) -> None:
        """A history note the store writes itself (data: the store's own)."""
        self._events[run_id].append(_Note(step_id, data, time.time()))


class _Created(NamedTuple):
    status: str
    at: float


class _Note(NamedTuple):
    step: str | None
    data: JSONDict
    at: float


_Event = StepChange | AttemptChange | RunChange | _Note | _Created


def _event(run_id: str, seq: int, e: _Event) -> EventRecord:
    if isinstance(e, StepChange):
        return EventRecord(run_id=run_id, seq=seq, at=e.at, kind="step", step_id=e.step,
                           data={"from": str(e.source), "to": str(e.target)})
    if isinstance(e, AttemptChange):
        return EventRecord(run_id=run_id, seq=seq, at=e.at, kind="attempt", step_id=e.step,
                           data={"attempt": e.attempt, "status": e.status})
    if isinstance(e, RunChange):
        return EventRecord(run_id=run_id, seq=seq, at=e.at, kind="run", step_id=None,
                           data={"from": str(e.source), "to": str(e.target)})
    if isinstance(e, _Created):
        return EventRecord(run_id=run_id, seq=seq, at=e.at, kind="run", step_id=None,
                           data={"from": None, "to": str(e.status)})
    return EventRecord(run_id=run_id, seq=seq, at=e.at, kind="note", step_id=e.step,
                       data=copy_json(e.data))


def _copy_run(run: RunRecord) -> RunRecord:
    # built field by field: dataclasses.replace costs several times more
    return RunRecord(run_id=run.run_id, workflow=run.workflow, version=run.version,
                     fingerprint=run.fingerprint, status=run.status, input=copy_json(run.input),
                     created_at=run.created_at, output=copy_json(run.output), error=run.error,
                     started_at=run.started_at, finished_at=run.finished_at,
                     retry_of=run.retry_of, parent_run_id=run.parent_run_id, sla=run.sla,
                     cancel_requested=run.cancel_requested, owner=run.owner,
                     heartbeat_at=run.heartbeat_at, concurrency_key=run.concurrency_key,
                     max_runs_per_key=run.max_runs_per_key, wake_at=run.wake_at)


def _copy_workflow(rec: WorkflowRecord) -> WorkflowRecord:
    # the definition is immutable text: a shallow copy suffices
    return WorkflowRecord(name=rec.name, version=rec.version, fingerprint=rec.fingerprint,
                          definition_json=rec.definition_json, created_at=rec.created_at)
