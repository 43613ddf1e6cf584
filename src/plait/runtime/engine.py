"""The engine: starts, executes, resumes and cancels runs against one Store.

``_RunLoop`` is the one run loop.  It asks the core's RunState what may start, commits
every change to the store *before* acting on it (a step is stored ``running`` with its
attempt counted before its function is called), runs attempts as tasks in a TaskGroup
the run owns, and feeds their outcomes back to the core.  Changes that happen together
are committed together (group commit).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import os
import random
import socket
import time
import traceback
import uuid
from collections.abc import Callable
from typing import cast

from ..core import expressions
from ..core.guards import CircuitBreaker
from ..core.jsoncheck import ensure_json
from ..core.model import JSON, JSONDict
from ..core.retry import ErrorInfo
from ..core.runstate import RunState, StepChange, StepRuntime
from ..core.states import RunStatus, StepStatus
from ..core.suggest import did_you_mean
from ..core.validate import CheckedWorkflow, validate_input
from ..errors import (
    CircuitOpenError,
    InputError,
    OutputError,
    RunError,
    StepError,
    StepTimeout,
    TemplateError,
    TransitionError,
)
from ..steps.registry import HTTPPolicy, Services, StepCall, get_step_type
from ..store.base import RunChange, RunRecord, Store, WriteBatch
from ..store.memory import MemoryStore
from .binding import bind, import_call, invoke, signature_of
from .pools import PoolRegistry
from .results import RunResult, StepResult, iso
from .secrets import Secrets
from .threads import DaemonThreadPool

_CANCEL_POLL_S = 0.5
_log = logging.getLogger("plait.engine")
_MISSING = object()


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _descendants(children: tuple[tuple[int, ...], ...], roots: list[int]) -> set[int]:
    seen = set(roots)
    todo = list(roots)
    while todo:
        for child in children[todo.pop()]:
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def owner_alive(owner: str) -> bool:
    """False only when ``owner`` ("host:pid") names a process of this host that has
    exited; owners on other hosts are presumed alive (their lease decides)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class InterruptedAttempt(StepError):
    """An attempt that was running when the process executing it stopped."""

    def __init__(self, worker: str | None, *, step: str) -> None:
        super().__init__(f"attempt interrupted: the process running it ({worker or '?'}) "
                         f"stopped", step=step)


def error_info(exc: BaseException) -> ErrorInfo:
    names = tuple(c.__name__ for c in type(exc).__mro__
                  if c not in (object, BaseException, Exception))
    retryable = bool(getattr(exc, "retryable", True)) if isinstance(exc, StepError) else True
    retry_after = getattr(exc, "retry_after", None)
    tb = "".join(traceback.format_exception(exc, limit=-8))[-4000:]
    return ErrorInfo(type=type(exc).__name__, message=str(exc), names=names,
                     retryable=retryable,
                     retry_after=retry_after if isinstance(retry_after, int | float) else None,
                     traceback=tb)


