"""Sizes in bytes: whole numbers, or strings such as ``512KiB``, ``16MiB``, ``1GB``."""

from __future__ import annotations

import re

from .numbers import MAX_INT, shown

_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3,
          "kib": 1024, "mib": 1024**2, "gib": 1024**3}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]i?b|b)?", re.IGNORECASE)


def parse_size(value: object) -> int:
    """Bytes in ``value`` (1 to ``MAX_INT``); ValueError naming the accepted forms
    otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _bounded(value, value)
    if isinstance(value, str):
        match = _SIZE.fullmatch(value.strip())
        if match:
            size = float(match[1]) * _UNITS[(match[2] or "").lower()]
            if size >= 1:
                return _bounded(size, value)
    raise ValueError(f"expected a size in bytes (a whole number, or a string like "
                     f"'512KiB', '16MiB', '1GB'), got {shown(value)}")


def _bounded(size: int | float, given: object) -> int:
    if size < 1:
        raise ValueError(f"must be at least 1 byte, got {given}")
    if size > MAX_INT:  # before int(): an infinite float has no int
        raise ValueError(f"must be at most {MAX_INT:,} bytes (2 GiB less one), got {shown(given)}")
    return int(size)
