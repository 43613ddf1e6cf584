"""How the run loop's task waits, and what reaches a run from other processes.

``Wake``: the loop's task waits for the next thing to do (an outcome, a ``when``
rendered, a timer, a decision, a poll) and anything that gives it one signals it.

``Watch``: a run whose store other processes share (or whose attempts run elsewhere,
``Turn.watched``) is reached through that store: a cancel request, an approval
decision, and another process taking the run over once its lease ran out.  The loop
polls the store every ``CANCEL_POLL_S`` for them, renewing the lease as it does (one
store call, ``Store.heartbeat``: one statement on SQLite and PostgreSQL); an
unwatched run (the memory store, local attempts) is this process's alone and is never
polled.
"""

from __future__ import annotations

import asyncio

from ..errors import RunTakenOver
from ..store.base import Store

CANCEL_POLL_S = 0.5
# the shortest lease ``plait worker --lease`` takes: a driven run's lease is renewed
# every CANCEL_POLL_S, so a shorter lease expires between two renewals at the first
# slow store call and another worker takes the run over (docs/workers.md)
MIN_LEASE_S = 2 * CANCEL_POLL_S


class Wake:
    """The loop's task waiting (see the module docstring)."""

    __slots__ = ("_future", "idle")

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None
        # the task waits for attempts' outcomes only: one that ends may take its turn
        # (``RunLoop.report``)
        self.idle = False

    def signal(self) -> None:
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)

    async def wait(self, delay: float | None, idle: bool) -> None:
        """Until signalled, or ``delay`` seconds (None: no limit)."""
        loop = asyncio.get_running_loop()
        self._future = future = loop.create_future()
        handle = None if delay is None else loop.call_later(delay, self.signal)
        self.idle = idle
        try:
            await future
        finally:
            self.idle = False
            self._future = None
            if handle is not None:
                handle.cancel()


class Watch:
    """Polls a shared store for what other processes tell a run (module docstring)."""

    __slots__ = ("_last", "_run_id", "_store", "_worker", "on")

    def __init__(self, on: bool, store: Store, run_id: str, worker: str,
                 claimed_at: float | None) -> None:
        self.on = on
        self._store = store
        self._run_id = run_id
        self._worker = worker
        # the claim that gave us the run just read its cancel request and renewed the
        # heartbeat: the first poll is due a poll interval after it
        self._last = claimed_at or 0.0

    def delay(self) -> float | None:
        """The longest the loop may wait before it polls again."""
        return CANCEL_POLL_S if self.on else None

    def due(self, now: float) -> bool:
        return self.on and now - self._last >= CANCEL_POLL_S

    async def poll(self, now: float) -> bool:
        """Renew the run's lease and return whether a cancel was requested; raises
        RunTakenOver when another process holds the run (stop, never write)."""
        self._last = now
        run_id = self._run_id
        beat = await self._store.heartbeat(run_id, self._worker, now)  # one statement
        if not beat.held:
            raise RunTakenOver(f"run {run_id!r} was taken over by another process "
                               f"({beat.owner}); this process stops executing it")
        return beat.cancel_requested