class Engine:
    """Runs workflows against a store.  One engine per process is typical; pools and
    circuit breakers are shared by every run the engine executes."""

    def __init__(self, store: Store, *, worker: str | None = None,
                 http_policy: HTTPPolicy | None = None,
                 clock: Callable[[], float] = time.time,
                 rand: Callable[[], float] = random.random,
                 max_threads: int = 64, lease: float = 30.0) -> None:
        self.store = store
        self.worker = worker or default_worker_id()
        self.clock = clock
        self.rand = rand
        self.pools = PoolRegistry()
        self.breakers: dict[str, CircuitBreaker] = {}
        self.lease = lease
        self._executor = DaemonThreadPool(max_threads)
        self.services = Services(executor=self._executor,
                                 http_policy=http_policy or HTTPPolicy())
        self._loops: dict[str, _RunLoop] = {}
        # Called after every committed batch (live progress, metrics).  A listener must
        # be quick and must not raise; it sees only what is already stored.
        self.listeners: list[Callable[[WriteBatch], None]] = []

    def close(self) -> None:
        # Threads of abandoned (timed-out) sync steps are not waited for.
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ runs

    async def submit(self, checked: CheckedWorkflow, input: JSON, *,
                     run_id: str | None = None, retry_of: str | None = None,
                     parent_run_id: str | None = None) -> RunRecord:
        """Check the input, store the definition (versioning, SPEC 2) and a new run.
        Raises InputError before anything is stored."""
        problems = validate_input(checked, input)
        if problems:
            raise InputError("input does not match the workflow's input schema:\n  - "
                             + "\n  - ".join(problems))
        check_input_params(checked, input)
        preflight(checked)
        spec = checked.spec
        stored = await self.store.save_workflow(spec.name, checked.definition,
                                                checked.fingerprint, spec.version)
        run = RunRecord(run_id=run_id or uuid.uuid4().hex, workflow=spec.name,
                        version=stored.version, fingerprint=checked.fingerprint,
                        status=RunStatus.PENDING, input=input, created_at=self.clock(),
                        retry_of=retry_of, parent_run_id=parent_run_id, sla=spec.sla)
        await self.store.create_run(run, checked.graph.ids)
        return run

    async def execute(self, checked: CheckedWorkflow, run: RunRecord,
                      state: RunState | None = None) -> RunResult:
        """Drive a stored run until it ends (or waits for a person).  The engine owns
        the run meanwhile (claim, heartbeat, release), so no other process executes it."""
        claimed = await self._claim(run)
        secrets = Secrets()
        if state is None:
            state = RunState(checked, run_id=run.run_id, input=run.input, secrets=secrets)
        else:
            state.secrets = secrets
        loop = _RunLoop(self, checked, claimed, state, secrets)
        self._loops[run.run_id] = loop
        try:
            await loop.run()
        finally:
            self._loops.pop(run.run_id, None)
            await asyncio.shield(self.store.release_run(run.run_id, self.worker))
        return loop.result()

    async def resume(self, run_id: str, checked: CheckedWorkflow | None = None) -> RunResult:
        """Continue a stored run whose process stopped (SPEC 6): completed steps are
        never re-run; attempts that were running count as failed attempts and retry
        under the step's policy.  A finished run is returned as it is."""
        run = await self.store.get_run(run_id)
        if run.status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
            return await self.result(run_id)
        if checked is None:
            checked = await self.stored_workflow(run.workflow, run.version)
        if checked.fingerprint != run.fingerprint:
            raise RunError(f"run {run_id!r} ran {run.workflow} with fingerprint "
                           f"{run.fingerprint}, but the definition given has "
                           f"{checked.fingerprint}")
        rows = {s.step_id: StepRuntime(s.status, s.attempts, s.output, s.error,
                                       s.started_at, s.finished_at, s.skip_reason,
                                       s.fallback_used, s.next_attempt_at, s.worker)
                for s in await self.store.get_steps(run_id)}
        state = RunState.restore(checked, run_id=run_id, input=run.input, rows=rows,
                                 now=self.clock())
        return await self.execute(checked, run, state)

    async def fork(self, run_id: str, *, from_step: str | None = None,
                   input: JSON = _MISSING) -> RunRecord:  # type: ignore[assignment]
        """A new run of the same workflow version that reuses the stored output of every
        completed step that is not ``from_step`` or downstream of it (default: of the
        failed and cancelled steps).  Linked to the old run by ``retry_of``; run it with
        ``resume``.  Like Airflow's clear, LangGraph's time travel, DBOS's fork."""
        old = await self.store.get_run(run_id)
        checked = await self.stored_workflow(old.workflow, old.version)
        graph = checked.graph
        rows = {s.step_id: s for s in await self.store.get_steps(run_id)}
        if from_step is not None:
            if from_step not in graph.index:
                hint = did_you_mean(from_step, graph.ids)
                raise RunError(f"workflow {old.workflow!r} has no step {from_step!r}"
                               + (f" ({hint})" if hint else ""))
            roots = [graph.index[from_step]]
        else:
            roots = [graph.index[s] for s, r in rows.items()
                     if r.status in (StepStatus.FAILED, StepStatus.CANCELLED)]
        rerun = _descendants(graph.children, roots)
        reuse = [graph.ids[i] for i in range(graph.size) if i not in rerun
                 and rows[graph.ids[i]].status is StepStatus.COMPLETED]
        new = await self.submit(checked, old.input if input is _MISSING else input,
                                retry_of=run_id)
        now = self.clock()
        batch = WriteBatch(run_id=new.run_id)
        for sid in reuse:
            rec = rows[sid]
            row = StepRuntime(StepStatus.COMPLETED, 0, rec.output, None, rec.started_at,
                              rec.finished_at, None, rec.fallback_used, None, rec.worker)
            for source, target in ((StepStatus.PENDING, StepStatus.QUEUED),
                                   (StepStatus.QUEUED, StepStatus.RUNNING),
                                   (StepStatus.RUNNING, StepStatus.COMPLETED)):
                batch.steps.append(StepChange(sid, source, target, now, row))
        batch.notes.append((None, {"retry_of": run_id, "reused": list(reuse),
                                   "from_step": from_step}))
        await self.store.write(batch)
        return await self.store.get_run(new.run_id)

    async def stored_workflow(self, name: str, version: int | None = None) -> CheckedWorkflow:
        """A stored definition, validated (its python steps import by name)."""
        from ..workflow import Workflow

        stored = await self.store.get_workflow(name, version)
        return Workflow.from_dict(stored.definition,
                                  source=f"{name}@{stored.version}").validate()

    async def _claim(self, run: RunRecord) -> RunRecord:
        claimed = await self.store.claim_run(run.run_id, self.worker, self.clock(),
                                             self.lease)
        if claimed is None:
            current = await self.store.get_run(run.run_id)
            if current.owner and not owner_alive(current.owner):
                # The owner was a process on this host that no longer exists: its
                # lease need not run out before someone continues the run.
                claimed = await self.store.claim_run(run.run_id, self.worker,
                                                     self.clock() + self.lease * 2,
                                                     self.lease)
            if claimed is None:
                age = self.clock() - (current.heartbeat_at or 0.0)
                raise RunError(f"run {run.run_id!r} is being executed by "
                               f"{current.owner} (last heartbeat {age:.0f}s ago); if "
                               f"that process is gone, retry after its {self.lease:g}s "
                               f"lease runs out")
        return claimed

    async def run(self, checked: CheckedWorkflow, input: JSON, **kwargs: str | None) -> RunResult:
        run = await self.submit(checked, input, **kwargs)
        return await self.execute(checked, run)

    async def result(self, run_id: str) -> RunResult:
        run = await self.store.get_run(run_id)
        return RunResult.from_records(run, await self.store.get_steps(run_id))

    async def cancel(self, run_id: str, reason: str = "cancelled on request") -> None:
        """Cancel a run: at once when this engine executes it, else through the store
        (the process executing it notices within a second)."""
        loop = self._loops.get(run_id)
        await self.store.request_cancel(run_id)
        if loop is not None:
            loop.request_cancel(reason)

    async def approve(self, run_id: str, step_id: str, *, approved: bool = True,
                      by: str | None = None, data: JSON = None) -> None:
        """Record a person's decision on a waiting approval step (who, when, data).
        The run continues when its executor sees it (resume it to continue here)."""
        run = await self.store.get_run(run_id)
        if run.status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
            raise RunError(f"run {run_id!r} is {run.status}; there is nothing to approve")
        steps = {s.step_id: s for s in await self.store.get_steps(run_id)}
        step = steps.get(step_id)
        if step is None:
            raise RunError(f"run {run_id!r} has no step {step_id!r}"
                           + (f" ({hint})" if (hint := did_you_mean(step_id, steps)) else ""))
        if step.status is not StepStatus.WAITING:
            raise RunError(f"step {step_id!r} of run {run_id!r} is {step.status}, not "
                           f"waiting for approval")
        decision: JSONDict = {"decision": "approved" if approved else "rejected",
                              "by": by or "unknown", "at": self.clock(), "data": data}
        await self.store.write(WriteBatch(run_id=run_id, notes=[(step_id,
                                                                 {"approval": decision})]))
        loop = self._loops.get(run_id)
        if loop is not None:
            loop.signal_decision()

    def breaker(self, key: str, spec: object) -> CircuitBreaker:
        found = self.breakers.get(key)
        if found is None:
            found = self.breakers[key] = CircuitBreaker(spec)  # type: ignore[arg-type]
        return found


