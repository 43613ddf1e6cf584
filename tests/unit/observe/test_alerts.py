"""Alert rules: the grammar, errors that name the rule and the fix, firing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait import Workflow
from plait.errors import DefinitionError
from plait.observe.alerts import (
    AlertRule,
    check_rules,
    evaluate,
    firings_to_json,
    load_rules,
    parse_rule,
    parse_rules,
    render_firings,
    rules_from_config,
    stored_rules,
)
from plait.observe.metrics import compute
from plait.runtime.engine import Engine
from plait.store import open_store

from .records import attempt, history, run, step

# ------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(("text", "metric", "op", "threshold", "step_id"), [
    ("success_rate < 0.8", "success_rate", "<", 0.8, None),
    ("success_rate<80%", "success_rate", "<", 0.8, None),
    ("p95 > 30s", "p95", ">", 30.0, None),
    ("p99 >= 1m30s", "p99", ">=", 90.0, None),
    ("p50 > 500ms", "p50", ">", 0.5, None),
    ("p95 > 12", "p95", ">", 12.0, None),
    ("retries_per_run > 2", "retries_per_run", ">", 2.0, None),
    ("failures >= 3", "failures", ">=", 3.0, None),
    ("  cancelled != 0 ", "cancelled", "!=", 0.0, None),
    ("runs == 10", "runs", "==", 10.0, None),
    ("step fetch: p95 > 2s", "p95", ">", 2.0, "fetch"),
    ("step  fetch :success_rate <= 95%", "success_rate", "<=", 0.95, "fetch"),
    ("step fetch: attempt_p99 > 1.5s", "attempt_p99", ">", 1.5, "fetch"),
    ("step fetch: retries_per_execution > 1", "retries_per_execution", ">", 1.0, "fetch"),
    ("step fetch[*]: compute_p95 > 2s", "compute_p95", ">", 2.0, "fetch[*]"),
    ("compute_p50 > 1m", "compute_p50", ">", 60.0, None),
])
def test_parse_accepts_the_grammar(text, metric, op, threshold, step_id):
    rule = parse_rule(text, workflow="wf")
    assert (rule.metric, rule.op, rule.step, rule.workflow) == (metric, op, step_id, "wf")
    assert rule.threshold == pytest.approx(threshold)
    assert rule.text == text.strip()


def _problem(text: str) -> str:
    with pytest.raises(DefinitionError) as info:
        parse_rule(text)
    assert len(info.value.problems) == 1
    return str(info.value.problems[0])


def test_unknown_metric_suggests_the_closest_name():
    message = _problem("p96 > 2s")
    assert "alert rule 'p96 > 2s'" in message
    assert "unknown workflow metric 'p96'" in message
    assert "did you mean" in message
    assert "did you mean 'success_rate'?" in _problem("succes_rate < 0.9")


def test_metric_of_the_wrong_scope_is_named_as_such():
    assert "'executions' is not a workflow metric" in _problem("executions > 3")
    message = _problem("step fetch: retries_per_run > 2")
    assert "'retries_per_run' is not a step metric" in message


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "empty rule"),
    ("p95", "expected METRIC OP THRESHOLD"),
    ("p95 = 3s", "use '==' to compare"),
    ("p95 >", "missing threshold"),
    ("> 3", "missing metric name"),
    ("p95 > soon", "bad duration threshold 'soon'"),
    ("p95 > -3s", "bad duration threshold"),
    ("success_rate < 1.5", "between 0 and 1"),
    ("success_rate < 120%", "between 0 and 1"),
    ("success_rate < high", "expected a rate like 0.8 or 80%"),
    ("failures > 3s", "expected a number"),
    ("failures > 30%", "expected a number"),
    ("step fetch p95 > 2s", "needs ':' after the step id"),
    ("step 9x: p95 > 2s", "'9x' is not a step id"),
    ("step : p95 > 2s", "is not a step id"),
])
def test_parse_errors_name_the_problem(text, fragment):
    message = _problem(text)
    assert fragment in message
    assert f"alert rule {text!r}" in message


def test_parse_rules_lists_every_bad_rule_with_its_location():
    with pytest.raises(DefinitionError) as info:
        parse_rules(["p95 > 2s", "p96 > 2s", "success_rate < 2", 3], workflow="wf")  # type: ignore[list-item]
    locations = [p.location for p in info.value.problems]
    assert locations == ["alerts[1]", "alerts[2]", "alerts[3]"]
    assert "must be a string" in str(info.value.problems[2])


def test_check_rules_returns_problems_for_validation():
    assert check_rules(["p95 > 2s", "step a: failures >= 1"]) == []
    problems = check_rules(["p95 > 2s", "bogus > 1"], location="alerts")
    assert [p.location for p in problems] == ["alerts[1]"]


# ------------------------------------------------------------------------ config files


def test_rules_from_config_scope_by_workflow_and_star(tmp_path: Path):
    path = tmp_path / "alerts.yaml"
    path.write_text("alerts:\n"
                    "  support-router:\n"
                    "    - success_rate < 0.8\n"
                    "    - 'step fetch: p95 > 2s'\n"
                    "  '*': [failures >= 3]\n", encoding="utf-8")
    rules = load_rules(path)
    assert [(r.workflow, r.step, r.metric) for r in rules] == [
        ("support-router", None, "success_rate"), ("support-router", "fetch", "p95"),
        (None, None, "failures")]
    assert rules[1].source == f"{path}: alerts.support-router[1]"


def test_config_errors_name_the_file_the_workflow_and_the_rule(tmp_path: Path):
    path = tmp_path / "alerts.yaml"
    path.write_text("alerts:\n  wf: [p95 > 2s, p59 > 1s]\n  '*': 'sucess_rate < 0.5'\n",
                    encoding="utf-8")
    with pytest.raises(DefinitionError) as info:
        load_rules(path)
    text = str(info.value)
    assert str(path) in text
    assert "alerts.wf[1]: alert rule 'p59 > 1s'" in text
    assert "alerts.*[0]: alert rule 'sucess_rate < 0.5'" in text
    assert "did you mean 'success_rate'?" in text


def test_config_shape_errors(tmp_path: Path):
    with pytest.raises(DefinitionError, match="mapping"):
        rules_from_config(["p95 > 1"])
    with pytest.raises(DefinitionError, match="workflow name"):
        rules_from_config({"alerts": ["p95 > 1"]})
    with pytest.raises(DefinitionError, match="list of rules"):
        rules_from_config({"alerts": {"wf": {"p95": 1}}})
    assert rules_from_config({"other": 1}) == ()
    bad = tmp_path / "bad.yaml"
    bad.write_text("alerts: [unclosed\n", encoding="utf-8")
    with pytest.raises(DefinitionError, match="not valid YAML"):
        load_rules(bad)
    with pytest.raises(DefinitionError, match="cannot read"):
        load_rules(tmp_path / "missing.yaml")


async def test_stored_rules_come_from_the_latest_definition():
    wf = Workflow.from_dict({"name": "alerted", "alerts": ["success_rate < 0.9",
                                                           "step only: p95 > 1s"],
                             "steps": [{"id": "only", "type": "transform", "value": 1}]})
    store = open_store("memory://")
    await Engine(store).run(wf.validate(), {})
    rules = await stored_rules(store, ["alerted", "never-stored"])
    assert [(r.workflow, r.step, r.metric) for r in rules] == [
        ("alerted", None, "success_rate"), ("alerted", "only", "p95")]
    assert rules[1].source == "alerted@1: alerts[1]"


# ------------------------------------------------------------------------ evaluating


def _report():
    """wf: 4 runs, 3 completed (10s, 20s, 30s), 1 failed (40s); fetch retried 3 times
    in r1.  other: 1 completed run of 1s."""
    runs = []
    for i, (status, seconds) in enumerate([("completed", 10.0), ("completed", 20.0),
                                           ("completed", 30.0), ("failed", 40.0)]):
        rid = f"r{i}"
        tries = 4 if i == 1 else 1
        runs.append(history(
            run(rid, status=status, end=seconds),
            [step("fetch", "failed" if status == "failed" else "completed", start=0,
                  end=seconds, attempts=tries, run_id=rid)],
            [attempt("fetch", n + 1, "completed", 0, seconds / tries, run_id=rid)
             for n in range(tries)]))
    runs.append(history(run("o", workflow="other", end=1.0), [step("fetch", run_id="o")],
                        [attempt("fetch", 1, "completed", 0, 1, run_id="o")]))
    return compute(runs)


def _fire(*texts: str, workflow: str | None = None):
    return evaluate(_report(), parse_rules(texts, workflow=workflow))


def test_rules_fire_when_the_comparison_holds():
    firings = _fire("success_rate < 0.8", workflow="wf")
    assert len(firings) == 1
    f = firings[0]
    assert (f.workflow, f.step, f.observed, f.threshold) == ("wf", None, 0.75, 0.8)
    assert f.rule.text == "success_rate < 0.8"


def test_rules_do_not_fire_when_the_comparison_fails():
    assert _fire("success_rate < 0.7", "p95 > 40s", "failures >= 2", workflow="wf") == []


def test_star_rules_apply_to_every_workflow():
    firings = _fire("p50 > 500ms")
    assert [(f.workflow, f.observed) for f in firings] == [("other", 1.0), ("wf", 25.0)]


def test_workflow_rules_only_apply_to_their_workflow():
    assert [f.workflow for f in _fire("runs >= 1", workflow="other")] == ["other"]
    assert _fire("runs >= 1", workflow="absent") == []


def test_step_rules_read_the_step_metrics():
    firings = _fire("step fetch: retries_per_execution > 0.5", "step fetch: failures >= 1",
                    "step missing: failures >= 0", workflow="wf")
    assert [(f.step, f.rule.metric, f.observed) for f in firings] == [
        ("fetch", "retries_per_execution", 0.75), ("fetch", "failures", 1.0)]
    assert [f.workflow for f in _fire("step fetch: p99 > 35s")] == ["wf"]


def test_workflow_retries_per_run():
    assert [f.observed for f in _fire("retries_per_run > 0.5", workflow="wf")] == [0.75]


def test_a_metric_without_a_value_does_not_fire():
    report = compute([history(run(status="running", end=None))])
    assert evaluate(report, parse_rules(["success_rate < 1", "p95 >= 0"])) == []


def test_firing_output():
    firings = _fire("success_rate < 80%", "step fetch: p95 > 2s", workflow="wf")
    text = render_firings(firings)
    assert text.splitlines()[0] == ("ALERT wf: success_rate is 75.0%, < 80.0% "
                                    "(rule 'success_rate < 80%')")
    assert "ALERT wf step fetch: p95 is" in text
    data = firings_to_json(firings)
    json.dumps(data)
    assert data["fired"] is True
    assert data["firings"][0] == {"rule": "success_rate < 80%", "source": "alerts[0]",
                                  "workflow": "wf", "step": None, "metric": "success_rate",
                                  "op": "<", "observed": 0.75, "threshold": 0.8}
    assert firings_to_json([]) == {"fired": False, "firings": []}
    assert render_firings([]) == "no alerts fired\n"


def test_rules_are_frozen_values():
    rule = parse_rule("p95 > 2s")
    assert rule == AlertRule(text="p95 > 2s", metric="p95", op=">", threshold=2.0)
    with pytest.raises(AttributeError):
        rule.threshold = 3.0  # type: ignore[misc]
