"""``Executor``: a worker executing the attempts of any run (docs/design/workers.md).

A claim loop takes up to the worker's free slots of tickets (``claim_attempts``; never
more), woken by ``NOTIFY plait_work`` on PostgreSQL, by one of its own attempts ending
while tickets may be left, and by a poll timer on every store.  Each lease runs as a
task of the worker's attempts TaskGroup, with the same ``AttemptRunner`` as a local run,
through a ``RunView`` built from the ticket's payload.  An attempt ends in an outcome
handed to ``Completions``, whose loop stores the outcomes of one turn with ONE
``complete_attempts`` (split when the store refuses a value), and whose heartbeat loop
extends the leases every lease/3.  An attempt whose lease is lost is cancelled (the store
discards its result and notes it); one whose task fails for a reason of the worker's own
(the runner turns every failure of the step into its outcome: this is a bug, or an
error no store should raise) is logged and stored ``interrupted``, so that it retries
under the step's policy rather than holding its lease forever.

The worker's ``--concurrency`` is shared with the eager attempts of the runs it drives
(``EagerSlots``, as ``ClaimSource`` sees it): an eager attempt takes a slot a claimed
ticket would otherwise take, and its task is the worker's too.

On drain (``let_go``) the attempts still running get the worker's grace; then they are
cancelled and stored ``interrupted`` (they retry elsewhere under the step's policy).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, cast

from ..core.jsoncheck import clean_text
from ..core.mapping import item_step, split_item_id
from ..core.model import JSON, JSONDict
from ..core.runstate import RunState, StepRuntime
from ..core.states import FINAL_STEP_STATES, StepStatus
from ..core.validate import CheckedWorkflow
from ..errors import StoreError
from ..steps.binding import declared_keys, import_step_call
from ..steps.context import AttemptLogs
from ..steps.registry import RunAccess, StepCall, StepFunction, get_step_type
from ..store.base import AttemptKey, InboxOutcome, Lease, Store, WriteBatch, late_result_note
from ..store.capabilities import Notifies
from .completions import Completions
from .engine import Engine, run_secrets
from .notify import OUTCOME
from .reads import ancestors_of, step_reads
from .runner import AttemptRunner, error_info
from .runview import RunView
from .untrusted import refusal
from .worksource import Reported

_log = logging.getLogger("plait.worker")

VIEWS_KEPT = 64  # runs whose view a worker keeps for their next attempts (_view)
EMITS_EVERY_S = 0.2  # the emits of a running attempt are stored at most this often


async def wait_woken(event: asyncio.Event, seconds: float) -> None:
    """Wait until ``event`` is set or ``seconds`` passed.  On Python 3.11
    ``asyncio.wait_for`` returns normally when cancelled just as the event is set: the
    cancellation would be lost, and a loop cancelled then would go on forever, so it is
    raised here.  (``asyncio.timeout`` loses none either, but wakes a loop a turn
    sooner, which changes how many tickets a claim takes: the loops keep the wake-ups
    they were measured with.)"""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class StepLoadError(Exception):
    """This worker cannot load a step's code (retryable: another worker may)."""


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


class ExecutorOwner(Protocol):
    """What the executor reads of the worker that owns it (``runtime.worker.Worker``)."""

    @property
    def store(self) -> Store: ...
    @property
    def name(self) -> str: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def engine(self) -> Engine: ...
    @property
    def lease(self) -> float: ...
    @property
    def poll(self) -> float: ...
    @property
    def grace(self) -> float: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def eager(self) -> bool: ...  # eager attempts allowed (EagerSlots)
    @property
    def draining(self) -> bool: ...
    @property
    def on_dispatch(self) -> Callable[[str, float], None] | None: ...


async def note_discarded(store: Store, worker: str, run_id: str,
                         keys: list[AttemptKey]) -> None:
    """History notes for eager results a refused batch lost (as a late ticket
    result leaves: ``late_result_note``), written without an owner."""
    if not keys:
        return
    notes: list[tuple[str | None, JSONDict]] = [
        (step, late_result_note(step, attempt, fallback, worker))
        for step, attempt, fallback in keys]
    with contextlib.suppress(StoreError):
        await store.write(WriteBatch(run_id, notes=notes))