def check_input_params(checked: CheckedWorkflow, value: JSON) -> None:
    """Before anything runs: Python-built steps whose parameters can only come from the
    input must find them there (SPEC 1.2), naming the function and the parameter."""
    declared = {k for s in checked.spec.steps for k in s.outputs}
    ids = checked.graph.index
    for step in checked.spec.steps:
        if step.func is None or step.config.get("with"):
            continue
        sig = signature_of(step.func)
        for name, has_default in sig.params:
            if has_default or name in ("input", "ctx") or name in sig.wants_ctx \
                    or (name in ids and name != step.id) or name in declared:
                continue
            if not (isinstance(value, dict) and name in value):
                raise InputError(f"step {step.id!r}: parameter {name!r} of "
                                 f"{getattr(step.func, '__qualname__', step.func)} is not "
                                 f"'input', 'ctx', a step id, a declared output key or a "
                                 f"key of the run input")


def preflight(checked: CheckedWorkflow) -> None:
    """Before anything is stored: every python step's function must import."""
    from ..errors import DefinitionError, Problem

    problems = []
    for i, step in enumerate(checked.spec.steps):
        targets = []
        if step.type == "python" and step.func is None:
            targets.append(("call", step.config.get("call")))
        if step.fallback is not None and step.fallback.call and step.fallback.func is None:
            targets.append(("fallback.call", step.fallback.call))
        for field, target in targets:
            try:
                import_call(str(target))
            except ImportError as exc:
                problems.append(Problem(location=f"steps[{i}].{field}",
                                        message=f"step {step.id!r}: {exc}"))
        get_step_type(step.type)
    if problems:
        raise DefinitionError(problems)


