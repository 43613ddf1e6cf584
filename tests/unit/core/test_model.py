"""The model's fast constructor and the garbage collector pause used when validating."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from plait.core.model import CircuitBreakerSpec, Fallback, RetryPolicy, StepSpec, new_step


def noop() -> None:
    return None


def test_new_step_is_the_same_step_as_the_dataclass_builds() -> None:
    assert new_step(id="a", type="python") == StepSpec(id="a", type="python")
    fields = {"id": "b", "type": "python", "config": {"call": "m:f"}, "depends_on": ("a",),
              "when": "{{ x }}", "trigger": "all_done", "retry": RetryPolicy(max_retries=1),
              "timeout": 2.0, "fallback": Fallback(output=1), "allow_failure": True,
              "outputs": ("k",), "circuit_breaker": CircuitBreakerSpec(key="c"),
              "pool": "p", "description": "d", "then": ("x",), "else_": ("y",),
              "func": noop}
    fast, slow = new_step(**fields), StepSpec(**fields)  # type: ignore[arg-type]
    assert type(fast) is StepSpec
    assert repr(fast) == repr(slow)
    assert [getattr(fast, f.name) for f in dataclasses.fields(StepSpec)] == \
        [getattr(slow, f.name) for f in dataclasses.fields(StepSpec)]
    assert pickle.loads(pickle.dumps(new_step(id="c", type="t"))) == StepSpec(id="c", type="t")


def test_new_step_is_frozen_and_gets_its_own_config() -> None:
    step = new_step(id="a", type="transform")
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.id = "b"  # type: ignore[misc]
    assert step.config == {} and step.config is not new_step(id="b", type="t").config
