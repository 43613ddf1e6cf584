"""Group commit: the writes of many runs that are ready together, in one transaction.

A store shared by many runs (``plait.connect``) gets a write from each run's loop in
turn.  Committing each alone costs one transaction apiece; committing the ones that
arrive together as ONE transaction costs about one.  ``GroupCommit`` decides which
writes go together, on the event loop that owns the store:

- A write that finds nothing queued and nothing being committed is committed at once,
  on the loop's thread (``commit_here``), without yielding: a lone run pays no latency.
  It opens a *turn* that ends when the loop has run what was ready with it.  The task
  that opened the turn may write again before it yields (a step's journaled calls, one
  after the other): nothing else can have queued meanwhile, so that write too is
  committed at once, instead of waiting a turn of the loop for a group of one.  While the
  store is *crowded* (the last turn ended with more than one write queued), the first
  write of a turn waits for the others instead: a commit costs about as much for one
  job as for fifty, so committing the first alone would double the commits.
- A write that arrives during a turn, or while a group is being committed on the
  store's thread, is queued; the queue is committed as one group when the turn ends
  (``call_soon``: after every task that was ready together has written) or when the
  group on the thread is done.
- ``commit_here`` returns False when the write lock is busy (another process writes):
  the group then goes to the store's thread (``commit_there``), which waits for the
  lock; what arrives meanwhile forms the next group.

Each writer's result or error is its own: the backend runs every job of a group in a
savepoint of its own, so a refused job (a stale write) is undone alone and fails only
its caller; a failure of the transaction itself (disk full) fails every job of the
group, and nothing of it is stored.  A writer's future is settled only after the
transaction holding its job committed, so "committed before its effect" holds for each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, eq=False)
class WriteJob:
    """One caller's write: ``apply(backend, *args)`` runs inside the group's
    transaction; ``ok`` and ``value`` (the result, or the error) are set by the
    backend."""

    apply: Callable[..., Any]
    args: tuple[Any, ...]
    future: asyncio.Future[Any] | None = None
    ok: bool = False
    value: Any = None

    def outcome(self) -> Any:
        if self.ok:
            return self.value
        raise self.value

    def settle(self) -> None:
        future = self.future
        if future is not None and not future.done():  # its caller may be cancelled
            if self.ok:
                future.set_result(self.value)
            else:
                future.set_exception(self.value)

    def fail(self, exc: BaseException) -> None:
        self.ok, self.value = False, exc
        self.settle()


CommitHere = Callable[[list[WriteJob]], bool]
CommitThere = Callable[[list[WriteJob]], "asyncio.Future[None]"]


class GroupCommit:
    """The write queue of one store on one event loop (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, commit_here: CommitHere | None,
                 commit_there: CommitThere) -> None:
        self.loop = loop
        self._here = commit_here
        self._there = commit_there
        self._queue: list[WriteJob] = []
        self._turn = False  # a turn is open: a flush is scheduled with call_soon
        self._crowded = False  # the last turn ended with several writes queued
        self._away: asyncio.Future[None] | None = None  # a group at the store's thread
        self._opener: asyncio.Task[Any] | None = None  # whose commit opened the turn

    async def write(self, job: WriteJob) -> Any:
        """Commit ``job`` (alone now, or with the others of its group) and return its
        result; raises its error."""
        here = self._here
        if here is not None and self._away is None and not self._crowded and \
                (not self._turn or self._own_turn()):
            if not self._turn:
                self._open_turn()
                self._opener = asyncio.current_task(self.loop)
            if here([job]):  # committed: the lock was free
                return job.outcome()
        job.future = self.loop.create_future()
        self._queue.append(job)
        if not self._turn and self._away is None:
            self._open_turn()
        return await job.future

    def _open_turn(self) -> None:
        self._turn = True
        self.loop.call_soon(self._end_turn)

    def _own_turn(self) -> bool:
        """The task that opened the turn with a commit writes again before it yielded:
        the loop ends a turn before it resumes a task that yielded after it opened it
        (``call_soon`` is first in, first out), so no other write is queued yet."""
        return not self._queue and self._opener is not None \
            and asyncio.current_task(self.loop) is self._opener

    def _end_turn(self) -> None:
        self._turn = False
        self._opener = None
        self._crowded = len(self._queue) > 1
        if self._queue and self._away is None:
            self._flush()

    def _flush(self) -> None:
        jobs, self._queue = self._queue, []
        here = self._here
        try:
            if here is not None and here(jobs):
                for job in jobs:
                    job.settle()
                return
        except Exception as exc:  # noqa: BLE001 - the group failed: each caller is told
            for job in jobs:
                job.fail(exc)
            return
        away = self._away = self._there(jobs)
        away.add_done_callback(lambda done: self._back(jobs, done))

    def _back(self, jobs: list[WriteJob], done: asyncio.Future[None]) -> None:
        self._away = None
        exc = None if done.cancelled() else done.exception()
        for job in jobs:
            if done.cancelled():
                job.fail(asyncio.CancelledError())
            elif exc is not None:
                job.fail(exc)
            else:
                job.settle()
        if self._queue and not self._turn:
            self._flush()

    async def drain(self) -> None:
        """Commit what is queued and wait for the group at the thread (closing)."""
        while self._queue or self._away is not None:
            away = self._away
            if away is not None:
                await asyncio.wait([away])
            else:
                self._flush()
