"""The Python API refuses mistakes instead of ignoring them: unknown
keyword arguments, unknown reducers, exception names that name no exception."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait import DefinitionError, Retry, Workflow
from plait.core.model import RetryPolicy

from .conftest import RunWf


class Transient(Exception):
    """An exception of the step module's own (named by retry_on below)."""


def problems(info: pytest.ExceptionInfo[DefinitionError]) -> list[str]:
    return [str(p) for p in info.value.problems]


# ---------------------------------------------------------------- keyword arguments


def test_misspelled_step_options_are_refused_with_the_right_name() -> None:
    wf = Workflow("typos")
    with pytest.raises(DefinitionError) as info:
        @wf.step(timout=5, retyr=2, dependson=["a"])
        def fetch() -> int:
            return 1
    assert problems(info) == [
        "steps[0].timout: unknown keyword argument 'timout' for step 'fetch' "
        "(did you mean 'timeout'?)",
        "steps[0].retyr: unknown keyword argument 'retyr' for step 'fetch' "
        "(did you mean 'retry'?)",
        "steps[0].dependson: unknown keyword argument 'dependson' for step 'fetch' "
        "(did you mean 'depends_on'?)",
    ]
    assert wf._pending == []  # nothing was added


def test_add_step_refuses_a_field_the_type_does_not_have() -> None:
    wf = Workflow("typos")
    with pytest.raises(DefinitionError) as info:
        wf.add_step("t", type="transform", valeu=1)
    assert problems(info) == ["steps[0].valeu: unknown keyword argument 'valeu' for step "
                              "'t' (did you mean 'value'?)"]
    with pytest.raises(DefinitionError) as info:
        wf.add_step("p", lambda: 1, with_={"x": 1}, url="http://x")
    assert problems(info)[0].startswith("steps[0].url: unknown keyword argument 'url'")


def test_add_step_takes_type_fields_and_keyword_fields_with_an_underscore() -> None:
    wf = Workflow("fields")
    wf.add_step("gate", type="condition", if_="{{ input.go }}", then=["yes"])
    wf.add_step("yes", type="transform", value="ran")
    spec = wf.validate().spec
    assert spec.steps[0].config == {"if": "{{ input.go }}"}
    assert spec.steps[0].then == ("yes",)
    assert wf.run({"go": True}).steps["yes"].output == "ran"


def test_workflow_constructor_refuses_unknown_keywords() -> None:
    with pytest.raises(DefinitionError) as info:
        Workflow("w", concurency=3)  # type: ignore[call-arg]
    assert problems(info) == ["concurency: unknown keyword argument 'concurency' for "
                              "Workflow('w') (did you mean 'concurrency'?)"]


# ---------------------------------------------------------------- reducers


def test_unknown_reducer_is_a_validation_problem_listing_the_builtins(
        tmp_path: Path) -> None:
    wf = Workflow("reduce", reducers={"k": "concat", "n": "maxx"})
    wf.add_step("a", lambda: {"k": [1], "n": 1}, outputs=["k", "n"])
    wf.add_step("b", lambda: {"k": [2], "n": 2}, outputs=["k", "n"])
    db = tmp_path / "runs.db"
    with pytest.raises(DefinitionError) as info:
        wf.run(db=f"sqlite:///{db}")
    builtins = "built-in reducers: append, extend, merge, sum, max, min, replace_last"
    assert problems(info) == [
        f"reducers.k: unknown reducer 'concat' ({builtins})",
        f"reducers.n: unknown reducer 'maxx' (did you mean 'max'? {builtins})",
    ]
    assert not db.exists()  # refused before anything was stored


def test_unknown_reducer_in_a_definition_names_the_builtins_too() -> None:
    with pytest.raises(DefinitionError) as info:
        Workflow.from_dict({"name": "r", "reducers": {"k": "concat"},
                            "steps": [{"id": "a", "type": "transform", "value": 1}]})
    assert problems(info) == ["reducers.k: unknown reducer 'concat' (built-in reducers: "
                              "append, extend, merge, sum, max, min, replace_last)"]


# ---------------------------------------------------------------- exceptions


async def test_no_retry_on_accepts_exception_classes_and_exception_matches_all(
        run_wf: RunWf) -> None:
    calls: list[int] = []

    def fail() -> None:
        calls.append(1)
        raise ValueError("no")

    wf = Workflow("classes")
    wf.add_step("f", fail, retry=Retry(max_retries=3, initial_delay=0.001,
                                       no_retry_on=[Exception]))
    result = await run_wf(wf)
    assert (result.status, result.steps["f"].attempts, len(calls)) == ("failed", 1, 1)
    assert wf.to_dict()["steps"][0]["retry"]["no_retry_on"] == ["Exception"]


