"""``plait worker``: one process of a cluster (SPEC 7), around ``runtime.worker.Worker``.

The command puts the current directory on ``sys.path``, imports the ``--import``
modules (one that fails: exit 2 naming it, before anything connects), opens the store,
listens on PostgreSQL unless ``--no-listen`` (``runtime.notify``), and runs the worker
until SIGTERM or SIGINT: then it drains (no new claims, no new runs, the runs it drives
are released, running attempts get ``--grace`` seconds) and exits 0.  A second signal
stops at once (the leases it held expire and other workers retry them).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import PlaitError
from ..store.base import Store
from ..store.url import shown_url
from . import output
from .session import handle_signal, opened_store
from .settings import ExitCode

if TYPE_CHECKING:
    from ..runtime.worker import Worker

_log = logging.getLogger("plait.worker")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerOptions:
    db: str
    concurrency: int
    imports: Sequence[str]
    lease: float
    poll: float
    grace: float
    max_runs: int
    listen: bool


class ImportRefused(Exception):
    """A ``--import`` module cannot be imported (exit 2)."""


def shared_store_problem(url: str) -> str | None:
    """Why ``url`` cannot serve a worker, or None: a worker needs a store other
    processes open too."""
    if url.startswith("memory:"):
        return (f"plait worker needs a store that other processes share "
                f"(postgresql://... or sqlite:///path.db); {url} lives in this process "
                f"only, so no run could reach the worker")
    return None


def import_modules(modules: Sequence[str]) -> None:
    """Import the ``--import`` modules with the current directory on sys.path."""
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    for name in modules:
        try:
            importlib.import_module(name)
        except (Exception, SystemExit) as exc:  # any failure of the module, named
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            raise ImportRefused(f"--import {name}: the module cannot be imported "
                                f"({last}); the current directory ({cwd}) and "
                                f"PYTHONPATH are searched") from exc


def configure_logging() -> None:
    """One line per record on stderr, with its time (a worker is a long-lived
    process whose output goes to a log), as text or JSON (``--log-format``)."""
    from ..observe.logs import configure

    configure(level=logging.INFO)


async def worker_command(options: WorkerOptions) -> ExitCode:
    err = output.console(stderr=True)
    problem = shared_store_problem(options.db)
    if problem is not None:
        err.print(output.error_text(problem), end="")
        return ExitCode.USAGE
    try:
        import_modules(options.imports)
    except ImportRefused as exc:
        err.print(output.error_text(str(exc)), end="")
        return ExitCode.USAGE
    configure_logging()
    try:
        async with opened_store(options.db) as store:
            return await _serve(store, options)
    except PlaitError as exc:
        err.print(output.error_text(f"store {shown_url(options.db)}: {exc}"), end="")
        return ExitCode.USAGE


async def _serve(store: Store, options: WorkerOptions) -> ExitCode:
    from ..runtime.worker import Notifications, Worker
    from ..store.postgres_url import is_postgres

    notifications: Notifications | None = None
    if options.listen and is_postgres(options.db):
        from ..runtime.notify import PgNotifications

        notifications = PgNotifications(options.db)
    worker = Worker(store, concurrency=options.concurrency, lease=options.lease,
                    poll=options.poll, grace=options.grace, max_runs=options.max_runs,
                    notifications=notifications)
    wakeups = "LISTEN/NOTIFY and polling" if notifications is not None else "polling only"
    _log.info("plait worker %s started: db %s, concurrency %d, lease %gs, poll %gs, "
              "grace %gs, %s", worker.name, shown_url(options.db), options.concurrency,
              options.lease, options.poll, options.grace, wakeups)
    task = asyncio.create_task(worker.run())
    signals = _handle_signals(worker, task, options.grace)
    try:
        await task
    except asyncio.CancelledError:
        _log.warning("plait worker %s stopped at once (its leases expire and other "
                     "workers retry their attempts)", worker.name)
        return ExitCode.FAILED
    finally:
        loop = asyncio.get_running_loop()
        for sig in signals:
            loop.remove_signal_handler(sig)
    _log.info("plait worker %s drained and stopped (%d attempts completed here)",
              worker.name, worker.completed)
    return ExitCode.OK


def _handle_signals(worker: Worker, task: asyncio.Task[None],
                    grace: float) -> list[signal.Signals]:
    """SIGTERM and SIGINT drain; a second one stops at once."""
    loop = asyncio.get_running_loop()
    received: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig)
        if len(received) == 1:
            _log.info("plait worker %s: %s received, draining (no new claims; running "
                      "attempts get %gs; again to stop at once)", worker.name, sig.name,
                      grace)
            worker.stop()
        else:
            task.cancel()

    handled: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        if handle_signal(loop, sig, on_signal, sig):
            handled.append(sig)
    return handled
