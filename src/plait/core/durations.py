"""Durations: numbers of seconds or strings such as ``500ms``, ``30s``, ``5m``, ``2h``."""

from __future__ import annotations

import math
import re

from .numbers import MAX_DURATION, shown

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|min|s|m|h|d)")


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raise ValueError with the accepted forms otherwise.

    Compound strings (``1h30m``) are accepted; negative values never are, nor NaN,
    infinity or more than ``MAX_DURATION`` (10 years)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}")
    if isinstance(value, int | float):
        return _bounded(value, value)
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            return _bounded(number, value)
        pos, total = 0, 0.0
        for match in _PART.finditer(text):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos == len(text) and pos > 0:
            return _bounded(total, value)
    raise ValueError(
        f"expected a duration (seconds, or a string like '500ms', '30s', '5m', '2h'), "
        f"got {shown(value)}"
    )


def _bounded(seconds: int | float, given: object) -> float:
    """``seconds`` as a float when it is a duration plait can wait for."""
    if isinstance(seconds, float) and math.isnan(seconds):
        raise ValueError(f"expected a duration, got {given!r}")
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {shown(given)}")
    if seconds > MAX_DURATION:  # before float(): a huge int cannot become a float
        raise ValueError(f"a duration is at most 10 years ({MAX_DURATION:,} seconds), "
                         f"got {shown(given)}")
    return float(seconds)


def format_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.2f}s".replace(".00s", "s")
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
