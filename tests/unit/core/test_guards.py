"""Circuit breakers and rate windows: state machines driven by a clock value."""

from __future__ import annotations

import pytest

from plait.core.guards import CircuitBreaker, RateWindow
from plait.core.model import CircuitBreakerSpec, Rate
from plait.errors import StoreError


def breaker(threshold: int = 3, reset_after: float = 10.0) -> CircuitBreaker:
    return CircuitBreaker(CircuitBreakerSpec(key="llm", failure_threshold=threshold,
                                             reset_after=reset_after))


def test_breaker_opens_after_threshold_consecutive_failures() -> None:
    b = breaker(threshold=3)
    for t in (1.0, 2.0):
        assert b.allow(t)
        b.record_failure(t)
        assert b.state == "closed"
    assert b.allow(3.0)
    b.record_failure(3.0)
    assert b.state == "open"
    assert not b.allow(3.5)
    assert not b.allow(12.9)


def test_a_success_resets_the_failure_count() -> None:
    b = breaker(threshold=2)
    b.record_failure(1.0)
    b.record_success()
    b.record_failure(2.0)
    assert b.state == "closed"
    assert b.allow(2.5)
    b.record_failure(3.0)
    assert b.state == "open"


def test_half_open_lets_exactly_one_trial_through() -> None:
    b = breaker(threshold=1, reset_after=10.0)
    b.record_failure(0.0)
    assert not b.allow(9.99)
    assert b.allow(10.0)
    assert b.state == "half_open"
    assert not b.allow(10.1)  # a second caller waits for the trial's outcome
    assert not b.allow(50.0)


def test_a_successful_trial_closes_the_breaker() -> None:
    b = breaker(threshold=2, reset_after=5.0)
    b.record_failure(0.0)
    b.record_failure(0.0)
    assert b.allow(5.0)
    b.record_success()
    assert b.state == "closed"
    assert b.allow(5.1) and b.allow(5.2)
    b.record_failure(6.0)  # the count restarted
    assert b.state == "closed"


def test_a_failed_trial_opens_the_breaker_again_from_that_moment() -> None:
    b = breaker(threshold=3, reset_after=5.0)
    for _ in range(3):
        b.record_failure(0.0)
    assert b.allow(5.0)
    b.record_failure(6.0)  # a single failure is enough in half-open
    assert b.state == "open"
    assert not b.allow(10.9)
    assert b.allow(11.0)


def test_rate_window_allows_count_per_period() -> None:
    w = RateWindow(Rate(count=2, period=10.0))
    assert w.wait(0.0) == 0.0
    w.record(0.0)
    assert w.wait(1.0) == 0.0
    w.record(1.0)
    assert w.wait(2.0) == pytest.approx(8.0)  # until the first start leaves the window
    assert w.wait(10.0) == 0.0
    w.record(10.0)
    assert w.wait(10.5) == pytest.approx(0.5)  # the start at 1.0 leaves at 11.0
    assert w.wait(11.0) == 0.0


def test_rate_window_never_allows_more_than_count_in_any_window() -> None:
    w = RateWindow(Rate(count=3, period=1.0))
    starts: list[float] = []
    now = 0.0
    while len(starts) < 30:
        wait = w.wait(now)
        if wait == 0.0:
            w.record(now)
            starts.append(now)
        else:
            assert wait > 0
            now += wait
    for i in range(len(starts) - 3):
        assert starts[i + 3] - starts[i] >= 1.0 - 1e-9


def test_a_breaker_goes_through_json_unchanged_in_every_state() -> None:
    b = breaker(threshold=2, reset_after=10.0)
    states = [b.to_json()]
    b.record_failure(1.0)
    states.append(b.to_json())
    b.record_failure(2.0)  # open
    states.append(b.to_json())
    assert b.allow(12.0)  # half-open
    states.append(b.to_json())
    assert states[-1] == {"failures": 2, "opened_at": 2.0, "trial": True}
    for state in states:
        again = CircuitBreaker.from_json(b.spec, state)
        assert again.to_json() == state
    assert CircuitBreaker.from_json(b.spec, None).to_json() == states[0]
    restored = CircuitBreaker.from_json(b.spec, states[2])
    assert restored.state == "open" and not restored.allow(5.0)


@pytest.mark.parametrize("state", [
    {"failures": -1, "opened_at": None, "trial": False},
    {"failures": True, "opened_at": None, "trial": False},
    {"failures": 1, "opened_at": "soon", "trial": False},
    {"failures": 1, "opened_at": None, "trial": 0},
    {"opened_at": None, "trial": False},
])
def test_a_stored_breaker_state_of_another_shape_is_refused(state: dict[str, object]) -> None:
    with pytest.raises(StoreError, match="circuit breaker 'llm'"):
        CircuitBreaker.from_json(breaker().spec, state)  # type: ignore[arg-type]
