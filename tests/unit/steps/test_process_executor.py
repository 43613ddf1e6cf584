"""What validation says of ``executor`` (the python step field choosing a worker thread
or a child process): its values, the other step types, ``defaults.python``, and the
functions a child process cannot run (async, taking ``ctx``, not importable)."""

from __future__ import annotations

from typing import Any

import pytest

from plait import Workflow
from plait.definitions import check_definition
from plait.errors import DefinitionError, Problem
from plait.steps.context import StepContext


def sync_step(x: int = 1) -> int:
    return x


async def async_step() -> int:
    return 1


def ctx_step(ctx):  # type: ignore[no-untyped-def]
    return 1


def annotated_ctx_step(context: StepContext) -> int:
    return 1


def _problems(definition: dict[str, Any]) -> list[Problem]:
    with pytest.raises(DefinitionError) as caught:
        check_definition(definition, check_imports=True)
    return list(caught.value.problems)


def _python(function: str, **step: Any) -> dict[str, Any]:
    return {"name": "w", "steps": [{"id": "s", "type": "python",
                                    "call": f"{__name__}:{function}", **step}]}


def test_a_sync_function_takes_either_executor() -> None:
    for executor in ("thread", "process"):
        checked = check_definition(_python("sync_step", executor=executor),
                                   check_imports=True)
        assert checked.spec.steps[0].config["executor"] == executor


def test_an_unknown_executor_is_refused_at_its_field() -> None:
    [problem] = _problems(_python("sync_step", executor="fork"))
    assert problem.location == "steps[0].executor"
    assert "expected 'thread' (the default) or 'process', got 'fork'" in problem.message


def test_an_async_function_cannot_run_in_a_process() -> None:
    [problem] = _problems(_python("async_step", executor="process"))
    assert problem.location == "steps[0].executor"
    assert "sync functions only; this one is async" in problem.message


@pytest.mark.parametrize("function", ["ctx_step", "annotated_ctx_step"])
def test_a_function_taking_the_step_context_cannot_run_in_a_process(function: str) -> None:
    [problem] = _problems(_python(function, executor="process"))
    assert problem.location == "steps[0].executor"
    assert "cannot pass the step context" in problem.message


def test_another_step_type_has_no_executor_and_the_hint_says_whose_it_is() -> None:
    [problem] = _problems({"name": "w", "steps": [{
        "id": "s", "type": "transform", "value": 1, "executor": "process"}]})
    assert (problem.location, problem.message) == ("steps[0].executor",
                                                   "unknown field for a transform step")
    assert problem.hint == "'executor' is a field of python steps only"


def test_defaults_python_sets_the_executor_of_every_python_step() -> None:
    checked = check_definition({
        "name": "w", "defaults": {"python": {"executor": "process"}},
        "steps": [{"id": "a", "type": "python", "call": f"{__name__}:sync_step"},
                  {"id": "b", "type": "python", "call": f"{__name__}:sync_step",
                   "executor": "thread"}]}, check_imports=True)
    assert [s.config.get("executor") for s in checked.spec.steps] == ["process", "thread"]


def test_defaults_python_refuses_an_unknown_executor_once() -> None:
    [problem] = _problems({"name": "w", "defaults": {"python": {"executor": "fork"}},
                           "steps": [{"id": "a", "type": "python",
                                      "call": f"{__name__}:sync_step"}]})
    assert problem.location == "defaults.python.executor"


def test_the_python_api_takes_executor_and_refuses_a_function_it_cannot_import() -> None:
    def nested(x: int = 1) -> int:
        return x

    wf = Workflow("w")
    wf.add_step("s", sync_step, executor="process")
    assert wf.validate().spec.steps[0].config["executor"] == "process"
    bad = Workflow("w2")
    bad.add_step("s", nested, executor="process")
    bad.validate()  # what imports is checked before a run starts
    with pytest.raises(DefinitionError) as caught:
        bad.run({})
    [problem] = caught.value.problems
    assert problem.location == "steps[0].executor"
    assert "imports the function by" in problem.message
    assert "a nested function cannot run in a process" in problem.message
