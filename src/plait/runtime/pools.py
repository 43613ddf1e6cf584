"""Named pools shared by every run in a process: a concurrency limit and a rate window."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ..core.guards import RateWindow
from ..core.model import PoolSpec


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
