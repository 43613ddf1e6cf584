"""What an attempt produces is storable when it is built: its log records, its notes
and its error info (``context.log_record``, ``context.note_data``,
``runner.error_info``); and a worker stops heartbeating a lease whose outcome it could
not store for longer than a lease (``Completions.to_extend``)."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import pytest

from plait.errors import StepError
from plait.runtime.completions import Completions
from plait.runtime.runner import error_info, finite_seconds
from plait.steps.context import MAX_NOTE_BYTES, log_record, note_data
from plait.store import MemoryStore


def storable(value: Any) -> None:
    json.dumps(value, allow_nan=False).encode("utf-8")


def test_a_log_record_with_a_lone_surrogate_is_cleaned_and_says_so() -> None:
    record = log_record(1, logging.INFO, "processing report-\udcff.csv")
    assert record["message"] == "processing report-\ufffd.csv"
    assert record["cleaned"] == "lone surrogates replaced by U+FFFD"
    storable(record)
    plain = log_record(1, logging.INFO, "processing é")
    assert plain["message"] == "processing é" and "cleaned" not in plain


def test_a_note_is_cleaned_then_redacted() -> None:
    note = note_data({"usage": {"tokens": math.nan, "model": "m-\udcff-SECRET"}},
                     lambda text: None if text is None else text.replace("SECRET", "***"))
    assert note == {"usage": {"tokens": None, "model": "m-\ufffd-***", "cleaned":
                              "NaN and infinities dropped (stored as null); lone "
                              "surrogates replaced by U+FFFD"}}
    big = note_data({"emit": "x" * MAX_NOTE_BYTES}, lambda text: text)
    assert list(big) == ["note"] and "not kept" in str(big["note"])


class MyError(Exception):
    def __init__(self, data: object, retry_after: object) -> None:
        super().__init__(data, retry_after)
        self.data, self.retry_after = data, retry_after


class Unprintable(StepError):
    @property
    def retryable(self) -> bool:  # type: ignore[override]
        raise RuntimeError("no")

    def __str__(self) -> str:
        raise RuntimeError("no message")


@pytest.mark.parametrize(("retry_after", "kept"), [
    (math.nan, None), (math.inf, None), (-math.inf, None), (10 ** 400, None),
    (True, None), (b"5", None), ("5", None), (5, 5.0), (2.5, 2.5)])
def test_retry_after_is_kept_only_when_finite(retry_after: object,
                                              kept: float | None) -> None:
    assert finite_seconds(retry_after) == kept
    assert error_info(MyError("x", retry_after)).retry_after == kept


def test_an_error_carrying_bytes_and_infinity_is_storable() -> None:
    info = error_info(MyError(b"\xff", float("inf")))
    assert (info.type, info.message, info.retry_after) == ("MyError", "(b'\\xff', inf)",
                                                           None)
    storable([info.type, info.message, list(info.names), info.traceback])


def test_an_error_whose_message_and_flags_raise_is_still_described() -> None:
    info = error_info(Unprintable("x"))
    assert info.type == "Unprintable" and info.retryable is True
    assert "could not be made" in info.message


def test_an_error_message_with_a_lone_surrogate_is_cleaned() -> None:
    info = error_info(ValueError("cannot read report-\udcff.csv"))
    assert (info.type, info.message) == ("ValueError", "cannot read report-\ufffd.csv")
    storable([info.type, info.message, list(info.names), info.traceback])


def test_a_lease_whose_outcome_is_not_stored_is_heartbeated_one_lease_at_most() -> None:
    now = [100.0]
    leases = Completions(MemoryStore(), "w1", 10.0, clock=lambda: now[0])
    for token in ("t1", "t2"):
        leases.hold(token)
    assert sorted(leases.to_extend()) == ["t1", "t2"]
    leases._retry_later([("t1", None)])  # type: ignore[list-item]  # storing it failed
    now[0] += 10.0
    assert sorted(leases.to_extend()) == ["t1", "t2"]
    now[0] += 0.5
    assert leases.to_extend() == ["t2"]  # t1's lease is let expire
    assert leases.finished == [("t1", None)]  # (still tried, for three leases)
