"""``Worker``: one process's share of a cluster (``plait worker``; SPEC 7).

A worker has two roles (docs/design/workers.md):

- **executing attempts** of any run: a claim loop takes up to its free slots of
  tickets (``claim_attempts``; never more), woken by ``NOTIFY plait_work`` on
  PostgreSQL and by a poll timer on every store; each lease runs with the same
  ``AttemptRunner`` as a local run, through a ``RunView`` built from the ticket's
  payload.  The outcomes of one turn are stored by ONE ``complete_attempts``, split
  when the store refuses a value (``runtime.completions``).  A heartbeat loop extends
  the leases every lease/3; an attempt whose lease is lost is cancelled (the store
  discards its result and notes it).
- **driving runs**: a reaper loop turns expired leases into ``interrupted`` outcomes
  (``reap_expired``) and takes runs that need a driver (``runs_to_drive`` ->
  ``claim_run``), at most ``max_runs`` at once; each is driven by ``Engine.execute``
  with a ``ClaimSource``.  A run taken over keeps the attempts that are still out (a
  ticket or an inbox outcome for the step's current attempt) and counts the others
  interrupted, as a resumed run does.  The cron ``Scheduler`` ticks too: the runs it
  creates are pending runs like any other.

``stop()`` drains: no new claims, no new runs; the runs it drives are released at
once for another worker; running attempts finish, or after ``grace`` seconds are
cancelled and stored ``interrupted`` (they retry elsewhere under the step's policy).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

from ..core.jsoncheck import clean_text
from ..core.mapping import item_step, split_item_id
from ..core.model import JSON, JSONDict
from ..core.runstate import RunState, StepRuntime
from ..core.states import RunStatus, StepStatus
from ..core.trust import TrustPolicy
from ..core.validate import CheckedWorkflow
from ..errors import RunBusy, RunTakenOver, StaleWriteError, StoreError
from ..steps.binding import import_step_call
from ..steps.builtin import declared_keys
from ..steps.context import AttemptLogs
from ..steps.netpolicy import NetworkPolicy
from ..steps.registry import RunAccess, StepCall, StepFunction, get_step_type
from ..store.base import (
    AttemptKey,
    Lease,
    Outcome,
    RunRecord,
    Store,
    WriteBatch,
    late_result_note,
)
from .children import ChildRuns
from .claims import ClaimSource, Subscribe, error_dict
from .completions import Completions
from .engine import Engine, default_worker_id, run_secrets
from .runner import AttemptRunner, error_info
from .runview import RunView
from .scheduler import Scheduler
from .untrusted import refusal, refused
from .worksource import Reported

_log = logging.getLogger("plait.worker")
_FINAL = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class Notifications(Protocol):
    """Wake-ups from the store (``runtime.notify.PgNotifications`` on PostgreSQL):
    ``on_work`` for the claim loop, ``on_run`` for the loop that takes runs."""

    on_work: Callable[[], None] | None
    on_run: Callable[[], None] | None

    def subscribe(self, run_id: str, callback: Callable[[], None]) -> Callable[[], None]: ...

    async def run(self) -> None: ...


class _OneStep(Sequence[StepFunction]):
    """The runner's per-step functions, of which a worker knows the one it runs."""

    def __init__(self, index: int, fn: StepFunction, size: int) -> None:
        self._index, self._fn, self._size = index, fn, size

    def __getitem__(self, i: Any) -> Any:
        if i != self._index:
            raise IndexError(i)
        return self._fn

    def __len__(self) -> int:
        return self._size


class _ItemAccess:
    """What an item of a map step reads of its run on a worker: the run's view (at
    the map's place in the graph), with ``item`` and ``index`` in its templates."""

    def __init__(self, view: RunAccess, item: JSON, index: int) -> None:
        self._view, self._item, self._index = view, item, index
        self.run_id, self.checked, self.input = view.run_id, view.checked, view.input
        self.shared_state, self.services = view.shared_state, view.services
        self.step_log = view.step_log

    def template_context(self, index: int) -> Mapping[str, object]:
        names = dict(self._view.template_context(index))
        names["item"], names["index"] = self._item, self._index
        return names

    def parent_outputs(self, index: int) -> Mapping[str, JSON]:
        return self._view.parent_outputs(index)

    def step_output(self, index: int) -> JSON:
        return self._view.step_output(index)

    def step_error(self, index: int) -> str | None:
        return self._view.step_error(index)

    def resolve(self, call: StepCall, name: str) -> tuple[bool, object]:
        return self._view.resolve(call, name)


