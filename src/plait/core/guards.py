"""Circuit breakers and rate windows: small state machines driven with a clock value."""

from __future__ import annotations

from collections import deque

from ..errors import StoreError
from .model import CircuitBreakerSpec, JSONDict, Rate


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

    def to_json(self) -> JSONDict:
        """The state as a JSON object, so that a store can share it between processes
        (the spec is not part of it: each process has it from its definition)."""
        return {"failures": self.failures, "opened_at": self.opened_at,
                "trial": self.trial}

    @classmethod
    def from_json(cls, spec: CircuitBreakerSpec, state: JSONDict | None) -> CircuitBreaker:
        """A breaker with ``spec``'s rules in the stored ``state`` (None: a new one,
        closed).  A state that is not ``to_json``'s shape raises StoreError naming
        what is wrong, since it can only come from a damaged or foreign store."""
        breaker = cls(spec)
        if state is None:
            return breaker
        failures, opened_at, trial = (state.get("failures"), state.get("opened_at"),
                                      state.get("trial"))
        if (not isinstance(failures, int) or isinstance(failures, bool) or failures < 0
                or not (opened_at is None or (isinstance(opened_at, int | float)
                                              and not isinstance(opened_at, bool)))
                or not isinstance(trial, bool)):
            raise StoreError(f"the stored state of circuit breaker {spec.key!r} is not "
                             f"one: {state!r} (expected failures >= 0, opened_at a "
                             f"number or null, trial a boolean)")
        breaker.failures = failures
        breaker.opened_at = None if opened_at is None else float(opened_at)
        breaker.trial = trial
        return breaker


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
