"""``ClaimSource``: a run's attempts as tickets that any worker of a cluster claims.

The ``WorkSource`` of a run driven on a shared store (docs/design/workers.md).  The
driver (the process holding the run's lease) keeps making every decision in its one
``RunLoop``; this source only turns each attempt the loop begins into a ``Ticket``
and brings the outcomes that workers put in the run's inbox back to the loop.

- ``start`` builds the ticket and keeps it until the loop's next batch takes it
  (``claims``): the ticket is committed in the transaction that stores the step
  ``running`` with its attempt counted, never alone.
- Outcomes: a reader task reads ``store.outcomes(run_id)`` when told that an outcome
  was stored (PostgreSQL's ``NOTIFY plait_outcome``, through ``wake``) and every
  ``poll`` seconds whatever the store, so a lost notification costs latency only.
  Each new inbox row of an attempt out is reported to the loop; its key is consumed
  by the batch that writes what the outcome caused (``applied``), which fences two
  drivers.  An inbox row of an attempt already resolved (cancelled meanwhile, or from
  before a takeover) is consumed silently.  The worker that executed the attempt
  (``InboxOutcome.worker``) becomes the step's worker before the loop applies the outcome,
  so the attempt's end and the step's row name it (the driver begins an
  attempt before anyone claimed it).  The attempt's history notes travel in the
  outcome (``InboxOutcome.logs``: ``{"log": record}`` for ``ctx.logger``, ``usage``,
  ``cache``, ``emit``, ``wait``; a bare log record, as older workers wrote, is a
  ``log``) and are stored by the batch that consumes it, once.  Before the loop
  applies the outcome, its ``wait`` request (``ctx.wait_for_approval``) and its cache
  hit are put in the run's step log, as a local attempt leaves them; the approval the
  step log holds for a step rides on its next ticket (``payload["decision"]``).  The
  notes of an outcome the run no longer waits for (its ticket was withdrawn) are
  stored too, as a local cancelled attempt's are; a late result the store refused
  (a lost lease) never reaches the inbox, and its notes are discarded with it.
- ``cancel`` withdraws the ticket (a worker holding it loses its lease) and reports
  ``cancelled`` on the next turn of the event loop.
- **Eager attempts** (``slots``: the driving worker's free slots, ``LocalSlots``).  An
  attempt the driving worker has a free slot for, and can run itself, gets no ticket:
  the loop asks ``reserve`` before it begins the attempt (which then names this
  worker), the attempt is stored ``running`` by the batch like any other, and runs in
  this process once that batch is committed (``committed``), as a local run's attempt
  does; its outcome goes straight to the loop (no inbox, no claim, no notification).
  Steps with a pool or a circuit breaker, whose limits are judged store-wide, and steps
  this worker cannot load, always get a ticket, and so do fallbacks.  Such an attempt
  lives as long as the driver's lease on the run: if the worker dies, the run's next
  driver counts it interrupted (no ticket, no outcome), as a resumed run does; if the
  worker was only paused and the run was taken over meanwhile, its batches are refused
  (``WriteBatch.owner``) and ``discarded`` lists the results that were lost with them
  (the worker records each as a late result).  Temporal's eager activity dispatch does
  the same for an activity its workflow's worker has a slot for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Protocol

from ..core.model import JSONDict
from ..core.retry import ErrorInfo
from ..core.runstate import RunState
from ..core.states import StepStatus
from ..core.validate import CheckedWorkflow
from ..errors import StoreError
from ..steps.binding import import_step_call
from ..steps.context import StepLog
from ..steps.registry import StepCall, StepFunction
from ..store.base import AttemptKey, InboxOutcome, Store, Ticket
from .reads import is_small
from .runner import AttemptRunner, attempt_functions, item_function
from .worksource import Claims, OutcomeKind, Report, Reported, Spawn

_log = logging.getLogger("plait.engine")
Subscribe = Callable[[str, Callable[[], None]], Callable[[], None]]


def to_reported(index: int, outcome: InboxOutcome) -> Reported:
    """An inbox outcome as the loop's ``Outcome`` fields."""
    kind: OutcomeKind = outcome.kind
    error = None
    if outcome.kind in ("error", "interrupted"):
        error = ErrorInfo.from_json(outcome.error)
        if outcome.kind == "error" and (outcome.error or {}).get("refused") is True:
            kind = "refused"
    return (index, outcome.attempt, kind, outcome.output if kind == "ok" else None, error,
            outcome.fallback)


