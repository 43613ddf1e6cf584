"""The one run loop: drives a single run from its stored state to its end.

The loop asks the core's RunState what may start, commits every change to the store
*before* acting on it (a step is stored ``running`` with its attempt counted before its
function is called), hands attempts to a ``WorkSource`` and feeds the outcomes the
source reports back to the core as events.  The core decides (retry, then fallback,
then fail; fail-fast; cancel; approvals; timers; the run's end) and returns effects,
which the loop carries out (``runtime.outcomes``): it decides nothing itself.  Changes
that happen together are committed together (group commit, ``RunWriter``).  Approval
steps are parked without an attempt; when only people can move the run on, it is
stored ``waiting`` and the loop returns.

The seam's contract is in ``runtime.worksource``; ``LocalSource`` (``runtime.local``)
runs attempts as tasks of the run's TaskGroup.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ..core import expressions
from ..core.effects import Effects
from ..core.events import CancelRequested, TimerFired
from ..core.jsoncheck import ensure_json
from ..core.model import JSON
from ..core.retry import ErrorInfo
from ..core.runstate import RunState
from ..core.states import RunStatus
from ..core.validate import CheckedWorkflow
from ..errors import InterruptedAttempt, RunError, RunTakenOver
from ..steps.context import StepLog
from ..steps.registry import StepCall, StepType, get_step_type
from ..steps.secrets import Secrets
from ..store.base import RunChange, RunRecord
from .approvals import Approvals
from .ending import final_change
from .halt import Halt
from .host import RunHost
from .outcomes import OutcomeEffects
from .pools import PoolSlots
from .results import RunResult
from .runner import error_info, failed
from .runview import RunView
from .timers import Timers
from .untrusted import refusal
from .when import WhenJudge
from .worksource import OutcomeKind, Reported, Spawn, WorkSource
from .writer import RunWriter

CANCEL_POLL_S = 0.5
_log = logging.getLogger("plait.engine")


class _LoopData(NamedTuple):
    """Per-step facts the loop reads on every attempt, derived once per checked
    workflow (not once per run)."""

    types: tuple[StepType, ...]
    pool_of: tuple[str | None, ...]
    # StepType.inline per step, when its templates are cheap (else rendered off the loop)
    inline: tuple[Callable[[StepCall], JSON] | None, ...]
    declared: frozenset[str]  # every declared output key (shared state)
    # per step, its parents' ids -> their indices (ctx.outputs), made on first use
    parent_index: list[dict[str, int] | None]


def _loop_data(checked: CheckedWorkflow) -> _LoopData:
    steps = checked.spec.steps
    types = tuple(get_step_type(s.type) for s in steps)
    return _LoopData(
        types=types, pool_of=tuple(s.pool for s in steps),
        inline=tuple(t.inline if t.inline is not None and expressions.is_cheap(s.config)
                     else None for s, t in zip(steps, types, strict=True)),
        declared=frozenset(k for s in steps for k in s.outputs),
        parent_index=[None] * len(steps))


def _refused_only(call: StepCall) -> JSON:
    """What a parking step of a refused definition runs: never reached, the engine's
    rules fail it first (``RunLoop._run_inline``)."""
    raise AssertionError(f"step {call.step.id!r} of a refused definition ran")


class RunLoop:
    """The one run loop (see the module docstring)."""

    def __init__(self, host: RunHost, checked: CheckedWorkflow, run: RunRecord,
                 state: RunState, secrets: Secrets, source: WorkSource) -> None:
        self.store = host.store
        self.checked = checked
        self.spec = checked.spec
        self.state = state
        self.run_id = run.run_id
        self.secrets = secrets
        self.source = source
        self.clock = host.clock
        self._rand = host.rand
        self._worker = host.worker
        derived = checked.derive("loop", lambda: _loop_data(checked))
        step_log = StepLog(secrets.redact_text)
        # (internal classes take positional arguments: a class call with keywords
        # costs CPython 3.11 a dict, once per run and class)
        self.view = RunView(checked, state, run.run_id, host.services, step_log,
                            derived.declared, derived.parent_index)  # what attempts read
        self.writer = RunWriter(host.store, run, state, step_log, host.listeners, host.worker)
        # the engine's rules refuse the definition: every step fails as it would start
        # (an approval too, rather than wait for a person), and the run never completes
        self._refused = refusal(checked, host.services.trust, "")
        self.timers = Timers()
        self._slots = PoolSlots(self.spec.pools, state, self.timers)  # its use of pools
        # Nothing the loop holds refers back to it (callbacks are passed per call, and
        # the source lets go of ``report`` when closed): a finished run is freed by
        # reference counting, not left to the cyclic collector (runtime.gctune).
        self.approvals = Approvals(checked, state, host.store, run.run_id, host.clock,
                                   self.timers, step_log)
        self.tasks: dict[int, object] = {}  # attempts out: step -> the source's handle
        self.outcomes: list[Reported] = []  # reported, not processed yet
        self.whens = WhenJudge(checked, state)
        # the judge's own dict and list, read on every turn
        self._judging, self._judged = self.whens.judging, self.whens.judged
        self.halt = Halt(self.tasks, self.whens, source.cancel)
        # feeds an outcome to the state and carries out what it decides
        self._effects = OutcomeEffects(checked, state, secrets, self.view, self.timers,
                                       self.clock, self._rand, self.approvals, self.halt,
                                       self.tasks, source.start)
        self._handle: Callable[[int, OutcomeKind, JSON, ErrorInfo | None, bool, float],
                               None] = self._effects.apply
        self._wake: asyncio.Future[None] | None = None
        self._create_task: Spawn  # a task the run owns
        self._start_attempt: Callable[[StepCall, bool], object]  # WorkSource.start
        # the claim that gave us the run just read its cancel request and renewed the
        # heartbeat: the first poll is due a poll interval after it
        self._last_cancel_poll = run.heartbeat_at or 0.0
        self._decisions_due = False
        self._types: Sequence[StepType] = derived.types
        self._rows = state.rows
        self._pool_of: Sequence[str | None] = derived.pool_of
        self._inline: Sequence[Callable[[StepCall], JSON] | None] = derived.inline
        self._max_output_bytes = self.spec.limits.max_output_bytes
        # a store shared with other processes is polled for cancel requests, approval
        # decisions and the ownership heartbeat; a memory store is this process's own
        self._polls = self.store.capabilities.shared
        # ...and its writes complete at once: the loop calls them without a coroutine
        self._write_now = self.writer.write_now
        # a source whose attempts run elsewhere (``WorkSource.remote``): its tickets and
        # consumed outcomes ride in the loop's batches, so ``start`` is called before
        # the commit that stores the attempt; the run's lease is heartbeated whatever
        # the store, since other processes may take the run over
        self._remote = source.remote
        # a remote source that runs some attempts in this process (``ClaimSource``'s
        # eager attempts): asked before each attempt begins whether it runs here
        self._reserve: Callable[[int], bool] | None = None
        if self._remote:
            self._polls = True
            self._write_now = None
            self.writer.claims = source.claims
            self._reserve = source.reserve
            self.writer.committed = source.committed
        self._detached = False
        self._aio: asyncio.AbstractEventLoop
        self._held_change: RunChange | None = None  # the run's start, see _start
        # the loop's task waits for nothing but attempts, on a store whose writes
        # complete at once: an attempt that ends does the loop's turn itself (_advance)
        self._idle = False

    # ------------------------------------------------------------- driving

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                self._create_task = tg.create_task
                self._aio = asyncio.get_running_loop()
                self.source.open(tg.create_task, self.report)
                self._start_attempt = self.source.start
                try:
                    await self._main()
                finally:
                    self.source.close()
        except BaseExceptionGroup as group:
            # Attempt tasks never raise (outcomes are reported), so the group holds only
            # the loop's own error: surface it as itself.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        except asyncio.CancelledError:
            if not self._detached:
                await self._abort("cancelled (interrupted)")
            raise

    def detach(self) -> None:
        """The next cancellation of the loop's task stops driving the run without
        writing anything: another process takes it over (a worker that drains)."""
        self._detached = True

    async def _main(self) -> None:
        state, timers, parked, slots = self.state, self.timers, self.approvals.parked, \
            self._slots
        await self._start()
        while True:
            starts = self._launch(self.clock())
            if starts and self._remote:  # the tickets are committed with the attempts
                tasks, start = self.tasks, self._start_attempt
                for call in starts:
                    tasks[call.index] = start(call, False)
                starts = []
            if self._held_change is not None:
                change, self._held_change = self._held_change, None
                await self.writer.commit_run(change)
            elif self._write_now is None:
                await self.writer.flush()
            else:
                self.writer.flush_now()
            if starts:
                tasks, start = self.tasks, self._start_attempt
                for call in starts:
                    tasks[call.index] = start(call, False)
            if state.when_due:  # judged by the core above, rendered off the loop
                self.whens.render(self._create_task, self._signal)
            if state.done:
                break
            if not self.tasks and not self._judging and state.halting:
                # nothing runs any more: whatever has not started never will
                state.cancel_unstarted(self.clock(), state.stop_reason())
                parked.clear()
                continue
            if not self.tasks and not self._judging and not timers.busy() \
                    and not state.has_ready() and not slots.waiting:
                if parked:  # only people can move the run on: it waits
                    if self._polls:
                        # a decision stored since the last poll must not be missed
                        await self._check_decisions()
                        if not parked or state.has_ready() or state.when_due:
                            continue
                    await self._park_run()
                    return
                raise RunError(f"run {self.run_id!r} cannot make progress")
            if not self.outcomes and not self._judged:
                if timers or self._polls:
                    await self._wait()
                else:  # the common case inlined: attempts report, and wake the loop
                    self._wake = wake = self._aio.create_future()
                    # attempts that end meanwhile may do the loop's work (_advance)
                    self._idle = self._write_now is not None and not self._judging
                    try:
                        await wake
                    finally:
                        self._idle = False
                    self._wake = None
            now = self.clock()
            if timers:
                self._fire_timers(now)
            self._process(now)
            if self._polls and now - self._last_cancel_poll >= CANCEL_POLL_S:
                await self._poll_cancel(now)
            if self._decisions_due:
                await self._check_decisions()
        await self._finish()

    async def _start(self) -> None:
        """Start (or restart, on resume) the run: its timers, what was interrupted or
        waiting when it stopped, and the move to ``running``, committed together."""
        state, now, run = self.state, self.clock(), self.writer.run
        run_change = None
        if run.status in (RunStatus.PENDING, RunStatus.WAITING):
            run_change = RunChange(source=run.status, target=RunStatus.RUNNING, at=now)
        if self.spec.timeout is not None:
            self.timers.add(now + self.spec.timeout, "run_timeout", -1)
        if run.cancel_requested:  # cancelled while nobody executed it
            self._effects.carry_out(state.apply(CancelRequested(
                reason="cancelled on request", at=now)), now)
        state.start(now)
        if len(self._rows) != len(self._types):  # map items, restored
            self._grow()
        for due, i in state.queued_later():  # retries that were waiting when it stopped
            self.timers.add(due, "retry", i)
        for i, handle in self.source.adopt(state.interrupted).items():
            # taken over: the attempt still runs elsewhere, its outcome will come
            state.interrupted.remove(i)
            self.tasks[i] = handle
            if (pool := self._pool_of[i]) is not None:
                self._slots.hold(pool, now)
        await self.approvals.recall(state.interrupted)
        for i in state.interrupted:  # resumed: those attempts died with their process
            error = error_info(InterruptedAttempt(state.rows[i].worker,
                                                  step=state.steps[i].id,
                                                  taken_over=self._remote))
            self._apply(i, "interrupted", None, error, False, now)
        state.interrupted.clear()
        for i in state.waiting_steps():
            if self._types[i].parks:
                state.park(i, "approval", now, resumed=True)
                self.approvals.park(i, resumed=True)
            else:  # a Python step in ctx.wait_for_approval
                state.park(i, "code_approval", now, resumed=True)
                self.approvals.park_code(i, now)
        if self.approvals.parked:
            await self.writer.commit_run(run_change)
            await self._check_decisions()
        else:
            # committed with the first steps the loop starts (one batch, one transaction):
            # nothing has taken effect before that commit
            self._held_change = run_change

    # ------------------------------------------------------------- approvals

    def signal_decision(self) -> None:
        self._decisions_due = True
        self._signal()

    async def _check_decisions(self) -> None:
        """Apply stored approval decisions, and deadlines that have passed."""
        self._decisions_due = False
        await self.approvals.apply(self._carry)
        await self.writer.flush()

    async def _park_run(self) -> None:
        run = self.writer.run
        await self.writer.commit_run(RunChange(source=run.status, target=RunStatus.WAITING,
                                               at=self.clock()))

    # ------------------------------------------------------------- starting

    def _grow(self) -> None:
        """A map step expanded: its items' rows get the loop's per-step facts."""
        types, pool_of, inline = list(self._types), list(self._pool_of), list(self._inline)
        steps = self.state.steps
        for j in range(len(types), len(self._rows)):
            step = steps[j]
            kind = get_step_type(step.type)
            types.append(kind)
            pool_of.append(step.pool)
            inline.append(kind.inline if kind.inline is not None
                          and expressions.is_cheap(step.config) else None)
        self._types, self._pool_of, self._inline = types, pool_of, inline

    def _launch(self, now: float) -> list[StepCall]:
        """Begin as many ready steps as concurrency and pools allow."""
        state = self.state
        if len(self._rows) != len(self._types):  # map items were added
            self._grow()
        starts: list[StepCall] = []
        limit = self.spec.concurrency
        # on a cluster the attempt's worker is not known before one claims it: its end
        # names it (``ClaimSource``)
        running, steps, types, worker, view = state.running, state.steps, self._types, \
            None if self._remote else self._worker, self.view
        reserve = self._reserve
        while len(running) < limit:
            i = state.pop_ready()
            if i is None:
                break
            step = steps[i]
            if step.pool is not None and not self._slots.take(i, step.pool, now,
                                                              self._signal):
                continue
            step_type = types[i]
            inline = self._inline[i]
            here = inline is not None and step.fallback is None and step.timeout is None
            # a cluster's driver runs inline steps itself and parks others, and runs
            # the attempts it has a slot for (eager): it is their worker; a ticket's
            # worker is named by whoever claims it
            if here or step_type.parks or (reserve is not None and reserve(i)):
                attempt = state.begin(i, now, self._worker)
            else:
                attempt = state.begin(i, now, worker)
            if step_type.parks and self._refused is None:
                state.park(i, "approval", now)
                self.approvals.park(i)
                self._carry_out()  # what it asks cannot be shown: it failed
                continue
            # begin() set started_at (at the step's first attempt)
            call = StepCall(step, i, attempt, state.rows[i].started_at or now, view)
            if here or step_type.parks:  # (a parking step here: refused, it fails)
                self._run_inline(i, inline or _refused_only, call, now)
            else:
                starts.append(call)
        return starts

    def _run_inline(self, i: int, inline: Callable[[StepCall], JSON], call: StepCall,
                    now: float) -> None:
        try:
            if call.services.trust is not None:  # the server's rules, as for attempts
                refused = refusal(call.run.checked, call.services.trust, call.step.id)
                if refused is not None:
                    raise refused
            value = ensure_json(inline(call), step=call.step.id,
                                max_bytes=self._max_output_bytes)
        except Exception as exc:  # noqa: BLE001 - the supervised step boundary
            outcome = failed(call, exc, False)
            self._release_slot(i)
            self._apply(i, outcome.kind, None, outcome.error, False, now)
            return
        self._release_slot(i)
        self._apply(i, "ok", value, None, False, now)

    def _release_slot(self, i: int) -> None:
        name = self._pool_of[i]
        if name is not None:
            self._slots.release(name)

    # ------------------------------------------------------------- outcomes

    def report(self, outcome: Reported) -> None:
        """How a WorkSource hands the loop an attempt's outcome (``runtime.worksource``).
        Speed: the turn run here (``_advance``) pays on the ``chain:1000`` rows of
        ``benchmarks/run.py`` (a dependency per wake-up of the loop's task otherwise)."""
        if self._idle and len(self.tasks) == 1:  # this attempt is the only one
            self._advance(outcome)
        else:
            self.outcomes.append(outcome)
            self._signal()

    def _advance(self, outcome: Reported) -> None:
        """The run's only attempt ended while the loop's task waits for attempts only,
        and the store's writes complete at once: the reporting task gives the outcome
        to the core and stores and starts the steps it readied in this event-loop turn
        (waking the loop's task first costs a turn per dependency).  Anything else
        wakes the loop's task: the run's end, timers, guards to render, a halt...  When
        other attempts run, their outcomes and this one are committed together by the
        loop's task as before (one batch for a fan-out's siblings)."""
        now = self.clock()
        self.outcomes.append(outcome)
        self._process(now)
        starts = self._launch(now)
        state = self.state
        if starts:
            self.writer.flush_now()
            tasks, start = self.tasks, self._start_attempt
            for call in starts:
                tasks[call.index] = start(call, False)
            if not (self.timers or state.when_due or state.halting or self._decisions_due
                    or self._slots.waiting):
                return
        self._signal()

    def _carry(self, effects: Effects) -> None:
        if effects:
            self._effects.carry_out(effects, self.clock())

    def _carry_out(self) -> None:
        """Effects of rules that fired outside an outcome (a decision, a ``when``)."""
        effects = self.state.take_effects()
        if effects:
            self._effects.carry_out(effects, self.clock())

    def _process(self, now: float) -> None:
        if self._judged:
            self.whens.settle(now)
            self._carry_out()
        outcomes, self.outcomes = self.outcomes, []
        tasks, pool_of, handle, rows, slots = self.tasks, self._pool_of, self._handle, \
            self._rows, self._slots
        for i, attempt, kind, output, error, fallback in outcomes:
            if attempt != rows[i].attempts or i not in tasks:  # late, or told twice
                self._drop(i, attempt, kind)
                continue
            del tasks[i]
            # a fallback runs outside the step's pool slot
            if not fallback and (pool := pool_of[i]) is not None:
                slots.release(pool)
            handle(i, kind, output, error, fallback, now)
        if self._remote:  # applied (or dropped): consumed by the batch that follows
            self.source.applied(outcomes)

    def _drop(self, i: int, attempt: int, kind: str) -> None:
        out = f"attempt {self._rows[i].attempts} is out" if i in self.tasks \
            else "no attempt is out"
        _log.warning("run %s: step %r: dropped an outcome (%s) of attempt %d: %s",
                     self.run_id, self.state.steps[i].id, kind, attempt, out)

    def _apply(self, i: int, kind: OutcomeKind, output: JSON, error: ErrorInfo | None,
               fallback: bool, now: float) -> None:
        """An outcome that did not come through ``report`` (inline, resumed)."""
        self._handle(i, kind, output, error, fallback, now)

    # ------------------------------------------------------------- waiting

    def _signal(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _wait(self) -> None:
        if self.outcomes or self._judged:
            return
        loop = asyncio.get_running_loop()
        self._wake = loop.create_future()
        handle = None
        if self.timers:
            delay = max(0.0, self.timers.next_due() - self.clock())
            handle = loop.call_later(delay, self._signal)
        elif self._polls:
            handle = loop.call_later(CANCEL_POLL_S, self._signal)
        try:
            await self._wake
        finally:
            self._wake = None
            if handle is not None:
                handle.cancel()

    def _fire_timers(self, now: float) -> None:
        state = self.state
        for kind, i in self.timers.pop_due(now):
            if kind == "approval_timeout" or kind == "wake":
                # decided in _check_decisions, after the stored decisions (and events)
                # are read
                if i in self.approvals.parked:
                    self._decisions_due = True
            else:
                self._effects.carry_out(state.apply(TimerFired(kind=kind, i=i, at=now)),
                                        now)

    # ------------------------------------------------------------- halting

    def request_cancel(self, reason: str) -> None:
        now = self.clock()
        self._effects.carry_out(self.state.apply(CancelRequested(reason=reason, at=now)),
                                now)
        self._signal()

    async def _poll_cancel(self, now: float) -> None:
        """Other processes reach a running run through the store: notice a cancel
        request within a second, and keep the ownership lease fresh."""
        self._last_cancel_poll = now
        run_id = self.run_id
        run = await self.store.get_run(run_id)
        if run.cancel_requested and not self.state.cancelled:
            self.request_cancel("cancelled on request")
        if self.approvals.parked:
            self._decisions_due = True
        if not await self.store.heartbeat(run_id, self._worker, now):
            # Someone else took the run over (our lease ran out): stop, never write.
            raise RunTakenOver(f"run {run_id!r} was taken over by another process "
                           f"({run.owner}); this process stops executing it")

    # ------------------------------------------------------------- the end

    def result(self) -> RunResult:
        """The run as stored (built from the loop's own state: no store read)."""
        return self.writer.result(self.checked)

    async def _finish(self) -> None:
        await self.writer.commit_run(await final_change(
            self.checked, self.state, self.writer.run, secrets=self.secrets,
            clock=self.clock, refused=self._refused))

    async def _abort(self, reason: str) -> None:
        """The run's task was cancelled (Ctrl-C): record everything as cancelled."""
        now = self.clock()
        self.state.apply(CancelRequested(reason=reason, at=now, interrupted=True))
        end = self.state.finish()
        run = self.writer.run
        if run.status in (RunStatus.RUNNING, RunStatus.PENDING, RunStatus.WAITING):
            await self.writer.commit_run(RunChange(source=run.status, target=end.status,
                                                   at=now, error=end.error))
