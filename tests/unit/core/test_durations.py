"""Durations: numbers of seconds or strings such as 500ms, 30s, 5m, 2h."""

from __future__ import annotations

import pytest

from plait.core.durations import format_duration, parse_duration


@pytest.mark.parametrize(("value", "seconds"), [
    (0, 0.0),
    (10, 10.0),
    (2.5, 2.5),
    ("10", 10.0),
    ("0.25", 0.25),
    ("500ms", 0.5),
    ("30s", 30.0),
    ("5m", 300.0),
    ("5min", 300.0),
    ("2h", 7200.0),
    ("1d", 86400.0),
    ("1.5s", 1.5),
    ("1h30m", 5400.0),
    ("2m30s", 150.0),
    (" 30s ", 30.0),
])
def test_parse_duration(value: object, seconds: float) -> None:
    result = parse_duration(value)
    assert result == pytest.approx(seconds)
    assert isinstance(result, float)


@pytest.mark.parametrize("value", [-1, -0.5, "-5s", "abc", "", "5 parsecs", "10x", "s",
                                   "1h-30m", True, False, None, [1], {"s": 1}, "30s5"])
def test_bad_durations_are_refused_with_the_accepted_forms(value: object) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(value)
    message = str(info.value)
    assert "duration" in message
    assert repr(value) in message or "negative" in message


@pytest.mark.parametrize(("seconds", "text"), [
    (0.5, "500ms"), (5, "5s"), (2.5, "2.50s"), (90, "1m30s"), (3600, "1h00m"),
    (5400, "1h30m"),
])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
