"""The canonical dict form: both front ends give the same model, and
``to_dict`` round-trips through YAML."""

from __future__ import annotations

import json
from typing import Any

import yaml

from plait import Retry, Workflow
from plait.core.serialize import canonical_json

FULL: dict[str, Any] = {
    "name": "full", "version": 2, "description": "every field",
    "input": {"type": "object", "properties": {"a": {"type": "boolean"}}},
    "concurrency": 4, "on_failure": "fail_fast", "timeout": "10m", "sla": "5m",
    "defaults": {"retry": {"max_retries": 2, "initial_delay": "500ms"}, "timeout": "30s"},
    "pools": {"llm": {"concurrency": 2, "rate": "60/min"}, "slow": {"rate": "5/30s"}},
    "reducers": {"msgs": "append"}, "output": {"x": "{{ steps.t.output }}"},
    "limits": {"max_steps": 500, "max_depth": 50},
    "steps": [
        {"id": "c", "type": "condition", "if": "{{ input.a }}", "then": ["t"], "else": ["u"]},
        {"id": "t", "type": "transform", "value": {"k": [1, "{{ input.a }}"]},
         "outputs": ["msgs"], "pool": "llm", "fallback": {"output": 0},
         "circuit_breaker": {"key": "k", "failure_threshold": 2, "reset_after": "1m"},
         "trigger": "none_failed", "allow_failure": True, "when": "{{ true }}",
         "description": "a transform"},
        {"id": "u", "type": "transform", "value": 1, "outputs": ["msgs"],
         "retry": {"retry_on": ["ValueError"], "no_retry_on": ["KeyError"], "jitter": 0}},
        {"id": "p", "type": "python", "call": "os.path:join", "with": {"a": "x"},
         "depends_on": ["t", "u"], "fallback": {"call": "os.path:basename"}},
        {"id": "w", "type": "delay", "duration": "1s", "depends_on": ["p"], "pool": "slow"},
    ],
}


def test_to_dict_round_trips_through_yaml_and_json() -> None:
    wf = Workflow.from_dict(FULL)
    data = wf.to_dict()
    via_yaml = Workflow.from_yaml(yaml.safe_dump(data, sort_keys=False))
    via_json = Workflow.from_dict(json.loads(json.dumps(data)))
    for other in (via_yaml, via_json):
        assert other.spec == wf.spec
        assert other.fingerprint == wf.fingerprint
        assert other.to_dict() == data


def test_defaults_are_resolved_into_each_step() -> None:
    data = Workflow.from_dict(FULL).to_dict()
    assert "defaults" not in data
    by_id = {s["id"]: s for s in data["steps"]}
    assert by_id["w"]["timeout"] == 30.0
    assert by_id["c"]["retry"]["max_retries"] == 2
    assert by_id["c"]["retry"]["initial_delay"] == 0.5


def test_canonical_json_is_independent_of_key_order() -> None:
    assert canonical_json({"b": 1, "a": [{"y": 2, "x": "é"}]}) == \
        canonical_json({"a": [{"x": "é", "y": 2}], "b": 1}) == \
        '{"a":[{"x":"é","y":2}],"b":1}'


def test_python_and_definition_front_ends_give_the_same_model() -> None:
    import os.path

    wf = Workflow("same", concurrency=3, reducers={"k": "sum"})
    wf.add_step("base", os.path.basename, retry=Retry(max_retries=1, initial_delay=2),
                timeout=5, outputs=["k"])
    wf.add_step("shown", type="transform", depends_on=["base"],
                value="{{ steps.base.output }}", trigger="all_done")
    as_dict = wf.to_dict()
    loaded = Workflow.from_dict(as_dict)
    assert loaded.to_dict() == as_dict
    assert loaded.fingerprint == wf.fingerprint
    assert as_dict["steps"][0]["call"] == "posixpath:basename"
    assert as_dict["steps"][0]["retry"] == {"max_retries": 1, "initial_delay": 2}


def _roundtrip_fingerprint(wf: Workflow) -> tuple[str, str]:
    exported = yaml.safe_dump(wf.to_dict(), sort_keys=False)
    return wf.fingerprint, Workflow.from_yaml(exported).fingerprint


def test_whole_number_durations_keep_the_fingerprint_through_yaml() -> None:
    # 2 and 2.0 are the same JSON number: a Python workflow and its YAML export must be
    # the same stored version
    wf = Workflow("ints", timeout=600, sla=60)
    wf.add_step("s", type="transform", value=1, timeout=5,
                retry=Retry(initial_delay=2, backoff=3, max_delay=30, jitter=0),
                circuit_breaker={"key": "k", "failure_threshold": 2, "reset_after": 30})
    wf.add_step("t", type="transform", value=2, retry={"initial_delay": 1, "max_delay": 10})
    mine, exported = _roundtrip_fingerprint(wf)
    assert mine == exported


def test_python_front_end_accepts_duration_strings() -> None:
    wf = Workflow("strings", timeout="10m", sla="1h")
    wf.add_step("s", type="transform", value=1, timeout="30s",
                retry={"initial_delay": "500ms", "max_delay": "2m"},
                circuit_breaker={"key": "k", "reset_after": "1m"})
    spec = wf.validate().spec
    assert (spec.timeout, spec.sla) == (600.0, 3600.0)
    step = spec.steps[0]
    assert step.timeout == 30.0
    assert (step.retry.initial_delay, step.retry.max_delay) == (0.5, 120.0)
    assert step.circuit_breaker is not None and step.circuit_breaker.reset_after == 60.0
    assert Retry(initial_delay="2s").initial_delay == 2.0  # type: ignore[arg-type]
