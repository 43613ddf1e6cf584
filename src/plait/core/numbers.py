"""The largest numbers a definition may hold, so that whatever validation accepts can be
stored, slept on and shown (docs/limits.md).

* Whole numbers (``version``, ``concurrency``, ``max_retries``, ``limits.*``...) are at
  most ``MAX_INT``: PostgreSQL keeps versions, attempt numbers and pool limits in 32-bit
  ``integer`` columns, SQLite in 64-bit ones.
* Durations are at most ``MAX_DURATION`` (10 years): ``asyncio`` timers, ``timedelta``
  and ``datetime`` overflow long before ``1e308`` seconds.
* A moment given as epoch seconds is at most ``MAX_EPOCH`` (the last second of year
  9999, the last one ``datetime`` can show).
"""

from __future__ import annotations

import math

MAX_INT = 2**31 - 1  # 2,147,483,647
MAX_DURATION = 10 * 365 * 86_400  # seconds: 10 years (3,650 days)
MAX_EPOCH = 253_402_300_799  # 9999-12-31T23:59:59Z
MAX_BACKOFF = 1_000.0  # retry.backoff: the factor between two retry delays
MAX_JITTER = 1.0  # retry.jitter: a fraction of the delay (1.0 doubles it at most)


def shown(value: object) -> str:
    """``repr(value)``, except that a huge integer is described by its size (its text
    may be thousands of digits long, or past what ``str`` converts)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits"
    return repr(value)


def whole(value: object, low: int, high: int = MAX_INT) -> int:
    """``value`` when it is a whole number from ``low`` to ``high``; TypeError or
    ValueError saying what is wrong otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a whole number, got {shown(value)}")
    if value < low:
        raise ValueError(f"must be at least {low}, got {value}")
    if value > high:
        raise ValueError(f"must be at most {high:,}, got {shown(value)}")
    return value


def real(value: object, low: float, high: float) -> float:
    """``value`` as a float when it is a number from ``low`` to ``high`` (never NaN or
    infinite); TypeError or ValueError saying what is wrong otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {shown(value)}")
    if isinstance(value, float) and math.isnan(value):
        raise ValueError(f"expected a number, got {value!r}")
    if value < low:
        raise ValueError(f"must be at least {low:g}, got {shown(value)}")
    if value > high:  # compared before float(): a huge int cannot become a float
        raise ValueError(f"must be at most {high:g}, got {shown(value)}")
    return float(value)
