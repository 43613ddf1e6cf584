"""Outputs must be JSON: a value a store cannot hold fails its step cleanly.

A lone surrogate, an integer past 4,300 digits, nesting past 256 levels, NaN, sets,
bytes, or an output over ``limits.max_output_bytes`` fails the step without retry with
an OutputError naming the key path; the run goes on by its failure rules, ends in a final
state, and the store holds it all (memory and SQLite alike).  A hypothesis property
checks the same for any JSON-ish value: it round-trips exactly, or fails the step
cleanly.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
import respx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait import InputError, RunResult, Workflow
from plait.core.model import Limits
from plait.store import open_store
from plait.store.base import StepRecord

SURROGATE = "x\ud800y"
BIG_INT = 10**4300  # 4,301 digits
FAST_RETRY = {"max_retries": 2, "initial_delay": 0, "jitter": 0}
RETURNED: dict[str, Any] = {}  # what `produce` returns (the step must be importable)


async def produce() -> Any:
    return RETURNED["value"]


async def other() -> str:
    return "ran"


def nested(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def returning(value: Any, *, limits: Limits | None = None) -> Workflow:
    RETURNED["value"] = value
    wf = Workflow("values", limits=limits)
    wf.add_step("produce", produce, retry=FAST_RETRY["max_retries"])
    wf.add_step("other", other)
    return wf


async def stored_steps(db: str, run_id: str) -> dict[str, StepRecord]:
    """The steps as a second store object reads them back."""
    store = open_store(db)
    await store.open()
    try:
        run = await store.get_run(run_id)
        assert run.status in ("completed", "failed"), run.status
        return {s.step_id: s for s in await store.get_steps(run_id)}
    finally:
        await store.close()


@pytest.fixture(params=["memory", "sqlite"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return f"memory://values-{request.node.name}"
    return f"sqlite:///{tmp_path}/runs.db"


def assert_refused(result: RunResult, path: str, words: str) -> None:
    step = result.steps["produce"]
    assert (result.status, step.status, step.attempts) == ("failed", "failed", 1)
    assert step.error is not None
    assert step.error.startswith(f"OutputError: output{path}"), step.error
    assert words in step.error
    assert result.steps["other"].status == "completed"  # the run went on


@pytest.mark.parametrize(("value", "path", "words"), [
    ({"s": SURROGATE}, ".s", "lone surrogate '\\ud800' at position 1"),
    ({"items": [1, 2, 3, "a\udfffb"]}, ".items[3]", "lone surrogate"),
    ({"n": BIG_INT}, ".n", "more than 4,300 digits"),
    ({"n": -BIG_INT}, ".n", "more than 4,300 digits"),
    ({"d": nested(256)}, ".d[0][0]", "more than 256 levels"),  # 257 with the dict
    ({"f": math.nan}, ".f", "nan"),
    ({"f": -math.inf}, ".f", "-inf"),
    ({"tags": {1, 2}}, ".tags", "is a set"),
    ({"raw": b"\x00"}, ".raw", "is a bytes"),
    ({"k": {1: "one"}}, ".k", "int key 1"),
    ({"bad\ud800key": 1}, "", "key with a lone surrogate"),
])
async def test_a_value_no_store_can_hold_fails_the_step_without_retry(
        db: str, value: Any, path: str, words: str) -> None:
    result = await returning(value).run_async({}, db=db)

    assert_refused(result, path, words)
    stored = await stored_steps(db, result.run_id)
    assert stored["produce"].status == "failed"
    assert stored["produce"].error == result.steps["produce"].error
    assert stored["produce"].output is None


@pytest.mark.parametrize("value", [
    {"n": 10**4299 + 1, "m": -(10**4299)}, {"d": nested(255)},  # 256 levels
    {"s": "😀 é \u2028 \x00", "t": (1, "a")},
])
async def test_values_at_the_limits_round_trip(db: str, value: Any) -> None:
    result = await returning(value).run_async({}, db=db)

    expected = json.loads(json.dumps(value))
    assert result.steps["produce"].output == expected
    assert (await stored_steps(db, result.run_id))["produce"].output == expected


async def test_an_output_over_max_output_bytes_fails_naming_size_and_limit(db: str) -> None:
    wf = returning({"blob": "x" * 2000}, limits=Limits(max_output_bytes=1000))

    result = await wf.run_async({}, db=db)

    assert_refused(result, "", "2,011 bytes of JSON, over limits.max_output_bytes "
                               "(1,000 bytes)")
    assert (await stored_steps(db, result.run_id))["produce"].output is None


async def test_max_output_bytes_is_read_from_a_definition() -> None:
    wf = Workflow.from_dict({"name": "sized", "limits": {"max_output_bytes": "1KiB"},
                             "steps": [{"id": "t", "type": "transform",
                                        "value": "{{ 'x' * 1100 }}"}]})
    assert wf.spec.limits.max_output_bytes == 1024
    assert wf.to_dict()["limits"] == {"max_output_bytes": 1024}

    result = await wf.run_async({})

    step = result.steps["t"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert "1,102 bytes of JSON, over limits.max_output_bytes (1,024 bytes)" in str(step.error)


@pytest.mark.parametrize("limit", [0, "lots", True, "-5MiB"])
def test_a_bad_max_output_bytes_is_a_definition_problem(limit: object) -> None:
    from plait import DefinitionError

    with pytest.raises(DefinitionError) as excinfo:
        Workflow.from_dict({"name": "sized", "limits": {"max_output_bytes": limit},
                            "steps": [{"id": "t", "type": "transform", "value": 1}]})
    assert [p.location for p in excinfo.value.problems] == ["limits.max_output_bytes"]


async def test_a_transform_rendering_a_lone_surrogate_fails_cleanly(db: str) -> None:
    wf = Workflow.from_dict({"name": "tr", "steps": [
        {"id": "t", "type": "transform", "value": {"s": "{{ input.a ~ '\\ud800' }}"}},
        {"id": "after", "type": "transform", "value": 1, "depends_on": ["t"],
         "trigger": "all_done"}]})

    result = await wf.run_async({"a": "x"}, db=db)

    step = result.steps["t"]
    assert (result.status, step.status, step.attempts) == ("failed", "failed", 1)
    assert step.error is not None and "output.s has a string with a lone surrogate" in step.error
    assert result.steps["after"].status == "completed"
    assert (await stored_steps(db, result.run_id))["t"].status == "failed"


async def test_a_fallback_output_that_is_not_json_fails_the_step(db: str) -> None:
    wf = Workflow.from_dict({"name": "fb", "steps": [
        {"id": "t", "type": "transform", "value": "{{ 1 / 0 }}",
         "fallback": {"output": {"n": ["{{ 'a\\udfff' }}"]}}}]})

    result = await wf.run_async({}, db=db)

    step = result.steps["t"]
    assert (result.status, step.status) == ("failed", "failed")
    assert "fallback failed" in str(step.error)
    assert "output.n[0] has a string with a lone surrogate" in str(step.error)


async def test_an_http_json_body_with_a_lone_surrogate_fails_cleanly(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.get("https://api.test/s").respond(
        200, content=b'{"name": "a\\ud800"}', headers={"content-type": "application/json"})
    wf = Workflow.from_dict({"name": "hs", "steps": [
        {"id": "call", "type": "http", "url": "https://api.test/s", "retry": FAST_RETRY}]})

    result = await wf.run_async({})

    step = result.steps["call"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert "output.json.name has a string with a lone surrogate" in str(step.error)
    assert respx_mock.calls.call_count == 1


def surrogate_error() -> None:
    raise RuntimeError(f"cannot parse {SURROGATE!s}")


async def test_an_error_message_with_a_lone_surrogate_is_stored(db: str) -> None:
    wf = Workflow("errs")
    wf.add_step("bad", surrogate_error, retry=0)

    result = await wf.run_async({}, db=db)

    stored = await stored_steps(db, result.run_id)
    assert result.status == "failed"
    assert stored["bad"].error == "RuntimeError: cannot parse x\ufffdy"
    assert result.steps["bad"].error == stored["bad"].error


@pytest.mark.parametrize(("value", "words"), [
    ({"s": SURROGATE}, "input.s has a string with a lone surrogate"),
    ({"d": nested(300)}, "more than 256 levels"),
    ({"n": BIG_INT}, "input.n is an integer of more than 4,300 digits"),
    ({"f": math.inf}, "input.f is inf"),
    ({"k": {1, 2}}, "input.k is a set"),
])
async def test_a_run_input_that_is_not_json_raises_input_error_storing_nothing(
        db: str, value: Any, words: str) -> None:
    wf = returning(1)

    with pytest.raises(InputError, match="the run input is not JSON") as excinfo:
        await wf.run_async(value, db=db)

    assert words in str(excinfo.value)
    store = open_store(db)
    await store.open()
    try:
        from plait.store.base import RunFilter
        assert await store.list_runs(RunFilter(limit=10)) == []
    finally:
        await store.close()


# ------------------------------------------------------------------ the property


def _json_ok(value: Any, depth: int = 0) -> bool:
    """The oracle, written apart from plait: can every store hold ``value``?"""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) < 10**4300
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, list | tuple):
        return depth < 256 and all(_json_ok(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return depth < 256 and all(isinstance(k, str) and _json_ok(k) and _json_ok(v, depth + 1)
                                   for k, v in value.items())
    return False


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


texts = st.text(max_size=8) | st.builds(lambda a, c, b: a + c + b, st.text(max_size=3),
                                        st.characters(min_codepoint=0xD800,
                                                      max_codepoint=0xDFFF),
                                        st.text(max_size=3))
leaves = (st.none() | st.booleans() | st.integers() | texts
          | st.floats(allow_nan=True, allow_infinity=True)
          | st.integers(4295, 4305).map(lambda digits: -(10 ** (digits - 1)))
          | st.binary(max_size=4) | st.frozensets(st.integers(), max_size=2))
values = st.recursive(
    leaves,
    lambda children: (st.lists(children, max_size=4)
                      | st.tuples(children, children)
                      | st.dictionaries(texts, children, max_size=4)
                      | st.dictionaries(st.integers() | st.none(), children, max_size=2)
                      | st.builds(lambda v, n: [nested(n - 1), v], children,
                                  st.integers(250, 260))),
    max_leaves=12)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(value=values)
def test_any_value_round_trips_or_fails_the_step_cleanly(db: str, value: Any) -> None:
    async def check() -> None:
        result = await returning({"v": value}).run_async({}, db=db)
        stored = await stored_steps(db, result.run_id)
        step = result.steps["produce"]
        if _json_ok(value):
            assert (result.status, step.status, step.attempts) == ("completed", "completed", 1)
            assert _canonical(step.output) == _canonical({"v": value})
            assert _canonical(stored["produce"].output) == _canonical({"v": value})
        else:
            assert (result.status, step.status, step.attempts) == ("failed", "failed", 1)
            assert str(step.error).startswith("OutputError: output.v"), step.error
            assert stored["produce"].status == "failed"
            assert stored["produce"].error == step.error
        assert stored["other"].status == "completed"

    asyncio.run(check())
