"""``plait worker``: one process of a cluster (docs/workers.md), around
``runtime.worker.Worker``.

The command puts the current directory on ``sys.path``, imports the ``--import``
modules (one that fails: exit 2 naming it, before anything connects), opens the store,
listens on PostgreSQL unless ``--no-listen`` (``runtime.notify``), and runs the worker
until SIGTERM or SIGINT: then it drains (no new claims, no new runs, the runs it drives
are released, running attempts get ``--grace`` seconds) and exits 0.  A second signal
stops at once (the leases it held expire and other workers retry them) and exits 1.
A worker whose loop failed too often in a row (``runtime.worker.Restarts``) drains,
logs why and exits 1, as does one that fails otherwise (its traceback logged): a
process manager restarts it, where a worker left running would do part of its job.

A server that cannot be reached at start (refused, timed out, restarting) is retried
with a backoff (``CONNECT_BACKOFF``), each failure logged with the URL's password
hidden, until it answers or SIGTERM/SIGINT stops the wait (exit 0): workers may start
before their database, as with a process manager or a container orchestrator.  What
retrying cannot fix (a bad URL, a refused login, a missing database, a newer schema)
exits 2 at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import logging
import signal
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import PlaitError, StoreUnreachable
from ..store.base import Store
from ..store.url import shown_url
from . import output
from .session import handle_signal, opened_store
from .settings import ExitCode

if TYPE_CHECKING:
    from ..runtime.retention import Retention
    from ..runtime.worker import Worker

_log = logging.getLogger("plait.worker")

# Waiting for an unreachable store at start: the first retry after this many seconds,
# doubling up to the second number.
CONNECT_BACKOFF = (0.5, 30.0)


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
    eager: bool = True
    retention: Retention | None = None  # PLAIT_RETENTION (read by worker_command)


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
    from ..runtime.retention import RetentionSettingError, retention_from_environment

    try:
        import_modules(options.imports)
        options = dataclasses.replace(options, retention=retention_from_environment())
    except (ImportRefused, RetentionSettingError) as exc:
        err.print(output.error_text(str(exc)), end="")
        return ExitCode.USAGE
    configure_logging()
    try:
        async with contextlib.AsyncExitStack() as stack:
            store = await _connect(stack, options.db)
            if store is None:  # stopped while waiting for the store
                return ExitCode.OK
            return await _serve(store, options)
    except PlaitError as exc:
        err.print(output.error_text(f"store {shown_url(options.db)}: {exc}"), end="")
        # unreachable later than at start (which is waited out): its own exit code
        return ExitCode.UNREACHABLE if isinstance(exc, StoreUnreachable) else \
            ExitCode.USAGE


async def _connect(stack: contextlib.AsyncExitStack, db: str) -> Store | None:
    """The opened store of ``db`` (closed by ``stack``), once its server answers; None
    when SIGTERM or SIGINT came first.  Only an unreachable server is retried."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = [sig for sig in (signal.SIGTERM, signal.SIGINT)
               if handle_signal(loop, sig, stopping.set)]
    delay, most = CONNECT_BACKOFF
    try:
        failures = 0
        while not stopping.is_set():
            try:
                store = await stack.enter_async_context(opened_store(db, wait=0))
            except StoreUnreachable as exc:
                failures += 1
                _log.warning("plait worker: the store %s cannot be reached (attempt %d: "
                             "%s); retrying in %gs (SIGTERM or Ctrl-C stops)",
                             shown_url(db), failures, exc, delay)
            else:
                if not stopping.is_set():  # a signal while connecting: stop all the same
                    return store
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), delay)
            delay = min(delay * 2, most)
        _log.info("plait worker: stopped before the store %s could be reached",
                  shown_url(db))
        return None
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


async def _serve(store: Store, options: WorkerOptions) -> ExitCode:
    from ..runtime.worker import Notifications, Worker, WorkerFailed
    from ..store.postgres_url import is_postgres

    notifications: Notifications | None = None
    if options.listen and is_postgres(options.db):
        from ..runtime.notify import PgNotifications

        notifications = PgNotifications(options.db)
    worker = Worker(store, concurrency=options.concurrency, lease=options.lease,
                    poll=options.poll, grace=options.grace, max_runs=options.max_runs,
                    notifications=notifications, eager=options.eager,
                    retention=options.retention)
    wakeups = "LISTEN/NOTIFY and polling" if notifications is not None else "polling only"
    _log.info("plait worker %s started: db %s, concurrency %d, lease %gs, poll %gs, "
              "grace %gs, %s%s", worker.name, shown_url(options.db), options.concurrency,
              options.lease, options.poll, options.grace, wakeups,
              "" if options.eager else ", no eager attempts")
    task = asyncio.create_task(worker.run())
    signals = _handle_signals(worker, task, options.grace)
    try:
        await task
    except asyncio.CancelledError:
        _log.warning("plait worker %s stopped at once (its leases expire and other "
                     "workers retry their attempts)", worker.name)
        return ExitCode.FAILED
    except WorkerFailed as exc:  # each failure's traceback is logged already
        _log.error("plait worker %s stopped: %s", worker.name, exc)
        return ExitCode.FAILED
    except Exception as exc:
        if isinstance(exc, PlaitError):
            raise  # its own exit code (worker_command)
        _log.exception("plait worker %s failed and stopped", worker.name)
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
