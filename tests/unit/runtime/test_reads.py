"""What a worker reads of a run for one attempt (``runtime.reads``): the parents, the
steps its templates name, the steps its function's parameters are named after; every
ancestor when a template reads ``steps`` in a way that names no step, or when a
fallback function is imported only when it runs.  And which values are small enough
to travel in a ticket."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plait.core.validate import CheckedWorkflow
from plait.definitions import check_definition
from plait.runtime.reads import INLINE_BYTES, is_small, step_reads


def _take_a(a: object) -> object:
    return a


def _checked(last: dict[str, object]) -> CheckedWorkflow:
    """a -> b -> c -> last (each after the one before), and d beside them."""
    return check_definition({"name": "reads", "steps": [
        {"id": "a", "type": "transform", "value": 1},
        {"id": "b", "type": "transform", "value": 1, "depends_on": ["a"]},
        {"id": "c", "type": "transform", "value": 1, "depends_on": ["b"]},
        {"id": "d", "type": "transform", "value": 1},
        {"id": "last", "depends_on": ["c"], **last}]})


def _ids(checked: CheckedWorkflow) -> list[str]:
    at = checked.graph.index["last"]
    return [checked.graph.ids[p] for p in step_reads(checked, at)]


def test_a_step_without_templates_reads_its_parents_only() -> None:
    assert _ids(_checked({"type": "transform", "value": 1})) == ["c"]


def test_a_template_naming_a_step_reads_it() -> None:
    checked = _checked({"type": "transform", "value": 1, "when": "{{ steps.a.output and steps['b'].status }}"})
    assert _ids(checked) == ["a", "b", "c"]


@pytest.mark.parametrize("template", [
    "{% for k in ['a'] %}{{ steps[k].output }}{% endfor %}",
    "{{ steps | length }}",
    "{% set s = steps %}{{ s.a }}",
    "{{ steps.c.output }}{{ steps[input.which] }}",
])
def test_a_template_reading_steps_without_naming_them_reads_every_ancestor(
        template: str) -> None:
    assert _ids(_checked({"type": "transform", "value": 1, "when": template})) == ["a", "b", "c"]


def test_a_python_step_reads_the_steps_its_parameters_are_named_after() -> None:
    checked = _checked({"type": "python", "call": f"{__name__}:_take_a"})
    assert _ids(checked) == ["a", "c"]


def test_a_fallback_named_by_module_reads_every_ancestor() -> None:
    checked = _checked({"type": "python", "call": f"{__name__}:_take_a",
                        "fallback": {"call": f"{__name__}:_take_a"}})
    assert _ids(checked) == ["a", "b", "c"]


def test_a_map_item_reads_what_its_templates_name() -> None:
    checked = _checked({"type": "map", "over": "{{ [1, 2] }}",
                        "step": {"type": "transform", "value": "{{ steps.b.output }}"}})
    assert _ids(checked) == ["b", "c"]


def test_sizes_near_the_bound() -> None:
    assert is_small(None) and is_small({"a": [1, 2.5, True, "x"]})
    assert is_small("x" * (INLINE_BYTES - 10))
    assert not is_small("x" * (INLINE_BYTES + 1))
    assert not is_small({"k": ["y" * 100] * 100})
    assert not is_small([[[[[]]]]] * INLINE_BYTES)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=50),
                    lambda inner: st.lists(inner, max_size=5)
                    | st.dictionaries(st.text(max_size=10), inner, max_size=5),
                    max_leaves=60))
def test_a_small_value_is_small_as_json_too(value: object) -> None:
    import json
    if is_small(value):  # type: ignore[arg-type]
        assert len(json.dumps(value)) <= 2 * INLINE_BYTES
