"""Graph-level validation."""

from __future__ import annotations

import random
import re
import sys

import pytest

from plait.core.loader import parse_definition
from plait.core.validate import check

from .helpers import find, load, problems_of, t, wf


def cond(id: str, *deps: str, then: list[str] = [], else_: list[str] = [],  # noqa: B006
         if_: object = "{{ input.flag }}") -> dict[str, object]:
    step: dict[str, object] = {"id": id, "type": "condition", "if": if_, "then": then,
                               "else": else_}
    if deps:
        step["depends_on"] = list(deps)
    return step


# ---------------------------------------------------------------- cycles


def test_cycle_names_the_whole_path() -> None:
    problems = problems_of(wf(t("a", "c"), t("b", "a"), t("c", "b")))
    [cycle] = [p for p in problems if p.message.startswith("cycle:")]
    assert cycle.message == "cycle: a -> b -> c -> a"
    assert cycle.location == "steps"


def test_self_dependency_is_a_cycle() -> None:
    problems = problems_of(wf(t("a", "a")))
    assert any(p.message == "cycle: a -> a" for p in problems)


def test_cycle_through_a_condition_branch() -> None:
    problems = problems_of(wf(cond("c", "b", then=["b"]), t("b")))
    cycles = [p.message for p in problems if p.message.startswith("cycle:")]
    assert cycles and set(re.findall(r"\w+", cycles[0].removeprefix("cycle:"))) == {"b", "c"}


def test_cycle_path_is_closed_and_follows_dependencies() -> None:
    # x -> y -> z -> w -> y: the knot is y, z, w; x only leads into it
    problems = problems_of(wf(t("x"), t("y", "x", "w"), t("z", "y"), t("w", "z")))
    [cycle] = [p.message for p in problems if p.message.startswith("cycle:")]
    path = cycle.removeprefix("cycle: ").split(" -> ")
    assert path[0] == path[-1]
    assert set(path) == {"y", "z", "w"}
    depends = {"y": {"x", "w"}, "z": {"y"}, "w": {"z"}}
    for before, after in zip(path, path[1:]):
        assert before in depends[after]


# ---------------------------------------------------------------- unknown names


def test_unknown_step_in_depends_on_suggests() -> None:
    problem = find(problems_of(wf(t("fetch"), t("parse", "fetch", "fetc"))),
                   "steps[1].depends_on[1]")
    assert "unknown step 'fetc'" in problem.message
    assert problem.hint == "did you mean 'fetch'?"


def test_unknown_step_in_then_and_else_suggests() -> None:
    problems = problems_of(wf(t("fetch"), t("store"),
                              cond("c", then=["fetc"], else_=["stor", "fetch"])))
    assert find(problems, "steps[2].then[0]").hint == "did you mean 'fetch'?"
    assert find(problems, "steps[2].else[0]").hint == "did you mean 'store'?"
    assert not [p for p in problems if p.location == "steps[2].else[1]"]


def test_unknown_then_target_with_state_outputs_is_reported_not_crashing() -> None:
    # regression: the state-write check indexed then/else targets before they were known
    problems = problems_of(wf(t("a", outputs=["k"]), t("b", outputs=["k"]),
                              cond("c", then=["nope"])))
    assert find(problems, "steps[2].then[0]")


def test_unknown_step_in_a_template_suggests() -> None:
    problem = find(problems_of(wf(t("fetch"), t("b", "fetch",
                                                value="{{ steps.fetc.output }}"))),
                   "steps[1].value")
    assert "unknown step 'fetc'" in problem.message
    assert problem.hint == "did you mean 'fetch'?"


def test_template_location_names_the_key_path() -> None:
    problem = find(problems_of(wf(t("fetch"), t("b", "fetch", value={
        "items": ["ok", {"deep": "{{ steps.fecth.output }}"}]}))),
        "steps[1].value.items[1].deep")
    assert problem.hint == "did you mean 'fetch'?"


def test_unknown_step_in_when_and_in_item_syntax() -> None:
    problems = problems_of(wf(t("fetch"),
                              t("b", "fetch", when="{{ steps['fetsh'].status == 'x' }}")))
    assert find(problems, "steps[1].when").hint == "did you mean 'fetch'?"


