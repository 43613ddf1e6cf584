"""The memory store's own copies of JSON values: what a persistent store would give
back, without the cost of a round trip through JSON text when the value is plain."""

from __future__ import annotations

import json
from typing import Any, cast

from ..core.model import JSON
from ..errors import UnstorableValue

_ENCODE = json.JSONEncoder(allow_nan=False).encode
# an int of fewer bits has fewer than 4,300 digits: JSON text carries it back
_INT_BOUND = 1 << 14_283
_MAX_DEPTH = 256


class _NotPlain(Exception):
    """A value ``plain_copy`` does not take: the JSON codec converts or refuses it."""


def plain_copy(value: Any, depth: int = 0) -> Any:
    """A deep copy of plain JSON (dicts with str keys, lists, str, bounded int, finite
    float, bool, None), equal to a round trip through JSON text at a fraction of its
    cost; _NotPlain for anything else (tuples, subclasses, NaN, huge ints, deep nesting),
    which the caller sends through the codec instead."""
    kind = type(value)
    if kind is dict:
        if depth >= _MAX_DEPTH:
            raise _NotPlain
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            kind = type(item)
            if kind is str or kind is bool or item is None or (
                    kind is int and -_INT_BOUND < item < _INT_BOUND):
                out[key] = item
            else:
                out[key] = plain_copy(item, depth + 1)
        return out
    if kind is list:
        if depth >= _MAX_DEPTH:
            raise _NotPlain
        return [plain_copy(item, depth + 1) for item in value]
    if kind is str or kind is bool or value is None:
        return value
    if kind is int and -_INT_BOUND < value < _INT_BOUND:
        return value
    if kind is float and value - value == 0.0:  # not NaN, not infinite
        return value
    raise _NotPlain


def owned_output(value: JSON, run_id: str, step: str) -> JSON:
    """The store's own copy of a step's output, as JSON text would give it back:
    UnstorableValue (as the SQLite store) when it is not JSON (the run loop checks outputs
    first: this is the second line)."""
    try:
        return cast(JSON, plain_copy(value))
    except _NotPlain:
        pass
    try:
        text = _ENCODE(value)
    except (TypeError, ValueError) as exc:
        raise UnstorableValue(f"run {run_id!r}, step {step!r}: the output to store is not "
                         f"JSON ({exc})") from exc
    return cast(JSON, json.loads(text))


def copy_json(value: Any) -> Any:
    """A deep copy, what a persistent store would give back (JSON text's round trip)."""
    try:
        return plain_copy(value)
    except _NotPlain:
        return json.loads(json.dumps(value))


def owned_json(value: Any, what: str) -> Any:
    """The store's own copy of any JSON value it keeps (``what`` names it in the
    StoreError raised when it is not JSON)."""
    try:
        return plain_copy(value)
    except _NotPlain:
        pass
    try:
        text = _ENCODE(value)
    except (TypeError, ValueError) as exc:
        raise UnstorableValue(f"{what} is not JSON ({exc})") from exc
    return json.loads(text)