def _item_call(call: StepCall, lease: Lease) -> StepCall:
    """The call of a map's item, from its map's call and the ticket's item."""
    inline = call.step.item
    assert inline is not None
    position = lease.payload.get("index")
    return StepCall(item_step(inline, lease.step_id), call.index, call.attempt,
                    call.started_at, _ItemAccess(call.run, lease.payload.get("item"),
                                                 position if isinstance(position, int)
                                                 else 0))


class StepLoadError(Exception):
    """This worker cannot load a step's code (retryable: another worker may)."""


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


VIEWS_KEPT = 64  # runs whose view a worker keeps for their next attempts (_view)


class _LocalSlots:
    """The worker's ``--concurrency`` as the runs it drives see it (``LocalSlots``):
    an eager attempt takes a slot a claimed ticket would otherwise take."""

    __slots__ = ("_worker", "busy", "tasks", "unsettled")

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self.busy = 0  # eager attempts whose body runs (or is about to)
        self.unsettled = 0  # eager attempts whose outcome is not stored yet
        # eager attempts running, and the notes of their late results being written
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return self._worker.name

    def take(self) -> bool:
        worker = self._worker
        if not worker.eager or worker.draining \
                or self.busy + len(worker._tasks) >= worker.concurrency:
            return False
        self.busy += 1
        self.unsettled += 1
        return True

    def release(self) -> None:
        self.busy -= 1
        worker = self._worker
        if worker._backlog:  # a slot is free for tickets that may be left
            worker._work.set()

    def settled(self, count: int, stored: bool) -> None:
        self.unsettled -= count
        if stored:
            self._worker._eager_stored += count

    def spawn(self, body: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(body)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def dispatched(self, workflow: str, seconds: float) -> None:
        report = self._worker.on_dispatch
        if report is not None:
            report(workflow, seconds)

    def late(self, run_id: str, key: AttemptKey) -> None:
        worker = self._worker
        _log.warning("worker %s: the result of eager attempt %d of step %r (run %s) was "
                     "discarded: the run was taken over", worker.name, key[1], key[0],
                     run_id, extra={"run_id": run_id, "step_id": key[0],
                                    "worker": worker.name})
        self.spawn(worker._note_discarded(run_id, [key]))


class Worker:
    """See the module docstring."""

    def __init__(self, store: Store, *, concurrency: int = 4, lease: float = 30.0,
                 poll: float = 1.0, grace: float = 30.0, name: str | None = None,
                 max_runs: int = 100, schedules: bool = True,
                 notifications: Notifications | None = None,
                 clock: Callable[[], float] = time.time, eager: bool = True,
                 http_policy: NetworkPolicy | None = None,
                 trust: TrustPolicy | None = None) -> None:
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
        # the runs it drives run their attempts here while it has free slots (eager
        # attempts, ``ClaimSource``); False: every attempt waits for a claim
        self.eager = eager
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
        self._tasks: dict[str, asyncio.Task[None]] = {}  # token -> its running attempt
        # leases held until their completion is stored, and the outcomes to store
        self._leases = Completions(store, self.name, lease)
        self._abandoned: dict[str, str] = {}  # token -> "lost" | "drained"
        self._journals: dict[str, AttemptLogs] = {}  # token -> where its attempt logs
        self._driving: dict[str, asyncio.Task[None]] = {}  # run id -> its driver
        self._workflows: dict[tuple[str, int], CheckedWorkflow] = {}
        self._views: OrderedDict[tuple[str, int], tuple[RunView, RunState]] = OrderedDict()
        self._functions: dict[tuple[str, int, int, bool], StepFunction] = {}
        self._work = asyncio.Event()  # something to claim, or a slot freed
        self._backlog = False  # tickets may be left unclaimed (_claim_loop)
        self._stop = asyncio.Event()
        self._runs = asyncio.Event()  # a run may need a driver, or stop
        self.draining = False
        self._eager_stored = 0  # eager attempts whose outcome a run's batch stored
        self._slots = _LocalSlots(self)

    @property
    def completed(self) -> int:
        """Attempts this worker executed whose outcome was stored: a ticket's in the
        inbox, an eager attempt's (of a run it drives) with the run's batch."""
        return self._leases.stored + self._eager_stored

    # ------------------------------------------------------------- lifecycle

    def stop(self) -> None:
        """Drain (see the module docstring); ``run`` returns when it is done."""
        self.draining = True
        self._stop.set()
        self._work.set()
        self._runs.set()

    async def run(self) -> None:
        loops: list[asyncio.Task[None]] = []

        def spawn(coro: Coroutine[Any, Any, None]) -> None:
            loops.append(asyncio.create_task(coro))
        if self._notifications is not None:
            self._notifications.on_work = self._work.set
            self._notifications.on_run = self._runs.set
            spawn(self._notifications.run())
        spawn(self._claim_loop())
        spawn(self._leases.heartbeat_loop(self._lost))
        spawn(self._leases.complete_loop())
        spawn(self._drive_loop())
        if self._schedules:
            spawn(Scheduler(self.store, clock=self.clock).run())
            spawn(sla_sweep(self.engine))
        try:
            await self._stop.wait()
            await self._drain()
        finally:
            for task in loops:
                task.cancel()
            for task in (*self._tasks.values(), *self._driving.values(),
                         *self._slots.tasks):
                task.cancel()
            await asyncio.gather(*loops, *self._tasks.values(), *self._driving.values(),
                                 *self._slots.tasks, return_exceptions=True)

    async def _drain(self) -> None:
        # the eager attempts of the runs it drives finish first (no new one starts:
        # draining), and their outcomes are stored by their runs' drivers; then the
        # runs are let go
        deadline = time.monotonic() + self.grace
        while self._slots.unsettled > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        drivers = list(self._driving.items())
        for run_id, task in drivers:
            self.engine.detach(run_id)
            task.cancel()
        await asyncio.gather(*(t for _, t in drivers), return_exceptions=True)
        eager = list(self._slots.tasks)  # of runs taken over meanwhile, or past grace
        running = [*self._tasks.values(), *eager]
        if running:
            await asyncio.wait(running, timeout=self.grace)
        for token, task in list(self._tasks.items()):
            if not task.done():
                self._abandoned[token] = "drained"
                task.cancel()
        for task in eager:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        deadline = time.monotonic() + max(self.lease, 1.0)
        while self._leases.pending and time.monotonic() < deadline:
            self._leases.done.set()
            await asyncio.sleep(0.01)

    @property
    def subscribe(self) -> Subscribe | None:
        return self._notifications.subscribe if self._notifications is not None else None

    # ------------------------------------------------------------- attempts

    async def _claim_loop(self) -> None:
        delay = self.poll
        while not self.draining:
            self._work.clear()  # before claiming: a wake-up during the claim is kept
            free = self.concurrency - len(self._tasks) - self._slots.busy
            # whether a slot freeing should claim again: only when tickets may be left
            # (the claim filled every free slot, failed, or there was no slot to claim
            # with); a claim that took fewer saw none left, and a ticket stored since
            # wakes the loop itself (plait_work, or the poll)
            self._backlog = True
            if free > 0:
                try:
                    leases = await self.store.claim_attempts(self.name, free, self.lease)
                except StoreError as exc:
                    _log.warning("worker %s: claiming failed (%s)", self.name, exc)
                    leases = []
                    delay = min(delay * 2, 10 * self.poll)
                else:
                    delay = self.poll
                    self._backlog = len(leases) >= free
                if leases and self.on_dispatch is not None:
                    self._observe_dispatch(leases)
                for lease in leases:
                    if self.draining:  # claimed while stopping: let it go at once
                        self._leases.hold(lease.token)
                        self._finish(lease, self._interrupted(lease, "the worker stops"))
                        continue
                    self._start(lease)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._work.wait(), delay)

    def _observe_dispatch(self, leases: list[Lease]) -> None:
        assert self.on_dispatch is not None
        now = time.time()
        for lease in leases:
            at = lease.payload.get("dispatched_at")
            if isinstance(at, int | float) and not isinstance(at, bool):
                self.on_dispatch(lease.workflow, now - at)

    def _start(self, lease: Lease) -> None:
        token = lease.token
        self._leases.hold(token)
        task = asyncio.create_task(self._execute(lease))
        self._tasks[token] = task

    async def _execute(self, lease: Lease) -> None:
        token = lease.token
        try:
            outcome = await self._attempt(lease)
        except asyncio.CancelledError:
            why = self._abandoned.pop(token, None)
            if why is None:
                raise  # the worker itself is being torn down
            if why == "drained":
                outcome = self._interrupted(lease, f"the worker {self.name} drained and "
                                            f"let the attempt go after {self.grace:g}s")
            else:
                outcome = self._outcome(lease, (0, lease.attempt, "cancelled", None, None,
                                                lease.fallback))
        finally:
            self._tasks.pop(token, None)
            if self._backlog:  # a slot is free for what may be left
                self._work.set()
        self._finish(lease, outcome)

    def _finish(self, lease: Lease, outcome: Outcome) -> None:
        journal = self._journals.pop(lease.token, None)
        if journal is not None:  # its notes go with it (to the history)
            notes = journal.take(lease.step_id, lease.attempt)
            if notes:
                outcome = dataclasses.replace(outcome, logs=notes)
        self._leases.finish(lease.token, outcome)

    async def _attempt(self, lease: Lease) -> Outcome:
        reported: list[Reported] = []
        try:
            checked = await self._workflow(lease.workflow, lease.version)
            index = checked.graph.index.get(lease.step_id)
            if index is None:  # an item of a map step (``fetch[3]``): its map's place
                index = self._map_of(checked, lease.step_id)
            refused = refusal(checked, self.engine.services.trust, lease.step_id)
            if refused is not None:  # before anything of the step is imported
                return self._outcome(lease, None, error=error_dict(error_info(refused)))
            fn = self._function(checked, lease, index)
        except (StepLoadError, StoreError) as exc:
            return self._outcome(lease, None, error={
                "type": "StepLoadError", "message": clean_text(str(exc)),
                "names": ["StepLoadError"],
                "retryable": True})
        call = self._call(checked, lease, index)
        journal = call.run.step_log
        if isinstance(journal, AttemptLogs):
            self._journals[lease.token] = journal
            # the approval the driver holds for a step in ctx.wait_for_approval
            decision = lease.payload.get("decision")
            journal.begin(lease.step_id, lease.attempt,
                          decision if isinstance(decision, dict) else None)
        if lease.step_id != call.step.id:
            call = _item_call(call, lease)
        runner = AttemptRunner(_OneStep(index, fn, checked.graph.size),
                               checked.spec.limits.max_output_bytes, self.clock,
                               reported.append)
        await runner.run(call, lease.fallback)
        return self._outcome(lease, reported[-1])

    def _call(self, checked: CheckedWorkflow, lease: Lease, index: int) -> StepCall:
        payload = lease.payload
        view, state = self._view(checked, lease)
        shared = payload.get("state")
        if isinstance(shared, dict):
            state.state.update(shared)
        steps = payload.get("steps")
        graph = checked.graph.index
        if isinstance(steps, dict):
            for sid, row in steps.items():
                if sid in graph and isinstance(row, dict):
                    state.rows[graph[sid]] = StepRuntime(
                        StepStatus(str(row.get("status"))), output=row.get("output"))
        error = payload.get("error")
        state.rows[index].error = error if isinstance(error, str) else None
        started = payload.get("started_at")
        return StepCall(checked.spec.steps[index], index, lease.attempt,
                        float(started) if isinstance(started, int | float) else self.clock(),
                        view)

    def _view(self, checked: CheckedWorkflow, lease: Lease) -> tuple[RunView, RunState]:
        """What an attempt reads of its run, filled from its ticket's payload.  A run's
        view is kept for its later attempts on this worker (building one costs a row
        per step of the workflow: per attempt, a 10,000-step fan-out paid 10,000 rows
        per step), unless the workflow keeps shared state: then two attempts of the run
        could be given different states, and each gets a view of its own."""
        cacheable = not declared_keys(checked)
        key = (lease.run_id, lease.version)
        if cacheable and (found := self._views.get(key)) is not None:
            self._views.move_to_end(key)
            return found
        secrets = run_secrets(self.engine.services.trust)
        state = RunState(checked, run_id=lease.run_id, input=lease.payload.get("input"),
                         secrets=secrets)
        view = RunView(checked, state, lease.run_id, self.engine.services,
                       AttemptLogs(secrets.redact_text), declared_keys(checked),
                       [None] * checked.graph.size)
        if cacheable:
            self._views[key] = (view, state)
            if len(self._views) > VIEWS_KEPT:
                self._views.popitem(last=False)
        return view, state

    async def _workflow(self, name: str, version: int) -> CheckedWorkflow:
        checked = self._workflows.get((name, version))
        if checked is None:
            try:
                checked = await self.engine.stored_workflow(name, version)
            except StoreError:
                raise
            except Exception as exc:  # named in the attempt's error
                raise StepLoadError(f"worker {self.name} cannot load workflow "
                                    f"{name}@{version}: {exc}") from exc
            self._workflows[(name, version)] = checked
        return checked

    def _map_of(self, checked: CheckedWorkflow, step_id: str) -> int:
        """The map step whose item ``step_id`` is (StepLoadError when none is)."""
        found = split_item_id(step_id)
        index = checked.graph.index.get(found[0]) if found is not None else None
        if index is None or checked.spec.steps[index].item is None:
            raise StepLoadError(f"worker {self.name}: workflow {checked.name!r} has no "
                                f"step {step_id!r}")
        return index

    def _function(self, checked: CheckedWorkflow, lease: Lease, index: int) -> StepFunction:
        key = (lease.workflow, lease.version, index,
               lease.step_id != checked.graph.ids[index])
        fn = self._functions.get(key)
        if fn is None:
            step = checked.spec.steps[index]
            if key[3]:  # an item: its map's inline step
                assert step.item is not None
                step = step.item
            try:
                import_step_call(step)  # a module this worker lacks: retryable, named
                step_type = get_step_type(step.type)
                fn = step_type.run if step_type.prepare is None \
                    else step_type.prepare(step, checked)
            except Exception as exc:  # named in the attempt's error
                raise StepLoadError(f"worker {self.name} cannot load step {step.id!r}: "
                                    f"{exc}") from exc
            self._functions[key] = fn
        return fn

    def _outcome(self, lease: Lease, reported: Reported | None, *,
                 error: dict[str, Any] | None = None) -> Outcome:
        if reported is None:
            return Outcome(run_id=lease.run_id, step_id=lease.step_id,
                           attempt=lease.attempt, fallback=lease.fallback, kind="error",
                           error=error, worker=self.name, at=self.clock())
        _, _, kind, output, info, _ = reported
        stored = error_dict(info, refused=kind == "refused") if info is not None else None
        return Outcome(run_id=lease.run_id, step_id=lease.step_id, attempt=lease.attempt,
                       fallback=lease.fallback,
                       kind="error" if kind == "refused" else kind,
                       output=output, error=stored, worker=self.name, at=self.clock())

    def _interrupted(self, lease: Lease, message: str) -> Outcome:
        return Outcome(run_id=lease.run_id, step_id=lease.step_id, attempt=lease.attempt,
                       fallback=lease.fallback, kind="interrupted",
                       error={"type": "WorkerDrained", "message": message,
                              "retryable": True},
                       worker=self.name, at=self.clock())

    def _lost(self, token: str) -> None:
        """The store no longer extends this lease: its attempt, if it runs, stops."""
        task = self._tasks.get(token)
        if task is not None and not task.done():
            self._abandoned[token] = "lost"
            task.cancel()

    # ------------------------------------------------------------- runs

    async def _drive_loop(self) -> None:
        last_reap = 0.0
        while not self.draining:
            self._runs.clear()  # before looking: a wake-up during the look is kept
            now = time.monotonic()
            try:
                if now - last_reap >= self.lease / 2:
                    last_reap = now
                    await self.store.reap_expired()
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
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._runs.wait(), self.poll)

    async def _take(self, run_id: str) -> bool:
        """Claim the run and start driving it (False: another worker has it)."""
        run = await self.store.claim_run(run_id, self.name, self.clock(), self.lease)
        if run is None:
            return False
        if run.status in _FINAL:
            with contextlib.suppress(StoreError):
                await self.store.release_run(run_id, self.name)
            return False
        self._driving[run_id] = asyncio.create_task(self._drive(run))
        return True

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
            except (StaleWriteError, RunTakenOver) as exc:
                # taken over while this worker was paused past its lease: the results
                # of its eager attempts not stored yet are lost (a refused batch, or
                # one never written); each is noted, as a late ticket result is
                _log.warning("worker %s: run %s was taken over (%s)", self.name, run_id,
                             exc, extra={"run_id": run_id, "worker": self.name})
                await self._note_discarded(run_id, source.discarded())
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

    async def _note_discarded(self, run_id: str, keys: list[AttemptKey]) -> None:
        """History notes for eager results a refused batch lost (as a late ticket
        result leaves: ``late_result_note``), written without an owner."""
        if not keys:
            return
        notes: list[tuple[str | None, JSONDict]] = [
            (step, late_result_note(step, attempt, fallback, self.name))
            for step, attempt, fallback in keys]
        with contextlib.suppress(StoreError):
            await self.store.write(WriteBatch(run_id, notes=notes))


SLA_SWEEP_S = 30.0  # how often runs past their SLA are looked for (sla_breached)


async def sla_sweep(engine: Engine, every: float = SLA_SWEEP_S) -> None:
    """Deliver ``sla_breached`` for runs past their SLA that no process drives (one
    waiting for a person) until cancelled: a worker that runs the scheduler does it,
    and so does ``plait serve``.  Each breach is delivered once across the cluster
    (``Store.claim_notification``)."""
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