_LOG_FIELDS = frozenset(("level", "message", "attempt", "at"))


def history_notes(entries: tuple[JSONDict, ...]) -> list[JSONDict]:
    """An outcome's ``logs`` as history notes: each entry is a note (one key: ``log``,
    ``usage``, ``emit``...), or a bare ``ctx.logger`` record as workers wrote before
    notes travelled (it becomes ``{"log": record}``)."""
    return [entry if len(entry) == 1 and not entry.keys() <= _LOG_FIELDS
            else {"log": entry} for entry in entries]


def payload_of(state: RunState, call: StepCall, fallback: bool) -> JSONDict:
    """What a worker needs to run the attempt: the shared state, its own last error
    (a fallback's ``error``), when the step first started, and what is small of what it
    reads: the run's input and its parents' rows (``runtime.reads``; the worker reads
    the rest from the store).  ``by_ref`` tells the worker that ``steps`` holds only
    some of the rows the step may read (a ticket without it holds them all)."""
    rows, ids = state.rows, state.graph.ids
    steps: JSONDict = {}
    at = state.graph_index(call.index)  # a map's item reads what its map may
    for p in state.graph.parents[at]:
        row = rows[p]
        if row.status is StepStatus.COMPLETED:
            if is_small(row.output):
                steps[ids[p]] = {"status": "completed", "output": row.output}
        else:
            steps[ids[p]] = {"status": str(row.status), "output": None}
    own = rows[call.index]
    # dispatched_at: the driver's clock when it stored the ticket (the dispatch
    # latency a claiming worker reports: observe.prometheus)
    payload: JSONDict = {"state": dict(state.state), "steps": steps, "by_ref": True,
                         "started_at": call.started_at,
                         "error": own.error if fallback else None,
                         "dispatched_at": time.time()}
    if is_small(state.input):
        payload["input"] = state.input
    if at != call.index:  # a map's item: its item and index (templates, parameters)
        payload["item"], payload["index"] = state.item_value(call.index)
    decision = call.run.step_log.decisions.get(call.step.id)
    if decision is not None:  # approved: ctx.wait_for_approval returns it
        payload["decision"] = decision
    return payload


class LocalSlots(Protocol):
    """The driving worker's share of its ``--concurrency`` for eager attempts."""

    @property
    def name(self) -> str: ...  # the worker: the attempts' worker in history

    def take(self) -> bool: ...  # a slot, if one is free (and the worker not draining)

    def release(self) -> None: ...  # the attempt's body ended

    # outcomes stored (stored=True), or never to be (the run's loop ended first)
    def settled(self, count: int, stored: bool) -> None: ...

    # an eager attempt's task: the worker's, not the run loop's, so that an attempt
    # outlives a loop that stopped driving its run (taken over), as a ticket's does
    def spawn(self, body: Coroutine[object, object, None]) -> asyncio.Task[None]: ...

    # an eager attempt ended after its run's loop stopped: its result is discarded,
    # and noted in the run's history
    def late(self, run_id: str, key: AttemptKey) -> None: ...

    # an eager attempt of a run of ``workflow`` starts ``seconds`` after its attempt
    # began (the commit that stores it running, in between): its dispatch latency
    def dispatched(self, workflow: str, seconds: float) -> None: ...


class _Eager:
    """An eager attempt: run by this process once the batch storing it is committed."""

    __slots__ = ("begun", "call", "started", "task")

    def __init__(self, call: StepCall) -> None:
        self.call = call
        self.begun = time.time()  # the driver began it (dispatch latency from here)
        self.started = False
        self.task: asyncio.Task[None] | None = None


