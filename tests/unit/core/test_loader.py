"""Loading definitions: every problem at once, each with its location."""

from __future__ import annotations

from plait.core.loader import parse_definition, parse_rate
from plait.core.model import Rate

from .helpers import find, load, problems_of, t, wf


def test_a_minimal_definition_loads() -> None:
    checked = load(wf(t("a"), t("b", "a")))
    assert checked.spec.name == "test"
    assert [s.id for s in checked.spec.steps] == ["a", "b"]
    assert checked.spec.steps[1].depends_on == ("a",)
    assert checked.spec.concurrency == 16
    assert checked.spec.on_failure == "continue"


def test_every_problem_is_listed_at_once() -> None:
    problems = problems_of(wf(
        t("a", depnds_on=["x"]),
        t("a"),
        t("c", trigger="all_sucess"),
        t("d", "a", "fetchh", retry={"max_retries": -1}),
        {"id": "fetch", "type": "pythn"},
        {"id": "9bad", "type": "transform", "value": 1},
        {"id": "e", "type": "transform"},
    ))
    locations = {p.location for p in problems}
    assert {"steps[0].depnds_on", "steps[1].id", "steps[2].trigger",
            "steps[3].retry.max_retries", "steps[3].depends_on[1]", "steps[4].type",
            "steps[5].id", "steps[6].value"} <= locations


def test_unknown_step_field_suggests_the_known_one() -> None:
    problem = find(problems_of(wf(t("a", depnds_on=[]))), "steps[0].depnds_on")
    assert "unknown field" in problem.message
    assert problem.hint == "did you mean 'depends_on'?"
    assert "did you mean 'depends_on'?" in str(problem)


def test_unknown_top_level_field_suggests_the_known_one() -> None:
    problem = find(problems_of(wf(t("a"), concurency=4)), "concurency")
    assert problem.hint == "did you mean 'concurrency'?"


def test_unknown_retry_field_is_located_inside_retry() -> None:
    problem = find(problems_of(wf(t("a", retry={"max_retry": 2}))), "steps[0].retry.max_retry")
    assert problem.hint == "did you mean 'max_retries'?"


def test_unknown_field_far_from_any_known_has_no_suggestion() -> None:
    problem = find(problems_of(wf(t("a", zzzqqq=1))), "steps[0].zzzqqq")
    assert problem.hint is None


def test_duplicate_ids_name_the_first_occurrence() -> None:
    problem = find(problems_of(wf(t("a"), t("b"), t("a"))), "steps[2].id")
    assert "duplicate step id 'a'" in problem.message
    assert "steps[0]" in problem.message


def test_a_name_may_add_dotted_step_ids_as_plait_names_written_definitions() -> None:
    step = [{"id": "a", "type": "transform", "value": 1}]
    for name in ("planner.research", "p.Step_2.inner"):
        assert load({"name": name, "steps": step}).spec.name == name
    for name in ("planner.", ".research", "planner..x", "Planner.x", "p.2x", "p.a-b"):
        assert "invalid workflow name" in find(problems_of(
            {"name": name, "steps": step}), "name").message, name


def test_malformed_ids_and_names() -> None:
    problems = problems_of({"name": "Bad Name", "steps": [
        {"id": "has-dash", "type": "transform", "value": 1},
        {"id": 7, "type": "transform", "value": 1},
        {"type": "transform", "value": 1},
        {"id": "x" * 65, "type": "transform", "value": 1},
    ]})
    assert "invalid workflow name" in find(problems, "name").message
    assert "invalid step id 'has-dash'" in find(problems, "steps[0].id").message
    assert find(problems, "steps[1].id")
    assert "missing step id" in find(problems, "steps[2].id").message
    assert find(problems, "steps[3].id")


def test_bad_trigger_lists_or_suggests_the_rules() -> None:
    close = find(problems_of(wf(t("a"), t("b", "a", trigger="one_faild"))),
                 "steps[1].trigger")
    assert "unknown trigger rule 'one_faild'" in close.message
    assert close.hint == "did you mean 'one_failed'?"
    far = find(problems_of(wf(t("a", trigger="whenever"))), "steps[0].trigger")
    assert far.hint is not None
    for rule in ("default", "all_success", "none_failed", "all_done", "one_failed"):
        assert rule in far.hint


def test_bad_retry_values_are_each_reported() -> None:
    problems = problems_of(wf(t("a", retry={
        "max_retries": -1, "initial_delay": "soon", "backoff": 0.5, "max_delay": "-3s",
        "jitter": -0.1, "retry_on": 5})))
    assert "at least 0" in find(problems, "steps[0].retry.max_retries").message
    assert "duration" in find(problems, "steps[0].retry.initial_delay").message
    assert "at least 1" in find(problems, "steps[0].retry.backoff").message
    assert find(problems, "steps[0].retry.max_delay")
    assert "at least 0" in find(problems, "steps[0].retry.jitter").message
    assert find(problems, "steps[0].retry.retry_on")


