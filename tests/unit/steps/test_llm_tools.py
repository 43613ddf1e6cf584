"""``tools`` on ``llm`` steps: checked with the definition (each problem named by its
path), sent as written, and the model's ``tool_calls`` parsed into the output.

respx stands in for an OpenAI-compatible endpoint."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from plait import DefinitionError, Workflow

BASE = "https://llm.test/v1"
URL = f"{BASE}/chat/completions"
FAST = {"max_retries": 2, "initial_delay": 0.01, "jitter": 0}
SEARCH: dict[str, Any] = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "required": ["query"],
                   "properties": {"query": {"type": "string"}}}}}


def step(**fields: Any) -> dict[str, Any]:
    return {"id": "ask", "type": "llm", "base_url": BASE, "model": "gpt-test",
            "api_key_env": "TEST_LLM_KEY", "prompt": "Find {{ input.q }}", "retry": FAST,
            **fields}


def answer(*, content: str | None = None, calls: list[Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = calls
    return {"model": "gpt-test", "choices": [{
        "index": 0, "message": message,
        "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}


def call(ident: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": ident, "type": "function",
            "function": {"name": name, "arguments": arguments}}


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-tools-test")


async def run(*steps: dict[str, Any]) -> Any:
    wf = Workflow.from_dict({"name": "tools", "steps": list(steps)})
    return await wf.run_async({"q": "plait"})


def problems(**fields: Any) -> str:
    with pytest.raises(DefinitionError) as excinfo:
        Workflow.from_dict({"name": "bad", "steps": [step(**fields)]}).validate()
    return "\n".join(str(p) for p in excinfo.value.problems)


# ------------------------------------------------------------------ the answer


async def test_tools_are_sent_and_tool_calls_parsed(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).respond(200, json=answer(calls=[
        call("call_a", "search", '{"query": "plait docs"}'),
        call("call_b", "search", "")]))

    result = await run(step(tools=[SEARCH]))

    out = result.steps["ask"].output
    assert result.steps["ask"].status == "completed"
    assert out["tool_calls"] == [
        {"id": "call_a", "name": "search", "arguments": {"query": "plait docs"}},
        {"id": "call_b", "name": "search", "arguments": {}}]
    assert (out["content"], out["json"], out["finish_reason"]) == ("", None, "tool_calls")
    assert json.loads(route.calls.last.request.content)["tools"] == [SEARCH]


async def test_a_text_answer_with_tools_has_no_tool_calls(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.post(URL).respond(200, json=answer(content="No tool needed."))

    with_tools = await run(step(tools=[SEARCH]))
    without = await run(step())

    assert with_tools.steps["ask"].output["tool_calls"] == []
    assert "tool_calls" not in without.steps["ask"].output


async def test_arguments_that_are_not_json_retry_then_fail_naming_call_and_tool(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).respond(200, json=answer(calls=[
        call("call_7", "search", '{"query": plait')]))

    result = await run(step(tools=[SEARCH]))

    ask = result.steps["ask"]
    assert (ask.status, ask.attempts, route.call_count) == ("failed", 3, 3)
    assert "tool call 'call_7' of tool 'search' has arguments that are not JSON" in ask.error
    assert "{\"query\": plait" in ask.error


async def test_bad_arguments_once_are_fixed_by_the_retry(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.post(URL).mock(side_effect=[
        httpx.Response(200, json=answer(calls=[call("c1", "search", "{nope")])),
        httpx.Response(200, json=answer(calls=[call("c1", "search", '{"query": "x"}')]))])

    result = await run(step(tools=[SEARCH]))

    assert result.steps["ask"].attempts == 2
    assert result.steps["ask"].output["tool_calls"][0]["arguments"] == {"query": "x"}


async def test_a_tool_call_without_a_function_is_no_completion(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.post(URL).respond(200, json=answer(calls=[{"id": "c1", "type": "function"}]))

    result = await run(step(tools=[SEARCH], retry=0))

    error = result.steps["ask"].error or ""
    assert "not a chat completion" in error and "tool_calls[0]" in error


async def test_templated_tools_are_checked_when_rendered(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.post(URL).respond(200, json=answer(content="ok"))
    good = await run({"id": "t", "type": "transform", "value": [SEARCH]},
                     step(tools="{{ steps.t.output }}", depends_on=["t"]))
    bad = await run({"id": "t", "type": "transform", "value": [{"type": "function"}]},
                    step(tools="{{ steps.t.output }}", depends_on=["t"]))

    assert good.steps["ask"].status == "completed"
    ask = bad.steps["ask"]
    assert (ask.status, ask.attempts) == ("failed", 1)  # no retry: it would fail again
    assert "`tools[0].function`: expected a mapping" in (ask.error or "")


# ------------------------------------------------------------------ the definition


@pytest.mark.parametrize(("tools", "where", "message"), [
    ("not a list", ".tools", "expected a non-empty list of tools"),
    ([], ".tools", "expected a non-empty list of tools"),
    (["search"], ".tools[0]", "expected a mapping {type: function"),
    ([{"type": "retrieval", "function": SEARCH["function"]}], ".tools[0].type",
     "expected 'function'"),
    ([{"type": "function"}], ".tools[0].function", "expected a mapping"),
    ([{"type": "function", "function": {"description": "x"}}], ".tools[0].function.name",
     "expected the tool's name as text, got null"),
    ([{"type": "function", "function": {"name": 7}}], ".tools[0].function.name",
     "got int"),
    ([{"type": "function", "function": {"name": "web search"}}],
     ".tools[0].function.name", "letters, digits"),
    ([SEARCH, {"type": "function", "function": {"name": "f", "parameters": "object"}}],
     ".tools[1].function.parameters", "expected a JSON Schema object"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "thing"}}}],
     ".tools[0].function.parameters", "not a valid JSON Schema"),
    ([{"type": "function", "function": {"name": "f", "description": ["x"]}}],
     ".tools[0].function.description", "expected text"),
    ([{"type": "function", "function": {"name": "f", "params": {}}}],
     ".tools[0].function.params", "unknown key"),
    ([{"type": "function", "function": {"name": "f"}, "extra": 1}], ".tools[0].extra",
     "unknown key"),
    ([SEARCH, SEARCH], ".tools[1].function.name", "'search' is used twice"),
])
def test_tools_of_the_wrong_shape_are_refused_naming_the_path(
        tools: Any, where: str, message: str) -> None:
    text = problems(tools=tools)
    assert f"steps[0]{where}" in text and message in text, text


def test_templates_stand_for_any_tool_or_value() -> None:
    Workflow.from_dict({"name": "ok", "steps": [step(tools=[
        "{{ input.tool }}",
        {"type": "function", "function": {"name": "{{ input.name }}",
                                          "parameters": "{{ input.schema }}"}},
        {"type": "function", "function": {"name": "g", "parameters": {
            "type": "object", "properties": "{{ input.props }}"}}}])]}).validate()
