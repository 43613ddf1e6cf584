"""``Driver``: a worker driving runs (docs/design/workers.md).

The drive loop reaps, every lease/2, the leases that expired (``reap_expired`` turns
each into an ``interrupted`` outcome) and the parents whose child ended without waking
them (``child_ends.wake_stranded``), and takes runs that need a driver
(``runs_to_drive`` -> ``claim_run``), at most ``max_runs`` at once, woken by
``NOTIFY plait_run`` on PostgreSQL, by a run it drives ending, and by a poll timer.
Each run is driven by ``Engine.execute`` with a ``ClaimSource``, as a task of the
worker's runs TaskGroup (the run's loop has a TaskGroup of its own inside it); a
child run that ends wakes its waiting parent (``child_ends``).  A run taken over
keeps the attempts that are still out (``in_flight``: a ticket or an inbox outcome
for the step's current attempt) and counts the others interrupted, as a resumed run
does.  A run whose driving fails unexpectedly is logged and released at
once: any worker (this one too) takes it over.

While the worker has free slots, the runs it drives run their attempts here
(``executor.EagerSlots``: an eager attempt takes a slot a claimed ticket would
otherwise take); a result such an attempt lost when its run was taken over is noted
in the run's history (``executor.note_discarded``).

On drain (``let_go``) the eager attempts finish first and their outcomes are stored by
their runs' drivers (within the grace); then the runs are let go at once, for another
worker to take.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import Protocol

from ..core.runstate import RunState
from ..core.states import RunStatus
from ..errors import RunBusy, RunTakenOver, StaleWriteError, StoreError
from ..store.base import AttemptKey, RunRecord, Store
from .child_ends import child_ended, wake_stranded
from .claims import ClaimSource, Subscribe
from .executor import Executor, ExecutorOwner, note_discarded, wait_woken
from .untrusted import refused

_log = logging.getLogger("plait.worker")
_FINAL = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


async def in_flight(store: Store, run_id: str, state: RunState) -> dict[int, AttemptKey]:
    """The steps stored ``running`` whose current attempt is still out: a ticket or an
    inbox outcome exists for it (the invariant of a run driven on a cluster)."""
    keys = {t.ticket.key for t in await store.tickets(run_id)}
    keys |= {o.key for o in await store.outcomes(run_id)}
    found: dict[int, AttemptKey] = {}
    ids = state.ids
    for i in state.interrupted:
        attempt = state.rows[i].attempts
        for fallback in (True, False):
            key = (ids[i], attempt, fallback)
            if key in keys:
                found[i] = key
                break
    return found


class DriverOwner(ExecutorOwner, Protocol):
    """What the driver reads of the worker that owns it (``runtime.worker.Worker``)."""

    @property
    def max_runs(self) -> int: ...
    @property
    def subscribe(self) -> Subscribe | None: ...


class Driver:
    """See the module docstring.  ``group`` (the worker's runs TaskGroup) is set by
    ``Worker.run`` before the drive loop starts."""

    def __init__(self, worker: DriverOwner, executor: Executor) -> None:
        self._worker = worker
        self.store, self.name, self.clock = worker.store, worker.name, worker.clock
        self.engine, self.lease, self.poll = worker.engine, worker.lease, worker.poll
        self.subscribe = worker.subscribe
        self.group: asyncio.TaskGroup | None = None
        self._slots = executor.slots
        self._workflow = executor.workflow
        self._driving: dict[str, asyncio.Task[None]] = {}  # run id -> its driver
        self._runs = asyncio.Event()  # a run may need a driver, or stop

    @property
    def draining(self) -> bool:
        return self._worker.draining

    @property
    def concurrency(self) -> int:
        return self._worker.concurrency

    @property
    def max_runs(self) -> int:
        return self._worker.max_runs

    def wake(self) -> None:
        """A run may need a driver (``NOTIFY plait_run``), or the worker stops."""
        self._runs.set()

    async def loop(self) -> None:
        last_reap = 0.0
        while not self.draining:
            self._runs.clear()  # before looking: a wake-up during the look is kept
            now = time.monotonic()
            try:
                if now - last_reap >= self.lease / 2:
                    last_reap = now
                    await self.store.reap_expired()
                    await wake_stranded(self.engine)
                # a look takes a quarter of --concurrency runs (at least one), so that
                # the runs waiting spread over the workers and a driver has slots for
                # most of its runs' attempts itself (eager: measured 10-15% more steps
                # per second than taking --concurrency runs per look, whose overflow
                # went through tickets); a run ending looks again at once
                free = min(self.max_runs - len(self._driving),
                           max(1, self.concurrency // 4))
                if free > 0:
                    # every worker that looks is shown the same oldest runs: each tries
                    # a shuffled few times as many as it wants, so that workers looking
                    # at once mostly try different runs (a lost claim is a round trip)
                    found = await self.store.runs_to_drive(self.lease, free * 4)
                    shuffled = random.sample(found, len(found))
                    for run_id in shuffled:
                        if free <= 0 or self.draining:
                            break
                        if run_id not in self._driving and await self._take(run_id):
                            free -= 1
            except StoreError as exc:
                _log.warning("worker %s: looking for runs failed (%s)", self.name, exc)
            await wait_woken(self._runs, self.poll)

    async def _take(self, run_id: str) -> bool:
        """Claim the run and start driving it (False: another worker has it, or this
        one began draining while claiming it: then it is let go at once)."""
        run = await self.store.claim_run(run_id, self.name, self.clock(), self.lease)
        if run is None:
            return False
        if run.status in _FINAL or self.draining:
            with contextlib.suppress(StoreError):
                await self.store.release_run(run_id, self.name)
            return False
        assert self.group is not None
        self._driving[run_id] = self.group.create_task(self._own(run))
        return True

    async def _own(self, run: RunRecord) -> None:
        """The task of one run: ``_drive``, and whatever escapes it (a failure while
        noting discarded results, say) logged and the run released, so that one run
        never stops the worker."""
        try:
            await self._drive(run)
        except Exception:  # noqa: BLE001 - logged; another look takes the run over
            _log.exception("worker %s: driving run %s failed", self.name, run.run_id,
                           extra={"run_id": run.run_id, "worker": self.name})
            with contextlib.suppress(StoreError):
                await self.store.release_run(run.run_id, self.name)

    async def _drive(self, run: RunRecord) -> None:
        """Drive a run this worker just claimed (``run``: the claim's answer)."""
        run_id = run.run_id
        try:
            checked = await self._workflow(run.workflow, run.version)
            state = await self.engine.restore(run, checked)
            # a run taken over may have attempts still out (tickets, inbox outcomes);
            # one that never ran a step has none: no need to read for them
            out = await in_flight(self.store, run_id, state) if state.interrupted else {}
            source = ClaimSource(checked, state, self.store, run_id=run_id, poll=self.poll,
                                 in_flight=out, subscribe=self.subscribe,
                                 # a refused definition: no eager attempt imports it
                                 slots=None if refused(checked, self.engine.services.trust)
                                 else self._slots)
            try:
                await self.engine.execute(checked, run, state, source=source,
                                          claimed=True)
                if run.parent_run_id is not None:  # its end wakes its waiting parent
                    await child_ended(self.engine, run_id)
            except (StaleWriteError, RunTakenOver) as exc:
                # taken over while this worker was paused past its lease: the results
                # of its eager attempts not stored yet are lost (a refused batch, or
                # one never written); each is noted, as a late ticket result is
                _log.warning("worker %s: run %s was taken over (%s)", self.name, run_id,
                             exc, extra={"run_id": run_id, "worker": self.name})
                await note_discarded(self.store, self.name, run_id, source.discarded())
        except RunBusy:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - one run's failure must not stop the worker
            _log.exception("worker %s: driving run %s failed", self.name, run_id,
                           extra={"run_id": run_id, "worker": self.name})
            with contextlib.suppress(StoreError):
                await self.store.release_run(run_id, self.name)
        finally:
            self._driving.pop(run_id, None)
            self._runs.set()  # room for another run

    async def let_go(self, grace: float) -> list[asyncio.Task[None]]:
        """The eager attempts of the runs it drives finish first (no new one starts:
        draining), within ``grace``, and their outcomes are stored by their runs'
        drivers; then every run is let go at once.  Returns the eager attempts still
        running (of runs taken over meanwhile, or past the grace)."""
        deadline = time.monotonic() + grace
        while self._slots.unsettled > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        drivers = list(self._driving.items())
        for run_id, task in drivers:
            self.engine.detach(run_id)
            task.cancel()
        await asyncio.gather(*(t for _, t in drivers), return_exceptions=True)
        return list(self._slots.tasks)
