"""Stored runs from Python: read one, resume one, decide on an approval step, send
an event.

``get_run`` / ``resume`` / ``approve`` / ``signal`` do what ``plait show --json`` /
``plait resume`` / ``plait approve`` / ``plait signal`` do, and return the
``RunResult`` a run returns; each has an async twin (``get_run_async``...), which does
the work: the sync ones are ``asyncio.run`` around it.  ``db`` is a store URL, or a
handle from ``plait.connect`` (async twins
only: a handle belongs to its event loop).  A ``memory://`` store lives in one process
and, unnamed, in one handle: pass the handle the run was started on, or name the store
(``memory://demo``) to share it between calls.  Docs: docs/python-api.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .core.model import JSON
from .errors import RunNotFound
from .runtime import control, signals
from .runtime.engine import Engine
from .runtime.results import RunResult
from .store.base import Store
from .store.postgres_url import is_postgres
from .store.shared import StoreHandle
from .store.url import missing_database

__all__ = ["approve", "approve_async", "get_run", "get_run_async", "resume",
           "resume_async", "signal", "signal_async"]


def get_run(run_id: str, *, db: str) -> RunResult:
    """The stored run, in any state (RunNotFound when there is none)."""
    return asyncio.run(get_run_async(run_id, db=db))


async def get_run_async(run_id: str, *, db: str | StoreHandle) -> RunResult:
    async with _engine(db, run_id, read_only=True) as engine:
        return await engine.result(run_id)


def resume(run_id: str, *, db: str) -> RunResult:
    """Continue a stored run in this process until it ends or waits for a person, like
    ``plait resume`` (on PostgreSQL too: this process drives it, as ``wf.run`` does).
    Completed steps are not run again; a finished run is returned as it is.  RunBusy
    when another live process executes it; DefinitionError when its python steps
    cannot be imported here."""
    return asyncio.run(resume_async(run_id, db=db))


async def resume_async(run_id: str, *, db: str | StoreHandle) -> RunResult:
    async with _engine(db, run_id) as engine:
        return await control.resume_here(engine, run_id)


def approve(run_id: str, step: str, approved: bool = True, data: JSON = None, *,
            db: str, by: str | None = None) -> RunResult:
    """Record a decision on a waiting approval step (``by``: who; default the OS
    user), like ``plait approve``.  The first decision stands: a later one raises
    DecisionTaken carrying it.  With SQLite or memory the run then continues in this
    process until it ends or waits again; with PostgreSQL it is handed to the workers
    and the result is the run as it is now.  A run another live process executes is
    left to it (it applies the decision).  StepNotFound / StepNotWaiting (RunError)
    name a step that is not there or does not wait."""
    return asyncio.run(approve_async(run_id, step, approved, data, db=db, by=by))


async def approve_async(run_id: str, step: str, approved: bool = True, data: JSON = None,
                        *, db: str | StoreHandle, by: str | None = None) -> RunResult:
    async with _engine(db, run_id) as engine:
        return await control.decide(engine, run_id, step, approved=approved, data=data,
                                    by=by, for_workers=is_postgres(_url(db)))


def signal(run_id: str, name: str, data: JSON = None, *, db: str) -> RunResult:
    """Send event ``name`` (with ``data``, JSON) to a run, for its
    ``ctx.wait_for_event`` and ``event`` steps, like ``plait signal``.  The first event
    of a name stands: a later one raises EventTaken.  With SQLite or memory the run
    then continues in this process until it ends or waits again; with PostgreSQL it is
    handed to the workers and the result is the run as it is now.  InputError names a
    bad name or data; RunFinished a run that has ended."""
    return asyncio.run(signal_async(run_id, name, data, db=db))


async def signal_async(run_id: str, name: str, data: JSON = None, *,
                       db: str | StoreHandle) -> RunResult:
    async with _engine(db, run_id) as engine:
        return await signals.deliver(engine, run_id, name, data,
                                     for_workers=is_postgres(_url(db)))


def _url(db: str | StoreHandle) -> str:
    return db.url if isinstance(db, StoreHandle) else db


@asynccontextmanager
async def _engine(db: str | StoreHandle, run_id: str, *,
                  read_only: bool = False) -> AsyncIterator[Engine]:
    """An engine on the store of ``db`` (opened and closed here for a URL).  A SQLite
    file that does not exist holds no run: RunNotFound, and no file is created."""
    if isinstance(db, StoreHandle):
        async with _engine_on(db.store) as engine:
            yield engine
        return
    if missing_database(db) is not None:
        raise RunNotFound(run_id)
    async with StoreHandle(db, read_only=read_only) as held, \
            _engine_on(held.store) as engine:
        yield engine


@asynccontextmanager
async def _engine_on(store: Store) -> AsyncIterator[Engine]:
    engine = Engine(store)
    try:
        yield engine
    finally:
        engine.close()
