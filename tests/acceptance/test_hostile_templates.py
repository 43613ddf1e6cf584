"""Hostile templates: nested 80 or thousands of levels deep (brackets, calls, blocks,
filter chains, operator chains, prefix operators), wherever a template is compiled.
Each is refused past 50 levels with a located problem, never a RecursionError, in
validation, on the command line and in a run (docs/limits.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hostile import located, transform, validate_and_run, write_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait import Workflow
from plait.core import expressions
from plait.core.template_depth import MAX_NESTING, TooDeep
from plait.core.templates import compile_template, render

DEEP = "template nested deeper than 50 levels"


def nested(kind: str, n: int) -> str:
    """A template of ``kind`` nested ``n`` levels deep."""
    shapes = {
        "parens": ("{{ " + "(" * n + "1" + ")" * n + " }}"),
        "lists": ("{{ " + "[" * n + "1" + "]" * n + " }}"),
        "dicts": ("{{ " + "{'a': " * n + "1" + "}" * n + " }}"),
        "calls": ("{{ " + "range(" * n + "1" + ")" * n + " }}"),
        "text": ("x {{ " + "(" * n + "1" + ")" * n + " }} y"),
        "ifs": ("{% if true %}" * n + "x" + "{% endif %}" * n),
        "sets": ("{% set v %}" * n + "x" + "{% endset %}" * n),
        "filters": ("{{ 1" + " | abs" * n + " }}"),
        "sums": ("{{ 1" + " + 1" * n + " }}"),
        "ands": ("{{ true" + " and true" * n + " }}"),
        "lookups": ("{{ input" + ".a" * n + " }}"),
        "nots": ("{{ " + "not " * n + "true }}"),
        "signs": ("{{ " + "- " * n + "1 }}"),
        "conditions": ("{{ " + "1 if true else " * n + "1 }}"),
    }
    return shapes[kind]


KINDS = ["parens", "lists", "dicts", "calls", "text", "ifs", "sets", "filters", "sums",
         "ands", "lookups", "nots", "signs", "conditions"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_deep_template_is_a_located_problem(kind: str) -> None:
    for n in (80, 1000):
        located(transform(nested(kind, n)), "steps[0].value", DEEP)


@pytest.mark.parametrize("kind", ["parens", "lists", "calls", "ifs", "sets", "filters",
                                  "sums", "nots"])
def test_fifty_levels_are_accepted(kind: str) -> None:
    assert expressions.syntax_problem(nested(kind, MAX_NESTING - 1)) is None


def test_long_flat_templates_are_not_deep() -> None:
    items = ", ".join(f"-{i}" for i in range(200))
    assert render("{{ [" + items + "] | length }}", {}) == 200
    pairs = ", ".join(f"'k{i}': not {i}" for i in range(200))
    assert render("{{ {" + pairs + "} | length }}", {}) == 200
    assert render("{{ 'a'" + " ~ 'b'" * 500 + " }}", {}) == "a" + "b" * 500
    text = "".join(f"{{% if x{i} %}}{i}{{% endif %}}" for i in range(500))
    assert render(text, {f"x{i}": i % 2 == 1 for i in range(500)}) == "".join(
        str(i) for i in range(1, 500, 2))


def test_fifty_nested_brackets_render() -> None:
    value = render(nested("lists", 50), {})
    for _ in range(50):
        assert isinstance(value, list)
        value = value[0]
    assert value == 1
    assert render(nested("ifs", 50), {}) == "x"


def test_every_place_a_template_is_checked() -> None:
    deep = nested("parens", 80)
    step: dict[str, Any] = {"id": "a", "type": "transform", "value": 1}
    cases = [
        ({**step, "when": deep}, "steps[0].when"),
        ({**step, "value": {"k": [deep]}}, "steps[0].value.k[0]"),
        ({**step, "cache": {"key": deep, "ttl": "1h"}}, "steps[0].cache.key"),
        ({"id": "a", "type": "python", "call": "json:dumps", "fallback": {"output": deep}},
         "steps[0].fallback.output"),
        ({"id": "a", "type": "map", "over": [1], "step": {"type": "transform",
                                                          "value": deep}},
         "steps[0].step.value"),
    ]
    for body, where in cases:
        located({"name": "t", "steps": [body]}, where, DEEP)
    located({"name": "t", "output": deep, "steps": [step]}, "output", DEEP)
    located({"name": "t", "concurrency_key": deep, "steps": [step]}, "concurrency_key",
            DEEP)


def test_too_many_nested_loops_for_python_are_refused_the_same_way() -> None:
    loops = "{% for x in [1] %}" * 25 + "x" + "{% endfor %}" * 25
    problem = located(transform(loops), "steps[0].value")
    assert problem.message.startswith("template nested too deeply to compile")


def test_a_run_never_meets_a_recursion_error() -> None:
    with pytest.raises(expressions.RenderError, match=DEEP):
        render(nested("parens", 500), {})
    with pytest.raises(TooDeep):
        compile_template(nested("filters", 5000))


def test_a_caller_deep_in_its_stack_gets_the_same_refusal() -> None:
    template = nested("calls", 49) + " "  # not in the cache yet

    def descend(depth: int) -> object:
        if depth:
            return descend(depth - 1)
        try:
            return compile_template(template)
        except TooDeep as exc:
            return exc

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        outcome = descend(300)
    finally:
        sys.setrecursionlimit(limit)
    assert isinstance(outcome, TooDeep), outcome


def test_validate_and_run_name_the_field(tmp_path: Path) -> None:
    for kind in ("parens", "lists", "ifs", "filters"):
        file = write_json(tmp_path, "flow.json", transform(nested(kind, 80)))
        validate_and_run(file, f"steps[0].value: {DEEP}")


def test_a_template_rendered_from_data_is_not_compiled() -> None:
    wf = Workflow.from_dict(transform("{{ input.t }}"))
    result = wf.run({"t": nested("parens", 5000)}, db="memory://")
    assert result.status == "completed"
    assert result.steps["a"].output == nested("parens", 5000)


def test_no_traceback_from_the_real_command(plait: Any, tmp_path: Path) -> None:
    file = write_json(tmp_path, "flow.json", transform(nested("parens", 80)))
    done = plait("validate", "--no-import", str(file))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"steps[0].value: {DEEP}" in done.stderr


pieces = st.sampled_from(["(", "[", "{'k': ", "range(", "not ", "- ", "x | abs",
                          "1 + ", "a.b", "1 if x else ", "{% if x %}", "{% for i in y %}",
                          "{% set s %}", ")", "]", "}", "{% endif %}", "{% endfor %}",
                          "{% endset %}", " ", "1"])


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pieces, max_size=40), st.integers(1, 120), st.booleans())
def test_any_nesting_compiles_or_is_refused(body: list[str], repeat: int,
                                            lone: bool) -> None:
    text = "".join(body) * repeat
    template = "{{ " + text + " }}" if lone else "a {{ x }} " + text
    problem = expressions.syntax_problem(template)  # never a RecursionError
    if problem is None:
        compile_template(template)


def test_the_readme_promises_what_holds() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    assert "(no recursion limit)" not in readme
    assert "templates at most 50" in " ".join(readme.split())
    with pytest.raises(TooDeep):
        compile_template(nested("ands", MAX_NESTING + 1))