async def test_a_policy_built_directly_with_classes_gets_their_names(run_wf: RunWf) -> None:
    def fail() -> None:
        raise Transient("again")

    wf = Workflow("direct")
    wf.add_step("f", fail, retry=RetryPolicy(max_retries=2, initial_delay=0.001,
                                             retry_on=(Transient,)))  # type: ignore[arg-type]
    # a module-level class is named by its dotted path, so YAML finds it again
    dotted = f"{__name__}.Transient"
    assert wf.to_dict()["steps"][0]["retry"]["retry_on"] == [dotted]
    result = await run_wf(wf)
    assert (result.status, result.steps["f"].attempts) == ("failed", 3)


def test_retry_entries_that_are_not_exceptions_are_refused() -> None:
    with pytest.raises(DefinitionError) as info:
        Retry(retry_on=[ValueError, 5, int])  # type: ignore[list-item]
    assert problems(info) == ["retry.retry_on[1]: expected an exception name or class, got 5",
                              "retry.retry_on[2]: expected an exception name or class, "
                              "got <class 'int'>"]
    wf = Workflow("shape")
    wf.add_step("a", lambda: 1, retry=RetryPolicy(no_retry_on=("not a name",)))
    with pytest.raises(DefinitionError) as info:
        wf.validate()
    assert problems(info) == ["steps[0].retry.no_retry_on[0]: expected an exception name "
                              "(ValueError, package.module.ClassName), got 'not a name'"]


def test_misspelled_exception_names_are_refused_with_a_suggestion() -> None:
    wf = Workflow("names")
    wf.add_step("a", lambda: 1, retry=Retry(retry_on=["ValueEror", "Transient",
                                                      "FatalError", "json.JSONDecodeError",
                                                      "json.NoSuchError"]))
    with pytest.raises(DefinitionError) as info:
        wf.validate()
    assert problems(info) == [
        "steps[0].retry.retry_on[0]: 'ValueEror' is not an exception plait or the step "
        "modules know (step 'a'); it would never match (did you mean 'ValueError'?)",
        "steps[0].retry.retry_on[4]: 'json.NoSuchError' is not an exception plait or the "
        "step modules know (step 'a'); it would never match (for an exception of your "
        "own, give its dotted path (package.module.ClassName))",
    ]


def test_exception_names_in_a_file_are_checked_when_imports_are(tmp_path: Path) -> None:
    definition = {"name": "names", "steps": [
        {"id": "a", "type": "python", "call": f"{__name__}:Transient",
         "retry": {"retry_on": ["Transient", "ValueEror"]}}]}
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(definition))
    Workflow.load(path)  # without imports, any name is accepted
    with pytest.raises(DefinitionError) as info:
        Workflow.load(path, check_imports=True)
    assert [p.location for p in info.value.problems] == ["steps[0].retry.retry_on[1]"]
    with pytest.raises(DefinitionError) as info:  # and running checks them first
        Workflow.load(path).run(db="memory://")
    assert [p.location for p in info.value.problems] == ["steps[0].retry.retry_on[1]"]


@pytest.mark.parametrize(("value", "message"), [
    ({1, 2}, "steps[0].value: value is a set, which is not JSON"),
    (b"x", "steps[0].value: value is a bytes, which is not JSON"),
    ({"s": "x\ud800y"}, "steps[0].value.s: value has a string with a lone surrogate"),
    (float("nan"), "steps[0].value: value is nan, which JSON cannot hold"),
    ({1: "a"}, "steps[0].value: value has a int key 1"),
])
def test_a_python_built_step_with_a_value_that_is_not_json_is_a_definition_problem(
        value: object, message: str) -> None:
    wf = Workflow("values")
    wf.add_step("a", type="transform", value=value)
    with pytest.raises(DefinitionError) as caught:
        wf.validate()
    assert message in str(caught.value)


def test_python_with_and_fallback_output_and_run_output_are_checked_too() -> None:
    def f(x: object) -> object:
        return x

    wf = Workflow("values", output={"o": {1}})
    wf.add_step("a", f, with_={"x": b"raw"}, fallback={"output": {2}})
    with pytest.raises(DefinitionError) as caught:
        wf.run({})
    text = str(caught.value)
    assert "steps[0].with.x: value is a bytes" in text
    assert "steps[0].fallback.output: value is a set" in text
    assert "output: value is a set" in text


def test_depends_on_takes_a_step_function_or_refuses_naming_it() -> None:
    wf = Workflow("fn-deps")

    @wf.step
    def collect() -> list[int]:
        return [1, 2]

    @wf.step(depends_on=[collect])
    def report() -> str:
        return "done"

    assert wf.to_dict()["steps"][1]["depends_on"] == ["collect"]
    assert wf.run({}).status == "completed"

    def stranger() -> None: ...

    with pytest.raises(TypeError, match=r"step 'late'.*'stranger' is neither"):
        wf.add_step("late", collect, depends_on=[stranger])
