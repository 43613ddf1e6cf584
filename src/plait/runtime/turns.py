"""How the run loop ends a turn: commits it, then hands its attempts over.

Every turn of ``RunLoop`` ends the same way: what the core changed is committed as one
batch (``RunWriter``), and the attempts begun in the turn are handed to the
``WorkSource``.  Only the order of the two and how the batch is written differ, and
they are chosen once per run (``turn_for``), from what the source and the store
declare, never tested inside the loop:

- ``Turn``: the attempts run in this process and the store does I/O (SQLite,
  PostgreSQL): the batch is awaited, then the attempts start (persist before
  execute).
- ``InstantTurn``: the attempts run in this process and the store's writes complete at
  once (``StoreCapabilities.in_process``: the memory store): the batch is written
  without awaiting, and an attempt's outcome may take the loop's turn in the task that
  reports it (``RunLoop.report``).
- ``RemoteTurn``: the attempts run elsewhere (``WorkSource.remote``: ``ClaimSource``):
  the source records them first, and the batch that stores them ``running`` carries
  their tickets and the inbox outcomes it consumes (``WorkSource.claims``); the
  attempts the source runs here (eager) start once that batch is committed
  (``WorkSource.committed``).  Such a run names an attempt's worker only when it runs
  here (``WorkSource.reserve``), and its driver heartbeats the run whatever the store.

``holds_waits``: a run stored ``waiting`` with a due time stays with its loop, which
wakes it at that time (a local run: ``plait run``, ``plait resume``, the server's); a run
driven on a cluster is let go instead, and any worker continues it then
(``Store.runs_to_drive``).

``watched``: other processes reach the run through the store (a shared store, or a
remote source), so the loop polls it for cancel requests, approval decisions and its
lease (``runtime.waiting.Watch``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..steps.registry import StepCall
from ..store.base import RunChange, Store
from .worksource import Reported, WorkSource
from .writer import RunWriter


class Turn:
    """Local attempts, a store that does I/O (see the module docstring)."""

    __slots__ = ("_source", "_tasks", "_writer", "watched")
    inline = False  # an outcome never takes the loop's turn in its reporting task
    taken_over = False  # an attempt stored running died with its process
    # a run that waits with a due time is held here until then (stored ``waiting``);
    # one driven on a cluster is let go, for any worker to continue at that time
    holds_waits = True

    def __init__(self, source: WorkSource, writer: RunWriter, tasks: dict[int, object],
                 watched: bool) -> None:
        self._source = source
        self._writer = writer
        self._tasks = tasks  # the loop's attempts out: step -> the source's handle
        self.watched = watched

    def worker(self, i: int, driver: str) -> str | None:
        """The worker an attempt of step ``i`` names when it begins."""
        return driver

    async def commit(self, starts: Sequence[StepCall], change: RunChange | None) -> None:
        """Store the turn's changes (and the run's own ``change``), then start
        ``starts``."""
        await self._writer.commit_run(change)
        self._start(starts)

    def _start(self, starts: Sequence[StepCall]) -> None:
        tasks, start = self._tasks, self._source.start
        for call in starts:
            tasks[call.index] = start(call, False)

    def commit_now(self, starts: Sequence[StepCall]) -> None:
        """``commit`` without awaiting: only an ``InstantTurn`` (``inline``) can."""
        raise AssertionError("only a store whose writes complete at once commits "
                             "without awaiting")

    def applied(self, outcomes: list[Reported]) -> None:
        """The loop processed ``outcomes`` (applied or dropped)."""


class InstantTurn(Turn):
    """Local attempts, a store whose writes complete at once (module docstring)."""

    # speed: benchmarks/child.py chain:10000 db=memory:// (no await, no wake per step)

    __slots__ = ()
    inline = True

    async def commit(self, starts: Sequence[StepCall], change: RunChange | None) -> None:
        self._writer.commit_now(change)
        self._start(starts)

    def commit_now(self, starts: Sequence[StepCall]) -> None:
        """``commit`` without awaiting (the turn an outcome takes, ``RunLoop.report``)."""
        self._writer.commit_now()
        self._start(starts)


class RemoteTurn(Turn):
    """Attempts that run elsewhere (see the module docstring)."""

    __slots__ = ()
    taken_over = True  # an attempt stored running may have been taken over
    holds_waits = False

    def worker(self, i: int, driver: str) -> str | None:
        # an eager attempt runs here; a ticket's worker is named by whoever claims it
        return driver if self._source.reserve(i) else None

    async def commit(self, starts: Sequence[StepCall], change: RunChange | None) -> None:
        self._start(starts)  # recorded only: the tickets ride in the batch
        await self._writer.commit_run(change)

    def applied(self, outcomes: list[Reported]) -> None:
        self._source.applied(outcomes)  # consumed by the batch that follows


def turn_for(source: WorkSource, store: Store, writer: RunWriter,
             tasks: dict[int, object]) -> Turn:
    """The run's way of ending a turn (see the module docstring)."""
    if source.remote:
        writer.take_claims(source)
        return RemoteTurn(source, writer, tasks, True)
    kind = InstantTurn if store.capabilities.in_process else Turn
    return kind(source, writer, tasks, store.capabilities.shared)