def test_template_reading_a_non_ancestor_is_refused() -> None:
    problem = find(problems_of(wf(t("a"), t("b", value="{{ steps.a.output }}"))),
                   "steps[1].value")
    assert "not an ancestor" in problem.message
    assert "depends_on" in (problem.hint or "")


def test_template_reading_a_sibling_or_descendant_is_refused() -> None:
    problems = problems_of(wf(t("root"), t("left", "root"),
                              t("right", "root", value="{{ steps.left.output }}"),
                              t("top", value="{{ steps.root.output }}")))
    assert "not an ancestor" in find(problems, "steps[2].value").message
    assert "not an ancestor" in find(problems, "steps[3].value").message


def test_template_reading_a_distant_ancestor_is_fine() -> None:
    load(wf(t("a"), t("b", "a"), t("c", "b"), t("d", "c", value="{{ steps.a.output }}")))


def test_a_step_read_by_every_step_of_a_long_chain_is_checked_once_per_reader() -> None:
    n = 20_000  # one search of the whole chain per reader would take minutes
    steps = [t("s0"), t("lone")] + [
        t(f"s{i}", f"s{i - 1}", value="{{ steps.s0.output }}") for i in range(1, n)]
    steps.append(t("last", f"s{n - 1}", value="{{ steps.s0.output + steps.lone.output }}"))
    problems = problems_of(wf(*steps, limits={"max_depth": n + 1}))
    assert [p.location for p in problems] == [f"steps[{n + 1}].value"]
    assert "steps.lone, which is not an ancestor of 'last'" in problems[0].message


def test_ancestry_answers_as_the_graph_does() -> None:
    from plait.core.validate import _Ancestry

    rng = random.Random(3)
    for _ in range(30):
        n = rng.randrange(2, 40)
        steps = [t(f"s{i}", *sorted({f"s{rng.randrange(i)}" for _ in range(rng.randrange(3))}))
                 if i else t("s0") for i in range(n)]
        graph = load(wf(*steps)).graph
        ancestry = _Ancestry(graph)
        for _ in range(400):
            a, b = rng.randrange(n), rng.randrange(n)
            assert ancestry.is_ancestor(a, b) == graph.is_ancestor(a, b)


def test_template_syntax_error_has_line_and_column() -> None:
    problem = find(problems_of(wf(t("a", value="line one\n  xx {{ input.a + }}"))),
                   "steps[0].value")
    assert "syntax error at line 2, column 19" in problem.message  # the `}}` after `+`


def test_lexer_error_column_points_inside_the_tag() -> None:
    problem = find(problems_of(wf(t("a", value="{{ 'unclosed }}"))), "steps[0].value")
    assert "line 1, column 4" in problem.message


def test_syntax_error_in_when_and_output() -> None:
    problems = problems_of(wf(t("a", when="{% if %}"), output="{{ steps.a.output ) }}"))
    assert "syntax error at line 1" in find(problems, "steps[0].when").message
    assert "syntax error" in find(problems, "output").message


# ---------------------------------------------------------------- shared state


def test_parallel_writers_without_reducer_are_refused() -> None:
    problem = find(problems_of(wf(t("a", outputs=["k"]), t("b", outputs=["k"]))),
                   "steps[1].outputs")
    assert "'k'" in problem.message and "'a'" in problem.message and "'b'" in problem.message
    assert "reducer" in (problem.hint or "")


def test_parallel_writers_with_a_reducer_are_fine() -> None:
    load(wf(t("a", outputs=["k"]), t("b", outputs=["k"]), reducers={"k": "append"}))


def test_ordered_writers_are_fine() -> None:
    load(wf(t("a", outputs=["k"]), t("mid", "a"), t("b", "mid", outputs=["k"])))


def test_writers_on_exclusive_branches_are_fine() -> None:
    load(wf(cond("c", then=["yes"], else_=["no"]), t("yes", outputs=["k"]),
            t("no", outputs=["k"])))


