"""The key of a run, rendered from its input (plait.core.concurrency_key), and how many
runs of one key may run at once."""

from __future__ import annotations

import pytest

from plait.core.concurrency_key import (
    MAX_KEY_LENGTH,
    render_key,
    runs_per_key,
)
from plait.core.expressions import RenderError

from .helpers import load, t, wf


@pytest.mark.parametrize(("template", "input", "key"), [
    ("{{ input.customer }}", {"customer": "acme"}, "acme"),
    ("tenant-{{ input.customer | lower }}", {"customer": "ACME"}, "tenant-acme"),
    ("{{ input.shard }}", {"shard": 7}, "7"),
    ("{{ input.vip }}", {"vip": False}, "false"),
    ("{{ input.who }}", {"who": {"b": 1, "a": [2, "x"]}}, '{"a":[2,"x"],"b":1}'),
    ("{{ input['region'] ~ '/' ~ input.customer }}", {"region": "eu", "customer": "c"},
     "eu/c"),
    ("one-for-all", {"anything": 1}, "one-for-all"),
])
def test_the_key_rendered_from_the_input(template: str, input: dict[str, object],
                                         key: str) -> None:
    assert render_key(template, input) == key


def test_an_input_field_that_is_missing_fails_naming_it() -> None:
    with pytest.raises(RenderError, match="customer"):
        render_key("{{ input.customer }}", {"client": "acme"})


def test_a_key_that_renders_null_is_refused() -> None:
    with pytest.raises(RenderError, match="rendered null"):
        render_key("{{ input.customer }}", {"customer": None})


def test_a_key_past_the_length_bound_is_refused() -> None:
    assert render_key("{{ input.c }}", {"c": "x" * MAX_KEY_LENGTH}) == "x" * MAX_KEY_LENGTH
    with pytest.raises(RenderError, match=f"over {MAX_KEY_LENGTH}"):
        render_key("{{ input.c }}", {"c": "x" * (MAX_KEY_LENGTH + 1)})


def test_the_key_renders_in_the_sandbox() -> None:
    with pytest.raises(RenderError) as info:
        render_key("{{ input.__class__.__mro__ }}", {"c": 1})
    assert info.value.sandbox or "__class__" in str(info.value)


def test_runs_per_key_defaults_to_one_when_a_key_is_set() -> None:
    assert runs_per_key(load(wf(t("a"))).spec) is None
    assert runs_per_key(load(wf(t("a"), concurrency_key="{{ input.c }}")).spec) == 1
    assert runs_per_key(load(wf(t("a"), concurrency_key="{{ input.c }}",
                                max_runs_per_key=5)).spec) == 5
