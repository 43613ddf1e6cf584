"""``schedules:``, ``concurrency_key:`` and ``max_runs_per_key:`` in a definition:
loaded from a file or given to ``Workflow``, every problem listed at once, each naming
its field."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from plait import DefinitionError, Workflow
from plait.core.model import ScheduleSpec
from plait.core.serialize import workflow_to_dict

from .helpers import load, problems_of, t, wf

SCHEMA = {"type": "object", "required": ["customer"],
          "properties": {"customer": {"type": "string"}, "limit": {"type": "integer"}}}


def scheduled(*schedules: Any, **top: Any) -> dict[str, Any]:
    return wf(t("a"), input=SCHEMA, schedules=list(schedules), **top)


def where(problems: list[Any]) -> dict[str, str]:
    return {p.location: str(p) for p in problems}


def test_a_valid_definition_gives_the_model_with_defaults() -> None:
    checked = load(scheduled(
        {"cron": "*/5 * * * *", "input": {"customer": "acme"}},
        {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Paris", "catch_up": "all",
         "input": {"customer": "b", "limit": 3}},
        concurrency_key="{{ input.customer }}", max_runs_per_key=2))
    spec = checked.spec
    assert spec.schedules == (
        ScheduleSpec(cron="*/5 * * * *", input={"customer": "acme"}),
        ScheduleSpec(cron="0 9 * * MON-FRI", timezone="Europe/Paris", catch_up="all",
                     input={"customer": "b", "limit": 3}))
    assert spec.schedules[0].timezone == "UTC" and spec.schedules[0].catch_up == "skip"
    assert (spec.concurrency_key, spec.max_runs_per_key) == ("{{ input.customer }}", 2)


def test_the_canonical_form_round_trips_and_keeps_old_fingerprints() -> None:
    definition = scheduled({"cron": "@daily", "timezone": "Asia/Tokyo", "catch_up": "all",
                            "input": {"customer": "acme"}},
                           concurrency_key="{{ input.customer }}")
    checked = load(definition)
    again = load(workflow_to_dict(checked.spec))
    assert again.spec == checked.spec
    assert again.fingerprint == checked.fingerprint
    assert workflow_to_dict(checked.spec)["schedules"] == [
        {"cron": "@daily", "timezone": "Asia/Tokyo", "input": {"customer": "acme"},
         "catch_up": "all"}]
    # a definition without the new fields has the canonical form (and fingerprint) it
    # had before they existed
    plain = load(wf(t("a")))
    assert set(workflow_to_dict(plain.spec)) == {"name", "steps"}


def test_every_problem_is_listed_with_its_field() -> None:
    problems = where(problems_of(scheduled(
        {"cron": "*/5 * * * *", "input": {"customer": "acme"}},
        {"cron": "61 * * * *", "timezone": "Europe/Pariss", "catch_up": "al",
         "input": {"customer": 3}, "crn": "x"},
        {"cron": "*/5  * * * *", "input": {"customer": "acme"}},
        "hourly",
        {"timezone": 5, "input": {"customer": "c", "limit": "many"}},
        concurrency_key="{{ input.customer }}-{{ state.x }}", max_runs_per_key=0)))
    assert problems == {
        "schedules[1].crn": "schedules[1].crn: unknown field for a schedule "
                            "(did you mean 'cron'?)",
        "schedules[1].cron": "schedules[1].cron: invalid cron expression '61 * * * *': "
                             "Bad minute (minute hour day-of-month month day-of-week, or "
                             "@hourly, @daily, @weekly, @monthly, @yearly)",
        "schedules[1].timezone": "schedules[1].timezone: unknown time zone 'Europe/Pariss' "
                                 "(did you mean 'Europe/Paris'?)",
        "schedules[1].catch_up": "schedules[1].catch_up: expected 'skip' or 'all', got "
                                 "'al' (did you mean 'all'?)",
        "schedules[1].input.customer": "schedules[1].input.customer: the schedule's input "
                                       "does not match the workflow's input schema: 3 is "
                                       "not of type 'string'",
        "schedules[2]": "schedules[2]: the same cron, time zone and input as schedules[0]: "
                        "it would start the same runs (remove one of them)",
        "schedules[3]": "schedules[3]: a schedule must be a mapping {cron, timezone, input, "
                        "catch_up}, got str",
        "schedules[4].cron": "schedules[4].cron: missing field 'cron' of a schedule",
        "schedules[4].timezone": "schedules[4].timezone: expected an IANA time zone name "
                                 "like 'Europe/Paris', got 5",
        "schedules[4].input.limit": "schedules[4].input.limit: the schedule's input does "
                                    "not match the workflow's input schema: 'many' is not "
                                    "of type 'integer'",
        "concurrency_key": "concurrency_key: the template reads 'state'; a concurrency key "
                           "may read only `input` (the key is decided when the run is "
                           "created, before any step ran)",
        "max_runs_per_key": "max_runs_per_key: must be at least 1, got 0",
    }


def test_a_schedule_without_input_meets_the_schema_with_an_empty_input() -> None:
    problems = where(problems_of(scheduled({"cron": "@hourly"})))
    assert problems == {"schedules[0].input": "schedules[0].input: the schedule's input "
                        "does not match the workflow's input schema: 'customer' is a "
                        "required property"}
    # without a schema, any JSON input is fine
    assert load(wf(t("a"), schedules=[{"cron": "@hourly"}])).spec.schedules[0].input == {}


def test_a_schedule_input_is_not_judged_against_a_broken_schema() -> None:
    problems = where(problems_of(wf(t("a"), input={"type": "nonsense"},
                                    schedules=[{"cron": "@hourly", "input": {"x": 1}}])))
    assert list(problems) == ["input.type"]


@pytest.mark.parametrize(("value", "message"), [
    ({"cron": "* * * * *"}, "schedules: expected a list of schedules, each {cron, "
                            "timezone, input, catch_up}, got dict"),
    ("@daily", "schedules: expected a list of schedules"),
])
def test_schedules_must_be_a_list(value: object, message: str) -> None:
    [problem] = problems_of(wf(t("a"), schedules=value))
    assert str(problem).startswith(message)


def test_a_cron_that_is_not_a_string_or_has_seconds() -> None:
    problems = where(problems_of(wf(t("a"), schedules=[{"cron": 5}, {"cron": "0 * * * * *"},
                                                       {"cron": "  "}])))
    assert problems["schedules[0].cron"].endswith("expected a cron expression like "
                                                  "'*/5 * * * *', got 5")
    assert "(seconds are not supported)" in problems["schedules[1].cron"]
    assert "got '  '" in problems["schedules[2].cron"]


# ----------------------------------------------------------- concurrency keys


@pytest.mark.parametrize("key", ["{{ input.customer }}", "{{ input['customer'] | lower }}",
                                 "tenant-{{ input.customer }}", "one-key-for-all"])
def test_valid_concurrency_keys(key: str) -> None:
    spec = load(wf(t("a"), concurrency_key=key)).spec
    assert (spec.concurrency_key, spec.max_runs_per_key) == (key, None)


@pytest.mark.parametrize(("top", "message"), [
    ({"concurrency_key": "{{ input.customer "},
     "concurrency_key: template syntax error at line 1, column"),
    ({"concurrency_key": "{{ steps.a.output }}"},
     "concurrency_key: the template reads 'steps'; a concurrency key may read only"),
    ({"concurrency_key": "{{ run.id }}-{{ secrets.X }}"},
     "concurrency_key: the template reads 'run', 'secrets'"),
    ({"concurrency_key": 5}, "concurrency_key: expected a string, got 5"),
    ({"concurrency_key": ""}, "concurrency_key: expected a template over the input"),
    ({"max_runs_per_key": 3}, "max_runs_per_key: max_runs_per_key bounds the runs of one "
                              "concurrency_key, and this workflow has none (add "
                              "concurrency_key:"),
    ({"concurrency_key": "{{ input.c }}", "max_runs_per_key": True},
     "max_runs_per_key: expected a whole number, got True"),
    ({"concurrency_key": "{{ input.c }}", "max_runs_per_key": "2"},
     "max_runs_per_key: expected a whole number, got '2'"),
])
def test_concurrency_key_problems(top: dict[str, Any], message: str) -> None:
    [problem] = problems_of(wf(t("a"), **top))
    assert str(problem).startswith(message)


def test_unknown_top_level_fields_suggest_the_new_ones() -> None:
    problems = where(problems_of(wf(t("a"), schedule=[], concurency_key="x")))
    assert problems["schedule"].endswith("(did you mean 'schedules'?)")
    assert problems["concurency_key"].endswith("(did you mean 'concurrency_key'?)")


# ------------------------------------------------------------------ Python


def build(**options: Any) -> Workflow:
    flow = Workflow("py-scheduled", input=SCHEMA, **options)
    flow.add_step("a", type="transform", value=1)
    return flow


def test_the_python_api_takes_the_same_fields() -> None:
    flow = build(schedules=[{"cron": "*/5 * * * *", "input": {"customer": "acme"}},
                            ScheduleSpec(cron="@daily", timezone="Europe/Paris",
                                         input={"customer": "b"}, catch_up="all")],
                 concurrency_key="{{ input.customer }}", max_runs_per_key=4)
    spec = flow.validate().spec
    assert [s.cron for s in spec.schedules] == ["*/5 * * * *", "@daily"]
    assert spec.schedules[1].catch_up == "all"
    assert (spec.concurrency_key, spec.max_runs_per_key) == ("{{ input.customer }}", 4)
    # what to_dict gives loads back as the same definition, through YAML too
    text = yaml.safe_dump(flow.to_dict())
    assert Workflow.from_yaml(text).fingerprint == flow.fingerprint


def test_the_python_api_lists_every_problem_with_its_field() -> None:
    flow = build(schedules=[{"cron": "*/5 * * * *", "input": {"customer": 1},
                             "timezone": "Nowhere/City", "catchup": "all"}, "daily"],
                 max_runs_per_key=2)
    with pytest.raises(DefinitionError) as info:
        flow.validate()
    assert sorted(p.location for p in info.value.problems) == [
        "max_runs_per_key", "schedules[0].catchup", "schedules[0].input.customer",
        "schedules[0].timezone", "schedules[1]"]
    catchup = next(p for p in info.value.problems if p.location == "schedules[0].catchup")
    assert catchup.hint == "did you mean 'catch_up'?"


def test_the_python_api_refuses_an_unknown_option_with_a_suggestion() -> None:
    with pytest.raises(DefinitionError, match="did you mean 'schedules'"):
        Workflow("x", schedule=[{"cron": "@daily"}])  # type: ignore[call-arg]


def test_a_python_schedule_input_that_is_not_json_is_named() -> None:
    flow = Workflow("py-scheduled", schedules=[{"cron": "@daily", "input": {"s": {1, 2}}}])
    flow.add_step("a", type="transform", value=1)
    with pytest.raises(DefinitionError) as info:
        flow.validate()
    [problem] = info.value.problems
    assert problem.location == "schedules[0].input.s"
    assert "set" in problem.message


def test_each_schedule_input_must_give_the_run_its_concurrency_key() -> None:
    problems = where(problems_of(wf(
        t("a"), concurrency_key="{{ input.customer }}",
        schedules=[{"cron": "@hourly", "input": {"customer": "acme"}},
                   {"cron": "@daily", "input": {"client": "acme"}},
                   {"cron": "@weekly", "input": {"customer": None}}])))
    assert problems == {
        "schedules[1].input": "schedules[1].input: the concurrency_key "
                              "'{{ input.customer }}' does not render for this input: input "
                              "has no key 'customer'",
        "schedules[2].input": "schedules[2].input: the concurrency_key "
                              "'{{ input.customer }}' does not render for this input: "
                              "concurrency_key '{{ input.customer }}' rendered null for this "
                              "input"}
