"""State reducers: how a key written by several steps combines (docs/definitions.md)."""

from __future__ import annotations

from ..errors import OutputError
from .model import JSON, REDUCERS
from .suggest import did_you_mean


def unknown_reducer(name: object) -> str:
    """The message for a reducer name that is not a built-in one."""
    return f"unknown reducer {name!r}"


def reducer_hint(name: object) -> str:
    """The built-in reducers, and the closest one to ``name`` when one is close."""
    builtins = f"built-in reducers: {', '.join(REDUCERS)}"
    close = did_you_mean(name, REDUCERS) if isinstance(name, str) else None
    return f"{close} {builtins}" if close else builtins


def reduce_value(reducer: str | None, key: str, old: JSON, new: JSON) -> JSON:
    """The key's new value.  Without a reducer the last write wins."""
    if reducer is None:
        return new
    try:
        return _REDUCE[reducer](old, new)
    except (TypeError, ValueError) as exc:
        raise OutputError(f"reducer {reducer!r} cannot combine state key {key!r}: {exc}",
                          path=key) from exc


def _as_list(old: JSON) -> list[JSON]:
    if old is None:
        return []
    if not isinstance(old, list):
        raise TypeError(f"current value is {type(old).__name__}, not a list")
    return old


def _append(old: JSON, new: JSON) -> JSON:
    return [*_as_list(old), new]


def _extend(old: JSON, new: JSON) -> JSON:
    if not isinstance(new, list):
        raise TypeError(f"extend needs a list, got {type(new).__name__}")
    return [*_as_list(old), *new]


def _merge(old: JSON, new: JSON) -> JSON:
    if not isinstance(new, dict) or not isinstance(old, dict | None):
        raise TypeError("merge needs mappings")
    return {**(old or {}), **new}


def _number(value: JSON) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return value


def _sum(old: JSON, new: JSON) -> JSON:
    return _number(new) if old is None else _number(old) + _number(new)


def _max(old: JSON, new: JSON) -> JSON:
    return _number(new) if old is None else max(_number(old), _number(new))


def _min(old: JSON, new: JSON) -> JSON:
    return _number(new) if old is None else min(_number(old), _number(new))


def _replace_last(old: JSON, new: JSON) -> JSON:
    items = _as_list(old)
    return [*items[:-1], new] if items else [new]


_REDUCE = {"append": _append, "extend": _extend, "merge": _merge, "sum": _sum,
           "max": _max, "min": _min, "replace_last": _replace_last}
