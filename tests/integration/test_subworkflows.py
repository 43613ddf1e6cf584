"""``workflow`` and ``loop`` steps: child runs by name, name@version and
relative path, isolation, output, failure, cancellation, the depth limit, and loops
(``loop.iteration``, ``loop.previous``, ``until``, ``max_iterations``)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

from plait import Workflow
from plait.core.child_ids import child_run_id
from plait.core.states import RunStatus
from plait.errors import DefinitionError
from plait.runtime.engine import Engine
from plait.store import MemoryStore, open_store
from plait.store.base import RunFilter, Store

CHILD = {
    "name": "double",
    "input": {"type": "object", "properties": {"n": {"type": "integer"}},
              "required": ["n"]},
    "steps": [{"id": "twice", "type": "transform",
               "value": {"n": "{{ input.n * 2 }}", "big": "{{ input.n * 2 >= 10 }}",
                         "saw_parent_state": "{{ state.secret is defined }}"}}],
    "output": "{{ steps.twice.output }}",
}


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


async def _run(store: Store, wf: Workflow, input: Any = None) -> Any:
    engine = Engine(store)
    try:
        return await asyncio.wait_for(engine.run(wf.validate(), input or {}), 20)
    finally:
        engine.close()


async def _children(store: Store, parent: str) -> list[Any]:
    return [r for r in await store.list_runs(RunFilter(limit=1000))
            if r.parent_run_id == parent]


def _parent(step: dict[str, Any], **more: Any) -> Workflow:
    return Workflow.from_dict({"name": "parent", **more, "steps": [
        {"id": "setup", "type": "python", "call": "json:dumps", "with": {"obj": 1},
         "outputs": ["secret"]}, {**step, "depends_on": ["setup"]}]})


async def _stored_child(store: Store) -> None:
    await _run(store, Workflow.from_dict(CHILD), {"n": 1})  # stores `double` v1


async def test_a_stored_child_by_name_returns_its_output_and_sees_only_its_input() -> None:
    store = MemoryStore()
    await _stored_child(store)
    wf = _parent({"id": "sub", "type": "workflow", "workflow": "double",
                  "input": {"n": "{{ 3 + 1 }}"}})
    result = await _run(store, wf)
    assert result.status == "completed", result.error
    assert result.steps["sub"].output == {"n": 8, "big": False, "saw_parent_state": False}
    [child] = await _children(store, result.run_id)
    assert child.run_id == child_run_id(result.run_id, "sub", "0")
    assert child.workflow == "double" and child.input == {"n": 4}


async def test_name_at_version_runs_that_version_and_a_missing_version_fails_naming_it(
) -> None:
    store = MemoryStore()
    await _stored_child(store)
    v2 = {**CHILD, "steps": [{"id": "twice", "type": "transform", "value": "v2"}],
          "output": "{{ steps.twice.output }}"}
    await _run(store, Workflow.from_dict(v2), {"n": 1})
    ok = await _run(store, _parent({"id": "sub", "type": "workflow",
                                    "workflow": "double@1", "input": {"n": 1}}))
    assert ok.steps["sub"].output["n"] == 2
    latest = await _run(store, _parent({"id": "sub", "type": "workflow",
                                        "workflow": "double", "input": {"n": 1}}))
    assert latest.steps["sub"].output == "v2"
    bad = await _run(store, _parent({"id": "sub", "type": "workflow",
                                     "workflow": "double@7", "input": {"n": 1}}))
    assert bad.status == "failed"
    assert bad.steps["sub"].attempts == 1  # never retried
    assert "'double' has versions 1, 2; no version 7" in (bad.steps["sub"].error or "")


async def test_an_unknown_child_fails_the_step_naming_it() -> None:
    result = await _run(MemoryStore(), _parent({"id": "sub", "type": "workflow",
                                                "workflow": "nope", "input": {}}))
    assert result.status == "failed"
    assert "no stored workflow 'nope'" in (result.steps["sub"].error or "")


async def test_child_input_that_fails_its_schema_fails_the_step_naming_the_child() -> None:
    store = MemoryStore()
    await _stored_child(store)
    result = await _run(store, _parent({"id": "sub", "type": "workflow",
                                        "workflow": "double", "input": {"n": "x"}}))
    assert result.status == "failed"
    error = result.steps["sub"].error or ""
    assert "input of child workflow 'double' is not valid" in error
    assert await _children(store, result.run_id) == []


async def test_a_failed_child_fails_the_step_naming_the_child_run_and_its_error() -> None:
    store = MemoryStore()
    broken = {"name": "broken", "steps": [
        {"id": "boom", "type": "transform", "value": "{{ input.missing.deeper }}"}]}
    await _run(store, Workflow.from_dict(broken))
    result = await _run(store, _parent({"id": "sub", "type": "workflow",
                                        "workflow": "broken"}))
    assert result.status == "failed"
    [child] = await _children(store, result.run_id)
    assert child.status is RunStatus.FAILED
    error = result.steps["sub"].error or ""
    assert f"child run {child.run_id} of workflow 'broken' failed" in error
    assert "boom" in error


async def test_nesting_past_max_subworkflow_depth_fails_with_a_clear_error() -> None:
    store = MemoryStore()
    recursive = Workflow.from_dict({
        "name": "rec", "limits": {"max_subworkflow_depth": 2},
        "steps": [{"id": "again", "type": "workflow", "workflow": "rec"}]})
    result = await _run(store, recursive)  # rec -> rec -> rec -> (depth 3) refused
    assert result.status == "failed"
    runs = await store.list_runs(RunFilter(limit=100))
    assert len(runs) == 3
    deepest = [r for r in runs if r.parent_run_id is not None
               and any(p.parent_run_id is not None and p.run_id == r.parent_run_id
                       for p in runs)]
    [last] = deepest
    steps = {s.step_id: s for s in await store.get_steps(last.run_id)}
    assert "past limits.max_subworkflow_depth (2)" in (steps["again"].error or "")


async def test_cancelling_the_parent_cancels_the_child(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'plait.db'}")
    await store.open()
    try:
        slow = Workflow.from_dict({"name": "slow", "steps": [
            {"id": "wait", "type": "delay", "duration": "30s"}]})
        engine = Engine(store)
        parent = _parent({"id": "sub", "type": "workflow", "workflow": "slow"})
        await engine.submit(slow.validate(), {})  # stores `slow` (never run)
        run = await engine.submit(parent.validate(), {})
        task = asyncio.create_task(engine.execute(parent.validate(), run))
        child_id = child_run_id(run.run_id, "sub", "0")
        for _ in range(400):
            runs = {r.run_id: r for r in await store.list_runs(RunFilter(limit=10))}
            if child_id in runs and runs[child_id].status is RunStatus.RUNNING:
                break
            await asyncio.sleep(0.01)
        await engine.cancel(run.run_id)
        result = await asyncio.wait_for(task, 10)
        assert result.status == "cancelled"
        assert (await store.get_run(child_id)).status is RunStatus.CANCELLED
        engine.close()
    finally:
        await store.close()


# ------------------------------------------------------------------ files


async def test_a_child_file_is_loaded_with_the_parent_and_stored_when_it_runs(
        tmp_path: Path) -> None:
    _write(tmp_path / "review.yaml", """\
        name: review
        input: {type: object, properties: {draft: {type: string}}, required: [draft]}
        steps:
          - id: judge
            type: transform
            value: {approved: "{{ input.draft | length > 3 }}"}
        output: "{{ steps.judge.output }}"
        """)
    parent = _write(tmp_path / "flow.yaml", """\
        name: flow
        steps:
          - id: check
            type: workflow
            workflow: ./review.yaml
            input: {draft: "hello"}
        """)
    store = MemoryStore()
    result = await _run(store, Workflow.load(parent))
    assert result.status == "completed", result.error
    assert result.steps["check"].output == {"approved": True}
    assert (await store.get_workflow("review")).version == 1
    # the parent's stored definition holds the child: a resume needs no file
    stored = (await store.get_workflow("flow")).definition
    assert stored["steps"][0]["definition"]["name"] == "review"


def test_a_child_files_problems_are_reported_at_the_step(tmp_path: Path) -> None:
    _write(tmp_path / "bad.yaml", """\
        name: bad
        steps:
          - id: a
            type: transfrom
            value: 1
        """)
    parent = _write(tmp_path / "flow.yaml", """\
        name: flow
        steps:
          - {id: x, type: transform, value: 1}
          - {id: sub, type: workflow, workflow: ./bad.yaml, depends_on: [x]}
          - {id: gone, type: workflow, workflow: ./missing.yaml}
        """)
    with pytest.raises(DefinitionError) as caught:
        Workflow.load(parent)
    text = str(caught.value)
    assert "steps[1].workflow: ./bad.yaml: steps[0].type" in text
    assert "steps[2].workflow" in text and "cannot read" in text
    assert "is a file path" not in text  # each child problem reported once


def test_a_workflow_that_includes_itself_by_path_is_a_validation_error(
        tmp_path: Path) -> None:
    _write(tmp_path / "a.yaml", """\
        name: a
        steps:
          - {id: sub, type: workflow, workflow: ./b.yaml}
        """)
    _write(tmp_path / "b.yaml", """\
        name: b
        steps:
          - {id: back, type: workflow, workflow: ./a.yaml}
        """)
    with pytest.raises(DefinitionError) as caught:
        Workflow.load(tmp_path / "a.yaml")
    assert "includes itself: a.yaml -> b.yaml -> a.yaml" in str(caught.value)


@pytest.mark.parametrize(("step", "where", "message"), [
    ({"type": "workflow", "workflow": "x@y"}, "workflow", "expected name@VERSION"),
    ({"type": "workflow"}, "workflow", "missing"),
    ({"type": "workflow", "workflow": "./child.yaml"}, "workflow", "file path"),
    ({"type": "workflow", "workflow": "x", "input": [1]}, "input", "expected a mapping"),
    ({"type": "loop", "workflow": "x", "until": "{{ true }}"}, "max_iterations", ""),
    ({"type": "loop", "workflow": "x", "until": "{{ true }}", "max_iterations": 0},
     "max_iterations", "from 1 to"),
    ({"type": "loop", "workflow": "x", "until": "{{ true }}", "max_iterations": 2,
      "on_max_iterations": "ignore"}, "on_max_iterations", "'fail' or 'complete'"),
])
def test_bad_fields_are_validation_errors(step: dict[str, Any], where: str,
                                          message: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        Workflow.from_dict({"name": "p", "steps": [{"id": "s", **step}]})
    text = str(caught.value)
    assert f"steps[0].{where}" in text and message in text


def test_template_problems_of_a_loop_are_validation_errors() -> None:
    with pytest.raises(DefinitionError) as caught:
        Workflow.from_dict({"name": "p", "steps": [
            {"id": "a", "type": "transform", "value": 1},
            {"id": "l", "type": "loop", "workflow": "x", "max_iterations": 2,
             "until": "{{ loop.output.ok", "input": {"v": "{{ steps.a.output }}"}}]})
    text = str(caught.value)
    assert "steps[1].until" in text
    assert "steps[1].input.v: template reads steps.a, which is not an ancestor" in text


def test_an_inline_child_definition_is_validated_with_the_parent() -> None:
    with pytest.raises(DefinitionError) as caught:
        Workflow.from_dict({"name": "p", "steps": [
            {"id": "s", "type": "workflow", "workflow": "c",
             "definition": {"name": "c", "steps": [{"id": "x", "type": "nope"}]}}]})
    assert "steps[0].definition: steps[0].type" in str(caught.value)


def test_a_cycle_of_edges_suggests_a_loop_step() -> None:
    with pytest.raises(DefinitionError) as caught:
        Workflow.from_dict({"name": "p", "steps": [
            {"id": "a", "type": "transform", "value": 1, "depends_on": ["b"]},
            {"id": "b", "type": "transform", "value": 1, "depends_on": ["a"]}]})
    assert "cycle: a -> b -> a (remove one of these dependencies; to repeat steps until " \
           "a condition holds, use a `loop` step)" in str(caught.value)


# ------------------------------------------------------------------ loops


def _loop(**fields: Any) -> Workflow:
    return _parent({"id": "revise", "type": "loop", "workflow": "double",
                    "input": {"n": "{{ loop.previous.n if loop.previous else 1 }}"},
                    "until": "{{ loop.output.big }}", **fields})


async def test_a_loop_repeats_until_its_condition_holds() -> None:
    store = MemoryStore()
    await _stored_child(store)
    result = await _run(store, _loop(max_iterations=5))
    assert result.status == "completed", result.error
    # 1 -> 2, 2 -> 4, 4 -> 8, 8 -> 16 (big)
    assert result.steps["revise"].output == {
        "iterations": 4, "output": {"n": 16, "big": True, "saw_parent_state": False}}
    children = await _children(store, result.run_id)
    assert sorted(c.input["n"] for c in children) == [1, 2, 4, 8]
    assert {c.run_id for c in children} == {
        child_run_id(result.run_id, "revise", str(i)) for i in range(4)}


async def test_a_loop_sees_its_iteration() -> None:
    store = MemoryStore()
    await _stored_child(store)
    wf = _parent({"id": "count", "type": "loop", "workflow": "double",
                  "input": {"n": "{{ loop.iteration }}"},
                  "until": "{{ loop.iteration == 2 }}", "max_iterations": 9})
    result = await _run(store, wf)
    assert result.steps["count"].output["iterations"] == 3
    assert result.steps["count"].output["output"]["n"] == 4


async def test_reaching_max_iterations_fails_the_step_naming_the_count() -> None:
    store = MemoryStore()
    await _stored_child(store)
    result = await _run(store, _loop(max_iterations=2))
    assert result.status == "failed"
    assert result.steps["revise"].attempts == 1
    assert "after max_iterations (2) iterations" in (result.steps["revise"].error or "")
    assert len(await _children(store, result.run_id)) == 2


async def test_on_max_iterations_complete_returns_the_last_output() -> None:
    store = MemoryStore()
    await _stored_child(store)
    result = await _run(store, _loop(max_iterations=2, on_max_iterations="complete"))
    assert result.status == "completed"
    assert result.steps["revise"].output["iterations"] == 2
    assert result.steps["revise"].output["output"]["n"] == 4


# ------------------------------------------------------------------ Python API


async def test_python_helpers_add_workflow_and_loop_steps() -> None:
    store = MemoryStore()
    await _stored_child(store)
    inline = Workflow.from_dict({**CHILD, "name": "inline"})
    wf = Workflow("py_parent")
    wf.subworkflow("by_name", workflow="double", input={"n": 2})
    wf.subworkflow("by_object", workflow=inline, input={"n": 3})
    wf.loop("grow", workflow=inline, input={"n": "{{ loop.iteration + 4 }}"},
            until="{{ loop.output.big }}", max_iterations=3, depends_on=["by_name"])
    result = await _run(store, wf)
    assert result.status == "completed", result.error
    assert result.steps["by_name"].output["n"] == 4
    assert result.steps["by_object"].output["n"] == 6
    assert result.steps["grow"].output["iterations"] == 2  # 4 -> 8, 5 -> 10 (big)
    assert (await store.get_workflow("inline")).version == 1
    again = Workflow.from_dict(wf.to_dict())  # round-trips
    assert again.fingerprint == wf.fingerprint


async def test_a_child_that_waits_for_a_person_goes_on_when_approved(
        tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'plait.db'}")
    await store.open()
    engine = Engine(store)
    try:
        gate = Workflow.from_dict({"name": "gate", "steps": [
            {"id": "ok", "type": "approval"}]})
        await engine.submit(gate.validate(), {})  # stores `gate`
        parent = _parent({"id": "sub", "type": "workflow", "workflow": "gate"})
        run = await engine.submit(parent.validate(), {})
        task = asyncio.create_task(engine.execute(parent.validate(), run))
        child_id = child_run_id(run.run_id, "sub", "0")
        for _ in range(400):
            runs = {r.run_id: r for r in await store.list_runs(RunFilter(limit=10))}
            if child_id in runs and runs[child_id].status is RunStatus.WAITING:
                break
            await asyncio.sleep(0.01)
        await Engine(store).approve(child_id, "ok", by="ana")  # as another process
        result = await asyncio.wait_for(task, 10)
        assert result.status == "completed"
        assert result.steps["sub"].output["ok"]["by"] == "ana"
    finally:
        engine.close()
        await store.close()


async def test_a_child_approvals_deadline_is_applied_while_the_parent_waits(
        tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'plait.db'}")
    await store.open()
    engine = Engine(store)
    try:
        gate = Workflow.from_dict({"name": "gate", "steps": [
            {"id": "ok", "type": "approval", "timeout": 0.4, "on_timeout": "approve"}]})
        await engine.submit(gate.validate(), {})  # stores `gate`
        parent = _parent({"id": "sub", "type": "workflow", "workflow": "gate"})
        result = await asyncio.wait_for(engine.run(parent.validate(), {}), 10)
        assert result.status == "completed"
        assert result.steps["sub"].output["ok"]["by"] == "timeout"
        child_id = child_run_id(result.run_id, "sub", "0")
        runs = [e for e in await store.get_events(child_id) if e.kind == "run"]
        assert len(runs) <= 6  # waited without resuming the child over and over
    finally:
        engine.close()
        await store.close()


def test_a_missing_field_of_a_loop_is_reported_once() -> None:
    with pytest.raises(DefinitionError) as info:
        Workflow.from_dict({"name": "bare", "steps": [{"id": "again", "type": "loop"}]})
    found = sorted(str(p) for p in info.value.problems)
    assert len(found) == 3, found
    for field in ("workflow", "until", "max_iterations"):
        assert [p for p in found if f"steps[0].{field}" in p] == [
            p for p in found if f"missing field '{field}'" in p], found


async def test_a_maps_inline_step_naming_a_file_is_loaded_and_stored_with_the_parent(
        tmp_path: Path) -> None:
    _write(tmp_path / "double.yaml", """\
        name: double
        steps:
          - {id: twice, type: transform, value: "{{ input.n * 2 }}"}
        output: "{{ steps.twice.output }}"
        """)
    parent = _write(tmp_path / "flow.yaml", """\
        name: flow
        steps:
          - id: each
            type: map
            over: [1, 2, 3]
            step: {type: workflow, workflow: ./double.yaml, input: {n: "{{ item }}"}}
        """)
    store = MemoryStore()
    result = await _run(store, Workflow.load(parent))
    assert result.status == "completed", result.error
    assert result.steps["each"].output == [2, 4, 6]
    stored = (await store.get_workflow("flow")).definition
    assert stored["steps"][0]["step"]["definition"]["name"] == "double"
    assert len(await _children(store, result.run_id)) == 3


def test_a_maps_inline_step_naming_a_file_from_data_says_what_to_do() -> None:
    with pytest.raises(DefinitionError) as caught:
        Workflow.from_dict({"name": "p", "steps": [
            {"id": "m", "type": "map", "over": [1],
             "step": {"type": "workflow", "workflow": "./agent_step.yaml"}}]})
    problem, = caught.value.problems
    assert problem.location == "steps[0].step.workflow"
    assert "given as data, without a file: load it from its file" in problem.message
