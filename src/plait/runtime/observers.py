"""Run observers: what watches runs from outside the loop (tracing, live metrics,
notifications) without the loop knowing about any of them.

An observer is asked once per run, when the engine starts driving it, whether it wants
to watch that run (``RunObserver.watch``).  A watch then sees every committed batch of
the run (``RunWatch.batch``: quick, never blocking; it sees only what is stored) and is
closed, awaited, when the engine stops driving the run (``RunWatch.close``: the run
ended, waits for a person, or its driver stopped), with the run as the loop left it.
Work a watch started for its run (a notification being delivered) is finished there:
nothing a run caused outlives the ``Engine.execute`` call that drove it.

Zero cost when nobody watches: ``Observers`` puts its one listener on the engine's list
only while at least one run is watched, so a process with no tracer configured, no
metrics registry and no notification targets runs its batches exactly as before.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Protocol

from ..core.validate import CheckedWorkflow
from ..steps.registry import Services
from ..store.base import RunRecord, Store, WriteBatch

_log = logging.getLogger("plait.engine")


class RunWatch(Protocol):
    def batch(self, batch: WriteBatch) -> None: ...

    # optional: ``prepare(batch)``, given each batch before it is written, may add to
    # what the batch stores (the notifications its events cause: ``WriteBatch.outbox``)

    async def close(self, run: RunRecord) -> None: ...


class RunObserver(Protocol):
    def watch(self, run: RunRecord, checked: CheckedWorkflow) -> RunWatch | None: ...


class Observers:
    """The engine's observers (see the module docstring)."""

    def __init__(self, listeners: list[Callable[[WriteBatch], None]],
                 preparers: list[Callable[[WriteBatch], None]] | None = None) -> None:
        self._listeners = listeners
        self._preparers = preparers if preparers is not None else []
        self._observers: list[RunObserver] = []
        self._watches: dict[str, list[RunWatch]] = {}

    def add(self, observer: RunObserver) -> None:
        self._observers.append(observer)

    def remove(self, observer: RunObserver) -> None:
        self._observers.remove(observer)

    def started(self, run: RunRecord, checked: CheckedWorkflow) -> bool:
        """Ask every observer about ``run``; True when at least one watches it."""
        if not self._observers:
            return False
        watches = []
        for observer in self._observers:
            try:
                found = observer.watch(run, checked)
            except Exception:  # noqa: BLE001 - an observer must never break a run
                _log.exception("run observer %r failed on run %s", observer, run.run_id,
                               extra={"run_id": run.run_id})
                continue
            if found is not None:
                watches.append(found)
        if not watches:
            return False
        if not self._watches:
            self._listeners.append(self._dispatch)
            self._preparers.append(self._prepare)
        self._watches[run.run_id] = watches
        return True

    async def ended(self, run: RunRecord) -> None:
        watches = self._watches.pop(run.run_id, None)
        if not self._watches and self._dispatch in self._listeners:
            self._listeners.remove(self._dispatch)
            self._preparers.remove(self._prepare)
        for watch in watches or ():
            try:
                await watch.close(run)
            except Exception:  # noqa: BLE001 - an observer must never break a run
                _log.exception("run observer %r failed closing run %s", watch, run.run_id,
                               extra={"run_id": run.run_id})

    def _prepare(self, batch: WriteBatch) -> None:
        for watch in self._watches.get(batch.run_id, ()):
            prepare = getattr(watch, "prepare", None)
            if prepare is None:
                continue
            try:
                prepare(batch)
            except Exception:  # noqa: BLE001 - an observer must never break a run
                _log.exception("run observer %r failed preparing a batch of run %s",
                               watch, batch.run_id, extra={"run_id": batch.run_id})

    def _dispatch(self, batch: WriteBatch) -> None:
        for watch in self._watches.get(batch.run_id, ()):
            try:
                watch.batch(batch)
            except Exception:  # noqa: BLE001 - an observer must never break a run
                _log.exception("run observer %r failed on a batch of run %s", watch,
                               batch.run_id, extra={"run_id": batch.run_id})


class _EngineLike(Protocol):
    @property
    def store(self) -> Store: ...

    @property
    def observers(self) -> Observers: ...

    @property
    def services(self) -> Services: ...

    @property
    def clock(self) -> Callable[[], float]: ...


def default_observers(engine: _EngineLike) -> None:
    """What every engine observes with: spans when OpenTelemetry is installed (and a
    tracer provider configured when a run starts), and notifications (of the runs whose
    definition, or ``PLAIT_NOTIFY``, names targets)."""
    from ..observe import tracing

    engine.observers.add(tracing.TracingObserver())  # watches only when configured
    if os.environ.get(NOTIFY_ENV):  # checked now: a bad PLAIT_NOTIFY fails at start
        engine.observers.add(_notifier(engine, from_environment=True))
    else:  # delivery code is imported by the first run whose definition has targets
        engine.observers.add(_NotifierOnDemand(engine))


NOTIFY_ENV = "PLAIT_NOTIFY"  # observe.notify_targets.ENV (not imported: see below)


def _notifier(engine: _EngineLike, *, from_environment: bool) -> RunObserver:
    from ..observe.notify import Notifier, targets_from_environment

    targets = targets_from_environment() if from_environment else ()
    return Notifier(engine.store, policy=engine.services.http_policy, targets=targets,
                    clock=engine.clock, trust=engine.services.trust)


class _NotifierOnDemand:
    """Notifications without ``PLAIT_NOTIFY``: only runs whose definition has
    ``notify:`` targets are watched, so ``plait run`` of any other workflow never
    imports the delivery code (about 8 ms of start-up)."""

    def __init__(self, engine: _EngineLike) -> None:
        self._engine = engine
        self._notifier: RunObserver | None = None

    def watch(self, run: RunRecord, checked: CheckedWorkflow) -> RunWatch | None:
        if not checked.spec.notify:
            return None
        if self._notifier is None:
            self._notifier = _notifier(self._engine, from_environment=False)
        return self._notifier.watch(run, checked)