def test_writers_on_the_same_branch_are_refused() -> None:
    problems = problems_of(wf(cond("c", then=["one", "two"]), t("one", outputs=["k"]),
                              t("two", outputs=["k"])))
    assert find(problems, "steps[2].outputs")


def test_writers_on_branches_of_different_conditions_are_refused() -> None:
    problems = problems_of(wf(cond("c1", then=["one"]), cond("c2", else_=["two"]),
                              t("one", outputs=["k"]), t("two", outputs=["k"])))
    assert find(problems, "steps[3].outputs")


def test_many_ordered_writers_are_fine_and_one_parallel_writer_is_not() -> None:
    n = 1000
    steps = [t(f"s{i}", *([f"s{i - 1}"] if i else []), outputs=["k"]) for i in range(n)]
    load(wf(*steps, limits={"max_depth": n}))
    problems = problems_of(wf(*steps, t("side", "s0", outputs=["k"]),
                              limits={"max_depth": n}))
    assert [p.location for p in problems] == [f"steps[{n}].outputs"] * (n - 1)
    assert "'s1' and 'side'" in problems[0].message


# ---------------------------------------------------------------- limits


def chain(n: int) -> list[dict[str, object]]:
    return [t("s0")] + [t(f"s{i}", f"s{i - 1}") for i in range(1, n)]


def test_max_steps_limit_and_raising_it() -> None:
    problem = find(problems_of(wf(*chain(6), limits={"max_steps": 5})), "steps")
    assert "max_steps" in problem.message and "6" in problem.message
    load(wf(*chain(6), limits={"max_steps": 6}))


def test_max_depth_limit_and_raising_it() -> None:
    problems = problems_of(wf(*chain(4), limits={"max_depth": 3}))
    assert any("max_depth" in p.message for p in problems)
    load(wf(*chain(4), limits={"max_depth": 4}))


def test_default_max_depth_is_1000() -> None:
    load(wf(*chain(1000)))
    problems = problems_of(wf(*chain(1001)))
    assert any("max_depth (1000)" in p.message for p in problems)


def test_a_100000_step_chain_validates_without_recursion_error() -> None:
    n = 100_000
    steps = [{"id": "s0", "type": "transform", "value": 0}] + [
        {"id": f"s{i}", "type": "transform", "value": i, "depends_on": [f"s{i - 1}"]}
        for i in range(1, n)]
    limit = sys.getrecursionlimit()
    checked = load({"name": "long", "steps": steps, "limits": {"max_depth": 200_000}})
    assert sys.getrecursionlimit() == limit
    assert checked.graph.size == n
    assert checked.priority[0] == n  # the root has the whole chain ahead of it
    assert checked.sinks == (n - 1,)


# ---------------------------------------------------------------- fingerprint


def test_fingerprint_is_12_hex_digits_and_stable_under_key_order() -> None:
    one = load({"name": "fp", "concurrency": 4, "steps": [
        {"id": "a", "type": "transform", "value": {"x": 1, "y": [1, 2]}},
        {"id": "b", "type": "transform", "value": 2, "depends_on": ["a"]}]})
    two = load({"steps": [
        {"value": {"y": [1, 2], "x": 1}, "type": "transform", "id": "a"},
        {"depends_on": ["a"], "value": 2, "id": "b", "type": "transform"}],
        "concurrency": 4, "name": "fp"})
    assert re.fullmatch(r"[0-9a-f]{12}", one.fingerprint)
    assert one.fingerprint == two.fingerprint


@pytest.mark.parametrize("edit", [
    lambda d: d["steps"][0].update(value={"x": 2, "y": [1, 2]}),
    lambda d: d["steps"][0].update(value={"x": 1, "y": [2, 1]}),
    lambda d: d.update(concurrency=5),
    lambda d: d["steps"][1].update(trigger="all_done"),
    lambda d: d["steps"].append({"id": "c", "type": "transform", "value": 3}),
    lambda d: d.update(name="fp2"),
])
def test_fingerprint_changes_with_content(edit: object) -> None:
    def base() -> dict[str, object]:
        return {"name": "fp", "concurrency": 4, "steps": [
            {"id": "a", "type": "transform", "value": {"x": 1, "y": [1, 2]}},
            {"id": "b", "type": "transform", "value": 2, "depends_on": ["a"]}]}
    changed = base()
    edit(changed)  # type: ignore[operator]
    assert load(base()).fingerprint != load(changed).fingerprint


