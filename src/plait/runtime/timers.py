"""A run's timers: retry delays, rate-window waits, approval deadlines (and event
timeouts), the ends of sleeps, the run timeout.

What each one means when it fires is the core's decision (``TimerFired``); this is
only the heap.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from ..core.events import TimerKind


class Timers(list[tuple[float, int, TimerKind, int]]):
    """A heap of ``(due, seq, kind, step)`` (step -1 for the run's own).

    A list itself, so the loop's checks on every turn (``if timers:``) cost what they
    cost on a plain list; ``seq`` keeps timers due at the same time in the order set."""

    _seq = 0  # (set on the instance by the first add: no __init__ to run per run)

    def add(self, due: float, kind: TimerKind, step: int) -> None:
        self._seq += 1
        heapq.heappush(self, (due, self._seq, kind, step))

    def pop_due(self, now: float) -> Iterator[tuple[TimerKind, int]]:
        """The timers due by ``now``, earliest first, each removed as it is taken."""
        while self and self[0][0] <= now:
            _, _, kind, step = heapq.heappop(self)
            yield kind, step

    def next_due(self) -> float:
        return self[0][0]

    def busy(self) -> bool:
        """Timers of the run itself (retry delays, rate windows, its timeout), which
        keep it running.  The times of parked steps (a sleep's end, an event's or an
        approval's deadline) do not: a run with only those waits, stored ``waiting``
        with the earliest of them (``RunState.wake_at``)."""
        return any(kind not in _PARKED for _, _, kind, _ in self)


_PARKED = ("approval_timeout", "wake")  # the times of parked steps
