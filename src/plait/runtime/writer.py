"""``RunWriter``: a run's group commit, and the loop's copy of the run's stored record.

Whatever the core changed since the last commit (steps, attempts, log records of
``ctx.logger``) and, when given, a change of the run itself are written as one batch:
one transaction, on stores that have them.  A batch the store refuses for a value it
cannot hold (UnstorableValue) is written again with its values cleaned
(``runtime.unstorable``), never retried as it was.  Listeners (live progress, metrics) see each
batch once it is stored, never before; preparers (notifications) see it before it is
written and may add the notifications its events cause (``WriteBatch.outbox``), stored in
its transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import cast

from ..core.runstate import RunState
from ..core.states import RunStatus
from ..core.validate import CheckedWorkflow
from ..errors import UnstorableValue
from ..steps.context import StepLog
from ..store.base import RunChange, RunRecord, Store, WriteBatch
from ..store.capabilities import WritesNow
from .results import RunResult, StepResults
from .unstorable import cleaned_batch
from .worksource import Claims, WorkSource

Listener = Callable[[WriteBatch], None]
_FINAL = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
_log = logging.getLogger("plait.engine")


class RunWriter:
    """Commits one run's changes (see the module docstring)."""

    __slots__ = ("_driver", "_listeners", "_owner", "_preparers", "_run_id", "_state",
                 "_step_log", "_store", "claims", "committed", "run", "write_now")

    def __init__(self, store: Store, run: RunRecord, state: RunState, step_log: StepLog,
                 listeners: Sequence[Listener], owner: str | None = None,
                 preparers: Sequence[Listener] = ()) -> None:
        self._store = store
        self.run = run  # the run as stored, kept up to date by apply_run_change
        self._run_id = run.run_id
        self._state = state
        self._step_log = step_log
        self._listeners = listeners  # the engine's list: one added later sees what follows
        # the engine's list, given each batch before it is written (``Observers``: the
        # notifications its events cause ride in it)
        self._preparers = preparers
        # an in-process store's writes complete at once: the loop calls them without
        # awaiting
        self.write_now = cast(WritesNow, store).write_now \
            if store.capabilities.in_process else None
        # a remote source's tickets, consumed outcomes and withdrawals, taken into each
        # batch (``WorkSource.claims``); None for a local run, at no cost per batch
        self.claims: Callable[[], Claims | None] | None = None
        # told after each batch a remote source's claims rode in is stored: attempts
        # the source runs in this process start only then (``ClaimSource.committed``)
        self.committed: Callable[[], None] | None = None
        # every batch names the driver writing it, which must still hold the run
        # (``WriteBatch.owner``): a driver that lost the run writes nothing more.  Not
        # on a store no other process shares, where nobody else can take the run over
        # (the memory store, whose per-step cost is the engine's own overhead) unless
        # the run is driven through claims (``claims`` set): another worker of this
        # process may take it over, so every batch names its driver
        self._owner = owner if store.capabilities.shared else None
        self._driver = owner

    def take_claims(self, source: WorkSource) -> None:
        """Each batch carries what the remote ``source`` hands over (``claims``), which
        is told when that batch is stored (``committed``)."""
        self.claims = source.claims
        self.committed = source.committed

    def batch(self, run_change: RunChange | None = None) -> WriteBatch | None:
        """What the core changed since the last commit (None when nothing did), named
        as its driver's (``WriteBatch.owner``)."""
        state = self._state
        steps, attempts = state.drain()
        notes = self._step_log.drain() if self._step_log.pending else []
        claims = self.claims() if self.claims is not None else None
        new_steps: tuple[tuple[str, int], ...] = ()
        if state.new_rows:  # a map step expanded: its items' rows are added first
            new_steps, state.new_rows = tuple(state.new_rows), []
        if claims is not None:
            dispatch, consumed, withdrawn, logs = claims
            if logs:  # the ctx.logger records of the outcomes consumed
                notes += logs
            batch = WriteBatch(self._run_id, steps, attempts, run_change, notes,
                               dispatch=dispatch, consumed=consumed, withdrawn=withdrawn,
                               new_steps=new_steps)
        elif not steps and not attempts and run_change is None and not notes:
            return None
        elif new_steps:
            batch = WriteBatch(self._run_id, steps, attempts, run_change, notes,
                               new_steps=new_steps)
        else:
            batch = WriteBatch(self._run_id, steps, attempts, run_change, notes)
        batch.owner = self._owner if self.claims is None else self._driver
        for prepare in self._preparers:
            prepare(batch)
        return batch

    def commit_now(self, change: RunChange | None = None) -> None:
        """``commit_run`` for a store whose writes complete at once (the memory store)."""
        write_now = self.write_now
        assert write_now is not None
        batch = self.batch(change)
        if batch is not None:
            try:
                write_now(batch)
            except UnstorableValue as exc:
                batch = self._cleaned(batch, exc)
                write_now(batch)
            self._notify(batch)
        if change is not None:
            self.apply_run_change(change)

    async def commit_run(self, change: RunChange | None = None) -> None:
        """Store what changed since the last commit and the run's own change (if any)
        as one batch, then mirror the change in ``run``."""
        batch = self.batch(change)
        if batch is not None:
            try:
                await self._store.write(batch)
            except UnstorableValue as exc:
                batch = await self._rewrite(batch, exc)
            if self.committed is not None:
                self.committed()
            self._notify(batch)
        if change is not None:
            self.apply_run_change(change)

    async def _rewrite(self, batch: WriteBatch, refused: UnstorableValue) -> WriteBatch:
        """The batch written again, cleaned (``unstorable.cleaned_batch``): refused
        again, the store's error is raised (the run stops, resumable)."""
        batch = self._cleaned(batch, refused)
        await self._store.write(batch)
        return batch

    def _cleaned(self, batch: WriteBatch, refused: UnstorableValue) -> WriteBatch:
        _log.warning("run %s: the store refused a value (%s); its changes are written "
                     "again, cleaned", self._run_id, refused, extra={"run_id": self._run_id})
        return cleaned_batch(batch, refused)

    def apply_run_change(self, change: RunChange) -> None:
        """Mirror a stored run change in the loop's copy of the run record."""
        run = self.run
        run.status = change.target
        run.wake_at = change.wake_at if change.target is RunStatus.WAITING else None
        if change.target is RunStatus.RUNNING and run.started_at is None:
            run.started_at = change.at
        if change.target in _FINAL:
            run.finished_at, run.output, run.error = change.at, change.output, change.error

    def _notify(self, batch: WriteBatch) -> None:
        for listener in self._listeners:
            try:
                listener(batch)
            except Exception:  # noqa: BLE001 - a view must never break the run
                _log.exception("run listener %r failed", listener)

    def result(self, checked: CheckedWorkflow) -> RunResult:
        """The run as stored (built from the loop's own state: no store read)."""
        run = self.run
        return RunResult(
            run_id=run.run_id, workflow=run.workflow, version=run.version,
            fingerprint=run.fingerprint, status=str(run.status), output=run.output,
            error=run.error, started_at=run.started_at, finished_at=run.finished_at,
            retry_of=run.retry_of, steps=StepResults(self._state.row_index(),
                                                     self._state.rows,
                                                     frozenset(self._step_log.cache_hits)))
