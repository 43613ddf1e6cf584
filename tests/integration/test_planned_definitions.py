"""``workflow`` steps whose definition is written at run time: a ``definition:``
template, or a Python function.  The definition is checked when the step runs (every
check loading does, the parent's limits, the modules the step allows, an untrusted
engine's rules), every problem listed in one failed attempt (retries and fallbacks
apply); it is stored as ``PARENT.STEP`` and runs as a child run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plait import DefinitionError, Workflow
from plait.core.trust import TrustPolicy
from plait.runtime.engine import Engine
from plait.store import MemoryStore
from plait.store.base import RunFilter, Store

PLAN = {"name": "anything", "version": 7, "steps": [
    {"id": "a", "type": "transform", "value": "{{ input.n }}"},
    {"id": "b", "type": "transform", "value": "{{ steps.a.output + 1 }}",
     "depends_on": ["a"]}]}


class _Planned:
    """A parent whose `plan` step outputs ``plan`` (given as the run's input: data,
    whose templates are not rendered) and whose `execute` step runs it with input
    {n: 1}."""

    def __init__(self, wf: Workflow, plan: Any) -> None:
        self.wf, self.plan = wf, plan


def _parent(plan: Any, *, step: dict[str, Any] | None = None,
            **more: Any) -> _Planned:
    return _Planned(Workflow.from_dict({"name": "planner", **more, "steps": [
        {"id": "plan", "type": "transform", "value": "{{ input.plan }}"},
        {"id": "execute", "type": "workflow", "depends_on": ["plan"],
         "definition": "{{ steps.plan.output }}", "input": {"n": 1},
         "retry": {"max_retries": 0}, **(step or {})}]}), plan)


async def _run(parent: _Planned, store: Store | None = None,
               trust: TrustPolicy | None = None) -> Any:
    engine = Engine(store or MemoryStore(), trust=trust)
    try:
        return await asyncio.wait_for(
            engine.run(parent.wf.validate(), {"plan": parent.plan}), 20)
    finally:
        engine.close()


async def _error(plan: Any, **kw: Any) -> str:
    result = await _run(_parent(plan, **kw))
    assert result.status == "failed"
    error = result.steps["execute"].error
    assert isinstance(error, str)
    return error


async def test_a_rendered_definition_runs_as_a_child_stored_as_parent_dot_step() -> None:
    store = MemoryStore()
    result = await _run(_parent(PLAN), store)
    assert result.status == "completed", result.error
    assert result.steps["execute"].output == {"b": 2}
    [child] = [r for r in await store.list_runs(RunFilter(limit=10))
               if r.parent_run_id == result.run_id]
    assert (child.workflow, child.version) == ("planner.execute", 1)
    assert str(child.status) == "completed"
    stored = await store.get_workflow("planner.execute")
    assert stored.definition["name"] == "planner.execute"  # whatever name it gave
    assert "version" not in stored.definition or stored.definition["version"] is None


async def test_a_changed_definition_is_a_new_version_and_the_same_one_reuses_it() -> None:
    store = MemoryStore()
    await _run(_parent(PLAN), store)
    await _run(_parent(PLAN), store)
    assert (await store.get_workflow("planner.execute")).version == 1
    other = {**PLAN, "steps": [{"id": "only", "type": "transform", "value": 3}]}
    result = await _run(_parent(other), store)
    assert result.steps["execute"].output == {"only": 3}
    assert (await store.get_workflow("planner.execute")).version == 2


@pytest.mark.parametrize("value, expected", [
    ("not a graph", "expected a workflow definition (a mapping), got str"),
    ([1, 2], "expected a workflow definition (a mapping), got list"),
    (None, "expected a workflow definition (a mapping), got null"),
])
async def test_a_value_that_is_no_mapping_fails_naming_what_it_is(value: Any,
                                                                   expected: str) -> None:
    assert expected in await _error(value)


async def test_a_large_definition_is_checked_and_runs() -> None:
    """Past 500 steps the check runs in a worker thread: the same result."""
    plan = {"name": "wide", "steps": [{"id": f"s{i}", "type": "transform", "value": i}
                                      for i in range(700)]}
    result = await _run(_parent(plan, limits={"max_steps": 1000}))
    assert result.status == "completed", result.error
    assert result.steps["execute"].output == {f"s{i}": i for i in range(700)}
    error = await _error(plan, limits={"max_steps": 600})
    assert "700 steps, over the parent's limits.max_steps (600)" in error


def big_plan() -> dict[str, Any]:
    return {**PLAN, "description": "x" * (1 << 20)}


async def test_a_definition_past_one_mebibyte_fails_naming_its_size() -> None:
    wf = Workflow("big")
    wf.subworkflow("execute", definition=big_plan, retry={"max_retries": 0})
    engine = Engine(MemoryStore())
    try:
        result = await engine.run(wf.validate(), {})
    finally:
        engine.close()
    assert result.status == "failed"
    assert "1,048," in (result.steps["execute"].error or "")
    assert "bytes of JSON, over the 1 MiB a definition written at run time may have" \
        in (result.steps["execute"].error or "")


async def test_more_steps_than_the_parents_max_steps_fails_naming_both() -> None:
    plan = {"name": "p", "steps": [{"id": f"s{i}", "type": "transform", "value": i}
                                   for i in range(6)]}
    error = await _error(plan, limits={"max_steps": 5})
    assert "6 steps, over the parent's limits.max_steps (5)" in error


async def test_a_definition_may_not_raise_the_parents_limits() -> None:
    plan = {**PLAN, "limits": {"max_steps": 500}}
    error = await _error(plan, limits={"max_steps": 50})
    assert "limits.max_steps: asks for 500, over the parent's limits.max_steps (50)" \
        in error


async def test_nesting_past_the_parents_max_subworkflow_depth_fails() -> None:
    inner = {"name": "inner", "steps": [{"id": "x", "type": "transform", "value": 1}]}
    plan = {"name": "outer", "steps": [
        {"id": "sub", "type": "workflow", "workflow": "inner", "definition": inner}]}
    error = await _error(plan, limits={"max_subworkflow_depth": 1})
    assert "child workflows would be nested 2 deep, past the parent's " \
           "limits.max_subworkflow_depth (1)" in error
    result = await _run(_parent(plan, limits={"max_subworkflow_depth": 2}))
    assert result.status == "completed", result.error


async def test_an_unknown_step_type_and_every_other_problem_are_listed_at_once() -> None:
    plan = {"name": "p", "steps": [
        {"id": "a", "type": "shell", "command": "rm -rf /"},
        {"id": "b", "type": "transform", "value": 1, "depends_on": ["c"]},
        {"id": "c", "type": "transform", "value": 1, "depends_on": ["b"]}]}
    error = await _error(plan)
    assert "the definition written at run time is invalid (2 problems)" in error
    assert "steps[0].type: unknown step type 'shell'" in error
    assert "cycle: b -> c -> b" in error or "cycle: c -> b -> c" in error


async def test_python_steps_may_call_only_the_modules_the_step_allows() -> None:
    plan = {"name": "p", "steps": [
        {"id": "a", "type": "python", "call": "os:getcwd"},
        {"id": "b", "type": "python", "call": "json:dumps", "with": {"obj": [1]}}]}
    error = await _error(plan)
    assert "steps[0].call: module 'os' may not be called by a definition written at " \
           "run time (the step's allowed_modules: none)" in error
    assert "steps[1].call: module 'json'" in error
    result = await _run(_parent(plan, step={"allowed_modules": ["json", "os"]}))
    assert result.status == "completed", result.error
    error = await _error(plan, step={"allowed_modules": ["json"]})
    assert "module 'os'" in error and "module 'json'" not in error


async def test_a_nested_step_may_not_widen_allowed_modules() -> None:
    plan = {"name": "p", "steps": [
        {"id": "sub", "type": "workflow", "definition": "{{ input.graph }}",
         "allowed_modules": ["os"]}]}
    error = await _error(plan, step={"allowed_modules": ["json"]})
    assert "steps[0].allowed_modules[0]: 'os' is not within the step's " \
           "allowed_modules (json)" in error


async def test_a_rejected_definition_is_a_failed_attempt_retries_and_fallbacks_apply(
) -> None:
    wf = _parent("nope", step={"retry": {"max_retries": 2, "initial_delay": 0.01,
                                         "jitter": 0},
                               "fallback": {"output": {"planned": False}}})
    result = await _run(wf)
    assert result.status == "completed", result.error
    step = result.steps["execute"]
    assert step.attempts == 3 and step.fallback_used
    assert step.output == {"planned": False}


async def test_its_http_steps_follow_the_parents_network_policy() -> None:
    plan = {"name": "p", "steps": [
        {"id": "meta", "type": "http", "url": "http://169.254.169.254/latest",
         "retry": {"max_retries": 0}}]}
    store = MemoryStore()
    result = await _run(_parent(plan), store)
    assert result.status == "failed"
    [child] = [r for r in await store.list_runs(RunFilter(limit=10))
               if r.parent_run_id == result.run_id]
    [meta] = await store.get_steps(child.run_id)
    assert "169.254.169.254" in (meta.error or "")


async def test_untrusted_allowed_modules_only_narrow_the_servers_list() -> None:
    plan = {"name": "p", "steps": [{"id": "a", "type": "python", "call": "json:dumps",
                                    "with": {"obj": 1}}]}
    wf = _parent(plan, step={"allowed_modules": ["json"]})
    result = await _run(wf, trust=TrustPolicy())
    assert result.status == "failed"
    assert "module 'json' may not be called by a definition registered over the API" \
        in (result.steps["execute"].error or "")
    result = await _run(wf, trust=TrustPolicy(allowed_modules=("json",)))
    assert result.status == "completed", result.error
    narrowed = _parent(plan, step={"allowed_modules": ["math"]})
    result = await _run(narrowed, trust=TrustPolicy(allowed_modules=("json",)))
    assert "module 'json' may not be called by a definition written at run time" \
        in (result.steps["execute"].error or "")


def test_the_parent_is_validated_as_usual() -> None:
    with pytest.raises(DefinitionError) as caught:
        Workflow.from_dict({"name": "p", "steps": [
            {"id": "a", "type": "workflow", "definition": "{{ steps.nope.output }}"},
            {"id": "b", "type": "workflow", "definition": 42},
            {"id": "c", "type": "workflow", "input": {}},
            {"id": "d", "type": "workflow", "definition": {"name": "x", "steps": []},
             "allowed_modules": ["json"]}]}).validate()
    text = str(caught.value)
    assert "steps[0].definition: template reads unknown step 'nope'" in text
    assert "steps[1].definition: expected a workflow definition (a mapping), or a " \
           "template" in text
    assert "steps[2].workflow: missing field 'workflow'" in text
    assert "steps[3].allowed_modules: applies only to a definition written at run " \
           "time" in text


def make_plan(plan: dict[str, Any], input: dict[str, Any]) -> dict[str, Any]:
    return {"name": "made", "steps": [
        {"id": t, "type": "transform", "value": f"{t}-{input['suffix']}"}
        for t in plan["topics"]]}


async def test_python_a_function_writes_the_definition_from_its_bound_parameters(
) -> None:
    wf = Workflow("research")

    @wf.step
    def plan() -> dict[str, Any]:
        return {"topics": ["market", "tech"]}

    wf.subworkflow("execute", definition=make_plan)  # `plan`: an implied dependency
    store = MemoryStore()
    engine = Engine(store)
    try:
        result = await engine.run(wf.validate(), {"suffix": "x"})
    finally:
        engine.close()
    assert result.status == "completed", result.error
    assert result.steps["execute"].output == {"market": "market-x", "tech": "tech-x"}
    assert wf.to_dict()["steps"][1]["call"].endswith(":make_plan")
    assert wf.to_dict()["steps"][1]["depends_on"] == ["plan"]
    assert (await store.get_workflow("research.execute")).version == 1


async def test_python_a_template_string_and_a_dict() -> None:
    wf = Workflow("p")
    wf.add_step("plan", type="transform", value={"n": 4})
    wf.subworkflow("inline", definition={"name": "fixed", "steps": [
        {"id": "x", "type": "transform", "value": 1}]})
    wf.subworkflow("planned", definition="{{ input.graph }}", input={"n": 2})
    graph = {"name": "g", "steps": [{"id": "y", "type": "transform",
                                     "value": "{{ input.n * 3 }}"}]}
    engine = Engine(MemoryStore())
    try:
        result = await engine.run(wf.validate(), {"graph": graph})
    finally:
        engine.close()
    assert result.status == "completed", result.error
    assert result.steps["inline"].output == {"x": 1}
    assert result.steps["planned"].output == {"y": 6}
