"""State reducers: append, extend, merge, sum, max, min, replace_last."""

from __future__ import annotations

import pytest

from plait.core.model import REDUCERS
from plait.core.reducers import reduce_value
from plait.errors import OutputError


def fold(reducer: str | None, *values: object) -> object:
    state = None
    for value in values:
        state = reduce_value(reducer, "key", state, value)  # type: ignore[arg-type]
    return state


def test_the_builtin_reducers_are_the_spec_list() -> None:
    assert set(REDUCERS) == {"append", "extend", "merge", "sum", "max", "min", "replace_last"}


@pytest.mark.parametrize(("reducer", "values", "expected"), [
    (None, (1, 2, 3), 3),
    ("append", ("a", ["b"], {"c": 1}), ["a", ["b"], {"c": 1}]),
    ("extend", ([1, 2], [], [3]), [1, 2, 3]),
    ("merge", ({"a": 1, "b": 1}, {"b": 2}, {"c": 3}), {"a": 1, "b": 2, "c": 3}),
    ("sum", (1, 2.5, -0.5), 3.0),
    ("sum", (2, 3), 5),
    ("max", (3, 7, 5), 7),
    ("min", (3, -7, 5), -7),
    ("replace_last", ("a", "b", "c"), ["c"]),
])
def test_reducer_folds(reducer: str | None, values: tuple[object, ...],
                       expected: object) -> None:
    assert fold(reducer, *values) == expected


def test_replace_last_replaces_only_the_last_item() -> None:
    assert reduce_value("replace_last", "k", [1, 2, 3], 9) == [1, 2, 9]


def test_reducers_do_not_mutate_the_old_value() -> None:
    old = [1]
    assert reduce_value("append", "k", old, 2) == [1, 2]
    assert old == [1]
    old_map = {"a": 1}
    reduce_value("merge", "k", old_map, {"b": 2})
    assert old_map == {"a": 1}


@pytest.mark.parametrize(("reducer", "old", "new"), [
    ("append", {"not": "a list"}, 1),
    ("extend", None, "not a list"),
    ("extend", 5, [1]),
    ("merge", None, [1]),
    ("merge", [1], {"a": 1}),
    ("sum", 1, "x"),
    ("sum", 1, True),
    ("max", None, "x"),
    ("min", "x", 1),
])
def test_reducer_type_errors_name_the_key(reducer: str, old: object, new: object) -> None:
    with pytest.raises(OutputError) as info:
        reduce_value(reducer, "messages", old, new)  # type: ignore[arg-type]
    assert "messages" in str(info.value)
    assert reducer in str(info.value)
    assert info.value.path == "messages"
