"""The one run loop: drives a single run from its stored state to its end.

The loop asks the core's RunState what may start, commits every change to the store
*before* acting on it (a step is stored ``running`` with its attempt counted before its
function is called), runs attempts as tasks in a TaskGroup the run owns, and feeds their
outcomes back to the core.  Changes that happen together are committed together (group
commit).  Approval steps are parked without a task; when only people can move the run
on, it is stored ``waiting`` and the loop returns.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import traceback
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, NamedTuple, cast

from ..core import expressions
from ..core.jsoncheck import clean_text, ensure_json
from ..core.model import JSON, JSONDict
from ..core.retry import ErrorInfo
from ..core.runstate import RunState
from ..core.states import RunStatus, StepStatus
from ..core.validate import CheckedWorkflow
from ..errors import (
    CircuitOpenError,
    DecisionTaken,
    InterruptedAttempt,
    OutputError,
    RunError,
    StepError,
    StepTimeout,
    TemplateError,
    TransitionError,
)
from ..steps.registry import StepCall, StepFunction, StepType, get_step_type
from ..store.base import RunChange, RunRecord, WriteBatch
from ..store.memory import MemoryStore
from . import offloop
from .binding import compile_plan, import_call, invoke
from .context import ParentOutputs, StepLog
from .results import RunResult, StepResults, iso
from .secrets import Secrets

if TYPE_CHECKING:
    from .engine import Engine

CANCEL_POLL_S = 0.5
_log = logging.getLogger("plait.engine")


def error_info(exc: BaseException) -> ErrorInfo:
    names = tuple(c.__name__ for c in type(exc).__mro__
                  if c not in (object, BaseException, Exception))
    retryable = bool(getattr(exc, "retryable", True)) if isinstance(exc, StepError) else True
    retry_after = getattr(exc, "retry_after", None)
    tb = clean_text("".join(traceback.format_exception(exc, limit=-8))[-4000:])
    # a message may quote a bad value (a lone surrogate): stored and printed as U+FFFD
    return ErrorInfo(type=type(exc).__name__, message=clean_text(str(exc)), names=names,
                     retryable=retryable,
                     retry_after=retry_after if isinstance(retry_after, int | float) else None,
                     traceback=tb)


class _LoopData(NamedTuple):
    """Per-step facts the loop reads on every attempt, derived once per checked
    workflow (not once per run)."""

    types: tuple[StepType, ...]
    pool_of: tuple[str | None, ...]
    # per step, what an attempt calls: its type's ``prepare`` answer, else its ``run``
    runs: tuple[StepFunction, ...]
    declared: frozenset[str]  # every declared output key (shared state)
    # StepType.inline per step, when its templates are cheap (else rendered off the loop)
    inline: tuple[Callable[[StepCall], JSON] | None, ...]
    # per step, its parents' ids -> their indices (ctx.outputs), made on first use
    parent_index: list[dict[str, int] | None]


def _loop_data(checked: CheckedWorkflow) -> _LoopData:
    steps = checked.spec.steps
    types = tuple(get_step_type(s.type) for s in steps)
    return _LoopData(
        types=types, pool_of=tuple(s.pool for s in steps),
        inline=tuple(t.inline if t.inline is not None and expressions.is_cheap(s.config)
                     else None for s, t in zip(steps, types, strict=True)),
        runs=tuple(t.run if t.prepare is None else t.prepare(s, checked)
                   for s, t in zip(steps, types, strict=True)),
        declared=frozenset(k for s in steps for k in s.outputs),
        parent_index=[None] * len(steps))


class RunLoop:
    """The one run loop (see the module docstring)."""

    def __init__(self, engine: Engine, checked: CheckedWorkflow, run: RunRecord,
                 state: RunState, secrets: Secrets) -> None:
        self.engine = engine
        self.store = engine.store
        self.checked = checked
        self.spec = checked.spec
        self.run_rec = run
        self.state = state
        # RunAccess: what attempts read of the run through their StepCall
        self.run_id = run.run_id
        self.input = state.input
        self.shared_state: Mapping[str, JSON] = state.state
        self.services = engine.services
        self.secrets = secrets
        self.step_log = StepLog(secrets.redact_text)  # ctx.logger's records, see _batch
        self.clock = engine.clock
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.outcomes: list[tuple[int, str, object, bool]] = []  # (step, kind, value, fb)
        self.timers: list[tuple[float, int, str, int]] = []  # (due, seq, kind, step)
        self._timer_seq = 0
        self._wake: asyncio.Future[None] | None = None
        self._cancel_reason: str | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._create_task: Callable[[Coroutine[object, object, None]], asyncio.Task[None]]
        # the claim that gave us the run just read its cancel request and renewed the
        # heartbeat: the first poll is due a poll interval after it
        self._last_cancel_poll = run.heartbeat_at or 0.0
        self.parked: dict[int, float | None] = {}  # approval steps -> deadline
        self._pool_waiting = 0  # steps of this run waiting for a pool slot
        self._decisions_due = False
        self._notes_seen = 0
        derived = checked.derive("loop", lambda: _loop_data(checked))
        self._types = derived.types
        self._runs = derived.runs
        self._parent_index = derived.parent_index
        self._rows = state.rows
        self._pool_of = derived.pool_of
        self._declared = derived.declared
        self._inline = derived.inline
        self._pool_specs = self.spec.pools
        self._max_output_bytes = self.spec.limits.max_output_bytes
        # a store shared with other processes is polled for cancel requests, approval
        # decisions and the ownership heartbeat; a memory store is this process's own
        self._polls = not isinstance(self.store, MemoryStore)
        # ...and its writes complete at once: the loop calls them without a coroutine
        self._write_now = self.store.write_now if isinstance(self.store, MemoryStore) \
            else None
        self._aio: asyncio.AbstractEventLoop
        self._held_change: RunChange | None = None  # the run's start, see _start
        # the loop's task waits for nothing but attempts, on a store whose writes
        # complete at once: an attempt that ends does the loop's turn itself (_advance)
        self._idle = False

    # ------------------------------------------------------------- driving

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                self._create_task = tg.create_task
                self._aio = asyncio.get_running_loop()
                await self._main()
        except BaseExceptionGroup as group:
            # Attempt tasks never raise (outcomes are reported), so the group holds only
            # the loop's own error: surface it as itself.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        except asyncio.CancelledError:
            await self._abort("cancelled (interrupted)")
            raise

    async def _main(self) -> None:
        state = self.state
        await self._start()
        while True:
            starts = self._launch(self.clock())
            if self._held_change is not None:
                change, self._held_change = self._held_change, None
                await self._flush(change)
                self._apply_run_change(change)
            elif self._write_now is None:
                await self._flush()
            else:
                self._flush_now()
            if starts:
                tasks, create, attempt = self.tasks, self._create_task, self._attempt
                for i, call in starts:
                    tasks[i] = create(attempt(i, call, False))
            if state.when_due:  # judged by the core above, rendered off the loop
                self._render_guards()
            if state.done:
                break
            if not self.tasks and state.halting:
                # nothing runs any more: whatever has not started never will
                state.cancel_unstarted(self.clock(), self._halt_reason())
                self.parked.clear()
                continue
            if not self.tasks and not self._busy_timers() and not state.has_ready() \
                    and not self._pool_waiting:
                if self.parked:  # only people can move the run on: it waits
                    if self._polls:
                        # a decision stored since the last poll must not be missed
                        await self._check_decisions()
                        if not self.parked or state.has_ready() or state.when_due:
                            continue
                    await self._park_run()
                    return
                raise RunError(f"run {self.run_rec.run_id!r} cannot make progress")
            if not self.outcomes:
                if self.timers or self._polls:
                    await self._wait()
                else:  # the common case inlined: attempts report, and wake the loop
                    self._wake = wake = self._aio.create_future()
                    # attempts that end meanwhile may do the loop's work (_advance)
                    self._idle = self._write_now is not None
                    try:
                        await wake
                    finally:
                        self._idle = False
                    self._wake = None
            now = self.clock()
            if self.timers:
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
        state, now = self.state, self.clock()
        run_change = None
        if self.run_rec.status in (RunStatus.PENDING, RunStatus.WAITING):
            run_change = RunChange(source=self.run_rec.status, target=RunStatus.RUNNING,
                                   at=now)
        if self.spec.timeout is not None:
            self._timer(now + self.spec.timeout, "run_timeout", -1)
        if self.run_rec.cancel_requested:  # cancelled while nobody executed it
            self._halt("cancelled on request", cancelled=True)
        state.start(now)
        for due, i in state.queued_later():  # retries that were waiting when it stopped
            self._timer(due, "retry", i)
        for i in state.interrupted:  # resumed: those attempts died with their process
            self._handle(i, "error", InterruptedAttempt(state.rows[i].worker,
                                                        step=self.spec.steps[i].id),
                         False, now)
        state.interrupted.clear()
        for i in state.waiting_steps():
            if self._types[i].parks:
                self._park(i)
        if self.parked:
            await self._flush(run_change)
            if run_change is not None:
                self._apply_run_change(run_change)
            await self._check_decisions()
        else:
            # committed with the first steps the loop starts (one batch, one transaction):
            # nothing has taken effect before that commit
            self._held_change = run_change

    # ------------------------------------------------------------- approvals

    def _park(self, i: int) -> None:
        """An approval step waits; its deadline (step timeout) is a timer."""
        step, row = self.spec.steps[i], self.state.rows[i]
        deadline = None
        if step.timeout is not None:
            deadline = (row.started_at or self.clock()) + step.timeout
            self._timer(deadline, "approval_timeout", i)
        self.parked[i] = deadline

    def _busy_timers(self) -> bool:
        """Timers that keep the loop alive (approval deadlines alone do not)."""
        return any(kind != "approval_timeout" for _, _, kind, _ in self.timers)

    def signal_decision(self) -> None:
        self._decisions_due = True
        self._signal()

    async def _check_decisions(self) -> None:
        """Apply stored approval decisions, and deadlines that have passed."""
        self._decisions_due = False
        events = await self.store.get_events(self.run_rec.run_id, after=self._notes_seen)
        now = self.clock()
        for event in events:
            self._notes_seen = max(self._notes_seen, event.seq)
            decision = event.data.get("approval") if event.kind == "note" else None
            i = self.checked.graph.index.get(event.step_id or "")
            if isinstance(decision, dict) and i is not None and i in self.parked:
                self._decide(i, decision, now)
        for i, deadline in list(self.parked.items()):
            if deadline is not None and deadline <= now:
                await self._timeout_approval(i, now)
        await self._flush()

    async def _timeout_approval(self, i: int, now: float) -> None:
        """The deadline passed: the timeout's decision is stored like a person's, as
        the same compare-and-set, so a person's decision stored first still stands."""
        choice = self.spec.steps[i].config.get("on_timeout", "reject")
        decision: JSONDict = {"decision": "approved" if choice == "approve" else "rejected",
                              "by": "timeout", "at": now, "data": None}
        try:
            await self.store.record_decision(self.run_id, self.spec.steps[i].id, decision)
        except DecisionTaken as taken:
            decision = cast(JSONDict, taken.decision)
        self._decide(i, decision, now)

    def _decide(self, i: int, decision: JSONDict, now: float) -> None:
        self.parked.pop(i, None)
        by = decision.get("by")
        if decision.get("decision") == "approved":
            at = decision.get("at")
            self.state.succeed(i, {"approved": True, "by": by,
                                   "at": iso(at) if isinstance(at, int | float) else at,
                                   "data": decision.get("data")}, now)
            return
        reason = f"rejected by {by}" if by != "timeout" else "approval timed out (rejected)"
        self.state.end_attempt(i, "failed", now, reason)
        self.state.fail(i, reason, now)
        self._after_failure()

    async def _park_run(self) -> None:
        change = RunChange(source=self.run_rec.status, target=RunStatus.WAITING,
                           at=self.clock())
        await self._flush(change)
        self._apply_run_change(change)

    def _spawn(self, coro: object) -> asyncio.Task[None]:
        assert self._tg is not None
        return self._tg.create_task(coro)  # type: ignore[arg-type]

    def _launch(self, now: float) -> list[tuple[int, StepCall]]:
        """Begin as many ready steps as concurrency and pools allow."""
        state = self.state
        starts: list[tuple[int, StepCall]] = []
        limit = self.spec.concurrency
        running, steps, types, worker = state.running, self.spec.steps, self._types, \
            self.engine.worker
        while len(running) < limit:
            i = state.pop_ready()
            if i is None:
                break
            step = steps[i]
            if step.pool is not None and not self._take_pool(i, step.pool, now):
                continue
            attempt = state.begin(i, now, worker)
            step_type = types[i]
            if step_type.parks:
                state.wait(i, now)
                self._park(i)
                continue
            # begin() set started_at (at the step's first attempt)
            call = StepCall(step, i, attempt, state.rows[i].started_at or now, self)
            inline = self._inline[i]
            if inline is not None and step.fallback is None and step.timeout is None:
                self._run_inline(i, inline, call, now)
            else:
                starts.append((i, call))
        return starts

    def _take_pool(self, i: int, name: str, now: float) -> bool:
        pool = self.engine.pools.get(self._pool_specs[name])
        if pool.full():
            self._pool_waiting += 1
            pool.waiters.append(lambda: self._requeue(i))
            return False
        if pool.window is not None:
            wait = pool.window.wait(now)
            if wait > 0:
                self._timer(now + wait, "ready", i)
                return False
        pool.acquire(now)
        return True

    def _requeue(self, i: int) -> bool:
        """A pool slot freed: try the step again (False when the run moved on)."""
        self._pool_waiting -= 1
        if self.state.halting or self.state.rows[i].status is not StepStatus.QUEUED:
            self._signal()
            return False
        self.state.push_back(i)
        self._signal()
        return True

    def _release_pool(self, i: int) -> None:
        name = self._pool_of[i]
        if name is not None:
            self.engine.pools.get(self._pool_specs[name]).release()

    def _run_inline(self, i: int, inline: Callable[[StepCall], JSON], call: StepCall,
                    now: float) -> None:
        try:
            value: object = ensure_json(inline(call), step=call.step.id,
                                        max_bytes=self._max_output_bytes)
        except Exception as exc:  # noqa: BLE001 - the supervised step boundary
            value, kind = exc, "error"
        else:
            kind = "ok"
        self._release_pool(i)
        self._handle(i, kind, value, False, now)

    def _call(self, i: int, attempt: int) -> StepCall:
        return StepCall(self.spec.steps[i], i, attempt,
                        self.state.rows[i].started_at or self.clock(), self)

    # RunAccess: what attempts read of the run
    def template_context(self, index: int) -> dict[str, object]:
        return self.state.context(index)

    def parent_outputs(self, index: int) -> ParentOutputs:
        names = self._parent_index[index]
        if names is None:
            ids = self.checked.graph.ids
            names = self._parent_index[index] = {
                ids[p]: p for p in self.checked.graph.parents[index]}
        return ParentOutputs(names, self.step_output)

    def step_output(self, index: int) -> JSON:
        """A step's output; None unless it completed."""
        row = self._rows[index]
        return row.output if row.status is StepStatus.COMPLETED else None

    def resolve(self, call: StepCall, name: str) -> tuple[bool, object]:
        state = self.state
        if name == "input":
            return True, state.input
        if name == "ctx":
            return True, call.context()
        if name in self.checked.graph.index and name != call.step.id:
            return True, state.steps_view[name]["output"]
        if name in self._declared:
            return True, state.state.get(name)
        if isinstance(state.input, dict) and name in state.input:
            return True, state.input[name]
        return False, None

    async def _attempt(self, i: int, call: StepCall, fallback: bool) -> None:
        step = call.step
        kind: str = "ok"
        value: object = None
        try:
            if step.circuit_breaker is not None and not fallback:
                breaker = self.engine.breaker(step.circuit_breaker.key, step.circuit_breaker)
                if not breaker.allow(self.clock()):
                    raise CircuitOpenError(step.circuit_breaker.key, step=step.id)
            awaitable = self._fallback_call(call) if fallback else self._runs[i](call)
            if step.timeout is not None:
                scope = asyncio.timeout(step.timeout)
                try:
                    async with scope:
                        value = await awaitable
                except TimeoutError:
                    if scope.expired():  # ours, not a TimeoutError raised by the step
                        call.stop()
                        raise StepTimeout(step.timeout, step=step.id) from None
                    raise
            else:
                value = await awaitable
            if value is not None:
                value = ensure_json(value, step=step.id, max_bytes=self._max_output_bytes)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                call.stop()
                self._report(i, "cancelled", None, fallback)
                raise  # plait cancelled this attempt: never swallowed
            # raised by the step's own code, nobody cancelled the attempt: a failure
            kind, value = "error", StepError(f"the step raised CancelledError: {exc}",
                                             step=step.id)
        except Exception as exc:  # noqa: BLE001 - the supervised step boundary
            kind, value = "error", exc
        if self._idle and len(self.tasks) == 1:  # this attempt is the only one
            self._advance(i, kind, value, fallback)
        else:
            self._report(i, kind, value, fallback)

    async def _fallback_call(self, call: StepCall) -> JSON:
        fb = call.step.fallback
        assert fb is not None
        if fb.call is None and fb.func is None:  # `output:` whose templates are not cheap
            output = fb.output
            return await call.rendered(lambda c: c.render(output, "fallback.output"),
                                       fields=output)
        fn = fb.func or import_call(fb.call or "")
        error = self.state.rows[call.index].error
        # a fallback runs at most once per step and run: its plan is not kept
        plan = compile_plan(fn, step_id=call.step.id, steps=self.checked.graph.index,
                            declared=self._declared, error=True)
        kwargs = plan.arguments(self, call.context, error=error)
        return await invoke(fn, kwargs, self.engine.services.executor,  # type: ignore[return-value]
                            is_async=plan.is_async)

    def _report(self, i: int, kind: str, value: object, fallback: bool) -> None:
        self.outcomes.append((i, kind, value, fallback))
        self._signal()

    def _advance(self, i: int, kind: str, value: object, fallback: bool) -> None:
        """The run's only attempt ended while the loop's task waits for attempts only,
        and the store's writes complete at once: the attempt's own task gives the
        outcome to the core and stores and starts the steps it readied in this
        event-loop turn (waking the loop's task first costs a turn per dependency).
        Anything else wakes the loop's task: the run's end, timers, guards to render,
        a halt...  When other attempts run, their outcomes and this one are committed
        together by the loop's task as before (one batch for a fan-out's siblings)."""
        now = self.clock()
        self.outcomes.append((i, kind, value, fallback))
        self._process(now)
        starts = self._launch(now)
        state = self.state
        if starts:
            self._flush_now()
            tasks, create, attempt = self.tasks, self._create_task, self._attempt
            for j, call in starts:
                tasks[j] = create(attempt(j, call, False))
            if not (self.timers or state.when_due or state.halting or self._decisions_due
                    or self._pool_waiting):
                return
        self._signal()

    def _signal(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _wait(self) -> None:
        if self.outcomes:
            return
        loop = asyncio.get_running_loop()
        self._wake = loop.create_future()
        handle = None
        if self.timers:
            delay = max(0.0, self.timers[0][0] - self.clock())
            handle = loop.call_later(delay, self._signal)
        elif self._polls:
            handle = loop.call_later(CANCEL_POLL_S, self._signal)
        try:
            await self._wake
        finally:
            self._wake = None
            if handle is not None:
                handle.cancel()

    def _timer(self, due: float, kind: str, i: int) -> None:
        self._timer_seq += 1
        heapq.heappush(self.timers, (due, self._timer_seq, kind, i))

    def _fire_timers(self, now: float) -> None:
        while self.timers and self.timers[0][0] <= now:
            _, _, kind, i = heapq.heappop(self.timers)
            if kind == "retry" or kind == "ready":
                if self.state.rows[i].status is StepStatus.QUEUED:
                    self.state.retry_due(i)
            elif kind == "approval_timeout":
                # decided in _check_decisions, after the stored decisions are read
                if i in self.parked:
                    self._decisions_due = True
            elif kind == "run_timeout":
                self._halt(f"run timed out after {self.spec.timeout:g}s", cancelled=False)

    # ------------------------------------------------------------- outcomes

    def _render_guards(self) -> None:
        """Each `when` the core could not judge on the loop renders in a worker thread
        (a task the run owns, like an attempt), then comes back as a "when" outcome."""
        due, self.state.when_due = self.state.when_due, []
        for i in due:
            names = offloop.snapshot(self.state.context(i))
            self.tasks[i] = self._create_task(self._guard(i, names))

    async def _guard(self, i: int, names: dict[str, object]) -> None:
        text, stop = self.spec.steps[i].when or "", expressions.Stop()
        value: object
        try:
            value = await offloop.in_thread(stop, expressions.render, text, names, stop=stop)
        except asyncio.CancelledError:
            self._report(i, "when_cancelled", None, False)
            raise
        except expressions.RenderError as exc:
            value = exc
        self._report(i, "when", value, False)

    def _process(self, now: float) -> None:
        outcomes, self.outcomes = self.outcomes, []
        tasks, pool_of, handle = self.tasks, self._pool_of, self._handle
        for i, kind, value, fallback in outcomes:
            tasks.pop(i, None)
            if kind == "when" or kind == "when_cancelled":
                if kind == "when":
                    self.state.settle_when(i, cast("JSON | expressions.RenderError", value),
                                           now)
                continue
            # a fallback runs outside the step's pool slot
            if not fallback and pool_of[i] is not None:
                self._release_pool(i)
            handle(i, kind, value, fallback, now)

    def _handle(self, i: int, kind: str, value: object, fallback: bool, now: float) -> None:
        state, step = self.state, self.spec.steps[i]
        if kind == "cancelled":
            state.cancel_step(i, now, self._cancel_reason or self._halt_reason())
            return
        if kind == "ok":
            if self.secrets.used:
                value = self.secrets.redact(cast(JSON, value))
            try:
                state.succeed(i, cast(JSON, value), now, fallback=fallback)
            except (OutputError, TransitionError) as refused:
                value = refused
            else:
                if step.circuit_breaker is not None and not fallback:
                    self.engine.breaker(step.circuit_breaker.key,
                                        step.circuit_breaker).record_success()
                return
        exc = value if isinstance(value, Exception) else RuntimeError(str(value))
        info = error_info(exc)
        info = ErrorInfo(type=info.type, message=self.secrets.redact_text(info.message) or "",
                         names=info.names, retryable=info.retryable,
                         retry_after=info.retry_after)
        if fallback:
            original = state.rows[i].error
            state.fail(i, f"{original}; fallback failed: {info}", now)
            self._after_failure()
            return
        if step.circuit_breaker is not None and not isinstance(exc, CircuitOpenError):
            self.engine.breaker(step.circuit_breaker.key,
                                step.circuit_breaker).record_failure(now)
        delay = state.fail_attempt(i, info, now, self.engine.rand())
        if delay is not None:
            self._timer(now + delay, "retry", i)
            return
        if step.fallback is not None and not state.halting:
            self._start_fallback(i, now)
            return
        state.fail(i, str(info), now)
        self._after_failure()

    def _start_fallback(self, i: int, now: float) -> None:
        step = self.spec.steps[i]
        assert step.fallback is not None
        if step.fallback.call is None and step.fallback.func is None \
                and expressions.is_cheap(step.fallback.output):
            call = self._call(i, self.state.rows[i].attempts)
            try:
                value = ensure_json(call.render(step.fallback.output, "fallback.output"),
                                    step=step.id, max_bytes=self._max_output_bytes)
            except (TemplateError, OutputError) as exc:
                self._handle(i, "error", exc, True, now)
                return
            self._handle(i, "ok", value, True, now)
            return
        call = self._call(i, self.state.rows[i].attempts)
        self.tasks[i] = self._spawn(self._attempt(i, call, True))

    def _after_failure(self) -> None:
        if self.state.halting and self.tasks:
            self._cancel_tasks(self._halt_reason())

    def _halt(self, reason: str, *, cancelled: bool) -> None:
        self.state.halt(reason, cancelled=cancelled)
        self._cancel_reason = reason
        self._cancel_tasks(reason)

    def _halt_reason(self) -> str:
        return self._cancel_reason or self.state.failure_reason or "run stopped"

    def _cancel_tasks(self, reason: str) -> None:
        self._cancel_reason = self._cancel_reason or reason
        for task in self.tasks.values():
            task.cancel()

    def request_cancel(self, reason: str) -> None:
        if not self.state.halting or not self.state.cancelled:
            self._halt(reason, cancelled=True)
            self._signal()

    async def _poll_cancel(self, now: float) -> None:
        """Other processes reach a running run through the store: notice a cancel
        request within a second, and keep the ownership lease fresh."""
        self._last_cancel_poll = now
        run_id = self.run_rec.run_id
        run = await self.store.get_run(run_id)
        if run.cancel_requested and not self.state.cancelled:
            self.request_cancel("cancelled on request")
        if self.parked:
            self._decisions_due = True
        if not await self.store.heartbeat(run_id, self.engine.worker, now):
            # Someone else took the run over (our lease ran out): stop, never write.
            raise RunError(f"run {run_id!r} was taken over by another process "
                           f"({run.owner}); this process stops executing it")

    # ------------------------------------------------------------- persistence

    def _batch(self, run_change: RunChange | None = None) -> WriteBatch | None:
        """What the core changed since the last commit (None when nothing did)."""
        steps, attempts = self.state.drain()
        notes = self.step_log.drain() if self.step_log.pending else []
        if not steps and not attempts and run_change is None and not notes:
            return None
        return WriteBatch(self.run_id, steps, attempts, run_change, notes)

    async def _flush(self, run_change: RunChange | None = None) -> None:
        batch = self._batch(run_change)
        if batch is not None:
            await self.store.write(batch)
            self._notify(batch)

    def _flush_now(self) -> None:
        """``_flush`` for a store whose writes complete at once (the memory store)."""
        assert self._write_now is not None
        batch = self._batch()
        if batch is not None:
            self._write_now(batch)
            self._notify(batch)

    def _notify(self, batch: WriteBatch) -> None:
        for listener in self.engine.listeners:
            try:
                listener(batch)
            except Exception:  # noqa: BLE001 - a view must never break the run
                _log.exception("run listener %r failed", listener)

    def result(self) -> RunResult:
        """The run as stored (built from the loop's own state: no store read)."""
        run = self.run_rec
        return RunResult(
            run_id=run.run_id, workflow=run.workflow, version=run.version,
            fingerprint=run.fingerprint, status=str(run.status), output=run.output,
            error=run.error, started_at=run.started_at, finished_at=run.finished_at,
            retry_of=run.retry_of,
            steps=StepResults(self.checked.graph.index, self.state.rows))

    async def _finish(self) -> None:
        state = self.state
        status = state.run_status()
        output: JSON = None
        error: str | None = None
        if status is RunStatus.COMPLETED:
            try:
                output = await self._run_output()
            except (expressions.RenderError, OutputError) as exc:
                status, error = RunStatus.FAILED, f"run output: {exc}"
        if status is RunStatus.FAILED and error is None:
            error = state.failure_reason or self._failed_steps()
        elif status is RunStatus.CANCELLED:
            error = self._cancel_reason or "cancelled"
        change = RunChange(source=self.run_rec.status, target=status, at=self.clock(),
                           output=self.secrets.redact(output), error=error)
        await self._flush(change)
        self._apply_run_change(change)

    def _apply_run_change(self, change: RunChange) -> None:
        """Mirror a stored run change in the loop's copy of the run record."""
        run = self.run_rec
        run.status = change.target
        if change.target is RunStatus.RUNNING and run.started_at is None:
            run.started_at = change.at
        if change.target in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
            run.finished_at, run.output, run.error = change.at, change.output, change.error

    async def _run_output(self) -> JSON:
        """The run's output (SPEC 1.1 `output`, else the sinks' outputs), within
        ``limits.max_output_bytes`` like any step's; a template that is not cheap renders
        in a worker thread, so other runs of this process go on meanwhile."""
        template = self.spec.output
        if template is None:
            value: JSON = self.state.default_output()
        elif expressions.is_cheap(template):
            value = expressions.render_value(template, self.state.context())
        else:
            stop = expressions.Stop()
            value = await offloop.in_thread(stop, expressions.render_value, template,
                                            self.state.context(), stop=stop)
        return ensure_json(value, max_bytes=self._max_output_bytes)

    def _failed_steps(self) -> str:
        failed = [s.id for s, r in zip(self.spec.steps, self.state.rows, strict=True)
                  if r.status is StepStatus.FAILED and not s.allow_failure]
        return "failed steps: " + ", ".join(failed)

    async def _abort(self, reason: str) -> None:
        """The run's task was cancelled (Ctrl-C): record everything as cancelled."""
        now = self.clock()
        state = self.state
        state.halt(reason, cancelled=True)
        for i in list(state.running):
            state.cancel_step(i, now, reason)
        state.cancel_unstarted(now, reason)
        self._cancel_reason = reason
        if self.run_rec.status in (RunStatus.RUNNING, RunStatus.PENDING, RunStatus.WAITING):
            change = RunChange(source=self.run_rec.status, target=RunStatus.CANCELLED,
                               at=now, error=reason)
            await self._flush(change)
            self._apply_run_change(change)
