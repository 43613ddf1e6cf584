"""``PgNotifications``: a worker's wake-ups from PostgreSQL (LISTEN/NOTIFY).

One connection per worker process, outside the store's pool and in autocommit, listens
on three channels (docs/postgresql.md, docs/workers.md):

- ``plait_work`` (payload ``''``): tickets were dispatched or a pool slot freed; wakes
  the claim loop (``on_work``);
- ``plait_outcome`` (payload: a run id): an outcome entered that run's inbox; wakes the
  ``ClaimSource`` reader of that run, if this process drives it (``subscribe``);
- ``plait_run`` (payload: a run id): a run was stored for the workers to drive
  (``plait run --db postgresql://... [--detach]``); wakes the loop that takes runs
  (``on_run``).

A notification is a wake-up, never work: everything it announces is also found by
polling.  So when the connection drops, the listener reconnects with a backoff (0.1 s
doubling to 5 s) while polling keeps everything moving, and on every (re)connection it
wakes every listener once, since what was announced meanwhile was missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ..store.capabilities import Notifies
from ..store.postgres_url import parse_url

_log = logging.getLogger("plait.worker")

WORK, OUTCOME, RUN = "plait_work", "plait_outcome", "plait_run"
CHANNELS = (WORK, OUTCOME, RUN)
_BACKOFF_START_S, _BACKOFF_MAX_S = 0.1, 5.0

if TYPE_CHECKING:
    from ..store.base import Store


async def announce(store: Store, run_id: str) -> None:
    """Wake the listening workers: run ``run_id`` needs a driver (a wake-up only; a
    store that cannot notify leaves it to the workers' poll)."""
    if store.capabilities.notify:
        await cast(Notifies, store).notify(RUN, run_id)

Callback = Callable[[], None]


class PgNotifications:
    """See the module docstring.  ``run()`` listens until cancelled."""

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        self._url = parse_url(url)
        self._connect_timeout = connect_timeout
        self.on_work: Callback | None = None
        self.on_run: Callback | None = None
        self._runs: dict[str, list[Callback]] = {}
        self.connected = asyncio.Event()  # set while the LISTEN connection is up
        self.connections = 0  # connections made (a reconnection counts)

    def subscribe(self, run_id: str, callback: Callback) -> Callback:
        """Call ``callback`` on each ``plait_outcome`` of ``run_id``; returns the
        function that stops it."""
        self._runs.setdefault(run_id, []).append(callback)

        def unsubscribe() -> None:
            callbacks = self._runs.get(run_id, [])
            if callback in callbacks:
                callbacks.remove(callback)
            if not callbacks:
                self._runs.pop(run_id, None)
        return unsubscribe

    async def run(self) -> None:
        delay = _BACKOFF_START_S
        while True:
            try:
                await self._listen()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure: reconnect, poll meanwhile
                if self.connected.is_set():
                    delay = _BACKOFF_START_S  # it was up: the drop is news, retry soon
                _log.warning("listening on %s failed (%s); polling meanwhile, "
                             "reconnecting in %.1fs", self._url.where, exc, delay)
            finally:
                self.connected.clear()
            await asyncio.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX_S)

    async def _listen(self) -> None:
        from psycopg import AsyncConnection

        conn = await asyncio.wait_for(
            AsyncConnection.connect(self._url.conninfo, autocommit=True),
            self._connect_timeout)
        async with conn:
            for channel in CHANNELS:
                await conn.execute(f"LISTEN {channel}")
            self.connections += 1
            self.connected.set()
            self._wake_all()  # whatever was announced while not listening
            async for note in conn.notifies():
                self._dispatch(note.channel, note.payload)

    def _dispatch(self, channel: str, payload: str) -> None:
        if channel == WORK:
            _call(self.on_work)
        elif channel == RUN:
            _call(self.on_run)
        elif channel == OUTCOME:
            for callback in list(self._runs.get(payload, ())):
                callback()

    def _wake_all(self) -> None:
        _call(self.on_work)
        _call(self.on_run)
        for callbacks in list(self._runs.values()):
            for callback in list(callbacks):
                callback()


def _call(callback: Callback | None) -> None:
    if callback is not None:
        callback()
