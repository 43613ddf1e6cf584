"""``Completions``: the leases a worker holds, from their claim until their outcome is
stored (docs/design/workers.md).

- ``hold`` a lease once its ticket is claimed; ``finish`` it with its attempt's
  outcome.  The completion loop stores the outcomes that ended together with ONE
  ``complete_attempts``, split when the store refuses a value
  (``unstorable.complete_split``: the refused outcome is stored as its attempt's
  failure, the others as they were).  An outcome not stored because the store failed
  otherwise is tried again, with backoff; so is one whose loop failed unexpectedly
  (the worker restarts the loop).
- The heartbeat loop extends the leases held every lease/3; a lease the store no
  longer extends is lost (``lost`` is told: the worker cancels its attempt).  A lease
  whose outcome the worker has failed to store for longer than a lease is no longer
  extended: it expires, any worker's reaper stores the attempt ``interrupted``, and the
  step retries (or fails) under its policy, where a worker that cannot store the
  outcome would otherwise hold the step forever.  Its outcome is given up once the
  store says the lease was lost, or after three leases of failures.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ..errors import StoreError
from ..store.base import InboxOutcome, Store
from .unstorable import Completion, complete_split

_log = logging.getLogger("plait.worker")


class Completions:
    """See the module docstring."""

    def __init__(self, store: Store, worker: str, lease: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.worker, self.lease, self.clock = store, worker, lease, clock
        self.tokens: set[str] = set()  # leases held until their completion is stored
        self.finished: list[Completion] = []  # outcomes to store
        self.done = asyncio.Event()  # an attempt ended: completions to store
        self.stored = 0  # outcomes stored in the inbox
        self._failing: dict[str, float] = {}  # token -> when storing its outcome failed

    @property
    def pending(self) -> bool:
        return bool(self.finished or self.tokens)

    def hold(self, token: str) -> None:
        self.tokens.add(token)

    def finish(self, token: str, outcome: InboxOutcome) -> None:
        self.finished.append((token, outcome))
        self.done.set()

    async def complete_loop(self) -> None:
        delay = 0.05
        while True:
            await self.done.wait()
            self.done.clear()
            if not self.finished:
                continue
            batch, self.finished = self.finished, []
            try:
                stored = await complete_split(self.store, self.worker, batch)
            except BaseException:  # kept for the loop restarted, or the drain
                self.finished[:0] = batch
                self.done.set()
                raise
            again = [item for item, ok in zip(batch, stored, strict=True) if ok is None]
            for (token, outcome), ok in zip(batch, stored, strict=True):
                if ok is not None:
                    self._settle(token, outcome, ok)
            if again:
                self._retry_later(again)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                self.done.set()
            else:
                delay = 0.05

    def _settle(self, token: str, outcome: InboxOutcome, stored: bool) -> None:
        self.tokens.discard(token)
        self._failing.pop(token, None)
        if stored:
            self.stored += 1
            return
        _log.warning("worker %s: the result of attempt %d of step %r (run %s) was "
                     "discarded: the lease was lost", self.worker, outcome.attempt,
                     outcome.step_id, outcome.run_id,
                     extra={"run_id": outcome.run_id, "step_id": outcome.step_id,
                            "worker": self.worker})

    def _retry_later(self, again: list[Completion]) -> None:
        """Outcomes the store did not take: tried again, but not forever."""
        now = self.clock()
        for token, outcome in again:
            since = self._failing.setdefault(token, now)
            if now - since <= 3 * self.lease:
                self.finished.append((token, outcome))
                continue
            _log.error("worker %s: gave up storing the outcome of attempt %d of step %r "
                       "(run %s) after %gs: its lease expired meanwhile and the attempt "
                       "counts as interrupted", self.worker, outcome.attempt,
                       outcome.step_id, outcome.run_id, now - since,
                       extra={"run_id": outcome.run_id, "step_id": outcome.step_id,
                              "worker": self.worker})
            self.tokens.discard(token)
            del self._failing[token]

    def to_extend(self) -> list[str]:
        """The leases to heartbeat: every one held but those whose outcome has failed
        to be stored for longer than a lease."""
        failing = self._failing
        if not failing:
            return list(self.tokens)
        now = self.clock()
        return [t for t in self.tokens if now - failing.get(t, now) <= self.lease]

    async def heartbeat_loop(self, lost: Callable[[str], None]) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            tokens = self.to_extend()
            if not tokens:
                continue
            try:
                alive = await self.store.extend_leases(self.worker, tokens, self.lease)
            except StoreError as exc:
                _log.warning("worker %s: extending leases failed (%s)", self.worker, exc)
                continue
            for token in tokens:
                if token not in alive:
                    lost(token)
