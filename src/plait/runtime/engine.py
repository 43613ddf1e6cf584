"""The engine: starts, executes, resumes and cancels runs against one Store.

Each run it executes is driven by the one run loop (``runtime.loop``), whose attempts
run in this process (``runtime.local``).  The engine owns the run meanwhile (claim,
heartbeat, release) and is what the loop calls its host (``RunHost``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Mapping

from ..core import signals
from ..core.concurrency_key import run_key
from ..core.expressions import RenderError
from ..core.jsoncheck import ensure_input
from ..core.mapping import item_id
from ..core.model import JSON, JSONDict
from ..core.runstate import RunState, StepChange, StepRuntime
from ..core.states import FINAL_RUN_STATES, RunStatus, StepStatus
from ..core.suggest import did_you_mean
from ..core.trust import TrustPolicy
from ..core.validate import CheckedWorkflow, validate_input
from ..definitions import check_definition
from ..errors import (
    DecisionTaken,
    InputError,
    RunBusy,
    RunError,
    RunFinished,
    RunLeftUnfinished,
    RunNotFound,
    StaleWriteError,
    StepNotFound,
    StepNotWaiting,
    StoreError,
    TransitionError,
)
from ..steps.llmcall import ModelCalls
from ..steps.netpolicy import NetworkPolicy
from ..steps.registry import Services
from ..steps.secrets import Secrets
from ..store.base import RunRecord, Signal, StepRecord, Store, WriteBatch
from .breakers import Breakers, breakers_for
from .children import ChildRuns
from .gctune import gc_paused, relaxed_gc
from .local import LocalSource
from .loop import RunLoop
from .observers import Observers, default_observers
from .pools import PoolRegistry, shared_limits
from .preflight import check_input_params, preflight
from .results import RunResult
from .threads import DaemonThreadPool, shared_pool
from .untrusted import refused
from .worksource import WorkSource

_log = logging.getLogger("plait.engine")
KEY_POLL_S = 0.25  # how often a run held back by its concurrency key asks again
_KEY_GATED = (RunStatus.PENDING, RunStatus.WAITING)  # what a full key holds back
_MISSING = object()


_worker_id: tuple[int, str] | None = None  # (pid, "host:pid"), asked once per process


def default_worker_id() -> str:
    """``host:pid`` of this process (what history and ownership record)."""
    global _worker_id
    pid = os.getpid()
    if _worker_id is None or _worker_id[0] != pid:
        _worker_id = (pid, f"{socket.gethostname()}:{pid}")
    return _worker_id[1]


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


def _run_key(checked: CheckedWorkflow, input: JSON) -> tuple[str | None, int | None]:
    try:
        return run_key(checked.spec, input)
    except RenderError as exc:
        raise InputError(f"concurrency_key {checked.spec.concurrency_key!r} of workflow "
                         f"{checked.spec.name!r} cannot be rendered for this input: "
                         f"{exc}") from exc


def heartbeat_age(run: RunRecord, now: float) -> str:
    """How long ago the run's owner last showed it was alive, for messages (a clock
    that differs between hosts never makes it negative)."""
    if run.heartbeat_at is None:
        return "no heartbeat yet"
    return f"last heartbeat {max(0.0, now - run.heartbeat_at):.0f}s ago"


def run_secrets(trust: TrustPolicy | None) -> Secrets:
    """The ``secrets`` of a run: those the rules allow, on an engine that has some."""
    return Secrets(allowed=None if trust is None else trust.allowed_secrets)


class Engine:
    """Runs workflows against a store.  Pools and circuit breakers are shared by every
    run in the event loop, whichever engine executes it (``runtime.pools``)."""

    def __init__(self, store: Store, *, worker: str | None = None,
                 http_policy: NetworkPolicy | None = None,
                 trust: TrustPolicy | None = None,
                 clock: Callable[[], float] = time.time,
                 rand: Callable[[], float] = random.random,
                 max_threads: int | None = None, lease: float = 30.0) -> None:
        self.store = store
        self.worker = worker or default_worker_id()
        self.clock = clock
        self.rand = rand
        self.lease = lease
        # sync steps run in the process's shared pool, unless a size is asked for
        self._own_executor = DaemonThreadPool(max_threads) if max_threads else None
        self._executor = self._own_executor or shared_pool()
        self.services = Services(executor=self._executor,
                                 http_policy=http_policy
                                 or NetworkPolicy.from_environment(), store=store,
                                 trust=trust)
        self.services.children = ChildRuns(self)  # `workflow` and `loop` steps
        self.services.model_calls = ModelCalls()  # ctx.llm
        self._loops: dict[str, RunLoop] = {}
        # Called after every committed batch (live progress, metrics).  A listener must
        # be quick and must not raise; it sees only what is already stored.
        self.listeners: list[Callable[[WriteBatch], None]] = []
        # Called with every batch before it is written: may add to what it stores
        # (the notifications its events cause: ``WriteBatch.outbox``).
        self.preparers: list[Callable[[WriteBatch], None]] = []
        # Tracing, live metrics, notifications (runtime.observers): each watches the
        # runs it wants; none of them costs a run it does not watch.
        self.observers = Observers(self.listeners, self.preparers)
        default_observers(self)

    def close(self) -> None:
        # Threads of abandoned (timed-out) sync steps are not waited for.
        if self._own_executor is not None:
            self._own_executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ runs

    async def submit(self, checked: CheckedWorkflow, input: JSON, *,
                     run_id: str | None = None, retry_of: str | None = None,
                     parent_run_id: str | None = None,
                     version: int | None = None) -> RunRecord:
        """Check the input, store the definition (a new version when it changed) and a
        new run.  Raises InputError before anything is stored.  ``version``: the stored
        version ``checked`` was loaded from (``plait run NAME@V``): the run records it as
        it is and the latest version stays what it is (VersionConflict if ``checked`` is
        not that version's definition)."""
        input = ensure_input(input)  # JSON every store can hold, tuples as lists
        problems = validate_input(checked, input)
        if problems:
            raise InputError("input does not match the workflow's input schema:\n  - "
                             + "\n  - ".join(problems))
        check_input_params(checked, input)
        if not refused(checked, self.services.trust):  # (else: nothing of it imports)
            preflight(checked)
        spec = checked.spec
        key, per_key = _run_key(checked, input)
        with gc_paused():  # the canonical form of a large graph, built once
            text = checked.definition_json
        stored = await self.store.save_workflow(
            spec.name, text, checked.fingerprint,
            spec.version if version is None else version)
        run = RunRecord(run_id=run_id or uuid.uuid4().hex, workflow=spec.name,
                        version=stored.version, fingerprint=checked.fingerprint,
                        status=RunStatus.PENDING, input=input, created_at=self.clock(),
                        retry_of=retry_of, parent_run_id=parent_run_id, sla=spec.sla,
                        concurrency_key=key, max_runs_per_key=per_key)
        await self.store.create_run(run, checked.graph.ids)
        return run

    async def execute(self, checked: CheckedWorkflow, run: RunRecord,
                      state: RunState | None = None, *,
                      source: WorkSource | None = None,
                      claimed: bool = False) -> RunResult:
        """Drive a stored run until it ends (or waits for a person).  The engine owns
        the run meanwhile (claim, heartbeat, release), so no other process executes it.
        ``source``: where its attempts run (default: in this process, ``LocalSource``;
        a worker of a cluster gives a ``ClaimSource`` built on ``state``).
        ``claimed``: ``run`` is what this engine's own ``claim_run`` just returned (a
        worker took it), so it is not claimed again."""
        if claimed:
            assert run.owner == self.worker, (run.owner, self.worker)
        else:
            run = await self._claim(run)
        secrets = run_secrets(self.services.trust)
        # the run's rows, history and result are long-lived: see gctune
        with relaxed_gc():
            if state is None:
                state = RunState(checked, run_id=run.run_id, input=run.input,
                                 secrets=secrets)
            else:
                state.secrets = secrets
            source = source or LocalSource(checked, self.clock)
            loop = RunLoop(self, checked, run, state, secrets, source)
            self._loops[run.run_id] = loop
            watched = self.observers.started(run, checked)
            try:
                await loop.run()
                if loop.writer.run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
                    # its steps that waited for child runs (parked) cancel them
                    await _children(self).cancel_unfinished(run.run_id, state)
            except StoreError as exc:
                if isinstance(exc, StaleWriteError | TransitionError):
                    raise  # not a failing store: another writer, or a bug, named as such
                raise RunLeftUnfinished(run.run_id, exc) from exc
            finally:
                self._loops.pop(run.run_id, None)
                if self.store.capabilities.in_process:
                    await self.store.release_run(run.run_id, self.worker)  # at once
                else:
                    await asyncio.shield(self._release(run.run_id))
                if watched:  # after the release: a notification never holds the run
                    await self.observers.ended(loop.writer.run)
            return loop.result()

    def look_again(self, run_id: str) -> bool:
        """When this engine drives ``run_id``: its loop looks at its decisions and
        waits at once (``RunLoop.signal_decision``); whether it drives it."""
        loop = self._loops.get(run_id)
        if loop is not None:
            loop.signal_decision()
        return loop is not None

    def detach(self, run_id: str) -> None:
        """Let the next cancellation of the run's task stop driving it without writing
        anything (``RunLoop.detach``): the run is released for another process."""
        loop = self._loops.get(run_id)
        if loop is not None:
            loop.detach()

    async def _release(self, run_id: str) -> None:
        """Give up the run, also when the store fails (the run loop may have stopped on
        that very failure): retried with backoff for up to one lease, after which the
        claim has lapsed anyway, so ``plait resume`` or any worker can continue the
        run.  Never raises: the run's own outcome or error is what the caller gets."""
        deadline = time.monotonic() + self.lease
        delay = 0.05
        while True:
            try:
                await self.store.release_run(run_id, self.worker)
                return
            except StoreError as exc:
                if time.monotonic() + delay > deadline:
                    _log.warning("run %s: could not release it (%s); its claim lapses "
                                 "%gs after its last heartbeat", run_id, exc, self.lease,
                                 extra={"run_id": run_id})
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def resume(self, run_id: str, checked: CheckedWorkflow | None = None) -> RunResult:
        """Continue a stored run whose process stopped: completed steps are
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
        return await self.execute(checked, run, await self.restore(run, checked))

    async def restore(self, run: RunRecord, checked: CheckedWorkflow) -> RunState:
        """The run's state rebuilt from its stored step rows (``RunState.restore``)."""
        rows = {s.step_id: s for s in await self.store.get_steps(run.run_id)}
        state = RunState.restore(checked, run_id=run.run_id, input=run.input, rows=rows,
                                 now=self.clock())
        await self._reused_items(run, state)
        return state

    async def _reused_items(self, run: RunRecord, state: RunState) -> None:
        """A retried run's map steps that have not expanded yet reuse the items that
        completed in the run retried (``fork`` noted which maps may: their input is
        the same), when they render as many items (``RunState.reused_items``)."""
        unexpanded = [i for i, step in enumerate(state.spec.steps[:state.graph.size])
                      if step.item is not None and i not in state.maps]
        if not unexpanded or run.retry_of is None:
            return
        counts: JSON = None
        for event in await self.store.get_events(run.run_id):
            if event.kind == "note" and event.step_id is None \
                    and event.data.get("retry_of") == run.retry_of:
                counts = event.data.get("reused_items")
                break
        if not isinstance(counts, dict):
            return
        try:
            old = {s.step_id: s for s in await self.store.get_steps(run.retry_of)}
        except RunNotFound:  # pruned meanwhile (docs/retention.md): the items run again
            return
        for i in unexpanded:
            mid = state.ids[i]
            count = counts.get(mid)
            if isinstance(count, int):
                state.reused_items[i] = (count, {
                    k: old[sid].output for k in range(count)
                    if (sid := item_id(mid, k)) in old
                    and old[sid].status is StepStatus.COMPLETED})

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
            # (a map's items are not steps of the definition: their map runs again,
            # reusing the items that completed, see _retried_maps)
            roots = [graph.index[s] for s, r in rows.items()
                     if r.status in (StepStatus.FAILED, StepStatus.CANCELLED)
                     and s in graph.index]
        rerun = _descendants(graph.children, roots)
        reuse = [graph.ids[i] for i in range(graph.size) if i not in rerun
                 and rows[graph.ids[i]].status is StepStatus.COMPLETED]
        new = await self.submit(checked, old.input if input is _MISSING else input,
                                retry_of=run_id)
        now = self.clock()
        batch = WriteBatch(run_id=new.run_id)
        for sid in reuse:
            rec = rows[sid]
            row = StepRuntime(status=StepStatus.COMPLETED, output=rec.output,
                              started_at=rec.started_at, finished_at=rec.finished_at,
                              fallback_used=rec.fallback_used, worker=rec.worker)
            for source, target in ((StepStatus.PENDING, StepStatus.QUEUED),
                                   (StepStatus.QUEUED, StepStatus.RUNNING),
                                   (StepStatus.RUNNING, StepStatus.COMPLETED)):
                batch.steps.append(StepChange(sid, source, target, now, row))
        note: JSONDict = {"retry_of": run_id, "reused": list(reuse), "from_step": from_step}
        if from_step is None and input is _MISSING:
            items = _retried_maps(checked, rows, rerun)
            if items:
                note["reused_items"] = items  # map step -> its item count then
        batch.notes.append((None, note))
        await self.store.write(batch)
        if from_step is None:  # `--from STEP` starts STEP and what follows afresh
            await copy_journal(self.store, run_id, new.run_id,
                               frozenset(graph.ids[i] for i in rerun))
        return await self.store.get_run(new.run_id)

    async def stored_workflow(self, name: str, version: int | None = None) -> CheckedWorkflow:
        """A stored definition, validated (its python steps import by name)."""
        stored = await self.store.get_workflow(name, version)
        return check_definition(stored.definition, source=f"{name}@{stored.version}")

    async def _claim(self, run: RunRecord) -> RunRecord:
        """Take the run (``Store.claim_run``).  A run refused only because its
        concurrency key has no slot free waits here, polling, until one frees (a local
        ``wf.run`` of a keyed run queues behind the runs of its key); a run another
        live process holds raises RunBusy."""
        told = False
        while True:
            claimed = await self._claim_once(run)
            if claimed is not None:
                return claimed
            current = await self.store.get_run(run.run_id)
            if not self._held_back_by_key(current):
                raise RunBusy(run.run_id, current.owner,
                              f"run {run.run_id!r} is being executed by {current.owner} "
                              f"({heartbeat_age(current, self.clock())}); if that process "
                              f"is gone, retry after its {self.lease:g}s lease runs out")
            if not told:
                _log.info("run %s waits: %d run(s) of concurrency key %r are running",
                          run.run_id, current.max_runs_per_key or 1,
                          current.concurrency_key, extra={"run_id": run.run_id})
                told = True
            await asyncio.sleep(KEY_POLL_S)

    async def _claim_once(self, run: RunRecord) -> RunRecord | None:
        claimed = await self.store.claim_run(run.run_id, self.worker, self.clock(),
                                             self.lease)
        if claimed is None:
            current = await self.store.get_run(run.run_id)
            if current.owner and not owner_alive(current.owner):
                # The owner was a process on this host that no longer exists: its
                # lease need not run out before someone continues the run (only one
                # process takes it over: the claim holds while that owner does).
                claimed = await self.store.claim_run(run.run_id, self.worker, self.clock(),
                                                     self.lease, dead_owner=current.owner)
        return claimed

    def _held_back_by_key(self, run: RunRecord) -> bool:
        """Whether a refused claim of ``run`` was refused for its key alone: nobody
        else holds it (no owner, ours, or a lapsed lease) and it has not started."""
        if run.concurrency_key is None or run.status not in _KEY_GATED:
            return False
        return run.owner is None or run.owner == self.worker or (
            run.heartbeat_at is not None and run.heartbeat_at < self.clock() - self.lease)

    async def run(self, checked: CheckedWorkflow, input: JSON, *, run_id: str | None = None,
                  retry_of: str | None = None,
                  parent_run_id: str | None = None) -> RunResult:
        run = await self.submit(checked, input, run_id=run_id, retry_of=retry_of,
                                parent_run_id=parent_run_id)
        return await self.execute(checked, run)

    async def result(self, run_id: str) -> RunResult:
        run = await self.store.get_run(run_id)
        return RunResult.from_records(run, await self.store.get_steps(run_id))

    async def cancel(self, run_id: str,
                     reason: str = "cancelled on request") -> RunResult | None:
        """Cancel a run.  When this engine executes it: at once.  When another live
        process does: through the store (it notices within a second); returns None.
        When nobody does (waiting for a person, orphaned by a crash): this engine takes
        it over, cancels every step that has not finished and returns the result."""
        loop = self._loops.get(run_id)
        await self.store.request_cancel(run_id)
        if loop is not None:
            loop.request_cancel(reason)
            return None
        run = await self.store.get_run(run_id)
        if run.status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
            return await self.result(run_id)
        if run.owner is not None and owner_alive(run.owner) and run.heartbeat_at is not None \
                and run.heartbeat_at >= self.clock() - self.lease:
            return None
        try:
            return await self.resume(run_id)  # the loop sees the request and halts
        except RunBusy:
            return None  # claimed meanwhile: that process sees the request

    async def approve(self, run_id: str, step_id: str, *, approved: bool = True,
                      by: str | None = None, data: JSON = None) -> None:
        """Record a person's decision on a waiting approval step (who, when, data).
        The first decision stored stands: a later one, from this process or another,
        raises DecisionTaken carrying it; StepNotFound / StepNotWaiting name a step
        that is not there or does not wait.  The run continues when its executor
        sees the decision (resume it to continue here)."""
        steps = {s.step_id: s for s in await self.store.get_steps(run_id)}
        if step_id not in steps:
            raise StepNotFound(run_id, step_id, did_you_mean(step_id, steps))
        decision: JSONDict = {"decision": "approved" if approved else "rejected",
                              "by": by or "unknown", "at": self.clock(), "data": data}
        try:
            await self.store.record_decision(run_id, step_id, decision)
        except DecisionTaken:
            raise
        except StaleWriteError as exc:  # not waiting (any more): say what it is now
            run = await self.store.get_run(run_id)
            step = next(s for s in await self.store.get_steps(run_id) if s.step_id == step_id)
            raise StepNotWaiting(run_id, step_id, str(step.status), str(run.status)) from exc
        loop = self._loops.get(run_id)
        if loop is not None:
            loop.signal_decision()

    async def signal(self, run_id: str, name: str, data: JSON = None) -> Signal:
        """Store event ``name`` (with ``data``) of a run, for its ``ctx.wait_for_event``
        and ``event`` steps (docs/waiting.md).  The first event of a name stands: a
        later one raises EventTaken.  InputError naming a bad name or data (not JSON,
        over 1 MiB); RunFinished for a run that has ended.  The run continues when its
        executor sees the event (resume it to continue here)."""
        problem = signals.event_name_problem(name)
        if problem is not None:
            raise InputError(problem)
        try:
            data = signals.checked_data(data)
        except ValueError as exc:
            raise InputError(f"event {name!r}: {exc}") from None
        run = await self.store.get_run(run_id)
        if run.status in FINAL_RUN_STATES:
            raise RunFinished(run_id, str(run.status), f"event {name!r}")
        sent = await self.store.event_put(run_id, name, data, self.clock())
        loop = self._loops.get(run_id)
        if loop is not None:
            loop.signal_decision()
        return sent

    @property
    def pools(self) -> PoolRegistry:
        return shared_limits().pools

    @property
    def breakers(self) -> Breakers:
        """Where the circuit breakers of this engine's runs are judged (its store's)."""
        return breakers_for(self.store)


def _retried_maps(checked: CheckedWorkflow, rows: Mapping[str, StepRecord],
                  rerun: set[int]) -> JSONDict:
    """The map steps that ``plait retry`` runs again with the same input (no step
    before them runs again), each with how many items it had: their completed items
    are reused when they render as many (``Engine._reused_items``)."""
    graph = checked.graph
    out: JSONDict = {}
    for i in sorted(rerun):
        step = checked.spec.steps[i]
        if step.item is None or any(p in rerun for p in graph.parents[i]):
            continue
        count = 0
        while item_id(step.id, count) in rows:
            count += 1
        if count:
            out[step.id] = count
    return out


def _children(engine: Engine) -> ChildRuns:
    children = engine.services.children
    return children if isinstance(children, ChildRuns) else ChildRuns(engine)


async def copy_journal(store: Store, old_run: str, new_run: str,
                       steps: frozenset[str]) -> int:
    """``plait retry``: the old run's journaled calls (``ctx.run``) of ``steps`` (the
    steps the new run executes again; a map's items with their map) stored in the new
    run as they were (attempt and time kept), so its attempts get them back without
    calling again.  The number copied."""
    copied = 0
    try:
        entries = await store.journal(old_run)
    except RunNotFound:  # pruned meanwhile (docs/retention.md): the calls run again
        return 0
    for entry in entries:
        if entry.step not in steps and entry.step.partition("[")[0] not in steps:
            continue
        found = await store.journal_get(old_run, entry.step, entry.name)
        if found is not None:
            await store.journal_put(new_run, entry.step, entry.name, found.value,
                                    found.attempt, found.at)
            copied += 1
    return copied
