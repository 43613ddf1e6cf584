"""Starting the runs of schedules (docs/schedules.md), exactly once across processes.

A ``Scheduler`` reads the latest stored version of every workflow.  For each of its
schedules it asks the store where the schedule stands (``Store.last_fire``, which
records the schedule's first sighting, so nothing before it is back-filled), asks the
pure core which fires are due (``core.schedule.due``: catch_up, the cap, the time zone)
and creates each fire's run through ``Store.claim_fire``: the fire is a unique row
written in the transaction that creates the run, so any number of schedulers ticking
one store (threads, processes, hosts) create one run per fire.

The run is stored ``pending``: executing it belongs to whoever executes runs (a
``plait worker``).  ``on_run`` hears of each run *this* scheduler created, so the
process that created it can execute it at once; a run whose ``on_run`` failed stays
pending in the store for any executor to take.

After downtime (no scheduler ticked for a while), the next tick starts what the
schedule's ``catch_up`` says: the latest missed fire (``skip``) or each missed fire up
to ``MAX_CATCH_UP`` (``all``), oldest first.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..core.concurrency_key import run_key
from ..core.model import ScheduleSpec
from ..core.schedule import MAX_CATCH_UP, due, schedule_key
from ..core.states import RunStatus
from ..core.validate import CheckedWorkflow
from ..errors import DefinitionError, StoreError
from ..store.base import RunRecord, Store, WorkflowRecord

_log = logging.getLogger("plait.scheduler")

REFRESH_S = 10.0  # how often `run` looks for new definitions when no fire is sooner


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduledRun:
    """A run this scheduler created for one fire of a schedule."""

    run: RunRecord
    checked: CheckedWorkflow
    schedule: ScheduleSpec
    key: str  # the schedule's key (core.schedule.schedule_key)
    fire_time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Tick:
    """What one tick did, and when the next fire of the schedules it saw is."""

    created: tuple[ScheduledRun, ...]
    next_fire: float | None


OnRun = Callable[[ScheduledRun], Awaitable[None]]


class Scheduler:
    """Creates the runs of every stored schedule as they fall due (module docstring).

    ``on_run`` is awaited once for each run this scheduler created, in fire order,
    before the tick goes on: it should hand the run over (put it on a worker's queue),
    not execute it.  ``clock``: seconds since the epoch (tests pass their own)."""

    def __init__(self, store: Store, *, on_run: OnRun | None = None,
                 clock: Callable[[], float] = time.time, refresh: float = REFRESH_S) -> None:
        self.store = store
        self.on_run = on_run
        self.clock = clock
        self.refresh = refresh
        # (name, version) -> its checked definition, or None when it does not load here
        self._checked: dict[tuple[str, int], CheckedWorkflow | None] = {}

    async def tick(self, now: float | None = None) -> Tick:
        """Create the runs of every fire due at ``now`` (default: the clock's time)."""
        now = self.clock() if now is None else now
        created: list[ScheduledRun] = []
        next_fires: list[float] = []
        for checked, record in await self._scheduled_workflows():
            for schedule in checked.spec.schedules:
                next_fire = await self._fire(checked, record, schedule, now, created)
                if next_fire is not None:
                    next_fires.append(next_fire)
        return Tick(created=tuple(created), next_fire=min(next_fires, default=None))

    async def run(self) -> None:
        """Tick until cancelled: after each tick, sleep until the next fire, or
        ``refresh`` seconds when that is sooner (to see definitions stored meanwhile).
        A tick that fails on the store is logged and tried again after ``refresh``."""
        while True:
            try:
                next_fire = (await self.tick()).next_fire
            except StoreError as exc:
                _log.warning("schedules: the tick failed (%s); trying again in %gs", exc,
                             self.refresh)
                next_fire = None
            wait = self.refresh
            if next_fire is not None:
                wait = min(wait, max(0.0, next_fire - self.clock()) + 0.001)
            await asyncio.sleep(wait)

    async def _scheduled_workflows(self) -> list[tuple[CheckedWorkflow, WorkflowRecord]]:
        """The latest version of each stored workflow that has schedules."""
        latest: dict[str, WorkflowRecord] = {}
        for record in await self.store.list_workflows():
            known = latest.get(record.name)
            if known is None or record.version > known.version:
                latest[record.name] = record
        found = []
        for record in latest.values():
            checked = self._load(record)
            if checked is not None and checked.spec.schedules:
                found.append((checked, record))
        return found

    def _load(self, record: WorkflowRecord) -> CheckedWorkflow | None:
        """The checked definition of a stored version, loaded once per scheduler; None
        (said once, in the log) when it does not load in this process."""
        key = (record.name, record.version)
        if key in self._checked:
            return self._checked[key]
        from ..workflow import Workflow  # the front end: it registers the step types

        checked: CheckedWorkflow | None = None
        try:
            checked = Workflow.from_dict(record.definition,
                                         source=f"{record.name}@{record.version}").validate()
        except DefinitionError as exc:
            _log.warning("schedules of %s@%s are not started: %s", record.name,
                         record.version, exc)
        self._checked[key] = checked
        return checked

    async def _fire(self, checked: CheckedWorkflow, record: WorkflowRecord,
                    schedule: ScheduleSpec, now: float,
                    created: list[ScheduledRun]) -> float | None:
        """Create the runs of one schedule's due fires; its next fire time."""
        key = schedule_key(schedule)
        last = await self.store.last_fire(record.name, key, seen_at=now)
        found = due(schedule, last, now)
        if found.dropped:
            _log.info("schedule %r of %s: older missed fires were not started (%s)",
                      schedule.cron, record.name,
                      "catch_up: skip" if schedule.catch_up == "skip"
                      else f"catch_up: all starts at most {MAX_CATCH_UP}")
        key_of_run, per_key = run_key(checked.spec, schedule.input)  # renders: validated
        for fire_time in found.fires:
            run = RunRecord(run_id=uuid.uuid4().hex, workflow=record.name,
                            version=record.version, fingerprint=record.fingerprint,
                            status=RunStatus.PENDING, input=copy.deepcopy(schedule.input),
                            created_at=now, sla=checked.spec.sla,
                            concurrency_key=key_of_run, max_runs_per_key=per_key)
            if await self.store.claim_fire(record.name, key, fire_time, run,
                                           checked.graph.ids):
                started = ScheduledRun(run=run, checked=checked, schedule=schedule, key=key,
                                       fire_time=fire_time)
                created.append(started)
                await self._tell(started)
        return found.next_fire

    async def _tell(self, started: ScheduledRun) -> None:
        """``on_run``, supervised: its failure leaves the run pending in the store."""
        if self.on_run is None:
            return
        try:
            await self.on_run(started)
        except Exception:  # noqa: BLE001 - a hook: the run is stored, others go on
            _log.exception("schedules: on_run failed for run %s of %s; it stays pending",
                           started.run.run_id, started.run.workflow,
                           extra={"run_id": started.run.run_id})
