"""Sandboxed expressions (SPEC 4)."""

from __future__ import annotations

from typing import Any

import pytest

from plait.core.expressions import (
    RenderError,
    is_template,
    render,
    render_value,
    syntax_problem,
    templates_in,
    truthy,
)


@pytest.fixture
def ctx() -> dict[str, Any]:
    return {"input": {"n": 3, "nums": [1, 2], "name": "ada", "flag": False,
                      "cfg": {"a": {"b": 1}}},
            "state": {"intent": "refund"},
            "steps": {"fetch": {"output": {"rows": [1, 2, 3]}, "status": "completed"}},
            "run": {"id": "r1"}}


@pytest.mark.parametrize(("template", "value"), [
    ("{{ input.n }}", 3),
    ("{{ input.nums }}", [1, 2]),
    ("{{ input.cfg }}", {"a": {"b": 1}}),
    ("{{ input.flag }}", False),
    ("{{ input.n > 2 }}", True),
    ("{{ state.intent == 'refund' }}", True),
    ("{{ none }}", None),
    ("{{ 1.5 }}", 1.5),
    ("  {{ input.nums }}\n", [1, 2]),
    ("{{ steps.fetch.output.rows | length }}", 3),
    ("{{ {'k': [input.n]} }}", {"k": [3]}),
])
def test_a_lone_expression_yields_the_native_value(ctx: dict[str, Any], template: str,
                                                   value: object) -> None:
    result = render(template, ctx)
    assert result == value
    assert type(result) is type(value)


@pytest.mark.parametrize(("template", "text"), [
    ("n={{ input.n }}", "n=3"),
    ("{{ input.n }}{{ input.n }}", "33"),
    ("{{ input.n }} and {{ input.flag }}", "3 and False"),
    ("{% for i in input.nums %}{{ i }},{% endfor %}", "1,2,"),
    ("{{ input.nums }}!", "[1, 2]!"),
])
def test_anything_else_renders_to_text(ctx: dict[str, Any], template: str,
                                       text: str) -> None:
    assert render(template, ctx) == text


def test_strings_without_templates_are_literals(ctx: dict[str, Any]) -> None:
    assert not is_template("plain { braces }")
    assert render_value("plain { braces }", ctx) == "plain { braces }"
    assert render_value({"a": [1, "x", None, True]}, ctx) == {"a": [1, "x", None, True]}


@pytest.mark.parametrize("template", [
    "{{ missing }}", "{{ input.nope }}", "hello {{ missing }}", "{{ state.nothing }}",
    "{{ steps.other.output }}", "{{ missing.attr }}", "{% if missing %}x{% endif %}",
])
def test_undefined_names_are_errors(ctx: dict[str, Any], template: str) -> None:
    with pytest.raises(RenderError) as info:
        render(template, ctx)
    assert info.value.sandbox is False
    assert "undefined" in str(info.value) or "has no attribute" in str(info.value)


@pytest.mark.parametrize("template", [
    "{{ input.__class__ }}",
    "{{ ''.__class__.__mro__ }}",
    "{{ input.nums.__len__() }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ input.__init__ }}",
    "{{ input.nums.append(3) }}",
    "{{ input.cfg.clear() }}",
])
def test_sandbox_refuses_dunder_access_and_mutation(ctx: dict[str, Any],
                                                   template: str) -> None:
    with pytest.raises(RenderError) as info:
        render(template, ctx)
    assert info.value.sandbox is True
    assert "sandbox" in str(info.value)
    assert ctx["input"]["nums"] == [1, 2] and ctx["input"]["cfg"] == {"a": {"b": 1}}


@pytest.mark.parametrize("template", [
    "{{ 'a' * 100000000 }}",
    "{{ [0] * 100000000 }}",
    "{{ 100000000 * 'a' }}",
    "{{ range(1000000000) | list | length }}",
    "{% for i in range(100000000) %}{% endfor %}",
    "{{ 10 ** 100000 }}",
])
def test_sandbox_refuses_huge_values(ctx: dict[str, Any], template: str) -> None:
    with pytest.raises(RenderError) as info:
        render(template, ctx)
    assert info.value.sandbox is True


def test_small_multiplication_and_ranges_still_work(ctx: dict[str, Any]) -> None:
    assert render("{{ 'ab' * 3 }}", ctx) == "ababab"
    assert render("{{ range(5) | list }}", ctx) == [0, 1, 2, 3, 4]
    assert render("{{ 2 ** 10 }}", ctx) == 1024
    assert render("{{ input.n * 4 }}", ctx) == 12


def test_huge_rendered_text_is_refused(ctx: dict[str, Any]) -> None:
    with pytest.raises(RenderError):
        render("{% for i in range(100000) %}" + "x" * 20 + "{% endfor %}", ctx)


def test_no_file_or_environment_access(ctx: dict[str, Any]) -> None:
    for template in ("{% include '/etc/passwd' %}", "{% import 'os' as os %}",
                     "{{ self.__init__ }}"):
        with pytest.raises(RenderError):
            render(template, ctx)


def test_outputs_are_data_and_never_rendered_again() -> None:
    context = {"steps": {"a": {"output": "{{ 7*7 }}", "status": "completed"}},
               "input": {"t": "{% for i in range(3) %}x{% endfor %}"}}
    assert render("{{ steps.a.output }}", context) == "{{ 7*7 }}"
    assert render("value: {{ steps.a.output }}", context) == "value: {{ 7*7 }}"
    assert render_value({"v": ["{{ input.t }}"]}, context) == {
        "v": ["{% for i in range(3) %}x{% endfor %}"]}


def test_render_value_error_carries_the_key_path(ctx: dict[str, Any]) -> None:
    with pytest.raises(RenderError) as info:
        render_value({"a": ["ok", {"b": "{{ missing }}"}]}, ctx)
    assert getattr(info.value, "path", None) == ".a[1].b"
    assert "missing" in str(info.value)


def test_templates_in_lists_every_template_with_its_path() -> None:
    value = {"a": "{{ x }}", "b": ["plain", "{% if y %}1{% endif %}"], "c": {"d": 1}}
    assert dict(templates_in(value)) == {".a": "{{ x }}", ".b[1]": "{% if y %}1{% endif %}"}
    assert list(templates_in("{{ x }}")) == [("", "{{ x }}")]


def test_syntax_problem_reports_line_and_column() -> None:
    assert syntax_problem("{{ ok }}") is None
    first = syntax_problem("{{ a + }}")
    assert first is not None and (first.line, first.column) == (1, 8)  # at the `}}`
    second = syntax_problem("line1\n  xx {{ a + }}")
    assert second is not None and (second.line, second.column) == (2, 13)
    assert "end of print statement" in second.message
    third = syntax_problem("a\nb\n{% for x in %}")
    assert third is not None and third.line == 3


def test_syntax_errors_at_render_time_are_render_errors(ctx: dict[str, Any]) -> None:
    with pytest.raises(RenderError) as info:
        render("{{ a + }}", ctx)
    assert "syntax error" in str(info.value)


@pytest.mark.parametrize(("value", "expected"), [
    (True, True), (False, False), (None, False), (0, False), (1, True), ([], False),
    ([0], True), ({}, False), ("", False), ("false", False), ("False ", False),
    ("no", False), ("0", False), ("none", False), ("null", False), ("yes", True),
    ("true", True), ("anything", True),
])
def test_truthy(value: object, expected: bool) -> None:
    assert truthy(value) is expected  # type: ignore[arg-type]