class EagerSlots:
    """The worker's ``--concurrency`` as the runs it drives see it (``LocalSlots``):
    an eager attempt takes a slot a claimed ticket would otherwise take.  Its tasks
    are the worker's (its attempts TaskGroup, ``group``), not the run loop's."""

    __slots__ = ("_executor", "_worker", "busy", "group", "stored", "tasks", "unsettled")

    def __init__(self, worker: ExecutorOwner, executor: Executor) -> None:
        self._worker, self._executor = worker, executor
        self.group: asyncio.TaskGroup | None = None
        self.busy = 0  # eager attempts whose body runs (or is about to)
        self.unsettled = 0  # eager attempts whose outcome is not stored yet
        self.stored = 0  # eager attempts whose outcome a run's batch stored
        # eager attempts running, and the notes of their late results being written
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return self._worker.name

    def take(self) -> bool:
        worker = self._worker
        if not worker.eager or worker.draining \
                or self.busy + self._executor.running >= worker.concurrency:
            return False
        self.busy += 1
        self.unsettled += 1
        return True

    def release(self) -> None:
        self.busy -= 1
        self._executor.slot_freed()

    def settled(self, count: int, stored: bool) -> None:
        self.unsettled -= count
        if stored:
            self.stored += count

    def spawn(self, body: Coroutine[object, object, None]) -> asyncio.Task[None]:
        assert self.group is not None
        task = self.group.create_task(body)
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
        self.spawn(note_discarded(self._executor.store, worker.name, run_id, [key]))


