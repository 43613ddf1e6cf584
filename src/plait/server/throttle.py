"""``LoginThrottle``: how many failed logins a client address may make.

``POST /api/login`` compares the token it is sent with PLAIT_API_TOKEN; without a limit
a client could try tokens as fast as the server answers.  After ``failures`` failed
logins within ``window`` seconds from one address, every login from it answers 429
with ``Retry-After`` until the oldest of them is ``window`` seconds old.  The count is
this process's (several server processes each keep their own).
"""

from __future__ import annotations

import math
from collections import deque

MAX_ADDRESSES = 10_000  # addresses tracked at once: the oldest is dropped past it


class LoginThrottle:
    def __init__(self, failures: int, window: float) -> None:
        self.failures, self.window = failures, window
        self._seen: dict[str, deque[float]] = {}

    def _recent(self, address: str, now: float) -> deque[float]:
        times = self._seen.get(address, deque())
        while times and times[0] <= now - self.window:
            times.popleft()
        return times

    def retry_after(self, address: str, now: float) -> int | None:
        """Seconds until ``address`` may try again, or None when it may now."""
        times = self._recent(address, now)
        if len(times) < self.failures:
            return None
        return max(1, math.ceil(times[0] + self.window - now))

    def failed(self, address: str, now: float) -> None:
        times = self._recent(address, now)
        times.append(now)
        self._seen.pop(address, None)
        self._seen[address] = times  # most recent last: the oldest is dropped first
        if len(self._seen) > MAX_ADDRESSES:
            del self._seen[next(iter(self._seen))]
