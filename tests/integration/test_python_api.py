"""The Python front end: StepContext, parameter resolution, shared state with
reducers, and the input schema, run through the public API."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

from plait import DefinitionError, InputError, Retry, StepContext, Workflow
from plait.runtime.engine import Engine
from plait.store import MemoryStore, RunFilter, open_store

from .conftest import RunWf, run_with, statuses

# ---------------------------------------------------------------- StepContext


async def test_step_context_fields(run_wf: RunWf) -> None:
    seen: dict[str, Any] = {}

    def a() -> dict[str, int]:
        return {"n": 1}

    def b() -> str:
        return "bee"

    def check(ctx: StepContext) -> str:
        seen.update(run_id=ctx.run_id, step_id=ctx.step_id, attempt=ctx.attempt,
                    key=ctx.idempotency_key, input=ctx.input, outputs=dict(ctx.outputs),
                    state=dict(ctx.state), logger=ctx.logger)
        return "checked"

    wf = Workflow("ctx")
    wf.add_step("a", a, outputs=["n"])
    wf.add_step("b", b)
    wf.add_step("check", check, depends_on=["a", "b"])
    result = await run_wf(wf, {"topic": "agents"})
    assert seen["run_id"] == result.run_id
    assert seen["step_id"] == "check"
    assert seen["attempt"] == 1
    assert seen["key"] == f"{result.run_id}:check"
    assert seen["input"] == {"topic": "agents"}
    assert seen["outputs"] == {"a": {"n": 1}, "b": "bee"}  # the parents' outputs
    assert seen["state"] == {"n": 1}
    assert isinstance(seen["logger"], logging.LoggerAdapter)


async def test_context_under_another_name_by_annotation(run_wf: RunWf) -> None:
    seen: list[str] = []

    def step(context: StepContext) -> None:
        seen.append(context.step_id)

    wf = Workflow("ctxname")
    wf.add_step("named", step)
    await run_wf(wf)
    assert seen == ["named"]


async def test_idempotency_key_is_identical_across_retries(run_wf: RunWf) -> None:
    keys: list[tuple[int, str]] = []

    async def step(ctx: StepContext) -> str:
        keys.append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt < 3:
            raise ConnectionError("flaky")
        return "ok"

    wf = Workflow("idem")
    wf.add_step("pay", step, retry=Retry(max_retries=5, initial_delay=0.001))
    result = await run_wf(wf)
    assert [a for a, _ in keys] == [1, 2, 3]
    assert {k for _, k in keys} == {f"{result.run_id}:pay"}


# ---------------------------------------------------------------- parameter resolution


async def test_parameter_resolution_order(run_wf: RunWf) -> None:
    """input, ctx, a step id, a declared output key, a key of the run input."""
    got: dict[str, Any] = {}

    def fetch() -> str:
        return "fetch-output"

    def classify() -> dict[str, str]:
        return {"intent": "state-intent"}

    def use(input: dict[str, Any], ctx: StepContext, fetch: str, intent: str,
            city: str, missing: str = "default") -> str:
        got.update(input=input, ctx=ctx.step_id, fetch=fetch, intent=intent, city=city,
                   missing=missing)
        return "used"

    wf = Workflow("resolve")
    wf.add_step("fetch", fetch)
    wf.add_step("classify", classify, outputs=["intent"])
    wf.add_step("use", use)
    run_input = {"input": "not this", "ctx": "nor this", "fetch": "shadowed",
                 "intent": "shadowed too", "city": "Lyon"}
    result = await run_wf(wf, run_input)
    assert result.status == "completed"
    assert got == {"input": run_input, "ctx": "use", "fetch": "fetch-output",
                   "intent": "state-intent", "city": "Lyon", "missing": "default"}


async def test_parameters_imply_dependencies(run_wf: RunWf) -> None:
    order: list[str] = []

    async def plan(input: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.02)
        order.append("plan")
        return {"topics": input["topics"]}

    def paginate() -> dict[str, Any]:
        order.append("paginate")
        return {"paginated_text": ["p1", "p2"]}

    def research(plan: dict[str, Any], paginated_text: list[str]) -> int:
        order.append("research")
        return len(plan["topics"]) + len(paginated_text)

    wf = Workflow("implied")
    wf.add_step("research", research)  # declared first: its parameters order it
    wf.add_step("plan", plan)
    wf.add_step("paginate", paginate, outputs=["paginated_text"])
    spec = wf.validate().spec
    assert set(spec.steps[0].depends_on) == {"plan", "paginate"}
    result = await run_wf(wf, {"topics": ["a", "b", "c"]})
    assert order[-1] == "research"
    assert result.steps["research"].output == 5


async def test_with_arguments_are_rendered_and_win_over_names(run_wf: RunWf) -> None:
    def greet(name: str, greeting: str) -> str:
        return f"{greeting}, {name}"

    wf = Workflow("with")
    wf.add_step("greet", greet, with_={"greeting": "{{ input.hello | upper }}"})
    result = await run_wf(wf, {"hello": "hi", "name": "ada", "greeting": "ignored"})
    assert result.steps["greet"].output == "HI, ada"


def test_unknown_parameter_is_a_build_error_when_the_input_schema_says_so() -> None:
    def needs_city(city: str, zip_code: str) -> None:
        return None

    wf = Workflow("schema", input={"type": "object", "properties": {"city": {}}})
    wf.add_step("geo", needs_city)
    with pytest.raises(DefinitionError) as info:
        wf.validate()
    text = str(info.value)
    assert "zip_code" in text
    assert "needs_city" in text
    assert "city'" not in text.replace("zip_code", "")  # the known one is not reported


async def test_unknown_parameter_fails_before_anything_is_stored() -> None:
    def lookup(account_id: str) -> str:
        return account_id

    wf = Workflow("param")
    wf.add_step("lookup", lookup)
    store = MemoryStore()
    eng = Engine(store)
    try:
        url = f"memory://unknown-param-{uuid.uuid4().hex}"
        with pytest.raises(InputError) as info:
            await wf.run_async({"other": 1}, db=url)
        assert "account_id" in str(info.value)
        assert "lookup" in str(info.value)
        shared = open_store(url)
        assert await shared.list_runs(RunFilter()) == []
        assert await shared.list_workflows() == []
        # through the engine directly the same check runs before anything is stored
        with pytest.raises(InputError, match="account_id"):
            await run_with(eng, wf, {"other": 1})
        assert await store.list_runs(RunFilter()) == []
    finally:
        eng.close()


async def test_the_same_checked_workflow_checks_each_runs_input_again(run_wf: RunWf) -> None:
    """What the runtime derives once per checked workflow (which parameters only the
    input can supply) must not cache one run's verdict for the next run."""
    wf = Workflow("rerun-input")
    wf.add_step("lookup", lambda account_id: {"id": account_id})
    first = await run_wf(wf, {"account_id": 7})
    assert first.steps["lookup"].output == {"id": 7}
    with pytest.raises(InputError, match="account_id"):
        await run_wf(wf, {"other": 1})
    again = await run_wf(wf, {"account_id": 8})
    assert again.steps["lookup"].output == {"id": 8}


