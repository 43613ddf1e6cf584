"""Circuit breakers and rate windows: small state machines driven with a clock value."""

from __future__ import annotations

from collections import deque

from .model import CircuitBreakerSpec, Rate


class CircuitBreaker:
    """Opens after ``failure_threshold`` consecutive failures of any step sharing its key;
    after ``reset_after`` seconds one trial attempt is let through (half-open): success
    closes it, failure opens it again."""

    __slots__ = ("failures", "opened_at", "spec", "trial")

    def __init__(self, spec: CircuitBreakerSpec) -> None:
        self.spec = spec
        self.failures = 0
        self.opened_at: float | None = None
        self.trial = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half_open" if self.trial else "open"

    def allow(self, now: float) -> bool:
        if self.opened_at is None:
            return True
        if not self.trial and now - self.opened_at >= self.spec.reset_after:
            self.trial = True
            return True
        return False

    def record_success(self) -> None:
        self.failures, self.opened_at, self.trial = 0, None, False

    def record_failure(self, now: float) -> None:
        self.failures += 1
        if self.trial or self.failures >= self.spec.failure_threshold:
            self.opened_at, self.trial = now, False


class RateWindow:
    """At most ``rate.count`` starts in any window of ``rate.period`` seconds."""

    __slots__ = ("rate", "starts")

    def __init__(self, rate: Rate) -> None:
        self.rate = rate
        self.starts: deque[float] = deque()

    def wait(self, now: float) -> float:
        """Seconds until a start is allowed (0 when allowed now)."""
        while self.starts and self.starts[0] <= now - self.rate.period:
            self.starts.popleft()
        if len(self.starts) < self.rate.count:
            return 0.0
        return self.starts[0] + self.rate.period - now

    def record(self, now: float) -> None:
        self.starts.append(now)