def test_retry_values_of_the_wrong_type() -> None:
    problems = problems_of(wf(t("a", retry={"max_retries": 1.5, "backoff": "fast"}),
                              t("b", retry="often"), t("c", retry={"max_retries": True})))
    assert find(problems, "steps[0].retry.max_retries")
    assert find(problems, "steps[0].retry.backoff")
    assert find(problems, "steps[1].retry")
    assert find(problems, "steps[2].retry.max_retries")


def test_retry_shorthand_and_durations() -> None:
    checked = load(wf(t("a", retry=5), t("b", retry={"initial_delay": "500ms",
                                                     "max_delay": "2m", "backoff": 3})))
    a, b = checked.spec.steps
    assert a.retry.max_retries == 5
    assert (b.retry.initial_delay, b.retry.max_delay, b.retry.backoff) == (0.5, 120.0, 3.0)
    assert b.retry.max_retries == 3


def test_defaults_are_merged_into_every_step_and_retry_merges_by_field() -> None:
    checked = load(wf(
        t("a"), t("b", retry={"max_retries": 1}), t("c", timeout="2s"),
        defaults={"retry": {"max_retries": 4, "initial_delay": "2s"}, "timeout": "5m",
                  "trigger": "all_done"}))
    a, b, c = checked.spec.steps
    assert (a.retry.max_retries, a.retry.initial_delay, a.timeout) == (4, 2.0, 300.0)
    assert (b.retry.max_retries, b.retry.initial_delay) == (1, 2.0)
    assert c.timeout == 2.0
    assert a.trigger == "all_done"


def test_unknown_defaults_field() -> None:
    problem = find(problems_of(wf(t("a"), defaults={"retyr": 1})), "defaults.retyr")
    assert problem.hint == "did you mean 'retry'?"


def test_top_level_values_are_checked() -> None:
    problems = problems_of(wf(t("a"), concurrency=0, on_failure="explode", timeout="later",
                              version=0, limits={"max_stepz": 1}, reducers={"k": "concat"},
                              pools={"p": {"rate": "fast"}}))
    assert find(problems, "concurrency")
    assert "fail_fast" in find(problems, "on_failure").message
    assert find(problems, "timeout")
    assert find(problems, "version")
    assert find(problems, "limits.max_stepz").hint == "did you mean 'max_steps'?"
    assert "unknown reducer 'concat'" in find(problems, "reducers.k").message
    assert find(problems, "pools.p.rate")


def test_not_a_mapping_or_no_steps() -> None:
    spec, problems = parse_definition(["a", "b"])
    assert spec is None and "mapping" in problems[0].message
    spec, problems = parse_definition({"name": "x", "steps": []})
    assert spec is None and problems[0].location == "steps"
    spec, problems = parse_definition({"name": "x"})
    assert spec is None and problems[0].location == "steps"


def test_a_step_that_is_not_a_mapping() -> None:
    problem = find(problems_of(wf(t("a"), "b")), "steps[1]")
    assert "mapping" in problem.message


def test_missing_type_and_required_fields() -> None:
    problems = problems_of(wf({"id": "a"}, {"id": "b", "type": "python"},
                              {"id": "c", "type": "condition", "then": []}))
    assert find(problems, "steps[0].type")
    assert "missing field 'call'" in find(problems, "steps[1].call").message
    assert "missing field 'if'" in find(problems, "steps[2].if").message


def test_fields_of_another_type_are_unknown() -> None:
    problem = find(problems_of(wf(t("a", url="http://x"))), "steps[0].url")
    assert "unknown field for a transform step" in problem.message


def test_fallback_and_breaker_shapes() -> None:
    problems = problems_of(wf(t("a", fallback={"call": "nocolon"}),
                              t("b", fallback={"output": 1, "call": "m:f"}),
                              t("c", circuit_breaker={"failure_threshold": 2})))
    assert find(problems, "steps[0].fallback.call")
    assert find(problems, "steps[1].fallback")
    assert find(problems, "steps[2].circuit_breaker")
    checked = load(wf(t("a", fallback={"output": {"x": 1}},
                        circuit_breaker={"key": "llm", "failure_threshold": 2,
                                         "reset_after": "30s"})))
    step = checked.spec.steps[0]
    assert step.fallback is not None and step.fallback.output == {"x": 1}
    assert step.circuit_breaker is not None
    assert (step.circuit_breaker.key, step.circuit_breaker.failure_threshold,
            step.circuit_breaker.reset_after) == ("llm", 2, 30.0)


def test_parse_rate() -> None:
    assert parse_rate("60/min") == Rate(count=60, period=60.0)
    assert parse_rate("10/s") == Rate(count=10, period=1.0)
    assert parse_rate("1000/h") == Rate(count=1000, period=3600.0)
    assert parse_rate("5/30s") == Rate(count=5, period=30.0)
    for bad in ("fast", "x/min", "0/s", "5/", 60):
        try:
            parse_rate(bad)  # type: ignore[arg-type]
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")


def test_pool_reference_must_be_declared() -> None:
    problem = find(problems_of(wf(t("a", pool="lmm"), pools={"llm": {"concurrency": 2}})),
                   "steps[0].pool")
    assert problem.hint == "did you mean 'llm'?"
