"""What every run of a process shares: named pools (a concurrency limit and a rate
window).  Circuit breakers are kept by ``runtime.breakers``.

Shared per event loop, which in practice is per process: every ``Engine`` in the loop
(one per ``run_async`` call, the CLI's, a server's) sees the same pools, so
fifty concurrent runs of a workflow with ``pools: {llm: {concurrency: 4}}`` run at most
four ``llm`` steps at once between them.  A pool's waiters are callbacks into run loops,
which only makes sense inside one event loop.  ``PoolSlots`` is one run's side of them.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Callable, Mapping

from ..core.guards import RateWindow
from ..core.model import PoolSpec
from ..core.runstate import RunState
from ..core.states import StepStatus
from .timers import Timers


class Pool:
    __slots__ = ("active", "spec", "waiters", "window")

    def __init__(self, spec: PoolSpec) -> None:
        self.spec = spec
        self.active = 0
        self.window = RateWindow(spec.rate) if spec.rate else None
        # woken in order when a slot frees; a waiter returns False when it no longer
        # wants the slot (its run ended), and the next one is woken instead
        self.waiters: deque[Callable[[], bool]] = deque()

    def full(self) -> bool:
        return self.spec.concurrency is not None and self.active >= self.spec.concurrency

    def acquire(self, now: float) -> None:
        self.active += 1
        if self.window is not None:
            self.window.record(now)

    def release(self) -> None:
        self.active -= 1
        while self.waiters:
            if self.waiters.popleft()():
                break


class PoolRegistry:
    def __init__(self) -> None:
        self._pools: dict[str, Pool] = {}

    def get(self, spec: PoolSpec) -> Pool:
        pool = self._pools.get(spec.name)
        if pool is None:
            pool = self._pools[spec.name] = Pool(spec)
        elif pool.spec != spec:  # the newest definition's limits win
            pool.spec = spec
            pool.window = RateWindow(spec.rate) if spec.rate else None
        return pool


class SharedLimits:
    """The pools of one event loop's runs."""

    __slots__ = ("__weakref__", "pools")

    def __init__(self) -> None:
        self.pools = PoolRegistry()


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SharedLimits] = \
    weakref.WeakKeyDictionary()


def shared_limits() -> SharedLimits:
    """The running event loop's pools (made on first use, dropped with the loop)."""
    loop = asyncio.get_running_loop()
    found = _BY_LOOP.get(loop)
    if found is None:
        found = _BY_LOOP[loop] = SharedLimits()
    return found


class PoolSlots:
    """One run's use of the shared pools.  A step takes a slot of its pool before it
    starts and gives it back when its attempt ends (its fallback runs outside it).  A
    step that finds its pool full waits in the pool's queue, and one whose rate window
    is full waits on a timer; either is ready again when it may try once more."""

    __slots__ = ("_specs", "_state", "_timers", "waiting")

    def __init__(self, specs: Mapping[str, PoolSpec], state: RunState,
                 timers: Timers) -> None:
        self._specs = specs
        self._state = state
        self._timers = timers
        self.waiting = 0  # steps of this run waiting for a slot

    def take(self, i: int, name: str, now: float, signal: Callable[[], None]) -> bool:
        """A slot for step ``i`` now, else False (it waits, as the class says; ``signal``
        wakes the run loop when the step may try again)."""
        pool = shared_limits().pools.get(self._specs[name])
        if pool.full():
            self.waiting += 1
            pool.waiters.append(lambda: self._requeue(i, signal))
            return False
        if pool.window is not None:
            wait = pool.window.wait(now)
            if wait > 0:
                self._timers.add(now + wait, "ready", i)
                return False
        pool.acquire(now)
        return True

    def _requeue(self, i: int, signal: Callable[[], None]) -> bool:
        """A slot freed: try the step again (False when the run moved on)."""
        self.waiting -= 1
        state = self._state
        if state.halting or state.rows[i].status is not StepStatus.QUEUED:
            signal()
            return False
        state.push_back(i)
        signal()
        return True

    def hold(self, name: str, now: float) -> None:
        """Count a slot taken by an attempt already running elsewhere (a run taken
        over), even past the pool's limit: it is running, whatever the limit says."""
        shared_limits().pools.get(self._specs[name]).acquire(now)

    def release(self, name: str) -> None:
        shared_limits().pools.get(self._specs[name]).release()
