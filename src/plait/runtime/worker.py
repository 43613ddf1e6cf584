"""``Worker``: one process's share of a cluster (``plait worker``).

A worker has two roles (docs/design/workers.md), each told in a module of its own:

- **executing attempts** of any run (``runtime.executor``): a claim loop takes up to
  its free slots of tickets (``claim_attempts``; never more), woken by
  ``NOTIFY plait_work`` on PostgreSQL and by a poll timer on every store; each lease
  runs with the same ``AttemptRunner`` as a local run, through a ``RunView`` built from
  the ticket's payload.  The outcomes of one turn are stored by ONE
  ``complete_attempts``, split when the store refuses a value (``runtime.completions``).
  A heartbeat loop extends the leases every lease/3; an attempt whose lease is lost is
  cancelled (the store discards its result and notes it).
- **driving runs** (``runtime.driver``): a drive loop turns expired leases into
  ``interrupted`` outcomes (``reap_expired``) and takes runs that need a driver
  (``runs_to_drive`` -> ``claim_run``), at most ``max_runs`` at once; each is driven by
  ``Engine.execute`` with a ``ClaimSource``.  A run taken over keeps the attempts that
  are still out (a ticket or an inbox outcome for the step's current attempt) and
  counts the others interrupted, as a resumed run does.  The cron ``Scheduler`` ticks
  too: the runs it creates are pending runs like any other.

This module is the worker's lifecycle.  ``run()`` owns every task the worker starts,
in TaskGroups nested so that they end in order::

    loops       claim, heartbeat, completion, drive; listen (PostgreSQL); schedule and
    │           SLA sweep (unless schedules=False)
    └── attempts        the attempts it executes: claimed tickets, eager attempts
        └── runs        one task per run it drives (whose loop has its own TaskGroup)

Each loop handles a store that fails by itself.  A loop that fails otherwise (a bug, an
error no store should raise) is logged with its traceback and restarted, every loop
alike, after a backoff (``Restarts``: 0.5 s doubling up to 10 s).  The fifth failure of
one loop in a row (a loop that ran a minute before failing starts a new row) stops the
worker: it drains as on ``stop()``, then ``run()`` raises ``WorkerFailed`` (``plait
worker`` exits 1), so that a process manager sees it, where a worker that looks alive
would do part of its job.  A claimed attempt or a run whose task fails does not stop
the worker: the attempt is stored ``interrupted`` (``runtime.executor``), the run is
released (``runtime.driver``).  An eager attempt's task reports every way its step
ends; were it to fail itself, its run could not hear of the attempt, so the attempts
group fails, and the worker with it, at once (``run()`` raises the group's error).

``stop()`` drains: no new claims, no new runs; the eager attempts of the runs it drives
finish and are stored by their runs (within ``grace`` seconds), then those runs are
released at once for another worker; running attempts finish, or after ``grace``
seconds are cancelled and stored ``interrupted`` (they retry elsewhere under the step's
policy); the outcomes not stored yet get a lease to be stored.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.trust import TrustPolicy
from ..steps.netpolicy import NetworkPolicy
from ..store.base import Store
from .children import ChildRuns
from .claims import Subscribe
from .driver import Driver, in_flight
from .engine import Engine, default_worker_id
from .executor import VIEWS_KEPT, Executor, StepLoadError
from .retention import Retention, retention_loop
from .scheduler import Scheduler

__all__ = ["RESTARTS", "VIEWS_KEPT", "Notifications", "Restarts", "StepLoadError",
           "Worker", "WorkerFailed", "in_flight", "sla_sweep"]

_log = logging.getLogger("plait.worker")

Loop = Callable[[], Coroutine[Any, Any, None]]


class Notifications(Protocol):
    """Wake-ups from the store (``runtime.notify.PgNotifications`` on PostgreSQL):
    ``on_work`` for the claim loop, ``on_run`` for the loop that takes runs."""

    on_work: Callable[[], None] | None
    on_run: Callable[[], None] | None

    def subscribe(self, run_id: str, callback: Callable[[], None]) -> Callable[[], None]: ...

    async def run(self) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Restarts:
    """How a worker restarts a loop that failed unexpectedly: after ``first`` seconds,
    doubling up to ``most``; the ``limit``-th failure in a row stops the worker.  A
    loop that ran ``healthy`` seconds before it failed starts a new row."""

    first: float = 0.5
    most: float = 10.0
    limit: int = 5
    healthy: float = 60.0

    def delay(self, failures: int) -> float:
        """Seconds before the restart that follows the ``failures``-th failure."""
        return float(min(self.first * 2.0 ** (failures - 1), self.most))


RESTARTS = Restarts()  # read when a Worker is made (a test may set a quicker one)


class WorkerFailed(Exception):
    """One of the worker's loops failed too often in a row: the worker drained and
    stopped.  Carries the loop's name, the failures and the last error (also the
    exception's ``__cause__``); every failure's traceback is in the log."""

    def __init__(self, loop: str, failures: int, error: Exception) -> None:
        super().__init__(f"the worker's {loop} loop failed {failures} times in a row "
                         f"(last: {type(error).__name__}: {error}); the worker stopped")
        self.loop, self.failures, self.error = loop, failures, error


class Worker:
    """See the module docstring."""

    def __init__(self, store: Store, *, concurrency: int = 4, lease: float = 30.0,
                 poll: float = 1.0, grace: float = 30.0, name: str | None = None,
                 max_runs: int = 100, schedules: bool = True,
                 notifications: Notifications | None = None,
                 clock: Callable[[], float] = time.time, eager: bool = True,
                 http_policy: NetworkPolicy | None = None,
                 trust: TrustPolicy | None = None,
                 restarts: Restarts | None = None,
                 retention: Retention | None = None) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        self.store = store
        self.concurrency = concurrency
        self.lease = lease
        self.poll = poll
        self.grace = grace
        self.name = name or default_worker_id()
        self.max_runs = max_runs
        self.clock = clock
        self.retention = retention  # pruned with the scheduler (runtime.retention)
        # the runs it drives run their attempts here while it has free slots (eager
        # attempts, ``ClaimSource``); False: every attempt waits for a claim
        self.eager = eager
        self.restarts = restarts if restarts is not None else RESTARTS
        # (http_policy, trust: as the Engine's, set before its observers are made)
        self.engine = Engine(store, worker=self.name, lease=lease, clock=clock,
                             http_policy=http_policy, trust=trust)
        # a child run of a `workflow`/`loop` step is a pending run any worker drives
        self.engine.services.children = ChildRuns(self.engine, drive=False)
        # told (workflow, seconds from dispatch to claim) of each claimed attempt, and
        # (from its begin to its start) of each eager one (observe.prometheus)
        self.on_dispatch: Callable[[str, float], None] | None = None
        self._notifications = notifications
        self._schedules = schedules
        self._stop = asyncio.Event()
        self.draining = False
        self._failed: WorkerFailed | None = None
        self.executor = Executor(self)
        self.slots = self.executor.slots
        self.driver = Driver(self, self.executor)

    @property
    def completed(self) -> int:
        """Attempts this worker executed whose outcome was stored: a ticket's in the
        inbox, an eager attempt's (of a run it drives) with the run's batch."""
        return self.executor.completions.stored + self.slots.stored

    @property
    def subscribe(self) -> Subscribe | None:
        return self._notifications.subscribe if self._notifications is not None else None

    def stop(self) -> None:
        """Drain (see the module docstring); ``run`` returns when it is done."""
        self.draining = True
        self._stop.set()
        self.executor.wake()
        self.driver.wake()

    async def run(self) -> None:
        """Work until ``stop()``, then drain.  Raises ``WorkerFailed`` (once drained)
        when a loop failed too often."""
        async with asyncio.TaskGroup() as loops:
            async with asyncio.TaskGroup() as attempts:
                async with asyncio.TaskGroup() as runs:
                    self.executor.group = self.slots.group = attempts
                    self.driver.group = runs
                    tasks = [loops.create_task(self._supervise(name, loop))
                             for name, loop in self._loops()]
                    try:
                        await self._stop.wait()
                        eager = await self.driver.let_go(self.grace)
                    except asyncio.CancelledError:
                        # stopped at once (or a group failed): no run is taken and no
                        # ticket claimed while the groups cancel what they own
                        self.draining = True
                        raise
                await self.executor.let_go(eager)
            await self.executor.store_completions()
            for task in tasks:
                task.cancel()
        if self._failed is not None:
            raise self._failed from self._failed.error

    def _loops(self) -> list[tuple[str, Loop]]:
        """The worker's loops, by name (as its log names them)."""
        found: list[tuple[str, Loop]] = [
            ("claim", self.executor.claim_loop), ("heartbeat", self.executor.heartbeat_loop),
            ("completion", self.executor.complete_loop), ("drive", self.driver.loop),
            ("emit", self.executor.emit_loop)]
        if self._notifications is not None:
            self._notifications.on_work = self.executor.wake
            self._notifications.on_run = self.driver.wake
            found.append(("listen", self._notifications.run))
        found.append(("notify", functools.partial(send_notifications, self.engine)))
        if self._schedules:
            found.append(("schedule", Scheduler(self.store, clock=self.clock).run))
            found.append(("SLA sweep", functools.partial(sla_sweep, self.engine)))
            if self.retention is not None:
                found.append(("retention", functools.partial(
                    retention_loop, self.store, self.retention, clock=self.clock,
                    name=f"worker {self.name}")))
        return found

    async def _supervise(self, name: str, loop: Loop) -> None:
        """Run ``loop`` until it returns (the worker drains) or is cancelled; after a
        failure, restart it or stop the worker (see the module docstring)."""
        failures = 0
        while True:
            began = time.monotonic()
            try:
                await loop()
                return
            except Exception as exc:  # noqa: BLE001 - logged; restarted or stops the worker
                healthy = time.monotonic() - began >= self.restarts.healthy
                failures = 1 if healthy else failures + 1
                if failures >= self.restarts.limit:
                    self._give_up(name, failures, exc)
                    return
                delay = self.restarts.delay(failures)
                _log.error("worker %s: its %s loop failed; restarting it in %gs",
                           self.name, name, delay, exc_info=exc,
                           extra={"worker": self.name})
            await asyncio.sleep(delay)

    def _give_up(self, name: str, failures: int, exc: Exception) -> None:
        _log.error("worker %s: its %s loop failed %d times in a row; the worker drains "
                   "and stops", self.name, name, failures, exc_info=exc,
                   extra={"worker": self.name})
        if self._failed is None:
            self._failed = WorkerFailed(name, failures, exc)
        self.stop()