async def test_a_parameter_named_after_its_own_step_reads_the_input(run_wf: RunWf) -> None:
    wf = Workflow("selfname")
    wf.add_step("ticket", lambda ticket: {"got": ticket})
    result = await run_wf(wf, {"ticket": "T-1"})
    assert result.steps["ticket"].output == {"got": "T-1"}


async def test_a_parameter_with_a_default_is_optional(run_wf: RunWf) -> None:
    def maybe(limit: int = 10) -> int:
        return limit

    wf = Workflow("default")
    wf.add_step("maybe", maybe)
    assert (await run_wf(wf, {})).steps["maybe"].output == 10
    assert (await run_wf(wf, {"limit": 3})).steps["maybe"].output == 3


# ---------------------------------------------------------------- reducers


async def test_append_reducer_with_parallel_writers(run_wf: RunWf) -> None:
    wf = Workflow("append", reducers={"messages": "append"})
    for n in range(4):
        async def writer(n: int = n) -> dict[str, Any]:
            await asyncio.sleep(0.01 * (4 - n))
            return {"messages": f"m{n}"}
        wf.add_step(f"w{n}", writer, outputs=["messages"])

    def summary(messages: list[str]) -> list[str]:
        return messages

    wf.add_step("summary", summary)
    result = await run_wf(wf)
    assert result.status == "completed"
    assert sorted(result.steps["summary"].output) == ["m0", "m1", "m2", "m3"]
    # writes land in completion order
    assert result.steps["summary"].output == ["m3", "m2", "m1", "m0"]


