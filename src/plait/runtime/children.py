"""Child runs of ``workflow`` and ``loop`` steps, for the engine's steps.

A child run's id is derived from its parent run, the step and a key (the loop's
iteration), so starting it is idempotent: an attempt of the step that runs again after
its process died (``plait resume PARENT``) finds the child it started and attaches to
it (resuming it when nobody drives it) instead of starting a second one; a finished
child's result is taken as it is stored, which is how a resumed loop skips the
iterations that ended.

Who drives the child: a local engine (``wf.run``, ``plait run``, ``plait resume``)
drives it in the step's attempt, in this process; a worker of a cluster leaves it
pending for any worker to drive (``Worker``), like every other run, and the step waits
for its end holding nothing: its attempt ends ``waiting`` (``ChildRequested``, a code
wait noted ``{"wait": {"kind": "child", "child_run_id"}}``), and the step runs again
from the start once the child has ended (``runtime.child_ends`` wakes the parent),
finding the child final.  Cancelling the step's attempt (the parent is cancelled, or
the step timed out) cancels the child.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..core.child_ids import child_run_id
from ..core.events import ChildEnded
from ..core.model import JSON, JSONDict
from ..core.policy import child_failure
from ..core.states import RunStatus, StepStatus
from ..core.steptypes import traits_of
from ..definitions import check_definition
from ..errors import (
    ChildRequested,
    DefinitionError,
    FatalError,
    InputError,
    RunBusy,
    RunNotFound,
    WorkflowNotFound,
)
from ..steps.waits import note_wait
from ..store.base import RunRecord
from .notify import announce

if TYPE_CHECKING:
    from ..core.runstate import RunState
    from ..core.validate import CheckedWorkflow
    from ..steps.registry import StepCall
    from ..store.base import Store
    from .results import RunResult


class _Engine(Protocol):
    """What child runs use of ``runtime.engine.Engine`` (which lends them)."""

    store: Store
    clock: Callable[[], float]

    async def stored_workflow(self, name: str,
                              version: int | None = None) -> CheckedWorkflow: ...

    async def submit(self, checked: CheckedWorkflow, input: JSON, *,
                     run_id: str | None = None, retry_of: str | None = None,
                     parent_run_id: str | None = None,
                     version: int | None = None) -> RunRecord: ...

    async def resume(self, run_id: str,
                     checked: CheckedWorkflow | None = None) -> RunResult: ...

    async def cancel(self, run_id: str, reason: str = ...) -> RunResult | None: ...

_log = logging.getLogger("plait.engine")
POLL_S = 0.25  # how often a child that someone else drives is looked at
_FINAL = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class ChildRuns:
    """What ``workflow`` and ``loop`` steps use of the engine (``Services.children``)."""

    def __init__(self, engine: _Engine, *, drive: bool = True) -> None:
        self._engine = engine
        self.drive = drive  # False on a worker: other workers drive the child

    def checked(self, call: StepCall, definition: JSONDict,
                source: str) -> CheckedWorkflow:
        """A child definition given in the step (validated with the parent already)."""
        try:
            return check_definition(definition, source=source)
        except DefinitionError as exc:
            raise FatalError(f"step {call.step.id!r}: child workflow: {exc}",
                             step=call.step.id) from exc

    def check(self, data: JSONDict) -> CheckedWorkflow:
        """A definition written at run time, checked as loading checks it
        (DefinitionError listing every problem)."""
        return check_definition(data, source=None)

    async def stored(self, call: StepCall, name: str,
                     version: int | None) -> tuple[CheckedWorkflow, int]:
        """The stored workflow ``name`` (``version``, or the latest) and its version;
        FatalError naming it when there is none."""
        try:
            record = await self._engine.store.get_workflow(name, version)
        except WorkflowNotFound as exc:
            raise FatalError(f"step {call.step.id!r}: {exc}", step=call.step.id) from exc
        return await self._engine.stored_workflow(name, record.version), record.version

    async def depth(self, run_id: str) -> int:
        """How many parents the run has (a top-level run: 0)."""
        depth, store = 0, self._engine.store
        run = await store.get_run(run_id)
        while run.parent_run_id is not None and depth <= 1000:
            depth += 1
            try:
                run = await store.get_run(run.parent_run_id)
            except RunNotFound:
                break
        return depth

    async def run(self, call: StepCall, child: CheckedWorkflow, input: JSON,
                  key: str, version: int | None = None) -> JSON:
        """Start (or find) the child run for ``key``, wait for its end and return its
        output; FatalError (never retried) when it fails, is cancelled or cannot
        start, naming the child.  ``version``: the stored version ``child`` is (a child
        given by its definition is stored like any run's)."""
        step, engine = call.step, self._engine
        run_id = child_run_id(call.run_id, step.id, key)
        name = child.spec.name
        try:
            run = await engine.store.get_run(run_id)
        except RunNotFound:
            limit = call.services.limits(call.run.checked.spec.limits) \
                .max_subworkflow_depth
            depth = await self.depth(call.run_id) + 1
            if depth > limit:
                raise FatalError(
                    f"step {step.id!r}: child workflow {name!r} would be nested "
                    f"{depth} deep, past limits.max_subworkflow_depth ({limit})",
                    step=step.id) from None
            try:
                run = await engine.submit(child, input, run_id=run_id,
                                          parent_run_id=call.run_id, version=version)
            except InputError as exc:
                raise FatalError(f"step {step.id!r}: input of child workflow {name!r} "
                                 f"is not valid: {exc}", step=step.id) from exc
            if not self.drive:  # a worker starts it now, not at its next poll
                await announce(engine.store, run_id)
        if not self.drive and run.status not in _FINAL:
            note_wait(call.run.step_log, step.id, {
                "kind": "child", "event": None, "until": None, "due": None,
                "child_run_id": run_id, "attempt": call.attempt})
            raise ChildRequested(step.id, run_id)
        try:
            run = await self._until_done(run, child)
        except asyncio.CancelledError:
            # the parent is cancelled (or the step timed out): so is the child
            await asyncio.shield(self._cancel(run_id))
            raise
        why = child_failure(step, ChildEnded(i=call.index, status=run.status,
                                             at=engine.clock(), output=run.output,
                                             error=run.error), run_id, name)
        if why is None:
            return run.output
        raise FatalError(why, step=step.id)

    async def _until_done(self, run: RunRecord, child: CheckedWorkflow) -> RunRecord:
        engine, store = self._engine, self._engine.store
        while run.status not in _FINAL:
            if self.drive and run.status is not RunStatus.WAITING:
                try:
                    await engine.resume(run.run_id, child)
                except RunBusy:  # someone else drives it: wait for its end
                    await asyncio.sleep(POLL_S)
            elif self.drive:
                await self._until_decided(run)
                await engine.resume(run.run_id, child)
            else:
                await asyncio.sleep(POLL_S)
            run = await store.get_run(run.run_id)
        return run

    async def _until_decided(self, run: RunRecord) -> None:
        """The child waits for a person or an event: return when a decision is stored
        for it, or when its due time (``wake_at``: the earliest deadline of its waits)
        has passed, or when it is no longer waiting (someone else resumed it)."""
        store, clock = self._engine.store, self._engine.clock
        events = await store.get_events(run.run_id)
        seen = max((e.seq for e in events), default=0)
        deadline = run.wake_at
        while deadline is None or clock() < deadline:
            await asyncio.sleep(POLL_S)
            events = await store.get_events(run.run_id, after=seen)
            seen = max((e.seq for e in events), default=seen)
            if any(e.kind == "note" and "approval" in e.data for e in events):
                return
            if events and (await store.get_run(run.run_id)).status \
                    is not RunStatus.WAITING:
                return

    async def cancel_unfinished(self, run_id: str, state: RunState) -> None:
        """Run ``run_id`` failed or was cancelled: the child runs of its ``workflow``
        and ``loop`` steps that did not complete are cancelled, by whoever drives them,
        else here (a step that waited for its child, parked, had no attempt whose
        cancellation would).  A loop's children are looked for iteration by
        iteration."""
        for i, step in enumerate(state.steps):
            count = traits_of(step.type).child_runs  # how many child runs it may start
            if count is None or state.rows[i].status is StepStatus.COMPLETED:
                continue
            for key in range(count(step.config)):
                if not await self._cancel_child(child_run_id(run_id, step.id, str(key))):
                    break

    async def _cancel_child(self, run_id: str) -> bool:
        """Cancel child ``run_id`` unless it has ended; False when there is none."""
        store = self._engine.store
        try:
            if (await store.get_run(run_id)).status in _FINAL:
                return True
            await store.request_cancel(run_id)
            await self._engine.cancel(run_id, "parent run ended")
        except RunNotFound:
            return False
        except Exception as exc:  # noqa: BLE001 - best effort: the request may be stored
            _log.warning("child run %s: could not cancel it: %s", run_id, exc)
        return True

    async def _cancel(self, run_id: str) -> None:
        try:
            await self._engine.store.request_cancel(run_id)
            run = await self._engine.store.get_run(run_id)
            if self.drive and run.status not in _FINAL:
                await self._engine.cancel(run_id, "parent run cancelled")
        except Exception as exc:  # noqa: BLE001 - best effort: the request may be stored
            _log.warning("child run %s: could not cancel it: %s", run_id, exc)