class Executor:
    """See the module docstring.  ``group`` (the worker's attempts TaskGroup) is set by
    ``Worker.run`` before the claim loop starts."""

    def __init__(self, worker: ExecutorOwner) -> None:
        self._worker = worker
        self.store, self.name, self.clock = worker.store, worker.name, worker.clock
        self.engine, self.lease, self.grace = worker.engine, worker.lease, worker.grace
        self.poll = worker.poll
        self.group: asyncio.TaskGroup | None = None
        # the worker's --concurrency as the runs it drives see it
        self.slots = EagerSlots(worker, self)
        self._tasks: dict[str, asyncio.Task[None]] = {}  # token -> its running attempt
        # leases held until their completion is stored, and the outcomes to store
        self.completions = Completions(self.store, self.name, self.lease)
        self._abandoned: dict[str, str] = {}  # token -> "lost" | "drained"
        self._journals: dict[str, AttemptLogs] = {}  # token -> where its attempt logs
        self._running: dict[str, Lease] = {}  # token -> its lease, while it runs
        self._emits_stored: dict[str, float] = {}  # token -> when its emits last were
        self._emits = asyncio.Event()  # an attempt running here emitted (emit_loop)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workflows: dict[tuple[str, int], CheckedWorkflow] = {}
        self._views: OrderedDict[tuple[str, int],
                                 tuple[RunView, RunState, set[int]]] = OrderedDict()
        self._functions: dict[tuple[str, int, int, bool], StepFunction] = {}
        self._work = asyncio.Event()  # something to claim, or a slot freed
        self._backlog = False  # tickets may be left unclaimed (claim_loop)

    @property
    def draining(self) -> bool:
        return self._worker.draining

    @property
    def concurrency(self) -> int:
        return self._worker.concurrency

    @property
    def running(self) -> int:
        """Claimed attempts whose task runs (each takes a slot)."""
        return len(self._tasks)

    def wake(self) -> None:
        """Something to claim (``NOTIFY plait_work``), or the worker stops."""
        self._work.set()

    def slot_freed(self) -> None:
        if self._backlog:  # a slot is free for tickets that may be left
            self._work.set()

    # ------------------------------------------------------------- the loops

    async def claim_loop(self) -> None:
        delay = self.poll
        while not self.draining:
            self._work.clear()  # before claiming: a wake-up during the claim is kept
            free = self.concurrency - len(self._tasks) - self.slots.busy
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
                if leases and self._worker.on_dispatch is not None:
                    self._observe_dispatch(leases)
                for lease in leases:
                    if self.draining:  # claimed while stopping: let it go at once
                        self.completions.hold(lease.token)
                        self._finish(lease, self._interrupted(lease, "the worker stops"))
                        continue
                    self._start(lease)
            await wait_woken(self._work, delay)

    async def heartbeat_loop(self) -> None:
        await self.completions.heartbeat_loop(self._lost)

    async def complete_loop(self) -> None:
        await self.completions.complete_loop()

    async def emit_loop(self) -> None:
        """Store what the attempts running here emit (``ctx.emit``, a streamed model
        answer) while they run: an attempt's first emit at once, then at most every
        ``EMITS_EVERY_S`` for that attempt.  The notes are written on their own (no
        owner, as a late result's), then ``plait_outcome`` wakes who follows the run.
        What an attempt emits after the last write travels with its outcome, as its
        other notes do."""
        self._loop = loop = asyncio.get_running_loop()
        timer: asyncio.TimerHandle | None = None
        while True:
            await self._emits.wait()
            self._emits.clear()
            later = await self._store_emits(time.monotonic())
            # attempts whose next write is not due yet: one timer, for the first of them
            now = loop.time()
            if later is not None and (timer is None or not now < timer.when() <= now + later):
                if timer is not None:
                    timer.cancel()
                timer = loop.call_later(later, self._emits.set)

    def _emitted(self) -> None:
        """An attempt running here emitted (from any thread)."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._emits.set)

    async def _store_emits(self, now: float) -> float | None:
        """Write the emits of the attempts due; in how long the next one is due."""
        by_run: dict[str, list[tuple[str | None, JSONDict]]] = {}
        later: float | None = None
        for token, lease in list(self._running.items()):
            journal = self._journals.get(token)
            if journal is None:
                continue
            wait = self._emits_stored.get(token, -EMITS_EVERY_S) + EMITS_EVERY_S - now
            if wait > 0:
                later = wait if later is None else min(later, wait)
                continue
            notes = journal.take_emits(lease.step_id, lease.attempt)
            if notes:
                self._emits_stored[token] = now
                by_run.setdefault(lease.run_id, []).extend(
                    (lease.step_id, note) for note in notes)
        for run_id, emits in by_run.items():
            if not emits:
                continue
            try:
                await self.store.write(WriteBatch(run_id, notes=emits))
                if self.store.capabilities.notify:
                    await cast(Notifies, self.store).notify(OUTCOME, run_id)
            except StoreError as exc:
                _log.warning("worker %s: storing the emits of run %s failed (%s)",
                             self.name, run_id, exc, extra={"run_id": run_id})
        return later

    def _observe_dispatch(self, leases: list[Lease]) -> None:
        on_dispatch = self._worker.on_dispatch
        assert on_dispatch is not None
        now = time.time()
        for lease in leases:
            at = lease.payload.get("dispatched_at")
            if isinstance(at, int | float) and not isinstance(at, bool):
                on_dispatch(lease.workflow, now - at)

    # ------------------------------------------------------------- drain

    async def let_go(self, eager: list[asyncio.Task[None]]) -> None:
        """The attempts running (claimed ones and ``eager``) get the grace; those
        left are cancelled, a claimed one stored ``interrupted``."""
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

    async def store_completions(self) -> None:
        """Wait, up to a lease, for the outcomes not stored yet to be stored."""
        deadline = time.monotonic() + max(self.lease, 1.0)
        while self.completions.pending and time.monotonic() < deadline:
            self.completions.done.set()
            await asyncio.sleep(0.01)

    # ------------------------------------------------------------- attempts

    def _start(self, lease: Lease) -> None:
        token = lease.token
        self.completions.hold(token)
        assert self.group is not None
        task = self.group.create_task(self._execute(lease))
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
        except Exception as exc:  # noqa: BLE001 - the worker's failure, not the step's
            _log.exception("worker %s: attempt %d of step %r (run %s) failed in the "
                           "worker; stored interrupted", self.name, lease.attempt,
                           lease.step_id, lease.run_id,
                           extra={"run_id": lease.run_id, "step_id": lease.step_id,
                                  "worker": self.name})
            outcome = self._interrupted(lease, f"the worker {self.name} failed running "
                                        f"the attempt: {type(exc).__name__}: {exc}",
                                        error_type="WorkerError")
        finally:
            self._tasks.pop(token, None)
            if self._backlog:  # a slot is free for what may be left
                self._work.set()
        self._finish(lease, outcome)

    def _finish(self, lease: Lease, outcome: InboxOutcome) -> None:
        self._running.pop(lease.token, None)
        self._emits_stored.pop(lease.token, None)
        journal = self._journals.pop(lease.token, None)
        if journal is not None:  # its notes go with it (to the history)
            notes = journal.take(lease.step_id, lease.attempt)
            if notes:
                outcome = dataclasses.replace(outcome, logs=notes)
        self.completions.finish(lease.token, outcome)

    async def _attempt(self, lease: Lease) -> InboxOutcome:
        reported: list[Reported] = []
        try:
            checked = await self.workflow(lease.workflow, lease.version)
            index = checked.graph.index.get(lease.step_id)
            if index is None:  # an item of a map step (``fetch[3]``): its map's place
                index = self._map_of(checked, lease.step_id)
            refused = refusal(checked, self.engine.services.trust, lease.step_id)
            if refused is not None:  # before anything of the step is imported
                return self._outcome(lease, None, error=error_info(refused).to_json())
            fn = self._function(checked, lease, index)
        except (StepLoadError, StoreError) as exc:
            return self._outcome(lease, None, error={
                "type": "StepLoadError", "message": clean_text(str(exc)),
                "names": ["StepLoadError"],
                "retryable": True})
        call = await self._call(checked, lease, index)
        journal = call.run.step_log
        if isinstance(journal, AttemptLogs):
            self._journals[lease.token] = journal
            self._running[lease.token] = lease
            journal.on_emit = self._emitted
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

    async def _call(self, checked: CheckedWorkflow, lease: Lease, index: int) -> StepCall:
        payload = lease.payload
        view, state, known = await self._view(checked, lease)
        shared = payload.get("state")
        if isinstance(shared, dict):
            state.state.update(shared)
        steps = payload.get("steps")
        graph = checked.graph.index
        if isinstance(steps, dict):
            for sid, row in steps.items():
                at = graph.get(sid)
                if at is not None and isinstance(row, dict):
                    status = StepStatus(str(row.get("status")))
                    state.rows[at] = StepRuntime(status=status, output=row.get("output"))
                    if status in FINAL_STEP_STATES:
                        known.add(at)
        if payload.get("by_ref") is True:  # what the ticket left out: from the store
            await self._read_rows(checked, lease, index, state, known)
        error = payload.get("error")
        state.rows[index].error = error if isinstance(error, str) else None
        started = payload.get("started_at")
        return StepCall(checked.spec.steps[index], index, lease.attempt,
                        float(started) if isinstance(started, int | float) else self.clock(),
                        view)

    async def _read_rows(self, checked: CheckedWorkflow, lease: Lease, index: int,
                         state: RunState, known: set[int]) -> None:
        """The rows step ``index`` reads that its run's view lacks, read from the store
        (``runtime.reads``); a final row is kept for the run's later attempts here."""
        try:
            reads = step_reads(checked, index)
        except Exception:  # noqa: BLE001 - a function not importable: every ancestor
            reads = ancestors_of(checked, index)
        ids = checked.graph.ids
        wanted = [ids[p] for p in reads if p not in known]
        if not wanted:
            return
        graph = checked.graph.index
        for record in await self.store.get_steps_by_id(lease.run_id, wanted):
            at = graph[record.step_id]
            status = StepStatus(record.status)
            state.rows[at] = StepRuntime(
                status=status, output=record.output if status is StepStatus.COMPLETED
                else None)
            if status in FINAL_STEP_STATES:
                known.add(at)

    async def _view(self, checked: CheckedWorkflow,
                    lease: Lease) -> tuple[RunView, RunState, set[int]]:
        """What an attempt reads of its run, filled from its ticket's payload and, for
        what the ticket leaves out, from the store.  A run's view is kept for its later
        attempts on this worker with the steps whose final rows it holds (building one
        costs a row per step of the workflow: per attempt, a 10,000-step fan-out paid
        10,000 rows per step), unless the workflow keeps shared state: then two
        attempts of the run could be given different states, and each gets a view of
        its own."""
        cacheable = not declared_keys(checked)
        key = (lease.run_id, lease.version)
        if cacheable and (found := self._views.get(key)) is not None:
            self._views.move_to_end(key)
            return found
        payload = lease.payload
        if "input" in payload or payload.get("by_ref") is not True:
            run_input = payload.get("input")
        else:  # too large to travel with each ticket: read once per run
            run_input = (await self.store.get_run(lease.run_id)).input
        secrets = run_secrets(self.engine.services.trust)
        state = RunState(checked, run_id=lease.run_id, input=run_input, secrets=secrets)
        view = RunView(checked, state, lease.run_id, self.engine.services,
                       AttemptLogs(secrets.redact_text, lambda: secrets.redacting),
                       declared_keys(checked),
                       [None] * checked.graph.size)
        made = (view, state, set[int]())
        if cacheable:
            self._views[key] = made
            if len(self._views) > VIEWS_KEPT:
                self._views.popitem(last=False)
        return made

    async def workflow(self, name: str, version: int) -> CheckedWorkflow:
        """A stored workflow version, checked once per worker (the attempts and the
        runs it drives share it)."""
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
                 error: dict[str, Any] | None = None) -> InboxOutcome:
        if reported is None:
            return InboxOutcome(run_id=lease.run_id, step_id=lease.step_id,
                           attempt=lease.attempt, fallback=lease.fallback, kind="error",
                           error=error, worker=self.name, at=self.clock())
        _, _, kind, output, info, _ = reported
        stored = info.to_json(refused=kind == "refused") if info is not None else None
        return InboxOutcome(run_id=lease.run_id, step_id=lease.step_id, attempt=lease.attempt,
                       fallback=lease.fallback,
                       kind="error" if kind == "refused" else kind,
                       output=output, error=stored, worker=self.name, at=self.clock())

    def _interrupted(self, lease: Lease, message: str, *,
                     error_type: str = "WorkerDrained") -> InboxOutcome:
        return InboxOutcome(run_id=lease.run_id, step_id=lease.step_id, attempt=lease.attempt,
                       fallback=lease.fallback, kind="interrupted",
                       error={"type": error_type, "message": clean_text(message),
                              "retryable": True},
                       worker=self.name, at=self.clock())

    def _lost(self, token: str) -> None:
        """The store no longer extends this lease: its attempt, if it runs, stops."""
        task = self._tasks.get(token)
        if task is not None and not task.done():
            self._abandoned[token] = "lost"
            task.cancel()
