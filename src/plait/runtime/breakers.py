"""Where a circuit breaker's state lives, and what an attempt tells it.

The rules are ``core.guards.CircuitBreaker``'s; this module keeps the state, one per
breaker key where the key is judged, and is the only place that does:

- ``StoreBreakers``: in the store, for a store other processes share
  (``Store.capabilities.shared``: PostgreSQL, a SQLite file).  Each call reads the state,
  applies the rule, and writes it back with a compare-and-set on the version it read;
  when another process wrote in between it reads again and applies the rule again, so
  every failure is counted once and one caller across the store gets a trial.  A call
  that changes nothing (an allowed attempt on a closed breaker, a success on a clean
  one) writes nothing.
- ``LocalBreakers``: in this process, for a store nobody else sees (memory), shared by
  every run of the event loop whichever engine and store runs it.

``breakers_for(store)`` chooses; ``Breakers.allow`` and ``Breakers.settle`` are what
the step boundary (``runtime.runner.AttemptRunner``) calls around an attempt, for local
runs and workers alike.
"""

from __future__ import annotations

import asyncio
import logging
import random
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable

from ..core.guards import CircuitBreaker
from ..core.model import CircuitBreakerSpec
from ..errors import StoreError
from ..store.base import Store

TRIES = 32  # read-apply-write rounds before a call gives up (contention, not errors)
_BACKOFF = 0.002  # seconds, doubled per lost race (with jitter), at most _MAX_BACKOFF
_MAX_BACKOFF = 0.05

_log = logging.getLogger("plait.breakers")

Rule = Callable[[CircuitBreaker], bool]


class Breakers(ABC):
    """The circuit breakers as the runtime consults them (the rules:
    ``CircuitBreaker``).  A subclass keeps the state: ``_apply`` applies a rule to the
    breaker of a key and keeps what it changed."""

    __slots__ = ("__weakref__",)

    async def allow(self, spec: CircuitBreakerSpec, now: float, holder: str) -> bool:
        """Whether an attempt may start at ``now`` (``holder`` takes the trial if it is
        one: see ``CircuitBreaker.allow``)."""
        return await self._apply(spec, lambda b: b.allow(now, holder))

    async def record_success(self, spec: CircuitBreakerSpec) -> None:
        await self._apply(spec, _succeeded)

    async def record_failure(self, spec: CircuitBreakerSpec, now: float) -> None:
        def failed(breaker: CircuitBreaker) -> bool:
            breaker.record_failure(now)
            return False
        await self._apply(spec, failed)

    async def release(self, spec: CircuitBreakerSpec, holder: str) -> None:
        """Let ``holder``'s trial go at once (nothing when it holds none)."""
        await self._apply(spec, lambda b: b.release(holder))

    async def settle(self, spec: CircuitBreakerSpec, holder: str, kind: str, waits: bool,
                     now: float) -> None:
        """Tell the breaker how an attempt it let through ended: ``ok`` closes it, an
        ``error`` counts as a failure, and an attempt that told nothing of the service
        (``cancelled``, or parked to wait for approval: ``waits``) lets its trial go at
        once.  A store that cannot take it is logged, never raised: the attempt's outcome
        must still be reported, and a trial left held runs out by itself."""
        try:
            if kind == "ok":
                await self.record_success(spec)
            elif kind == "error" and not waits:
                await self.record_failure(spec, now)
            else:
                await self.release(spec, holder)
        except StoreError as exc:
            _log.warning("circuit breaker %r: the end of attempt %s was not recorded (%s)",
                         spec.key, holder, exc)

    @abstractmethod
    async def state(self, spec: CircuitBreakerSpec) -> CircuitBreaker:
        """The breaker's state now (a copy: changing it changes nothing kept)."""

    @abstractmethod
    async def _apply(self, spec: CircuitBreakerSpec, rule: Rule) -> bool:
        ...


def _succeeded(breaker: CircuitBreaker) -> bool:
    breaker.record_success()
    return True


class LocalBreakers(Breakers):
    """The breakers of one event loop's runs, in memory."""

    __slots__ = ("_breakers",)

    def __init__(self) -> None:
        self._breakers: dict[str, CircuitBreaker] = {}

    async def _apply(self, spec: CircuitBreakerSpec, rule: Rule) -> bool:
        found = self._breakers.get(spec.key)
        if found is None:
            found = self._breakers[spec.key] = CircuitBreaker(spec)
        found.spec = spec  # the newest definition's rules
        return rule(found)

    async def state(self, spec: CircuitBreakerSpec) -> CircuitBreaker:
        found = self._breakers.get(spec.key)
        return CircuitBreaker.from_json(spec, None if found is None else found.to_json())


class StoreBreakers(Breakers):
    """The breakers of a store that several processes share (see the module
    docstring); each process has the rules from its definitions, the store holds only
    the state."""

    __slots__ = ("store", "tries")

    def __init__(self, store: Store, *, tries: int = TRIES) -> None:
        self.store = store
        self.tries = tries

    async def state(self, spec: CircuitBreakerSpec) -> CircuitBreaker:
        found, _ = await self.store.get_breaker(spec.key)
        return CircuitBreaker.from_json(spec, found)

    async def _apply(self, spec: CircuitBreakerSpec, rule: Rule) -> bool:
        key = spec.key
        for lost in range(self.tries):
            found, version = await self.store.get_breaker(key)
            breaker = CircuitBreaker.from_json(spec, found)
            before = breaker.to_json()
            answer = rule(breaker)
            after = breaker.to_json()
            if after == before:  # nothing changed (absent: still a new breaker's state)
                return answer
            if await self.store.put_breaker(key, after, version):
                return answer
            await asyncio.sleep(min(_BACKOFF * 2 ** lost, _MAX_BACKOFF) * random.random())
        raise StoreError(f"circuit breaker {key!r}: its state changed under each of "
                         f"{self.tries} read-and-update rounds (other processes updating "
                         f"it); the update was not stored")


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LocalBreakers] = \
    weakref.WeakKeyDictionary()
_BY_STORE: weakref.WeakKeyDictionary[Store, StoreBreakers] = weakref.WeakKeyDictionary()


def breakers_for(store: Store | None) -> Breakers:
    """Where the breakers of runs on ``store`` are judged: the store when other
    processes share it, else the running event loop's ``LocalBreakers``."""
    if store is not None and store.capabilities.shared:
        shared = _BY_STORE.get(store)
        if shared is None:
            shared = _BY_STORE[store] = StoreBreakers(store)
        return shared
    loop = asyncio.get_running_loop()
    local = _BY_LOOP.get(loop)
    if local is None:
        local = _BY_LOOP[loop] = LocalBreakers()
    return local


def holder_of(run_id: str, step_id: str, attempt: int) -> str:
    """Who holds a trial: one attempt of one step of one run."""
    return f"{run_id}/{step_id}#{attempt}"