class ClaimSource:
    """Attempts as tickets, outcomes from the inbox (see the module docstring)."""

    remote = True

    def __init__(self, checked: CheckedWorkflow, state: RunState, store: Store, *,
                 run_id: str, poll: float = 1.0, priority: float = 0.0,
                 in_flight: dict[int, AttemptKey] | None = None,
                 subscribe: Subscribe | None = None,
                 slots: LocalSlots | None = None) -> None:
        self._checked = checked
        self._state = state
        self._store = store
        self._run_id = run_id
        self._poll = poll
        self._priority = priority
        self._in_flight = dict(in_flight or {})
        self._subscribe = subscribe
        self._index = checked.graph.index
        self._out: dict[AttemptKey, int] = {}  # attempts out -> their step's index
        self._seen: set[AttemptKey] = set()  # inbox keys read already
        self._from_inbox: set[AttemptKey] = set()  # reported, to consume when applied
        self._dispatch: list[Ticket] = []
        self._consumed: list[AttemptKey] = []
        self._withdrawn: list[AttemptKey] = []
        self._logs: dict[AttemptKey, list[JSONDict]] = {}  # notes of outcomes reported
        self._notes: list[tuple[str | None, JSONDict]] = []  # of outcomes consumed
        # the run's step log (the loop's StepLog), given by ``open``: wait requests and
        # cache hits of outcomes go there
        self.step_log: StepLog | None = None
        self._wake = asyncio.Event()
        self._report: Report | None = None
        self._reader: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        # eager attempts (module docstring)
        self._slots = slots
        self._fns: tuple[StepFunction, ...] = ()  # the run's attempt functions, if loadable
        self._runner: AttemptRunner | None = None
        self._eligible: dict[int, bool] = {}  # per step of the graph: may run here
        self._reserved: set[int] = set()  # reserve()d, not started yet
        self._eager: set[_Eager] = set()  # started, body not ended
        self._to_commit: list[_Eager] = []  # started since the last batch
        self._committing: list[_Eager] = []  # in the batch being written
        self._eager_keys: set[AttemptKey] = set()  # eager attempts whose outcome is due
        self._ended: list[AttemptKey] = []  # outcomes applied since the last batch
        self._storing: list[AttemptKey] = []  # ... in the batch being written
        self._unsettled = 0  # slots taken whose outcome is not stored yet

    # ------------------------------------------------------------- the contract

    def open(self, spawn: Spawn, report: Report, log: StepLog) -> None:
        self._report = report
        self.step_log = log
        if self._slots is not None:
            self._fns = self._functions()
            if self._fns:
                self._runner = AttemptRunner(self._fns, self._checked.spec.limits
                                             .max_output_bytes, time.time,
                                             self._eager_report)
        if self._subscribe is not None:
            self._unsubscribe = self._subscribe(self._run_id, self._wake.set)
        self._reader = spawn(self._read())

    def adopt(self, running: list[int]) -> dict[int, object]:
        adopted: dict[int, object] = {}
        for i in running:
            key = self._in_flight.get(i)
            if key is not None:
                self._out[key] = i
                adopted[i] = key
        if adopted:
            self._wake.set()  # their outcomes may be in the inbox already
        return adopted

    def reserve(self, i: int) -> bool:
        """Whether the attempt the loop is about to begin for step ``i`` runs in this
        process (a slot of the driving worker taken for it); False: it gets a ticket."""
        slots = self._slots
        if slots is None or self._runner is None:
            return False
        at = self._state.graph_index(i)
        eligible = self._eligible.get(at)
        if eligible is None:
            eligible = self._eligible[at] = self._can_run(at)
        if not eligible or not slots.take():
            return False
        self._reserved.add(i)
        self._unsettled += 1
        return True

    def _functions(self) -> tuple[StepFunction, ...]:
        try:
            return attempt_functions(self._checked)
        except Exception:  # noqa: BLE001 - a step this worker cannot load: tickets only
            return ()

    def _can_run(self, at: int) -> bool:
        """A step this process may run itself: no store-wide limit, and loadable."""
        step = self._checked.spec.steps[at]
        if step.item is not None:  # a map: its items are what runs
            step = step.item
        if step.pool is not None or step.circuit_breaker is not None:
            return False
        try:
            import_step_call(step)
            if step is not self._checked.spec.steps[at]:
                item_function(self._checked, self._checked.graph.ids[at])
        except Exception:  # noqa: BLE001 - another worker may load it: a ticket
            return False
        return True

    def start(self, call: StepCall, fallback: bool) -> object:
        if not fallback and call.index in self._reserved:
            self._reserved.discard(call.index)
            eager = _Eager(call)
            self._to_commit.append(eager)
            self._eager.add(eager)
            self._eager_keys.add((call.step.id, call.attempt, False))
            return eager
        step = call.step
        pool = step.pool
        spec = self._checked.spec.pools[pool] if pool is not None else None
        # the pool's limits travel on the ticket: the claim judges them store-wide
        rate = spec.rate if spec is not None else None
        ticket = Ticket(run_id=self._run_id, step_id=step.id, attempt=call.attempt,
                        fallback=fallback,
                        priority=self._priority - self._checked.priority[
                            self._state.graph_index(call.index)],
                        pool=pool, pool_limit=spec.concurrency if spec is not None else None,
                        rate_count=rate.count if rate is not None else None,
                        rate_period=rate.period if rate is not None else None,
                        payload=payload_of(self._state, call, fallback))
        self._dispatch.append(ticket)
        self._out[ticket.key] = call.index
        return ticket.key

    def cancel(self, handle: object) -> None:
        if isinstance(handle, _Eager):
            self._cancel_eager(handle)
            return
        key: AttemptKey = handle  # type: ignore[assignment]
        i = self._out.pop(key, None)
        if i is None:
            return  # resolved already: its outcome is on its way to the loop
        if any(t.key == key for t in self._dispatch):  # never committed: drop it
            self._dispatch = [t for t in self._dispatch if t.key != key]
        else:
            self._withdrawn.append(key)
        report = self._report
        if report is not None:
            asyncio.get_running_loop().call_soon(
                report, (i, key[1], "cancelled", None, None, key[2]))

    def claims(self) -> Claims | None:
        if self._to_commit or self._ended:
            self._committing, self._to_commit = self._to_commit, []
            self._storing, self._ended = self._ended, []
        if not (self._dispatch or self._consumed or self._withdrawn):
            return None
        taken = (self._dispatch, self._consumed, self._withdrawn, self._notes)
        self._dispatch, self._consumed, self._withdrawn, self._notes = [], [], [], []
        return taken

    def applied(self, outcomes: list[Reported]) -> None:
        ids, from_inbox = self._state.ids, self._from_inbox
        for i, attempt, _kind, _output, _error, fallback in outcomes:
            key = (ids[i], attempt, fallback)
            if key in from_inbox:
                from_inbox.discard(key)
                self._consume(key, self._logs.pop(key, []))
            elif key in self._eager_keys:  # an eager attempt's: stored by the next batch
                self._eager_keys.discard(key)
                self._ended.append(key)

    def committed(self) -> None:
        """The batch ``claims`` last gave was stored: its eager attempts start, and the
        outcomes it applied are settled."""
        slots, run = self._slots, self._run_eager
        if slots is not None and self._report is not None:
            now, workflow = time.time(), self._checked.name
            for eager in self._committing:
                if eager in self._eager:  # (not cancelled meanwhile)
                    eager.task = slots.spawn(run(eager))
                    slots.dispatched(workflow, now - eager.begun)
        self._committing = []
        if self._storing:
            self._give_back(len(self._storing), True)
            self._storing = []

    def discarded(self) -> list[AttemptKey]:
        """The eager attempts whose results were applied but never stored: their
        batch was refused (the run was taken over), or never written."""
        return [*self._storing, *self._ended]

    def _eager_report(self, outcome: Reported) -> None:
        """An eager attempt's outcome: to the loop, or, once the loop stopped driving
        the run, a late result (a cancelled attempt leaves none)."""
        report = self._report
        if report is not None:
            report(outcome)
            return
        i, attempt, kind, _output, _error, fallback = outcome
        if kind != "cancelled" and self._slots is not None:
            self._slots.late(self._run_id, (self._state.ids[i], attempt, fallback))

    async def _run_eager(self, eager: _Eager) -> None:
        eager.started = True
        runner = self._runner
        assert runner is not None
        try:
            await runner.run(eager.call, False)
        finally:
            self._end_eager(eager)

    def _end_eager(self, eager: _Eager) -> None:
        if eager in self._eager:
            self._eager.discard(eager)
            if self._slots is not None:
                self._slots.release()

    def _cancel_eager(self, eager: _Eager) -> None:
        task = eager.task
        if task is not None:
            task.cancel()
        if eager.started:
            return  # the runner reports how it ended
        # never started (not committed yet, or cancelled before its first step): no
        # body ran, so no outcome comes from the runner; the loop is told here
        self._to_commit = [e for e in self._to_commit if e is not eager]
        self._end_eager(eager)
        report = self._report
        if report is not None:
            call = eager.call
            asyncio.get_running_loop().call_soon(
                report, (call.index, call.attempt, "cancelled", None, None, False))

    def _give_back(self, count: int, stored: bool) -> None:
        self._unsettled -= count
        if self._slots is not None:
            self._slots.settled(count, stored)

    def close(self) -> None:
        for eager in list(self._eager):
            if eager.task is None:  # never started: its slot is freed here
                self._end_eager(eager)
        # started ones run on (the worker's tasks): their results, if the run's loop
        # stopped before them, are late (``LocalSlots.late``)
        if self._unsettled > 0:  # no outcome of this run is stored by this driver now
            self._give_back(self._unsettled, False)
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._reader is not None:
            self._reader.cancel()
        self._report = None

    # ------------------------------------------------------------- the inbox

    async def _read(self) -> None:
        """Read the inbox when woken, and every ``poll`` seconds (the fallback)."""
        delay = self._poll
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except TimeoutError:
                pass
            self._wake.clear()
            if not self._out:
                continue
            try:
                inbox = await self._store.outcomes(self._run_id)
            except StoreError as exc:
                _log.warning("run %s: reading its outcomes failed (%s); retrying in "
                             "%gs", self._run_id, exc, delay,
                             extra={"run_id": self._run_id})
                delay = min(delay * 2, max(self._poll, 10.0))
                continue
            delay = self._poll
            self._take(inbox)

    def _take(self, inbox: list[InboxOutcome]) -> None:
        report = self._report
        if report is None:
            return
        for outcome in inbox:
            key = outcome.key
            if key in self._seen:
                continue
            self._seen.add(key)
            i = self._out.pop(key, None)
            notes = history_notes(outcome.logs)
            if i is None:  # resolved already (withdrawn, or before a takeover)
                self._consume(key, notes)  # it ran: its notes are kept, as locally
                continue
            self._from_inbox.add(key)
            if notes:
                self._logs[key] = notes
                self._log_notes(key[0], notes)
            if outcome.worker is not None:  # who executed it, for its end and its row
                self._state.rows[i].worker = outcome.worker
            report(to_reported(i, outcome))

    def _log_notes(self, step: str, notes: list[JSONDict]) -> None:
        """What a local attempt leaves in the run's step log, from its notes."""
        journal = self.step_log
        if journal is None:
            return
        for note in notes:
            wait = note.get("wait")
            if isinstance(wait, dict):  # read by Approvals.park_code
                journal.wait_requests[step] = wait
            elif isinstance(note.get("cache"), dict):  # the result's ``cached``
                journal.cache_hits.add(step)

    def _consume(self, key: AttemptKey, notes: list[JSONDict]) -> None:
        self._consumed.append(key)
        step = key[0]
        self._notes += [(step, note) for note in notes]