class _RunLoop:
    """The one run loop (see the module docstring)."""

    def __init__(self, engine: Engine, checked: CheckedWorkflow, run: RunRecord,
                 state: RunState, secrets: Secrets) -> None:
        self.engine = engine
        self.store = engine.store
        self.checked = checked
        self.spec = checked.spec
        self.run_rec = run
        self.state = state
        self.secrets = secrets
        self.clock = engine.clock
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.outcomes: list[tuple[int, str, object, bool]] = []  # (step, kind, value, fb)
        self.timers: list[tuple[float, int, str, int]] = []  # (due, seq, kind, step)
        self._timer_seq = 0
        self._wake: asyncio.Future[None] | None = None
        self._cancel_reason: str | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._last_cancel_poll = 0.0
        self._declared = {k for s in self.spec.steps for k in s.outputs}
        self.parked: dict[int, float | None] = {}  # approval steps -> deadline
        self._pool_waiting = 0  # steps of this run waiting for a pool slot
        self._decisions_due = False
        self._notes_seen = 0
        self._types = [get_step_type(s.type) for s in self.spec.steps]
        self._pool_specs = self.spec.pools
        self._pool_of = tuple(s.pool for s in self.spec.steps)
        # a store shared with other processes is polled for cancel requests, approval
        # decisions and the ownership heartbeat; a memory store is this process's own
        self._polls = not isinstance(self.store, MemoryStore)

    # ------------------------------------------------------------- driving

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
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
        state, now = self.state, self.clock()
        run_change = None
        if self.run_rec.status in (RunStatus.PENDING, RunStatus.WAITING):
            run_change = RunChange(source=self.run_rec.status, target=RunStatus.RUNNING,
                                   at=now)
        if self.spec.timeout is not None:
            self._timer(now + self.spec.timeout, "run_timeout", -1)
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
        await self._flush(run_change)
        if run_change is not None:
            self._apply_run_change(run_change)
        if self.parked:
            await self._check_decisions()
        while True:
            starts = self._launch(self.clock())
            await self._flush()
            for i, call in starts:
                self.tasks[i] = self._spawn(self._attempt(i, call, fallback=False))
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
                    await self._park_run()
                    return
                raise RunError(f"run {self.run_rec.run_id!r} cannot make progress")
            await self._wait()
            now = self.clock()
            self._fire_timers(now)
            self._process(now)
            if self._polls and now - self._last_cancel_poll >= _CANCEL_POLL_S:
                await self._poll_cancel(now)
            if self._decisions_due:
                await self._check_decisions()
        await self._finish()

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
                self._timeout_approval(i, now)
        await self._flush()

    def _timeout_approval(self, i: int, now: float) -> None:
        choice = self.spec.steps[i].config.get("on_timeout", "reject")
        self._decide(i, {"decision": "approved" if choice == "approve" else "rejected",
                         "by": "timeout", "at": now, "data": None}, now)

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
        while len(state.running) < limit:
            i = state.pop_ready()
            if i is None:
                break
            step = self.spec.steps[i]
            if step.pool is not None and not self._take_pool(i, step.pool, now):
                continue
            attempt = state.begin(i, now, self.engine.worker)
            if self._types[i].parks:
                state.wait(i, now)
                self._park(i)
                continue
            call = self._call(i, attempt)
            inline = self._types[i].inline
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
            value: object = ensure_json(inline(call), step=call.step.id)
        except Exception as exc:  # noqa: BLE001 - the supervised step boundary
            value, kind = exc, "error"
        else:
            kind = "ok"
        self._release_pool(i)
        self._handle(i, kind, value, False, now)

    def _call(self, i: int, attempt: int) -> StepCall:
        state = self.state
        return StepCall(step=self.spec.steps[i], index=i, run_id=self.run_rec.run_id,
                        attempt=attempt, input=state.input, state=state.state,
                        services=self.engine.services, run=self,
                        started_at=state.rows[i].started_at or self.clock())

    # RunAccess: what attempts read of the run
    def template_context(self, index: int) -> dict[str, object]:
        return self.state.context(index)

    def parent_outputs(self, index: int) -> JSONDict:
        return self.state.parent_outputs(index)

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

    async def _attempt(self, i: int, call: StepCall, *, fallback: bool) -> None:
        step = call.step
        kind: str = "ok"
        value: object = None
        try:
            if step.circuit_breaker is not None and not fallback:
                breaker = self.engine.breaker(step.circuit_breaker.key, step.circuit_breaker)
                if not breaker.allow(self.clock()):
                    raise CircuitOpenError(step.circuit_breaker.key, step=step.id)
            runner = self._fallback_call if fallback else self._types[i].run
            if step.timeout is not None:
                scope = asyncio.timeout(step.timeout)
                try:
                    async with scope:
                        value = await runner(call)
                except TimeoutError:
                    if scope.expired():  # ours, not a TimeoutError raised by the step
                        raise StepTimeout(step.timeout, step=step.id) from None
                    raise
            else:
                value = await runner(call)
            value = ensure_json(value, step=step.id)
        except asyncio.CancelledError:
            self._report(i, "cancelled", None, fallback)
            raise
        except Exception as exc:  # noqa: BLE001 - the supervised step boundary
            kind, value = "error", exc
        self._report(i, kind, value, fallback)

    async def _fallback_call(self, call: StepCall) -> JSON:
        fb = call.step.fallback
        assert fb is not None
        fn = fb.func or import_call(fb.call or "")
        error = self.state.rows[self.checked.graph.index[call.step.id]].error

        def resolve(name: str) -> tuple[bool, object]:
            return (True, error) if name == "error" else self.resolve(call, name)

        kwargs = bind(fn, {}, resolve, call.step.id)
        return await invoke(fn, kwargs, self.engine.services.executor)  # type: ignore[return-value]

    def _report(self, i: int, kind: str, value: object, fallback: bool) -> None:
        self.outcomes.append((i, kind, value, fallback))
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
            handle = loop.call_later(_CANCEL_POLL_S, self._signal)
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
                if i in self.parked:
                    self._timeout_approval(i, now)
            elif kind == "run_timeout":
                self._halt(f"run timed out after {self.spec.timeout:g}s", cancelled=False)

    # ------------------------------------------------------------- outcomes

    def _process(self, now: float) -> None:
        outcomes, self.outcomes = self.outcomes, []
        for i, kind, value, fallback in outcomes:
            self.tasks.pop(i, None)
            if not fallback:  # a fallback runs outside the step's pool slot
                self._release_pool(i)
            self._handle(i, kind, value, fallback, now)

    def _handle(self, i: int, kind: str, value: object, fallback: bool, now: float) -> None:
        state, step = self.state, self.spec.steps[i]
        if kind == "cancelled":
            state.cancel_step(i, now, self._cancel_reason or self._halt_reason())
            return
        if kind == "ok":
            try:
                state.succeed(i, self.secrets.redact(cast(JSON, value)), now,
                              fallback=fallback)
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
        if step.fallback.call is None and step.fallback.func is None:
            call = self._call(i, self.state.rows[i].attempts)
            try:
                value = ensure_json(call.render(step.fallback.output, "fallback.output"),
                                    step=step.id)
            except (TemplateError, OutputError) as exc:
                self._handle(i, "error", exc, True, now)
                return
            self._handle(i, "ok", value, True, now)
            return
        call = self._call(i, self.state.rows[i].attempts)
        self.tasks[i] = self._spawn(self._attempt(i, call, fallback=True))

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

    async def _flush(self, run_change: RunChange | None = None) -> None:
        steps, attempts = self.state.drain()
        if not steps and not attempts and run_change is None:
            return
        batch = WriteBatch(run_id=self.run_rec.run_id, steps=steps, attempts=attempts,
                           run=run_change)
        await self.store.write(batch)
        for listener in self.engine.listeners:
            try:
                listener(batch)
            except Exception:  # noqa: BLE001 - a view must never break the run
                _log.exception("run listener %r failed", listener)

    def result(self) -> RunResult:
        """The run as stored (built from the loop's own state: no store read)."""
        run = self.run_rec
        ids = self.checked.graph.ids
        return RunResult(
            run_id=run.run_id, workflow=run.workflow, version=run.version,
            fingerprint=run.fingerprint, status=str(run.status), output=run.output,
            error=run.error, started_at=run.started_at, finished_at=run.finished_at,
            retry_of=run.retry_of,
            steps={ids[i]: StepResult(status=str(r.status), attempts=r.attempts,
                                      output=r.output, error=r.error,
                                      started_at=r.started_at, finished_at=r.finished_at,
                                      skip_reason=r.skip_reason,
                                      fallback_used=r.fallback_used)
                   for i, r in enumerate(self.state.rows)})

    async def _finish(self) -> None:
        state = self.state
        status = state.run_status()
        output: JSON = None
        error: str | None = None
        if status is RunStatus.COMPLETED:
            try:
                output = self._run_output()
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

    def _run_output(self) -> JSON:
        if self.spec.output is None:
            return self.state.default_output()
        value = expressions.render_value(self.spec.output, self.state.context())
        return ensure_json(value)

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
