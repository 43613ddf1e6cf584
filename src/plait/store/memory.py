"""The in-memory store: fast, per process, gone at exit."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import replace

from ..core.model import JSONDict
from ..core.states import StepStatus, check_run_transition, check_step_transition
from ..errors import RunNotFound, StaleWriteError, StoreError, VersionConflict, WorkflowNotFound
from .base import (
    AttemptRecord,
    EventRecord,
    RunFilter,
    RunRecord,
    StepRecord,
    WorkflowRecord,
    WriteBatch,
)


class MemoryStore:
    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._workflows: dict[str, list[WorkflowRecord]] = {}
        self._runs: dict[str, RunRecord] = {}
        self._steps: dict[str, dict[str, StepRecord]] = {}
        self._attempts: dict[str, dict[tuple[str, int, bool], AttemptRecord]] = {}
        self._events: dict[str, list[EventRecord]] = {}
        self._seq = itertools.count(1)

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def save_workflow(self, name: str, definition: JSONDict, fingerprint: str,
                            version: int | None) -> WorkflowRecord:
        versions = self._workflows.setdefault(name, [])
        if version is None:
            if versions and versions[-1].fingerprint == fingerprint:
                return versions[-1]
            version = (versions[-1].version + 1) if versions else 1
        else:
            for rec in versions:
                if rec.version == version:
                    if rec.fingerprint != fingerprint:
                        raise VersionConflict(name, version, rec.fingerprint, fingerprint)
                    return rec
        rec = WorkflowRecord(name=name, version=version, fingerprint=fingerprint,
                             definition=definition, created_at=time.time())
        versions.append(rec)
        versions.sort(key=lambda r: r.version)
        return rec

    async def get_workflow(self, name: str, version: int | None = None) -> WorkflowRecord:
        versions = self._workflows.get(name)
        if not versions:
            raise WorkflowNotFound(name, version)
        if version is None:
            return versions[-1]
        for rec in versions:
            if rec.version == version:
                return rec
        raise WorkflowNotFound(name, version)

    async def list_workflows(self) -> list[WorkflowRecord]:
        return [v for versions in self._workflows.values() for v in versions]

    async def create_run(self, run: RunRecord, step_ids: Sequence[str]) -> None:
        if run.run_id in self._runs:
            raise StoreError(f"run {run.run_id!r} already exists")
        self._runs[run.run_id] = replace(run)  # the store owns its copy
        self._steps[run.run_id] = {
            sid: StepRecord(run_id=run.run_id, step_id=sid, status=StepStatus.PENDING)
            for sid in step_ids}
        self._attempts[run.run_id] = {}
        self._events[run.run_id] = [EventRecord(run_id=run.run_id, seq=next(self._seq),
                                                at=run.created_at, kind="run", step_id=None,
                                                data={"status": str(run.status)})]

    async def write(self, batch: WriteBatch) -> None:
        run_id = batch.run_id
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        steps = self._steps[run_id]
        # check everything first so a refused batch changes nothing (atomicity)
        expected: dict[str, StepStatus] = {}
        for ch in batch.steps:
            rec = steps.get(ch.step)
            if rec is None:
                raise StoreError(f"run {run_id!r} has no step {ch.step!r}")
            current = expected.get(ch.step, rec.status)
            if current != ch.source:
                raise StaleWriteError(f"step {ch.step!r} of run {run_id!r} is {current}, "
                                      f"not {ch.source}")
            check_step_transition(ch.step, ch.source, ch.target)
            expected[ch.step] = ch.target
        if batch.run is not None:
            if run.status != batch.run.source:
                raise StaleWriteError(f"run {run_id!r} is {run.status}, not "
                                      f"{batch.run.source}")
            check_run_transition(run_id, batch.run.source, batch.run.target)
        events = self._events[run_id]
        seq = self._seq
        for ch in batch.steps:
            rec = steps[ch.step]
            row = ch.row
            rec.status, rec.attempts, rec.output, rec.error = (row.status, row.attempts,
                                                               row.output, row.error)
            rec.started_at, rec.finished_at = row.started_at, row.finished_at
            rec.skip_reason, rec.fallback_used = row.skip_reason, row.fallback_used
            rec.next_attempt_at, rec.worker = row.next_attempt_at, row.worker
            events.append(EventRecord(run_id=run_id, seq=next(seq), at=ch.at, kind="step",
                                      step_id=ch.step, data={"from": ch.source,
                                                             "to": ch.target}))
        attempts = self._attempts[run_id]
        for a in batch.attempts:
            key = (a.step, a.attempt, a.fallback)
            if not a.ended:
                attempts[key] = AttemptRecord(run_id=run_id, step_id=a.step,
                                              attempt=a.attempt, fallback=a.fallback,
                                              status=a.status, started_at=a.at,
                                              worker=a.worker)
            else:
                rec_a = attempts.get(key)
                if rec_a is None:  # a fallback or inline outcome with no separate start
                    rec_a = attempts[key] = AttemptRecord(
                        run_id=run_id, step_id=a.step, attempt=a.attempt,
                        fallback=a.fallback, status=a.status, started_at=a.at,
                        worker=a.worker)
                rec_a.status, rec_a.finished_at, rec_a.error = a.status, a.at, a.error
        if batch.run is not None:
            rc = batch.run
            run.status = rc.target
            if rc.target == "running" and run.started_at is None:
                run.started_at = rc.at
            if rc.target in ("completed", "failed", "cancelled"):
                run.finished_at, run.output, run.error = rc.at, rc.output, rc.error
            events.append(EventRecord(run_id=run_id, seq=next(seq), at=rc.at, kind="run",
                                      step_id=None, data={"from": rc.source, "to": rc.target}))
        for step_id, data in batch.notes:
            events.append(EventRecord(run_id=run_id, seq=next(seq), at=time.time(),
                                      kind="note", step_id=step_id, data=data))

    async def get_run(self, run_id: str) -> RunRecord:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return replace(run)

    async def list_runs(self, filter: RunFilter) -> list[RunRecord]:
        runs = [r for r in self._runs.values()
                if (filter.workflow is None or r.workflow == filter.workflow)
                and (filter.status is None or r.status == filter.status)
                and (filter.since is None or r.created_at >= filter.since)]
        runs.sort(key=lambda r: r.created_at, reverse=True)
        return [replace(r) for r in runs[: filter.limit]]

    async def get_steps(self, run_id: str) -> list[StepRecord]:
        if run_id not in self._steps:
            raise RunNotFound(run_id)
        return [replace(s) for s in self._steps[run_id].values()]

    async def get_attempts(self, run_id: str) -> list[AttemptRecord]:
        if run_id not in self._attempts:
            raise RunNotFound(run_id)
        return sorted((replace(a) for a in self._attempts[run_id].values()),
                      key=lambda a: a.started_at)

    async def get_events(self, run_id: str, after: int = 0) -> list[EventRecord]:
        if run_id not in self._events:
            raise RunNotFound(run_id)
        return [e for e in self._events[run_id] if e.seq > after]

    async def request_cancel(self, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        run.cancel_requested = True
