"""Fuzzing the definition loader (hypothesis): whatever a definition holds, loading it
either gives a workflow or raises DefinitionError listing the problems; nothing else
escapes (no RecursionError, UnicodeEncodeError, TypeError...).  Crashes found are kept
below as named regression tests."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait import DefinitionError, Workflow

VALID: dict[str, Any] = {
    "name": "fuzz", "description": "d", "concurrency": 4, "on_failure": "continue",
    "timeout": "5m", "input": {"type": "object"},
    "defaults": {"retry": {"max_retries": 1, "initial_delay": "1s"}, "timeout": 10},
    "limits": {"max_steps": 100, "max_output_bytes": "1MiB"},
    "schedules": [{"cron": "*/5 * * * *", "timezone": "Europe/Paris", "catch_up": "all",
                   "input": {"c": 1}}, {"cron": "@daily", "input": {"c": "x"}}],
    "concurrency_key": "{{ input.c }}", "max_runs_per_key": 2,
    "steps": [
        {"id": "a", "type": "python", "call": "json:dumps", "with": {"obj": "{{ input }}"},
         "outputs": ["x"]},
        {"id": "b", "type": "transform", "value": {"v": "{{ steps.a.output }}"},
         "depends_on": ["a"], "when": "{{ state.x }}", "trigger": "all_done"},
        {"id": "c", "type": "condition", "if": "{{ true }}", "then": ["d"],
         "depends_on": ["b"]},
        {"id": "d", "type": "delay", "duration": "1s",
         "fallback": {"output": 1}, "retry": {"max_retries": 0}},
    ],
}


def loads_or_refuses(data: object) -> None:
    try:
        wf = Workflow.from_dict(data)
    except DefinitionError:
        return
    wf.to_dict()  # what is accepted can be stored and fingerprinted
    _ = wf.validate().fingerprint


scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6)
           | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
           | st.dates() | st.binary(max_size=3) | st.sampled_from(
               ["a", "b", "python", "transform", "{{", "{{ x }}", "1s", "-1", "json:dumps"]))
structures = st.recursive(
    scalars, lambda kids: st.lists(kids, max_size=3)
    | st.dictionaries(st.text(max_size=4) | st.integers() | st.sampled_from(
        ["id", "type", "steps", "name", "value", "retry", "limits", "with"]), kids,
        max_size=4), max_leaves=10)


def mutate(data: Any, path: list[str | int], new: Any) -> Any:
    """``data`` with the value at ``path`` (as far as it leads) replaced by ``new``."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(data, dict) and data:
        keys = list(data)
        key = keys[hash(head) % len(keys)] if not isinstance(head, str) or head not in data \
            else head
        return {**data, key: mutate(data[key], rest, new)}
    if isinstance(data, list) and data:
        i = int(hash(head)) % len(data)
        return [*data[:i], mutate(data[i], rest, new), *data[i + 1:]]
    return new


SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(structures)
def test_any_structure_loads_or_raises_definition_error(data: object) -> None:
    loads_or_refuses(data)
    loads_or_refuses({"name": "fuzz", "steps": [data]})


@SETTINGS
@given(st.lists(st.text(max_size=6) | st.integers(0, 9), max_size=4), structures)
def test_a_mutated_valid_definition_loads_or_raises_definition_error(
        path: list[str | int], new: object) -> None:
    loads_or_refuses(mutate(VALID, path, new))


@SETTINGS
@given(st.text(max_size=30) | st.sampled_from(["*/5 * * * *", "@daily", "0 0 * * MON"]),
       st.text(max_size=30) | st.sampled_from(["UTC", "Europe/Paris", "/etc/passwd",
                                              "../UTC", "Europe/Paris\x00"]))
def test_any_cron_and_time_zone_load_or_raise_definition_error(cron: str, zone: str) -> None:
    loads_or_refuses({**VALID, "schedules": [{"cron": cron, "timezone": zone}]})


@SETTINGS
@given(st.text(max_size=200) | st.builds(
    lambda text, cut, insert: text[:cut] + insert + text[cut:],
    st.just(yaml.safe_dump(VALID)), st.integers(0, 600),
    st.sampled_from(["[", "{", ": ", "\n  - ", "&a ", "*a", "!!python/object ", "\t",
                     "? ", "'", '"\\ud800"', "2020-01-01", ".nan", "0x1F", "~"])))
def test_yaml_text_loads_or_raises_definition_error(text: str) -> None:
    try:
        Workflow.from_yaml(text)
    except DefinitionError:
        pass


# ------------------------------------------------------------------ regressions


def problems(data: object) -> list[str]:
    with pytest.raises(DefinitionError) as excinfo:
        Workflow.from_dict(data)
    return [str(p) for p in excinfo.value.problems]


def test_a_lone_surrogate_in_a_definition_is_a_problem() -> None:
    found = problems({"name": "s", "description": "x\ud800",
                      "steps": [{"id": "a", "type": "transform", "value": "\udfff"}]})
    assert sorted(found) == [
        "description: value has a string with a lone surrogate '\\ud800' at position 1, "
        "which is not valid Unicode (UTF-8 cannot encode it)",
        "steps[0].value: value has a string with a lone surrogate '\\udfff' at position "
        "0, which is not valid Unicode (UTF-8 cannot encode it)"]


def test_a_yaml_date_nan_and_int_key_are_problems() -> None:
    with pytest.raises(DefinitionError) as excinfo:
        Workflow.from_yaml("name: d\nsteps:\n  - {id: a, type: transform, value: 2020-01-01,"
                           " timeout: .nan, with: {1: x}}\n")
    found = {p.location: p for p in excinfo.value.problems}
    assert found["steps[0].value"].hint == "YAML reads an unquoted date as a date: quote it"
    assert found["steps[0].timeout"].message == "value is nan, which JSON cannot hold"
    assert "int key 1" in found["steps[0].with"].message


@pytest.mark.parametrize("levels", [300, 100_000])
def test_a_deeply_nested_definition_is_a_problem_not_a_recursion_error(levels: int) -> None:
    text = json.dumps({"name": "deep", "steps": [{"id": "a", "type": "transform",
                                                  "value": "PLACEHOLDER"}]})
    deep = text.replace('"PLACEHOLDER"', "[" * levels + "]" * levels)
    for load in (lambda: Workflow.from_yaml(deep), lambda: Workflow.from_dict(
            json.loads(deep)) if levels < 900 else Workflow.from_yaml(deep)):
        with pytest.raises(DefinitionError, match="more than 256 levels|too deeply"):
            load()


def test_a_yaml_complex_key_is_a_problem_not_a_type_error() -> None:
    with pytest.raises(DefinitionError, match="a key must be a string, not a dict"):
        Workflow.from_yaml("? {concurrency: 4}\n: 1\nname: x\nsteps: []\n")
    with pytest.raises(DefinitionError, match="a key must be a string, not a list"):
        Workflow.from_yaml("name: x\nsteps:\n  - {id: a, type: transform, value: {[1]: 2}}\n")
