"""Circuit breakers and rate windows: small state machines driven with a clock value."""

from __future__ import annotations

from collections import deque

from ..errors import StoreError
from .model import CircuitBreakerSpec, JSONDict, Rate


class CircuitBreaker:
    """Opens after ``failure_threshold`` consecutive failures of any step sharing its key;
    after ``reset_after`` seconds one trial attempt is let through (half-open): success
    closes it, failure opens it again.

    The trial is a lease: the breaker records who took it (``holder``) and until when
    (``trial_until``, ``reset_after`` seconds after it was granted).  A trial that never
    reports (its process died, its end was lost) is let go at ``trial_until`` and the
    next caller gets a trial of its own; ``release`` lets it go at once (its attempt was
    cancelled).  Time is passed in: nothing here reads a clock."""

    __slots__ = ("failures", "holder", "opened_at", "spec", "trial_until")

    def __init__(self, spec: CircuitBreakerSpec) -> None:
        self.spec = spec
        self.failures = 0
        self.opened_at: float | None = None
        self.trial_until: float | None = None  # a trial is out until then
        self.holder: str | None = None  # who holds the trial

    @property
    def state(self) -> str:
        """``closed``, ``open``, or ``half_open`` while a trial lease is recorded (it
        may have run out: ``allow`` judges that with the time it is given)."""
        if self.opened_at is None:
            return "closed"
        return "half_open" if self.trial_until is not None else "open"

    def allow(self, now: float, holder: str = "") -> bool:
        """Whether an attempt may start at ``now``: always while closed; while open,
        once ``reset_after`` has passed since it opened, as the trial, which ``holder``
        then holds until ``now + reset_after`` (nobody else gets one meanwhile)."""
        if self.opened_at is None:
            return True
        if self.trial_until is None:
            if now - self.opened_at < self.spec.reset_after:
                return False
        elif now < self.trial_until:
            return False
        self.trial_until, self.holder = now + self.spec.reset_after, holder
        return True

    def release(self, holder: str) -> bool:
        """Let ``holder``'s trial go before its lease runs out (its attempt ended
        without telling success or failure): the next caller gets a trial at once.
        False, changing nothing, when ``holder`` holds no trial (its lease ran out and
        another took one, or the breaker closed or opened again meanwhile)."""
        if self.trial_until is None or self.holder != holder:
            return False
        self.trial_until, self.holder = None, None
        return True

    def record_success(self) -> None:
        self.failures, self.opened_at = 0, None
        self.trial_until, self.holder = None, None

    def record_failure(self, now: float) -> None:
        """A failure counts towards opening; a breaker already open (a failed trial,
        or a late failure of an attempt let through before it opened) opens again
        from ``now``, its trial let go."""
        self.failures += 1
        if self.opened_at is not None or self.failures >= self.spec.failure_threshold:
            self.opened_at = now
            self.trial_until, self.holder = None, None

    def to_json(self) -> JSONDict:
        """The state as a JSON object, so that a store can share it between processes
        (the spec is not part of it: each process has it from its definition)."""
        return {"failures": self.failures, "opened_at": self.opened_at,
                "trial_until": self.trial_until, "holder": self.holder}

    @classmethod
    def from_json(cls, spec: CircuitBreakerSpec, state: JSONDict | None) -> CircuitBreaker:
        """A breaker with ``spec``'s rules in the stored ``state`` (None: a new one,
        closed).  A state that is not ``to_json``'s shape raises StoreError naming
        what is wrong, since it can only come from a damaged or foreign store.  A state
        stored before trials were leases (``trial``: a boolean, no ``trial_until``)
        reads as open with no trial out, so a trial left over from then is let go."""
        breaker = cls(spec)
        if state is None:
            return breaker
        failures, holder = state.get("failures"), state.get("holder")
        if (not isinstance(failures, int) or isinstance(failures, bool) or failures < 0
                or not (holder is None or isinstance(holder, str))
                or not isinstance(state.get("trial", False), bool)):
            raise _not_a_state(spec, state)
        opened_at = _seconds(spec, state, "opened_at")
        trial_until = _seconds(spec, state, "trial_until")
        breaker.failures, breaker.opened_at = failures, opened_at
        if trial_until is not None and opened_at is not None:
            breaker.trial_until, breaker.holder = trial_until, holder
        return breaker


def _seconds(spec: CircuitBreakerSpec, state: JSONDict, name: str) -> float | None:
    value = state.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _not_a_state(spec, state)
    return float(value)


def _not_a_state(spec: CircuitBreakerSpec, state: JSONDict) -> StoreError:
    return StoreError(f"the stored state of circuit breaker {spec.key!r} is not one: "
                      f"{state!r} (expected failures >= 0, opened_at and trial_until "
                      f"numbers or null, holder a text or null)")


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
