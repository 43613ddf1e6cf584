"""The JSON form of an attempt's error: one codec (``ErrorInfo.to_json``/``from_json``),
its stored shape unchanged so that stored outcomes read back."""

from __future__ import annotations

import json

from plait.core.retry import ErrorInfo
from plait.store.base import reaped_error

FULL = ErrorInfo(type="Boom", message="it broke", names=("Boom", "StepError"),
                 retryable=False, retry_after=2.5, traceback="Traceback ...")


def test_the_stored_shape_is_the_one_stores_hold() -> None:
    assert json.dumps(FULL.to_json()) == (
        '{"type": "Boom", "message": "it broke", "names": ["Boom", "StepError"], '
        '"retryable": false, "retry_after": 2.5, "traceback": "Traceback ..."}')
    assert FULL.to_json(refused=True) == {**FULL.to_json(), "refused": True}


def test_an_error_reads_back_as_it_was_written() -> None:
    assert ErrorInfo.from_json(json.loads(json.dumps(FULL.to_json()))) == FULL
    assert ErrorInfo.from_json(FULL.to_json(refused=True)) == FULL


def test_a_partial_or_odd_error_takes_the_defaults() -> None:
    reaped = ErrorInfo.from_json(reaped_error("w1", "a", 1))
    assert (reaped.type, reaped.names, reaped.retryable, reaped.retry_after) == \
        ("LeaseExpired", (), True, None)
    assert ErrorInfo.from_json(None) == ErrorInfo(type="Error", message="")
    odd = ErrorInfo.from_json({"type": 3, "names": "x", "retry_after": float("inf"),
                               "retryable": 0, "traceback": 7})
    assert odd == ErrorInfo(type="3", message="", retryable=True)
