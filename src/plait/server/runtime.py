"""``ServerRuntime``: what the server does with runs, inside its lifespan.

The runs the server starts (or continues: approve, retry, cancel of a run nobody
executes) are executed by its ``Engine`` in tasks of the lifespan's task group, as
``plait run`` and ``wf.run`` execute them (``Engine.execute`` / ``Engine.resume``).
With PostgreSQL they are stored for the workers instead (``announce``, docs/workers.md), and the
server runs a ``Worker`` itself unless told not to.

The engines' listeners wake the event streams of a run as soon as a batch of it is
committed in this process (by the server's engine or its worker's), ``NOTIFY
plait_outcome`` wakes them when an attempt of the run ended on any worker (PostgreSQL),
and every stream re-reads its run every ``EVENTS_POLL_S`` whatever happens.

Shutdown drains: no new runs; the running ones get ``grace`` seconds to end, then are
released unfinished (resumable: ``plait resume`` or another server continues them);
the worker drains as ``plait worker`` does on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from ..core.model import JSON
from ..core.states import FINAL_RUN_STATES, RunStatus, StepStatus
from ..core.validate import CheckedWorkflow
from ..errors import PlaitError, RunBusy, RunError
from ..runtime import continuation, control
from ..runtime.control import executor
from ..runtime.engine import Engine
from ..runtime.preflight import preflight
from ..runtime.untrusted import refused
from ..store.base import RunRecord, Store, WriteBatch
from .settings import ServerSettings

_log = logging.getLogger("plait.server")
T = TypeVar("T")
EVENTS_POLL_S = 0.5  # how often a stream re-reads a run no listener here reports on
HANDOFF_WAIT_S = 10.0  # how long an approval waits for the run's executor to apply it
HANDOFF_POLL_S = 0.05
API_READS = 8  # store reads the API's requests make at once (memory, SQLite)


def api_read_slots(db_url: str) -> int:
    """How many store reads the API's requests may make at once: on PostgreSQL half the
    pool (the other half stays free for the runs the server executes and its worker,
    whatever the number of clients polling), else ``API_READS`` (the SQLite store's
    thread then always has the engine's jobs near the head of its queue)."""
    from ..store.postgres_url import is_postgres, parse_url

    if is_postgres(db_url):
        return max(1, parse_url(db_url).pool_max // 2)
    return API_READS


def _nothing() -> None:
    return None


class Closing(Exception):
    """The server is shutting down: no new runs."""


class ServerRuntime:
    def __init__(self, store: Store, db_url: str, settings: ServerSettings, *,
                 worker: bool = True, grace: float = 10.0,
                 events_poll: float = EVENTS_POLL_S, metrics: Any = None) -> None:
        from ..store.postgres_url import is_postgres

        self.store = store
        self.db_url = db_url
        self.settings = settings
        self.grace = grace
        self.events_poll = events_poll
        self.for_workers = is_postgres(db_url)  # as plait run: the workers execute
        # every definition the server runs follows the rules for untrusted ones,
        # however it was stored (core.trust): checked again before each step starts
        self.engine = Engine(store, http_policy=settings.http_policy,
                             trust=settings.trust)
        self.engine.listeners.append(self._committed)
        self.metrics = metrics  # observe.prometheus.LiveMetrics: this process's attempts
        if metrics is not None:
            metrics.attach(self.engine)
        self.closing = asyncio.Event()
        self._with_worker = worker and self.for_workers
        self._worker: Any = None
        self._notifications: Any = None  # the worker's LISTEN connection (PostgreSQL)
        self._tg: asyncio.TaskGroup | None = None
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._followers: dict[str, int] = {}  # event streams open, by run
        self._loop: asyncio.AbstractEventLoop | None = None
        # taken around each store read of API requests (one slot: one connection at a
        # time): 200 clients polling must not take every pooled connection from the
        # engine executing the runs
        self.reads = asyncio.Semaphore(api_read_slots(db_url))

    # ------------------------------------------------------------------ lifespan

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ServerRuntime]:
        self._loop = asyncio.get_running_loop()
        worker_task: asyncio.Task[None] | None = None
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            if self._with_worker:
                worker_task = tg.create_task(self._run_worker())
            from ..runtime.worker import send_notifications, sla_sweep

            # runs past their SLA (sla_breached) and the notification outbox: the
            # worker sweeps and sends when there is one
            sweep = None if self._with_worker else tg.create_task(sla_sweep(self.engine))
            sender = None if self._with_worker else tg.create_task(
                send_notifications(self.engine))
            prune = None if self._with_worker else self._retention(tg)
            try:
                yield self
            finally:
                self.closing.set()
                if sweep is not None:
                    sweep.cancel()
                if prune is not None:
                    prune.cancel()
                await self._drain()
                if sender is not None:  # after the drain: it hands its rows over
                    sender.cancel()
                if self._worker is not None:
                    self._worker.stop()
                if worker_task is not None:
                    await asyncio.wait([worker_task], timeout=self.grace + 5.0)
                    worker_task.cancel()
                self._tg = None
        self.engine.close()

    def _retention(self, tg: asyncio.TaskGroup) -> asyncio.Task[None] | None:
        """PLAIT_RETENTION's prune loop, when set (the worker runs it when there is one)."""
        if self.settings.retention is None:
            return None
        from ..runtime.retention import retention_loop

        return tg.create_task(retention_loop(self.store, self.settings.retention,
                                             name="plait serve"))

    async def _run_worker(self) -> None:
        from ..runtime.notify import PgNotifications
        from ..runtime.worker import Worker

        self._notifications = PgNotifications(self.db_url)
        # the runs the worker drives obey the server's (strict) network policy and
        # its rules for untrusted definitions, and their commits wake the event streams
        worker = Worker(self.store, grace=self.grace, notifications=self._notifications,
                        http_policy=self.settings.http_policy, trust=self.settings.trust,
                        retention=self.settings.retention)
        worker.engine.listeners.append(self._committed)
        if self.metrics is not None:
            self.metrics.attach(worker)
        self._worker = worker
        _log.info("plait serve: worker %s started", worker.name)
        try:
            await worker.run()
        except Exception:  # noqa: BLE001 - logged; the API goes on without it
            _log.exception("plait serve: the worker stopped")

    async def _drain(self) -> None:
        running = [t for t in self._runs.values() if not t.done()]
        if not running:
            return
        _log.info("plait serve: draining %d running run(s) (up to %gs)", len(running),
                  self.grace)
        await asyncio.wait(running, timeout=self.grace)
        for run_id, task in list(self._runs.items()):
            if not task.done():
                _log.warning("plait serve: run %s left unfinished (resumable)", run_id)
                self.engine.detach(run_id)
                task.cancel()
        await asyncio.wait(running, timeout=self.engine.lease)

    # ------------------------------------------------------------------ events

    def _committed(self, batch: WriteBatch) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self.wake, batch.run_id)

    def wake(self, run_id: str) -> None:
        event = self._changed.pop(run_id, None)
        if event is not None:
            event.set()

    def watch(self, run_id: str) -> asyncio.Event:
        """An event set at the next change of ``run_id`` committed in this process (take
        it before reading the store, so no change slips in between)."""
        event = self._changed.get(run_id)
        if event is None:
            event = self._changed[run_id] = asyncio.Event()
        return event

    def follow(self, run_id: str) -> Callable[[], None]:
        """While an event stream follows ``run_id``: wake it on each ``NOTIFY
        plait_outcome`` of the run too (an attempt ended on any worker), when the
        server listens (PostgreSQL with its worker).  Returns the function that stops;
        when the last stream of the run stops, its wake-up event is dropped (a run that
        ended commits nothing more that would drop it)."""
        self._followers[run_id] = self._followers.get(run_id, 0) + 1
        unsubscribe: Callable[[], None] = _nothing
        if self._notifications is not None:
            unsubscribe = self._notifications.subscribe(run_id, lambda: self.wake(run_id))

        def stop() -> None:
            unsubscribe()
            left = self._followers.get(run_id, 1) - 1
            if left > 0:
                self._followers[run_id] = left
            else:
                self._followers.pop(run_id, None)
                self._changed.pop(run_id, None)

        return stop

    def watched(self) -> int:
        """How many runs have a wake-up event (at most those with an open stream)."""
        return len(self._changed)

    async def read(self, call: Awaitable[T]) -> T:
        """``call`` (one store read of an API request) once a slot of ``reads`` is
        free: one slot, one pooled connection at a time."""
        async with self.reads:
            return await call

    # ------------------------------------------------------------------ runs

    def _spawn(self, run_id: str, work: Coroutine[Any, Any, object]) -> None:
        if self._tg is None or self.closing.is_set():
            work.close()
            raise Closing("the server is shutting down")
        task = self._tg.create_task(self._guard(run_id, work))
        self._runs[run_id] = task
        task.add_done_callback(lambda t: self._forget(run_id, t))

    def _forget(self, run_id: str, task: asyncio.Task[None]) -> None:
        if self._runs.get(run_id) is task:
            del self._runs[run_id]
        self.wake(run_id)

    async def _guard(self, run_id: str, work: Coroutine[Any, Any, object]) -> None:
        """Run ``work``; what goes wrong is logged (the run's own state is stored), never
        raised into the task group."""
        try:
            await work
        except RunBusy:
            _log.info("run %s is executed by another process", run_id)
        except Closing:
            _log.info("run %s left for later: the server is shutting down", run_id)
        except PlaitError as exc:
            _log.warning("run %s stopped: %s", run_id, exc)
        except Exception:  # noqa: BLE001 - one run's bug must not stop the server
            _log.exception("run %s: unexpected error", run_id)

    async def checked(self, name: str, version: int | None = None) -> CheckedWorkflow:
        """A stored definition, validated, its python steps importable (unless the
        rules refuse it: then nothing of it is imported, and its steps fail when they
        start, naming the rule)."""
        checked = await self.engine.stored_workflow(name, version)
        if not refused(checked, self.settings.trust):
            preflight(checked)
        return checked

    async def runnable(self, run: RunRecord) -> CheckedWorkflow:
        """The definition a stored run ran (as ``checked``), with the directories noted
        for the run (``plait run FILE`` notes its file's) on ``sys.path`` first, so a
        server started elsewhere imports the run's python steps."""
        for directory in await control.source_dirs(self.store, run):
            control.add_import_path(directory)
        return await self.checked(run.workflow, run.version)

    async def start(self, checked: CheckedWorkflow, input: JSON,
                    version: int | None = None, run_id: str | None = None) -> RunRecord:
        """Store a run of ``checked`` (InputError before anything is stored), with id
        ``run_id`` (default: a new one), and have it executed: here, or by the workers
        (PostgreSQL)."""
        if self.closing.is_set():
            raise Closing("the server is shutting down")
        run = await self.engine.submit(checked, input, version=version, run_id=run_id)
        await self._execute(run.run_id, checked, new=run)
        return run

    async def _execute(self, run_id: str, checked: CheckedWorkflow | None, *,
                       new: RunRecord | None = None) -> None:
        if self.for_workers:
            from ..runtime.notify import announce

            run = new or await self.store.get_run(run_id)
            await announce(self.store, run.run_id)  # a wake-up for the listening workers
            return
        if checked is None:
            checked = await self.runnable(await self.store.get_run(run_id))
        if new is not None:
            self._spawn(run_id, self.engine.execute(checked, new))
        else:
            self._spawn(run_id, self.engine.resume(run_id, checked))

    async def retry(self, run_id: str, from_step: str | None, input: JSON,
                    replace_input: bool) -> RunRecord:
        checked = await self.runnable(await self.store.get_run(run_id))
        if replace_input:
            new = await self.engine.fork(run_id, from_step=from_step, input=input)
        else:
            new = await self.engine.fork(run_id, from_step=from_step)
        await self._execute(new.run_id, checked)
        return new

    async def cancel(self, run: RunRecord) -> None:
        """Ask for the run's cancellation; its executor (this server, another process)
        acts on it; a run nobody executes is cancelled here, in the background."""
        if run.status is RunStatus.CANCELLED:
            return
        task = self._runs.get(run.run_id)
        if task is not None and not task.done():
            await self.engine.cancel(run.run_id)
            return
        await self.store.request_cancel(run.run_id)
        # Engine.cancel leaves a run another live process drives to it (it sees the
        # request), and takes over one nobody drives (waiting, orphaned) to cancel it
        self._spawn(run.run_id, self.engine.cancel(run.run_id))

    async def approve(self, run_id: str, step: str, *, approved: bool, by: str,
                      data: JSON) -> None:
        """Record the decision (DecisionTaken / RunError as ``Engine.approve``), then
        make sure someone applies it: the task executing the run here, another process,
        a new task here that continues the run, or (PostgreSQL) the workers, to which
        the parked run is handed as ``plait approve`` hands it."""
        await self.engine.approve(run_id, step, approved=approved, by=by, data=data)
        self.wake(run_id)
        if self._tg is not None and not self.closing.is_set():
            self._tg.create_task(self._guard(run_id, self._applied(run_id, step)))

    async def signal(self, run_id: str, name: str, data: JSON) -> None:
        """Store an event (EventTaken / RunFinished / InputError as ``Engine.signal``),
        then make sure the run goes on, as after a decision (``approve``)."""
        await self.engine.signal(run_id, name, data)
        self.wake(run_id)
        if self._tg is not None and not self.closing.is_set():
            self._tg.create_task(self._guard(run_id, self._after_event(run_id)))

    async def _after_event(self, run_id: str) -> None:
        """Continue the run here once no task here or other process executes it (a
        task here may be parking the run as the event arrives: it is waited for)."""
        if self.for_workers:
            await control.hand_to_workers(self.engine, run_id)
            return
        deadline = time.monotonic() + HANDOFF_WAIT_S
        while not self.closing.is_set():  # on shutdown the run stays resumable
            task = self._runs.get(run_id)
            if task is None or task.done():
                run = await self.store.get_run(run_id)
                if run.status is RunStatus.WAITING and executor(run, self.engine) is None \
                        and run_id not in self._runs:
                    self._spawn(run_id, self.engine.resume(run_id, await self.runnable(run)))
                return
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(HANDOFF_POLL_S)

    async def _applied(self, run_id: str, step: str) -> None:
        """Continue the run here once nobody else will apply the decision on ``step``
        (the task executing it may be parking the run as the decision arrives)."""
        if self.for_workers:
            await control.hand_to_workers(self.engine, run_id, step)
            return
        deadline = time.monotonic() + HANDOFF_WAIT_S
        while not self.closing.is_set():  # on shutdown the run stays resumable
            steps = await self.store.get_steps(run_id)
            if not any(s.step_id == step and s.status is StepStatus.WAITING for s in steps):
                return
            task = self._runs.get(run_id)
            if task is None or task.done():
                run = await self.store.get_run(run_id)
                if run.status in FINAL_RUN_STATES or executor(run, self.engine) is not None:
                    return
                if run_id not in self._runs:
                    # as `plait approve` does: a parked run nobody drives continues here
                    await self._continue(run, step)
                return
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(HANDOFF_POLL_S)

    async def _continue(self, run: RunRecord, step: str) -> None:
        """Continue ``run`` here after the decision on ``step``; when it cannot be
        (its python steps do not import here), the failure is noted in the run's
        history (``runtime.continuation``: the run document shows it) and raised."""
        try:
            checked = await self.runnable(run)
        except PlaitError as exc:
            await self._note_failure(run.run_id, step, exc)
            raise
        self._spawn(run.run_id, self._resume_noted(run.run_id, step, checked))

    async def _resume_noted(self, run_id: str, step: str, checked: CheckedWorkflow) -> None:
        try:
            await self.engine.resume(run_id, checked)
        except RunError:  # another process has it: not a failure of the decision
            raise
        except PlaitError as exc:
            await self._note_failure(run_id, step, exc)
            raise

    async def _note_failure(self, run_id: str, step: str, exc: PlaitError) -> None:
        _log.warning("run %s: the decision on %s is recorded, but the run cannot "
                     "continue here: %s; continue it with `%s`", run_id, step, exc,
                     continuation.resume_hint(run_id))
        await continuation.note_failure(self.store, run_id, step, str(exc))
        self.wake(run_id)
