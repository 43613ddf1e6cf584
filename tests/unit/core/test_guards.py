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
    assert not b.allow(19.9)  # (until the trial's lease runs out: see below)


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


def test_a_trial_that_never_reports_is_let_go_after_reset_after() -> None:
    b = breaker(threshold=1, reset_after=10.0)
    b.record_failure(0.0)
    assert b.allow(10.0, "first")
    assert (b.holder, b.trial_until) == ("first", 20.0)
    assert not b.allow(19.99, "second")  # the lease still runs
    assert b.allow(20.0, "second")  # run out: the next caller takes a trial of its own
    assert (b.state, b.holder, b.trial_until) == ("half_open", "second", 30.0)
    assert not b.allow(25.0, "third")


def test_releasing_a_trial_lets_the_next_caller_take_one_at_once() -> None:
    b = breaker(threshold=1, reset_after=10.0)
    b.record_failure(0.0)
    assert b.allow(10.0, "first")
    assert b.release("first")
    assert (b.state, b.holder, b.trial_until) == ("open", None, None)
    assert b.allow(10.5, "second")
    assert b.holder == "second"


def test_only_the_holder_of_the_trial_releases_it() -> None:
    b = breaker(threshold=1, reset_after=10.0)
    assert not b.release("anyone")  # closed: nothing to let go
    b.record_failure(0.0)
    assert not b.release("anyone")  # open, no trial out
    assert b.allow(10.0, "first")
    assert b.allow(20.0, "second")  # the first one's lease ran out
    assert not b.release("first")  # a late release of a lease that ran out
    assert (b.holder, b.trial_until) == ("second", 30.0)
    assert not b.allow(21.0, "third")


def test_a_trial_that_expired_and_then_succeeds_still_closes_the_breaker() -> None:
    b = breaker(threshold=1, reset_after=10.0)
    b.record_failure(0.0)
    assert b.allow(10.0, "slow")
    assert b.allow(20.0, "next")
    b.record_success()  # the slow trial reported after all
    assert (b.state, b.holder, b.trial_until) == ("closed", None, None)
    assert b.allow(20.5, "any")


def test_a_failure_while_a_trial_is_out_reopens_and_lets_the_trial_go() -> None:
    b = breaker(threshold=2, reset_after=10.0)
    b.record_failure(0.0)
    b.record_failure(0.0)
    assert b.allow(10.0, "trial")
    b.record_failure(12.0)  # the trial's, or a late one of an attempt let through before
    assert (b.state, b.opened_at, b.holder) == ("open", 12.0, None)
    assert not b.allow(21.9, "next")
    assert b.allow(22.0, "next")


def test_a_breaker_goes_through_json_unchanged_in_every_state() -> None:
    b = breaker(threshold=2, reset_after=10.0)
    states = [b.to_json()]
    b.record_failure(1.0)
    states.append(b.to_json())
    b.record_failure(2.0)  # open
    states.append(b.to_json())
    assert b.allow(12.0, "w1/run/s#1")  # half-open
    states.append(b.to_json())
    assert states[-1] == {"failures": 2, "opened_at": 2.0, "trial_until": 22.0,
                          "holder": "w1/run/s#1"}
    for state in states:
        again = CircuitBreaker.from_json(b.spec, state)
        assert again.to_json() == state
    assert CircuitBreaker.from_json(b.spec, None).to_json() == states[0]
    restored = CircuitBreaker.from_json(b.spec, states[2])
    assert restored.state == "open" and not restored.allow(5.0)
    held = CircuitBreaker.from_json(b.spec, states[3])
    assert not held.allow(21.0) and held.allow(22.0)


def test_a_trial_stored_before_trials_were_leases_is_let_go() -> None:
    """A state of the older shape ({"trial": true}, no lease) left a breaker refusing
    for good; read now, it is open with no trial out, so one may be taken."""
    spec = breaker(threshold=1, reset_after=10.0).spec
    old = CircuitBreaker.from_json(spec, {"failures": 3, "opened_at": 2.0, "trial": True})
    assert (old.state, old.failures) == ("open", 3)
    assert old.allow(12.0, "new")


@pytest.mark.parametrize("state", [
    {"failures": -1, "opened_at": None},
    {"failures": True, "opened_at": None},
    {"failures": 1, "opened_at": "soon"},
    {"failures": 1, "opened_at": 1.0, "trial_until": False},
    {"failures": 1, "opened_at": 1.0, "trial_until": 5.0, "holder": 7},
    {"failures": 1, "opened_at": None, "trial": 0},
    {"opened_at": None},
])
def test_a_stored_breaker_state_of_another_shape_is_refused(state: dict[str, object]) -> None:
    with pytest.raises(StoreError, match="circuit breaker 'llm'"):
        CircuitBreaker.from_json(breaker().spec, state)  # type: ignore[arg-type]
