"""Circuit breakers shared by every driver of a store (SPEC 5, 7): the state lives in
the store (``Store.get_breaker`` / ``put_breaker``), the rules in
``core.guards.CircuitBreaker``.

Each call reads the state, applies the core's rule to it, and writes it back with a
compare-and-set on the version it read; when another driver wrote in between, it
reads again and applies the rule again, so every failure is counted once and only one
driver of the cluster gets a half-open breaker's trial.  A call that changes nothing
(an allowed attempt on a closed breaker, a success on a clean one) writes nothing.

``runtime.pools.SharedLimits`` keeps the per-process breakers of local runs; this is
their form for runs driven on a cluster.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from ..core.guards import CircuitBreaker
from ..core.model import CircuitBreakerSpec
from ..errors import StoreError
from ..store.base import Store

TRIES = 32  # read-apply-write rounds before a call gives up (contention, not errors)
_BACKOFF = 0.002  # seconds, doubled per lost race (with jitter), at most _MAX_BACKOFF
_MAX_BACKOFF = 0.05


class SharedBreaker:
    """One breaker key of a store, with the rules of ``spec`` (each driver has them
    from its definition; the store holds only the state)."""

    __slots__ = ("spec", "store", "tries")

    def __init__(self, store: Store, spec: CircuitBreakerSpec, *, tries: int = TRIES) -> None:
        self.store = store
        self.spec = spec
        self.tries = tries

    async def allow(self, now: float) -> bool:
        """Whether an attempt guarded by the breaker may start at ``now``: True while
        closed, and once per opening after ``reset_after`` (the trial, taken by one
        caller across the store); False otherwise."""
        return await self._apply(lambda breaker: breaker.allow(now))

    async def record(self, ok: bool, now: float) -> None:
        """Count an attempt's end: a success closes the breaker, a failure counts
        towards opening it (or reopens it after a failed trial)."""
        def rule(breaker: CircuitBreaker) -> bool:
            if ok:
                breaker.record_success()
            else:
                breaker.record_failure(now)
            return ok
        await self._apply(rule)

    async def state(self) -> CircuitBreaker:
        """The stored state (a copy: changing it changes nothing stored)."""
        found, _ = await self.store.get_breaker(self.spec.key)
        return CircuitBreaker.from_json(self.spec, found)

    async def _apply(self, rule: Callable[[CircuitBreaker], bool]) -> bool:
        key = self.spec.key
        for lost in range(self.tries):
            found, version = await self.store.get_breaker(key)
            breaker = CircuitBreaker.from_json(self.spec, found)
            before = breaker.to_json()
            answer = rule(breaker)
            after = breaker.to_json()
            if after == before:  # nothing changed (absent: still a new breaker's state)
                return answer
            if await self.store.put_breaker(key, after, version):
                return answer
            await asyncio.sleep(min(_BACKOFF * 2 ** lost, _MAX_BACKOFF) * random.random())
        raise StoreError(f"circuit breaker {key!r}: its state changed under each of "
                         f"{self.tries} read-and-update rounds (other drivers updating "
                         f"it); the update was not stored")