def test_fingerprint_ignores_the_stated_version_and_defaults_spelled_out() -> None:
    plain = load({"name": "fp", "steps": [{"id": "a", "type": "transform", "value": 1}]})
    versioned = load({"name": "fp", "version": 3,
                      "steps": [{"id": "a", "type": "transform", "value": 1}]})
    spelled = load({"name": "fp", "concurrency": 16, "on_failure": "continue", "steps": [
        {"id": "a", "type": "transform", "value": 1, "trigger": "default",
         "retry": {"max_retries": 3}}]})
    assert plain.fingerprint == versioned.fingerprint == spelled.fingerprint


# ---------------------------------------------------------------- the checked form


def test_priority_is_the_longest_remaining_path() -> None:
    checked = load(wf(t("a"), t("b", "a"), t("c", "b"), t("d", "a"), t("e")))
    prio = dict(zip(checked.graph.ids, checked.priority, strict=True))
    assert prio == {"a": 3, "b": 2, "c": 1, "d": 1, "e": 1}


def test_check_collects_prior_problems_from_loading() -> None:
    spec, problems = parse_definition(wf(t("a", trigger="nope"), t("b", "zz")))
    assert spec is not None and problems
    from plait.errors import DefinitionError
    with pytest.raises(DefinitionError) as info:
        check(spec, prior=problems, source="flow.yaml")
    locations = {p.location for p in info.value.problems}
    assert {"steps[0].trigger", "steps[1].depends_on[0]"} <= locations
    assert str(info.value).startswith("flow.yaml: invalid workflow definition (2 problems)")


# ---------------------------------------------------------------- every problem at once


def test_a_cycle_and_an_unknown_step_do_not_hide_the_other_problems() -> None:
    problems = problems_of(wf(
        t("a", "c"), t("b", "a"), t("c", "b", "nope"),
        t("d", "c", value="{{ steps.e.output }}"),
        t("e", "a", outputs=["k"]), t("f", "b", outputs=["k"]),
        t("g", value=1), t("g", value=2)))
    assert sorted(str(p) for p in problems) == sorted([
        "steps: cycle: a -> b -> c -> a (remove one of these dependencies; to repeat "
        "steps until a condition holds, use a `loop` step)",
        "steps[2].depends_on[1]: unknown step 'nope' in depends_on of 'c'",
        "steps[3].value: template reads steps.e, which is not an ancestor of 'd' (it may "
        "not have run) (add 'e' to depends_on of 'd')",
        "steps[5].outputs: state key 'k' is written by 'e' and 'f', which may run at the "
        "same time (declare a reducer (reducers: {k: append}) or order them with "
        "depends_on)",
        "steps[7].id: duplicate step id 'g' (first at steps[6])",
    ])


def test_steps_ordered_through_a_cycle_are_not_reported() -> None:
    # x follows the knot a-b-c, so it may read any of them; two writers on one knot
    # are not said to race (the cycle is the problem)
    problems = problems_of(wf(
        t("a", "c", outputs=["k"]), t("b", "a", outputs=["k"]), t("c", "b"),
        t("x", "c", value="{{ steps.a.output }}", outputs=["k"])))
    assert [p.message for p in problems] == ["cycle: a -> b -> c -> a"]


def test_a_chain_too_deep_is_reported_beside_a_cycle() -> None:
    steps = [t("s0")] + [t(f"s{i}", f"s{i - 1}") for i in range(1, 6)]
    problems = problems_of(wf(*steps, t("p", "q"), t("q", "p"), limits={"max_depth": 3}))
    assert sorted(p.message.split(",")[0] for p in problems) == [
        "cycle: p -> q -> p", "the longest dependency chain has 6 steps"]