@pytest.mark.parametrize(("reducer", "values", "expected"), [
    ("sum", [1, 2, 3.5], 6.5),
    ("max", [4, 9, 2], 9),
    ("min", [4, 9, 2], 2),
    ("extend", [[1], [2, 3], []], [1, 2, 3]),
    ("merge", [{"a": 1}, {"b": 2}, {"c": 3}], {"a": 1, "b": 2, "c": 3}),
])
async def test_builtin_reducers_combine_parallel_writes(run_wf: RunWf, reducer: str,
                                                        values: list[Any],
                                                        expected: Any) -> None:
    wf = Workflow("reduce", reducers={"total": reducer})
    for n, value in enumerate(values):
        wf.add_step(f"w{n}", lambda value=value: {"total": value}, outputs=["total"])
    wf.add_step("read", lambda total: total)
    result = await run_wf(wf)
    assert result.steps["read"].output == expected


async def test_single_output_key_takes_the_whole_output(run_wf: RunWf) -> None:
    wf = Workflow("single")
    wf.add_step("make", lambda: [1, 2, 3], outputs=["numbers"])
    wf.add_step("use", lambda numbers: sum(numbers))
    result = await run_wf(wf)
    assert result.steps["use"].output == 6


async def test_missing_declared_output_key_fails_the_step(run_wf: RunWf) -> None:
    wf = Workflow("missingkey")
    wf.add_step("make", lambda: {"a": 1}, outputs=["a", "b"], retry=3)
    result = await run_wf(wf)
    step = result.steps["make"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert "'b'" in (step.error or "")


async def test_a_reducer_type_error_fails_the_step(run_wf: RunWf) -> None:
    wf = Workflow("badreduce", reducers={"total": "sum"})
    wf.add_step("a", lambda: {"total": 1}, outputs=["total"])
    wf.add_step("b", lambda a: {"total": "not a number"}, outputs=["total"])
    result = await run_wf(wf)
    assert result.steps["a"].status == "completed"
    assert result.steps["b"].status == "failed"
    assert "total" in (result.steps["b"].error or "")


def test_parallel_writers_without_a_reducer_are_refused() -> None:
    wf = Workflow("noreduce")
    wf.add_step("a", lambda: {"k": 1}, outputs=["k"])
    wf.add_step("b", lambda: {"k": 2}, outputs=["k"])
    with pytest.raises(DefinitionError) as info:
        wf.validate()
    assert "'k'" in str(info.value) and "reducer" in str(info.value)


# ---------------------------------------------------------------- input schema


async def test_input_schema_refusal_stores_nothing() -> None:
    wf = Workflow("strict", input={"type": "object", "required": ["ticket"],
                                   "properties": {"ticket": {"type": "string"}}})
    wf.add_step("echo", lambda ticket: ticket)
    store = MemoryStore()
    eng = Engine(store)
    try:
        with pytest.raises(InputError) as info:
            await eng.run(wf.validate(), {"ticket": 42})
        assert "input.ticket" in str(info.value)
        with pytest.raises(InputError) as missing:
            await eng.run(wf.validate(), {})
        assert "'ticket' is a required property" in str(missing.value)
        assert await store.list_runs(RunFilter()) == []
        assert await store.list_workflows() == []
        result = await run_with(eng, wf, {"ticket": "T-1"})
    finally:
        eng.close()
    assert result.steps["echo"].output == "T-1"
    assert len(await store.list_runs(RunFilter())) == 1


def test_sync_run_api(tmp_path: Any) -> None:
    wf = Workflow("syncapi")
    wf.add_step("a", lambda: 1)
    wf.add_step("b", lambda a: a + 1)
    result = wf.run({})
    assert result.status == "completed" and result.ok
    assert statuses(result) == {"a": "completed", "b": "completed"}
    assert result.steps["b"].output == 2
    assert result.steps["b"].attempts == 1
    assert result.duration_s is not None and result.duration_s >= 0
