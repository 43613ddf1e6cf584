"""The CLI's input parsing (``--input``, ``--input-file``, ``--data``): everything but a
JSON value every store can hold is a click usage error (exit 2) naming the option and
the problem.  A hypothesis fuzz pass checks that nothing else escapes."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.cli.inputs import parse_json_option, read_input


@pytest.mark.parametrize(("text", "words"), [
    ('{"s": "x\\ud800"}', "input.s has a string with a lone surrogate '\\ud800'"),
    ('{"k": ["\\udfff"]}', "input.k[0] has a string with a lone surrogate"),
    ('{"\\ud800": 1}', "has a key with a lone surrogate"),
    ("[" * 1000 + "]" * 1000, "more than 256 levels"),
    ("[" * 300 + "]" * 300, "more than 256 levels"),
    ('{"n": ' + "9" * 4301 + "}", "4,301 digits is over the 4,300-digit limit"),
    ('{"f": NaN}', "NaN is not a JSON value"),
    ('{"f": -Infinity}', "-Infinity is not a JSON value"),
    ('{"f": [1e999]}', "input.f[0] is inf, which JSON cannot hold"),
    ("nope", "not valid JSON: Expecting value (line 1, column 1)"),
    ('{"a": 1', "not valid JSON"),
])
def test_input_that_is_not_storable_json_is_a_usage_error(text: str, words: str) -> None:
    with pytest.raises(click.BadParameter) as excinfo:
        read_input(text, None)
    assert words in excinfo.value.message
    assert excinfo.value.param_hint == "--input"
    assert excinfo.value.exit_code == 2


def test_input_file_nested_1000_deep_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 1000 + "]" * 1000)
    with pytest.raises(click.BadParameter, match="more than 256 levels") as excinfo:
        read_input(None, str(path))
    assert excinfo.value.param_hint == "--input-file"


def test_data_option_names_itself() -> None:
    with pytest.raises(click.BadParameter, match=r"data\.s has a string") as excinfo:
        parse_json_option('{"s": "\\ud800"}', "--data")
    assert excinfo.value.param_hint == "--data"


def test_values_at_the_limits_are_accepted() -> None:
    deepest = "[" * 256 + "]" * 256
    assert read_input(deepest, None) == json.loads(deepest)
    assert read_input('{"n": ' + "9" * 4300 + "}", None) == {"n": int("9" * 4300)}
    assert read_input('{"s": "\\ud83d\\ude00"}', None) == {"s": "\U0001f600"}  # a pair


json_text = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(), kids, max_size=3),
    max_leaves=8).map(json.dumps)
pieces = st.sampled_from(['"\\ud800"', "[", "]", "{", "}", ":", ",", "NaN", "1e999",
                          "9" * 4400, '"\\u"', "\x00", "\ud800", "-", "0x10", "'a'"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(max_size=40) | st.builds(lambda text, cut, piece: text[:cut] + piece
                                         + text[cut:], json_text, st.integers(0, 40),
                                         pieces))
def test_any_text_parses_or_is_a_usage_error(text: str) -> None:
    try:
        value = read_input(text, None)
    except click.BadParameter as exc:
        assert exc.param_hint == "--input"
        return
    json.dumps(value, allow_nan=False).encode("utf-8")  # what is accepted is storable
