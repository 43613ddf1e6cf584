"""``jsoncheck.storable``: what a step leaves besides its output is made storable,
never refused, and says what was cleaned; plain JSON passes as it is, uncopied."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from plait.core.jsoncheck import MAX_NESTING, storable


class Thing:
    def __repr__(self) -> str:
        return "<thing>"


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no")


@pytest.mark.parametrize(("value", "stored", "said"), [
    ("a\udcffb", "a\ufffdb", "lone surrogates replaced by U+FFFD"),
    ({"k\ud800": ["\udfff"]}, {"k\ufffd": ["\ufffd"]}, "lone surrogates"),
    (math.nan, None, "NaN and infinities dropped (stored as null)"),
    ([math.inf, -math.inf, 1.5], [None, None, 1.5], "NaN and infinities dropped"),
    (b"\xff ok", "\ufffd ok", "bytes stored as text"),
    (bytearray(b"x"), "x", "bytes stored as text"),
    ({"t": (1, 2), "s": frozenset({3})}, {"t": [1, 2], "s": [3]}, None),
    ({1: "one", None: 2}, {"1": "one", "None": 2}, "keys that are not strings"),
    (10 ** 5000, "(an integer of 16,610 bits)", "integers of more than 4,300 digits"),
    (Thing(), "<thing>", "Thing objects stored as their repr"),
    (BadRepr(), "<BadRepr object (its repr failed)>", "BadRepr objects"),
], ids=["surrogate", "surrogate-key", "nan", "infinities", "bytes", "bytearray",
        "tuple-set", "keys", "big-int", "object", "bad-repr"])
def test_each_kind_of_value_is_made_storable(value: Any, stored: Any,
                                             said: str | None) -> None:
    out, cleaned = storable(value)
    assert out == stored
    json.dumps(out, allow_nan=False).encode("utf-8")  # storable: JSON, valid UTF-8
    if said is None:
        assert cleaned is None or "string" not in cleaned
    else:
        assert cleaned is not None and said in cleaned, cleaned


def test_plain_json_is_returned_as_given() -> None:
    value = {"a": [1, 2.5, "é", None, True], "b": {"c": "x"}}
    out, cleaned = storable(value)
    assert out is value and cleaned is None


def test_nesting_past_the_limit_is_cut() -> None:
    value: Any = 0
    for _ in range(MAX_NESTING + 5):
        value = [value]
    out, cleaned = storable(value)
    assert cleaned is not None and f"nesting past {MAX_NESTING} levels cut" in cleaned
    json.dumps(out)


def test_a_value_over_the_limit_becomes_its_size() -> None:
    out, cleaned = storable({"s": "x" * 5000}, max_bytes=1000)
    assert out == "(a value of 5,008 bytes of JSON, over 1,000, not kept)"
    assert cleaned is not None and "cut" in cleaned
    assert storable({"s": "x" * 10}, max_bytes=1000) == ({"s": "x" * 10}, None)
