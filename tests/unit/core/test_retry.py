"""Retry decisions: pure functions of the policy, the attempt and the error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plait.core.model import RetryPolicy
from plait.core.retry import (
    MAX_RETRY_AFTER,
    ErrorInfo,
    next_delay,
    retry_delay,
    should_retry,
)

BOOM = ErrorInfo(type="ValueError", message="boom", names=("ValueError",))


def error(type_: str, *bases: str, retryable: bool = True,
          retry_after: float | None = None) -> ErrorInfo:
    return ErrorInfo(type=type_, message="x", names=(type_, *bases), retryable=retryable,
                     retry_after=retry_after)


def test_default_policy_is_the_spec_default() -> None:
    p = RetryPolicy()
    assert (p.max_retries, p.initial_delay, p.backoff, p.max_delay, p.jitter) == (
        3, 1.0, 2.0, 60.0, 0.1)


@pytest.mark.parametrize(("n", "expected"), [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0),
                                             (5, 32.0), (6, 50.0), (10, 50.0)])
def test_retry_delay_without_jitter_is_exact(n: int, expected: float) -> None:
    policy = RetryPolicy(initial_delay=2.0, backoff=2.0, max_delay=50.0, jitter=0.1)
    assert retry_delay(policy, n, 0.0) == expected


def test_backoff_one_is_a_constant_delay() -> None:
    policy = RetryPolicy(initial_delay=0.5, backoff=1.0, jitter=0.0)
    assert [retry_delay(policy, n, 0.7) for n in (1, 2, 3)] == [0.5, 0.5, 0.5]


def test_jitter_adds_up_to_jitter_of_the_delay() -> None:
    policy = RetryPolicy(initial_delay=2.0, backoff=3.0, max_delay=60.0, jitter=0.25)
    assert retry_delay(policy, 2, 0.5) == pytest.approx(6.0 + 6.0 * 0.25 * 0.5)
    assert retry_delay(policy, 2, 0.999) == pytest.approx(6.0 + 6.0 * 0.25 * 0.999)


@given(n=st.integers(1, 30), rand=st.floats(0.0, 1.0, exclude_max=True),
       initial=st.floats(0.001, 10.0), backoff=st.floats(1.0, 4.0),
       max_delay=st.floats(0.001, 100.0), jitter=st.floats(0.0, 1.0))
def test_retry_delay_bounds(n: int, rand: float, initial: float, backoff: float,
                            max_delay: float, jitter: float) -> None:
    policy = RetryPolicy(initial_delay=initial, backoff=backoff, max_delay=max_delay,
                         jitter=jitter)
    base = min(initial * backoff ** (n - 1), max_delay)
    delay = retry_delay(policy, n, rand)
    assert delay == pytest.approx(retry_delay(policy, n, 0.0) + base * jitter * rand)
    assert base <= delay <= base * (1 + jitter) + 1e-9
    if jitter == 0:
        assert delay == base


@given(rand=st.floats(0.0, 1.0, exclude_max=True))
def test_retry_delays_grow_with_the_retry_number(rand: float) -> None:
    policy = RetryPolicy(initial_delay=1.0, backoff=2.0, max_delay=1000.0, jitter=0.1)
    delays = [retry_delay(policy, n, rand) for n in range(1, 8)]
    assert delays == sorted(delays)


def test_should_retry_counts_retries_not_attempts() -> None:
    policy = RetryPolicy(max_retries=3)
    assert [should_retry(policy, made, BOOM) for made in (1, 2, 3, 4, 5)] == [
        True, True, True, False, False]
    assert should_retry(RetryPolicy(max_retries=0), 1, BOOM) is False


def test_non_retryable_errors_are_never_retried() -> None:
    policy = RetryPolicy(max_retries=5, retry_on=("FatalError",))
    assert should_retry(policy, 1, error("FatalError", "StepError", retryable=False)) is False
    assert next_delay(policy, 1, error("TemplateError", retryable=False), 0.0) is None


def test_retry_on_limits_retries_to_named_exceptions_and_their_bases() -> None:
    policy = RetryPolicy(retry_on=("ConnectionError",))
    assert should_retry(policy, 1, error("ConnectionError", "OSError")) is True
    assert should_retry(policy, 1, error("ConnectionRefusedError", "ConnectionError",
                                         "OSError")) is True
    assert should_retry(policy, 1, error("ValueError")) is False


def test_no_retry_on_excludes_named_exceptions_and_subclasses() -> None:
    policy = RetryPolicy(no_retry_on=("KeyError",))
    assert should_retry(policy, 1, error("KeyError", "LookupError")) is False
    assert should_retry(policy, 1, error("MyKeyError", "KeyError", "LookupError")) is False
    assert should_retry(policy, 1, error("ValueError")) is True


def test_no_retry_on_wins_over_retry_on() -> None:
    policy = RetryPolicy(retry_on=("OSError",), no_retry_on=("TimeoutError",))
    assert should_retry(policy, 1, error("TimeoutError", "OSError")) is False
    assert should_retry(policy, 1, error("ConnectionError", "OSError")) is True


def test_next_delay_is_none_once_retries_are_spent() -> None:
    policy = RetryPolicy(max_retries=2, initial_delay=1.0, jitter=0.0)
    assert next_delay(policy, 1, BOOM, 0.0) == 1.0
    assert next_delay(policy, 2, BOOM, 0.0) == 2.0
    assert next_delay(policy, 3, BOOM, 0.0) is None


def test_retry_after_is_honoured_when_longer_than_the_backoff() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=60.0, jitter=0.0)
    assert next_delay(policy, 1, error("HTTPStatusError", retry_after=7.0), 0.0) == 7.0


def test_retry_after_shorter_than_the_backoff_does_not_shorten_it() -> None:
    policy = RetryPolicy(initial_delay=5.0, max_delay=60.0, jitter=0.0)
    assert next_delay(policy, 1, error("HTTPStatusError", retry_after=1.0), 0.0) == 5.0


def test_retry_after_is_honoured_past_max_delay_up_to_a_day() -> None:
    # README: a Retry-After raises the delay to what the server asks for (up to a day)
    policy = RetryPolicy(initial_delay=1.0, max_delay=30.0, jitter=0.0)
    assert next_delay(policy, 1, error("HTTPStatusError", retry_after=3600.0), 0.0) == 3600.0
    assert MAX_RETRY_AFTER == 86400
    bogus = next_delay(policy, 1, error("HTTPStatusError", retry_after=1e12), 0.0)
    assert bogus == MAX_RETRY_AFTER


def test_error_info_text() -> None:
    assert str(BOOM) == "ValueError: boom"
    assert str(ErrorInfo(type="KeyError", message="")) == "KeyError"


def test_exception_and_base_exception_name_every_error() -> None:
    # ErrorInfo.names leaves these bases out; a policy naming them still matches
    assert should_retry(RetryPolicy(no_retry_on=("Exception",)), 1, BOOM) is False
    assert should_retry(RetryPolicy(retry_on=("BaseException",)), 1, BOOM) is True


def test_a_dotted_exception_path_matches_by_its_class_name() -> None:
    policy = RetryPolicy(retry_on=("shop.errors.RateLimited",))
    assert should_retry(policy, 1, error("RateLimited")) is True
    assert should_retry(policy, 1, error("Limited")) is False
