"""The one run loop: drives a single run from its stored state to its end.

The loop asks the core's RunState what may start, commits every change to the store
*before* acting on it (a step is stored ``running`` with its attempt counted before its
function is called), hands attempts to a ``WorkSource`` and feeds the outcomes the
source reports back to the core as events.  The core decides (retry, then fallback,
then fail; fail-fast; cancel; approvals; timers; the run's end) and returns effects,
which the loop carries out (``runtime.outcomes``): it decides nothing itself.  Changes
that happen together are committed together (group commit, ``RunWriter``).  Approval
steps are parked without an attempt; when only its parked steps can move the run on
(``RunState.waits_only``), it is stored ``waiting`` with their earliest due time
(``RunState.wake_at``) and the loop returns, or, holding a local run with a due time
(``Turn.holds_waits``), waits for that time and goes on.

The loop is one path for every run, local or on a cluster, new or resumed: ``_start``,
then turns (``_main``).  A turn begins the ready steps (``_launch``), ends by
committing and handing them over (``runtime.turns``: the one place where a run whose
attempts run elsewhere, or whose store writes at once, differs), then waits
(``runtime.waiting``: ``Wake``, and ``Watch`` for a store other processes share) and
feeds what happened to the core (``_process``).

The seam's contract is in ``runtime.worksource``; ``LocalSource`` (``runtime.local``)
runs attempts as tasks of the run's TaskGroup, ``ClaimSource`` (``runtime.claims``)
as tickets of a cluster.
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
from ..core.model import JSON, StepSpec
from ..core.runstate import RunState
from ..core.states import RunStatus
from ..core.validate import CheckedWorkflow
from ..errors import InterruptedAttempt, RunError
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
from .turns import turn_for
from .untrusted import refusal
from .waiting import Wake, Watch
from .when import WhenJudge
from .worksource import Reported, Spawn, WorkSource
from .writer import RunWriter

_log = logging.getLogger("plait.engine")


# speed: benchmarks/many_runs.py (the same checked workflow run again and again)
class _LoopData(NamedTuple):
    """Per-step facts derived once per checked workflow (not once per run)."""

    types: tuple[StepType, ...]
    pool_of: tuple[str | None, ...]
    # StepType.inline per step, when its templates are cheap (else rendered off the loop)
    inline: tuple[Callable[[StepCall], JSON] | None, ...]
    declared: frozenset[str]  # every declared output key (shared state)
    # per step, its parents' ids -> their indices (ctx.outputs), made on first use
    parent_index: list[dict[str, int] | None]


def _inline(step: StepSpec, kind: StepType) -> Callable[[StepCall], JSON] | None:
    return kind.inline if kind.inline is not None and expressions.is_cheap(step.config) \
        else None


def _loop_data(checked: CheckedWorkflow) -> _LoopData:
    steps = checked.spec.steps
    types = tuple(get_step_type(s.type) for s in steps)
    return _LoopData(
        types=types, pool_of=tuple(s.pool for s in steps),
        inline=tuple(_inline(s, t) for s, t in zip(steps, types, strict=True)),
        declared=frozenset(k for s in steps for k in s.outputs),
        parent_index=[None] * len(steps))


class _StepFacts:
    """What the loop reads of each step on every attempt: the checked workflow's
    (``_LoopData``), until a map step expands and its items get theirs (``grow``)."""

    __slots__ = ("inline", "pool_of", "types")

    def __init__(self, data: _LoopData) -> None:
        self.types: Sequence[StepType] = data.types
        self.pool_of: Sequence[str | None] = data.pool_of
        self.inline: Sequence[Callable[[StepCall], JSON] | None] = data.inline

    def grow(self, steps: Sequence[StepSpec]) -> None:
        """Facts for the steps added since (a map step's items)."""
        added = steps[len(self.types):]
        kinds = [get_step_type(step.type) for step in added]
        self.types = [*self.types, *kinds]
        self.pool_of = [*self.pool_of, *(step.pool for step in added)]
        self.inline = [*self.inline, *(_inline(s, k) for s, k in zip(added, kinds,
                                                                     strict=True))]


def _refused_only(call: StepCall) -> JSON:
    """What a parking step of a refused definition runs: never reached, the engine's
    rules fail it first (``RunLoop._run_inline``)."""
    raise AssertionError(f"step {call.step.id!r} of a refused definition ran")


class RunLoop:
    """The one run loop (see the module docstring)."""

    def __init__(self, host: RunHost, checked: CheckedWorkflow, run: RunRecord,
                 state: RunState, secrets: Secrets, source: WorkSource) -> None:
        self.checked = checked
        self.state = state
        self.run_id = run.run_id
        self.source = source
        self.clock = host.clock
        self._secrets = secrets  # the run's output is redacted with them
        self._worker = host.worker  # who begins attempts (a ticket's: who claims it)
        derived = checked.derive("loop", lambda: _loop_data(checked))
        self._facts = _StepFacts(derived)
        step_log = StepLog(secrets.redact_text, lambda: secrets.redacting)
        self.view = RunView(checked, state, run.run_id, host.services, step_log,
                            derived.declared, derived.parent_index)  # what attempts read
        self.writer = RunWriter(host.store, run, state, step_log, host.listeners, host.worker,
                                host.preparers)
        self.tasks: dict[int, object] = {}  # attempts out: step -> the source's handle
        self.outcomes: list[Reported] = []  # reported, not processed yet
        # how a turn is committed and its attempts handed over: chosen once, from what
        # the source and the store declare (``runtime.turns``)
        self._turn = turn_for(source, host.store, self.writer, self.tasks)
        self._wake = Wake()
        self._watch = Watch(self._turn.watched, host.store, run.run_id, host.worker,
                            run.heartbeat_at)
        # the engine's rules refuse the definition: every step fails as it would start
        # (an approval too, rather than wait for a person), and the run never completes
        self._refused = refusal(checked, host.services.trust, "")
        self.timers = Timers()
        self._slots = PoolSlots(checked.spec.pools, state, self.timers)  # its use of pools
        # Nothing the loop holds refers back to it (callbacks are passed per call, and
        # the source lets go of ``report`` when closed): a finished run is freed by
        # reference counting, not left to the cyclic collector (runtime.gctune).
        self.approvals = Approvals(checked, state, host.store, run.run_id, host.clock,
                                   self.timers, step_log)
        self.whens = WhenJudge(checked, state)
        # feeds an outcome to the state and carries out what it decides
        self._effects = OutcomeEffects(checked, state, secrets, self.view, self.timers,
                                       self.clock, host.rand, self.approvals,
                                       Halt(self.tasks, self.whens, source.cancel),
                                       self.tasks, source.start)
        self._decisions_due = False
        self._detached = False
        self._emitted = False  # a wake-up to store a step's partial output is due
        self._spawn: Spawn  # a task the run owns (its TaskGroup's)

    # ------------------------------------------------------------- driving

    async def run(self) -> None:
        step_log, loop = self.view.step_log, asyncio.get_running_loop()

        def emitted() -> None:  # from any thread: a partial output is stored promptly
            if not self._emitted:
                self._emitted = True
                loop.call_soon_threadsafe(self._store_emits)

        step_log.on_emit = emitted
        try:
            async with asyncio.TaskGroup() as tg:
                self._spawn = tg.create_task
                self.source.open(tg.create_task, self.report, self.view.step_log)
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
        finally:
            step_log.on_emit = None  # no reference back to the loop once it ended

    def _store_emits(self) -> None:
        """A step emitted (``ctx.emit``, a streamed model answer): the loop's task
        wakes, and its next commit stores the emits."""
        self._emitted = False
        self._wake.signal()

    def detach(self) -> None:
        """The next cancellation of the loop's task stops driving the run without
        writing anything: another process takes it over (a worker that drains)."""
        self._detached = True

    async def _main(self) -> None:
        """Turn after turn: start what may start and commit it, then wait for what
        happens (outcomes, timers, ``when`` renders, decisions, polls) and feed it to
        the core."""
        state, timers, parked, whens = self.state, self.timers, self.approvals.parked, \
            self.whens
        change = await self._start()
        while True:
            if change is None and self.writer.run.status is RunStatus.WAITING:
                change = self._unpark()
            await self._turn.commit(self._launch(self.clock()), change)
            change = None
            if state.when_due:  # judged by the core above, rendered off the loop
                whens.render(self._spawn, self._wake.signal)
            if state.done:
                break
            if not self.tasks and not whens.judging and state.halting:
                # nothing runs any more: whatever has not started never will
                state.cancel_unstarted(self.clock(), state.stop_reason())
                parked.clear()
                continue
            if not self.tasks and not whens.judging and not timers.busy() \
                    and not state.has_ready() and not self._slots.waiting:
                if not state.waits_only():
                    raise RunError(f"run {self.run_id!r} cannot make progress")
                # only a decision, an event, a child's end or a time moves it on: it
                # waits, stored ``waiting`` with its due time
                if self.writer.run.status is not RunStatus.WAITING and self._watch.on:
                    # a decision stored since the last poll must not be missed
                    await self._check_decisions()
                    if not state.waits_only():
                        continue
                if await self._park_run():
                    return
            if not self.outcomes and not whens.judged:
                await self._wait()
            now = self.clock()
            if timers:
                self._fire_timers(now)
            self._process(now)
            if self._watch.due(now):
                await self._poll(now)
            if self._decisions_due:
                await self._check_decisions()
        await self._finish()

    async def _start(self) -> RunChange | None:
        """Start (or restart, on resume) the run: its timers, what was interrupted or
        waiting when it stopped.  Returns the move to ``running``, which the first
        turn commits with the first steps it starts (one batch: nothing has taken
        effect before it), unless approvals wait and it was committed here."""
        state, now, run = self.state, self.clock(), self.writer.run
        run_change = None
        if run.status in (RunStatus.PENDING, RunStatus.WAITING):
            run_change = RunChange(source=run.status, target=RunStatus.RUNNING, at=now)
        if self.checked.spec.timeout is not None:
            self.timers.add(now + self.checked.spec.timeout, "run_timeout", -1)
        if run.cancel_requested:  # cancelled while nobody executed it
            self._effects.carry_out(state.apply(CancelRequested(
                reason="cancelled on request", at=now)), now)
        state.start(now)
        for due, i in state.queued_later():  # retries that were waiting when it stopped
            self.timers.add(due, "retry", i)
        await self._adopt(now)
        for i in state.waiting_steps():
            if self._types_of()[i].parks:
                state.park(i, "approval", now, resumed=True)
                self.approvals.park(i, resumed=True)
            else:  # a Python step in ctx.wait_for_approval
                state.park(i, "code_approval", now, resumed=True)
                self.approvals.park_code(i, now)
        if not self.approvals.parked:
            return run_change
        await self.writer.commit_run(run_change)
        await self._check_decisions()
        return None

    async def _adopt(self, now: float) -> None:
        """The attempts stored ``running``: those still out (a run taken over) are
        waited for, the others died with their process and count as interrupted."""
        state = self.state
        self._types_of()  # (map items restored: their facts first)
        pool_of = self._facts.pool_of
        for i, handle in self.source.adopt(state.interrupted).items():
            state.interrupted.remove(i)
            self.tasks[i] = handle
            if (pool := pool_of[i]) is not None:
                self._slots.hold(pool, now)
        await self.approvals.recall(state.interrupted)
        for i in state.interrupted:
            error = error_info(InterruptedAttempt(state.rows[i].worker,
                                                  step=state.steps[i].id,
                                                  taken_over=self._turn.taken_over))
            self._effects.apply(i, "interrupted", None, error, False, now)
        state.interrupted.clear()

    def _types_of(self) -> Sequence[StepType]:
        """Each step's type, map items restored included."""
        if len(self.state.rows) != len(self._facts.types):
            self._facts.grow(self.state.steps)
        return self._facts.types

    # ------------------------------------------------------------- approvals

    def signal_decision(self) -> None:
        self._decisions_due = True
        self._wake.signal()

    async def _check_decisions(self) -> None:
        """Apply stored approval decisions, and deadlines that have passed."""
        self._decisions_due = False
        await self.approvals.apply(self._carry)
        await self.writer.commit_run()

    async def _park_run(self) -> bool:
        """The run waits (``RunState.waits_only``): stored ``waiting`` with its due time
        (``RunState.wake_at``), committed before anything else happens.  True when the
        loop lets it go: it is driven on a cluster (a worker continues it at its time),
        or no step sleeps (it waits for a person, an event or a child run, perhaps with
        a deadline); False when a local run stays here until its time
        (``Turn.holds_waits``, ``RunState.sleeps_until``), its timers waking the loop
        (the deadlines of its other waits included)."""
        run, wake_at = self.writer.run, self.state.wake_at()
        if run.status is not RunStatus.WAITING:
            await self.writer.commit_run(RunChange(
                source=run.status, target=RunStatus.WAITING, at=self.clock(),
                wake_at=wake_at))
        return not self._turn.holds_waits or self.state.sleeps_until() is None

    def _unpark(self) -> RunChange | None:
        """A run stored ``waiting`` that has something to do again, or whose due time
        moved, is ``running`` again (committed with the turn's first starts)."""
        state = self.state
        if state.waits_only() and state.wake_at() == self.writer.run.wake_at:
            return None
        return RunChange(source=RunStatus.WAITING, target=RunStatus.RUNNING,
                         at=self.clock())

    # ------------------------------------------------------------- starting

    def _launch(self, now: float) -> list[StepCall]:
        """Begin as many ready steps as concurrency and pools allow: those run inline
        end here, the others are returned, to start once their start is committed."""
        state, facts = self.state, self._facts
        if len(state.rows) != len(facts.types):  # map items were added
            facts.grow(state.steps)
        starts: list[StepCall] = []
        limit = self.checked.spec.concurrency
        running, steps, types, inlines, view, driver, worker = state.running, \
            state.steps, facts.types, facts.inline, self.view, self._worker, \
            self._turn.worker
        while len(running) < limit:
            i = state.pop_ready()
            if i is None:
                break
            step = steps[i]
            if step.pool is not None and not self._slots.take(i, step.pool, now,
                                                              self._wake.signal):
                continue
            step_type = types[i]
            inline = inlines[i]
            here = inline is not None and step.fallback is None and step.timeout is None
            # the driver runs inline steps itself and parks others: it is their worker
            attempt = state.begin(i, now, driver if here or step_type.parks
                                  else worker(i, driver))
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
                                max_bytes=self.checked.spec.limits.max_output_bytes)
        except Exception as exc:  # noqa: BLE001 - the supervised step boundary
            outcome = failed(call, exc, False)
            self._release_slot(i)
            self._effects.apply(i, outcome.kind, None, outcome.error, False, now)
            return
        self._release_slot(i)
        self._effects.apply(i, "ok", value, None, False, now)

    def _release_slot(self, i: int) -> None:
        name = self._facts.pool_of[i]
        if name is not None:
            self._slots.release(name)

    # ------------------------------------------------------------- outcomes

    def report(self, outcome: Reported) -> None:
        """How a WorkSource hands the loop an attempt's outcome (``runtime.worksource``):
        queued for the loop's task, or, when it is the only attempt out and the task
        waits for nothing else, processed here (``_advance``)."""
        # speed: benchmarks/child.py chain:10000 db=memory:// (a task wake-up per step)
        if self._wake.idle and len(self.tasks) == 1:
            self._advance(outcome)
        else:
            self.outcomes.append(outcome)
            self._wake.signal()

    def _advance(self, outcome: Reported) -> None:
        """The run's only attempt ended while the loop's task waits for attempts only,
        on a turn that commits without awaiting (``InstantTurn``): the reporting task
        gives the outcome to the core and commits and starts the steps it readied.
        Anything else wakes the loop's task: the run's end, timers, guards to render,
        a halt...  When other attempts run, their outcomes and this one are committed
        together by the loop's task (one batch for a fan-out's siblings)."""
        now = self.clock()
        self.outcomes.append(outcome)
        self._process(now)
        starts = self._launch(now)
        state = self.state
        if starts:
            self._turn.commit_now(starts)
            if not (self.timers or state.when_due or state.halting or self._decisions_due
                    or self._slots.waiting):
                return
        self._wake.signal()

    def _carry(self, effects: Effects) -> None:
        if effects:
            self._effects.carry_out(effects, self.clock())

    def _carry_out(self) -> None:
        """Effects of rules that fired outside an outcome (a decision, a ``when``)."""
        self._carry(self.state.take_effects())

    def _process(self, now: float) -> None:
        whens = self.whens
        if whens.judged:
            whens.settle(now)
            self._carry_out()
        outcomes, self.outcomes = self.outcomes, []
        tasks, pool_of, apply, rows, slots = self.tasks, self._facts.pool_of, \
            self._effects.apply, self.state.rows, self._slots
        for i, attempt, kind, output, error, fallback in outcomes:
            if attempt != rows[i].attempts or i not in tasks:  # late, or told twice
                self._drop(i, attempt, kind)
                continue
            del tasks[i]
            # a fallback runs outside the step's pool slot
            if not fallback and (pool := pool_of[i]) is not None:
                slots.release(pool)
            apply(i, kind, output, error, fallback, now)
        self._turn.applied(outcomes)

    def _drop(self, i: int, attempt: int, kind: str) -> None:
        out = f"attempt {self.state.rows[i].attempts} is out" if i in self.tasks \
            else "no attempt is out"
        _log.warning("run %s: step %r: dropped an outcome (%s) of attempt %d: %s",
                     self.run_id, self.state.steps[i].id, kind, attempt, out)

    # ------------------------------------------------------------- waiting

    async def _wait(self) -> None:
        """Until something happens: an outcome, a render, a decision, the next timer,
        the next poll of a watched store."""
        timers, poll = self.timers, self._watch.delay()
        delay = poll
        if timers:
            due = max(0.0, timers.next_due() - self.clock())
            delay = due if poll is None else min(due, poll)
        # attempts that end meanwhile may take the loop's turn (``report``)
        await self._wake.wait(delay, self._turn.inline and not timers
                              and not self.whens.judging)

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
        self._wake.signal()

    async def _poll(self, now: float) -> None:
        """Other processes reach a running run through the store: notice a cancel
        request within a second, and keep the ownership lease fresh (``Watch``)."""
        if await self._watch.poll(now) and not self.state.cancelled:
            self.request_cancel("cancelled on request")
        if self.approvals.parked:
            self._decisions_due = True

    # ------------------------------------------------------------- the end

    def result(self) -> RunResult:
        """The run as stored (built from the loop's own state: no store read)."""
        return self.writer.result(self.checked)

    async def _finish(self) -> None:
        await self.writer.commit_run(await final_change(
            self.checked, self.state, self.writer.run, secrets=self._secrets,
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
