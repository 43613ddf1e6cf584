"""Checking that a step's output is JSON, naming the key path of what is not."""

from __future__ import annotations

import math

from ..errors import OutputError
from .model import JSON

_SCALARS = (str, int, bool, type(None))


def ensure_json(value: object, *, step: str | None = None) -> JSON:
    """``value`` as JSON (tuples become lists); OutputError naming the path otherwise."""
    if type(value) in _SCALARS:
        return value  # type: ignore[return-value]
    try:
        return _convert(value, "", step)
    except RecursionError:
        raise OutputError("output is nested too deeply to store as JSON", step=step) \
            from None


def _convert(value: object, path: str, step: str | None) -> JSON:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise OutputError(f"output{path or ''} is {value}, which JSON cannot hold",
                              step=step, path=path)
        return value
    if isinstance(value, dict):
        out: dict[str, JSON] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise OutputError(f"output{path} has a key {key!r} that is not a string",
                                  step=step, path=path)
            out[key] = _convert(item, f"{path}.{key}", step)
        return out
    if isinstance(value, list | tuple):
        return [_convert(item, f"{path}[{i}]", step) for i, item in enumerate(value)]
    where = f"output{path}" if path else "output"
    raise OutputError(f"{where} is a {type(value).__name__}, which is not JSON "
                      f"(return dicts, lists, strings, numbers, booleans or None)",
                      step=step, path=path)