async def send_notifications(engine: Engine) -> None:
    """Send the store's due notifications (``observe.notify_outbox``) until cancelled,
    then hand what it holds to the next sender: every worker does, and so does
    ``plait serve``."""
    from ..observe.notify_outbox import OutboxSender

    await OutboxSender(engine.store, policy=engine.services.http_policy,
                       clock=engine.clock).run()


SLA_SWEEP_S = 30.0  # how often runs past their SLA are looked for (sla_breached)


async def sla_sweep(engine: Engine, every: float = SLA_SWEEP_S) -> None:
    """Deliver ``sla_breached`` for runs past their SLA that no process drives (one
    waiting for a person) until cancelled: a worker that runs the scheduler does it,
    and so does ``plait serve``.  Each breach is stored once across the cluster (the
    outbox row's id: ``observe.notify``)."""
    from ..observe.notify import Notifier, notify_sla_breaches, targets_from_environment

    notifier = Notifier(engine.store, policy=engine.services.http_policy,
                        targets=targets_from_environment(), clock=engine.clock,
                        trust=engine.services.trust)
    while True:
        await asyncio.sleep(every)  # not at start: a process starting is busy enough
        try:
            await notify_sla_breaches(notifier)
        except Exception:  # noqa: BLE001 - logged; the next sweep tries again
            _log.exception("SLA sweep failed")
