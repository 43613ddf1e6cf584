"""``ctx.llm`` / ``ctx.llm_sync``: an llm step's request made from a step's code as a
journaled call.  A later attempt gets the stored answer without a request (and spends
no tokens); the key and secrets are redacted from what is stored; bad fields fail the
step at once, naming the call and the field.

respx stands in for an OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from click.testing import CliRunner

from plait import Retry, StepContext, Workflow
from plait.cli.main import cli
from plait.store import open_store

BASE = "https://llm.test/v1"
URL = f"{BASE}/chat/completions"
KEY = "sk-ctx-llm-Kq7wPz3"
MODEL = {"base_url": BASE, "model": "gpt-test", "api_key_env": "TEST_LLM_KEY"}
ADD = {"type": "function", "function": {
    "name": "add", "parameters": {"type": "object", "properties": {
        "a": {"type": "number"}, "b": {"type": "number"}}}}}


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", KEY)


def answer(content: str | None = "hi", *, calls: list[Any] | None = None,
           tokens: tuple[int, int] = (6, 4)) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = calls
    return {"model": "gpt-test-1", "choices": [{"index": 0, "message": message,
                                                "finish_reason": "stop"}],
            "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1],
                      "total_tokens": sum(tokens)}}


def add_call(arguments: str) -> dict[str, Any]:
    return {"id": "call_1", "type": "function",
            "function": {"name": "add", "arguments": arguments}}


def show(db: str, run_id: str) -> dict[str, Any]:
    out = CliRunner().invoke(cli, ["show", run_id, "--db", db, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


async def stored(db: str, run_id: str, step: str, name: str) -> Any:
    store = open_store(db)
    await store.open()
    try:
        entry = await store.journal_get(run_id, step, name)
        return None if entry is None else entry.value
    finally:
        await store.close()


def test_a_retry_gets_the_answer_back_without_a_request(
        respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    route = respx_mock.post(URL).respond(200, json=answer(
        None, calls=[add_call('{"a": 1, "b": 2}')]))

    async def agent(ctx: StepContext) -> object:
        reply = await ctx.llm("plan", prompt="add 1 and 2", tools=[ADD], **MODEL)
        if ctx.attempt == 1:
            raise RuntimeError("fails after the model call")
        return reply

    wf = Workflow("ctx-llm-retry")
    wf.add_step("agent", agent, retry=Retry(max_retries=1, initial_delay=0))
    result = wf.run(db=db)

    assert result.status == "completed", result.steps["agent"].error
    assert route.call_count == 1
    reply = result.steps["agent"].output
    assert reply["tool_calls"] == [{"id": "call_1", "name": "add",
                                    "arguments": {"a": 1, "b": 2}}]
    assert (reply["content"], reply["model"]) == ("", "gpt-test-1")
    sent = json.loads(route.calls.last.request.content)
    assert sent["tools"] == [ADD] and sent["messages"] == [
        {"role": "user", "content": "add 1 and 2"}]
    doc = show(db, result.run_id)
    entry = doc["steps"]["agent"]
    assert [(j["name"], j["attempt"]) for j in entry["journal"]] == [("plan", 1)]
    # the tokens of the one request, counted once; the replay spent none
    assert entry["usage"] == {"prompt_tokens": 6, "completion_tokens": 4,
                              "total_tokens": 10}
    assert doc["llm_tokens"] == 10
    assert entry["llm"]["messages"] == [{"role": "user", "content": "add 1 and 2"}]


def test_tokens_of_every_call_add_up_and_metrics_count_them(
        respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    respx_mock.post(URL).mock(side_effect=[
        httpx.Response(200, json=answer("a", tokens=(3, 2))),
        httpx.Response(200, json=answer("b", tokens=(30, 20)))])

    async def two(ctx: StepContext) -> list[str]:
        return [(await ctx.llm(f"turn-{i}", prompt=f"q{i}", **MODEL))["content"]
                for i in range(2)]

    wf = Workflow("ctx-llm-tokens")
    wf.add_step("two", two)
    result = wf.run(db=db)

    assert result.steps["two"].output == ["a", "b"]
    assert show(db, result.run_id)["usage"] == {
        "prompt_tokens": 33, "completion_tokens": 22, "total_tokens": 55}
    out = CliRunner().invoke(cli, ["metrics", "--db", db, "--json"])
    assert out.exit_code == 0, out.output
    assert '"total_tokens": 55' in out.stdout


def test_the_key_and_secrets_are_redacted_from_the_journal(
        respx_mock: respx.MockRouter, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAIT_SECRET_TOKEN", "tok-ctx-llm-8812")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    respx_mock.post(URL).respond(200, json=answer(
        f"your key is {KEY} and the token tok-ctx-llm-8812"))

    async def leaky(ctx: StepContext) -> object:
        return await ctx.llm("echo", prompt="tell me secrets", **MODEL)

    wf = Workflow("ctx-llm-redact")
    wf.add_step("leaky", leaky)
    result = wf.run(db=db)

    value = asyncio.run(stored(db, result.run_id, "leaky", "echo"))
    assert value["content"] == "your key is *** and the token ***"
    assert result.steps["leaky"].output["content"] == value["content"]
    assert KEY not in json.dumps(show(db, result.run_id))


async def test_llm_sync_in_a_sync_step(respx_mock: respx.MockRouter,
                                       tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    route = respx_mock.post(URL).respond(200, json=answer(
        None, calls=[add_call('{"a": 2, "b": 3}')]))

    def sync_agent(ctx: StepContext) -> object:
        reply = ctx.llm_sync("ask", messages=[{"role": "user", "content": "2+3"}],
                             tools=[ADD], **MODEL)
        if ctx.attempt == 1:
            raise RuntimeError("again")
        arguments = reply["tool_calls"][0]["arguments"]
        return ctx.run_sync("add", lambda: arguments["a"] + arguments["b"])

    wf = Workflow("ctx-llm-sync")
    wf.add_step("s", sync_agent, retry=Retry(max_retries=1, initial_delay=0))
    result = await wf.run_async(db=db)

    assert (result.steps["s"].output, route.call_count) == (5, 1)


async def test_retryable_errors_fail_the_attempt_and_the_step_retries(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).mock(side_effect=[
        httpx.Response(429, json={"error": {"message": "slow down"}},
                       headers={"Retry-After": "0"}),
        httpx.Response(200, json=answer("fine"))])

    async def step(ctx: StepContext) -> object:
        return (await ctx.llm("ask", prompt="hi", **MODEL))["content"]

    wf = Workflow("ctx-llm-429")
    wf.add_step("s", step, retry=Retry(max_retries=1, initial_delay=0))
    result = await wf.run_async()

    assert (result.steps["s"].output, result.steps["s"].attempts) == ("fine", 2)
    assert route.call_count == 2


async def test_arguments_not_json_fail_naming_the_call_and_the_tool(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).respond(200, json=answer(
        None, calls=[add_call('{"a": 1,')]))

    async def step(ctx: StepContext) -> object:
        return await ctx.llm("pick", prompt="add", tools=[ADD], **MODEL)

    wf = Workflow("ctx-llm-args")
    wf.add_step("s", step, retry=Retry(max_retries=1, initial_delay=0))
    result = await wf.run_async()

    s = result.steps["s"]
    assert (s.status, s.attempts, route.call_count) == ("failed", 2, 2)  # retried
    assert ("ctx.llm 'pick': the model's tool call 'call_1' of tool 'add' has "
            "arguments that are not JSON") in (s.error or "")


@pytest.mark.parametrize(("name", "fields", "message"), [
    ("", {}, "ctx.llm needs a name (non-empty text of at most 200 characters), got ''"),
    (7, {}, "ctx.llm needs a name"),
    ("x" * 201, {}, "at most 200 characters"),
    ("ok", {"tools": [{"type": "function", "function": {"name": 3}}]},
     "ctx.llm 'ok': `tools[0].function.name`: expected the tool's name as text"),
    ("ok", {"tools": {"add": ADD}}, "`tools`: expected a non-empty list of tools"),
    ("ok", {"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]},
     "`tools[0].function.parameters`: expected a JSON Schema object"),
    ("ok", {"model": None}, "ctx.llm 'ok': `model` is required"),
    ("ok", {"api_key_env": "not a name"}, "`api_key_env`: expected the name of an "
                                          "environment variable"),
    ("ok", {"temprature": 0}, "unknown field 'temprature'"),
    ("ok", {"messages": [{"role": "user", "content": "x"}]},
     "give exactly one of `messages` and `prompt`"),
    ("ok", {"prompt": {1, 2}}, "is not JSON"),
    ("ok", {"base_url": "ftp://llm.test"}, "`base_url`"),
])
async def test_bad_inputs_fail_the_step_at_once_naming_them(
        respx_mock: respx.MockRouter, name: Any, fields: dict[str, Any],
        message: str) -> None:
    route = respx_mock.post(URL).respond(200, json=answer())

    async def step(ctx: StepContext) -> object:
        return await ctx.llm(name, **{**MODEL, "prompt": "hi", **fields})

    wf = Workflow("ctx-llm-bad")
    wf.add_step("s", step, retry=Retry(max_retries=2, initial_delay=0))
    result = await wf.run_async()

    s = result.steps["s"]
    assert (s.status, s.attempts, route.call_count) == ("failed", 1, 0)
    assert message in (s.error or ""), s.error


async def test_a_missing_key_fails_naming_the_variable(
        respx_mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_LLM_KEY")
    route = respx_mock.post(URL).respond(200, json=answer())

    async def step(ctx: StepContext) -> object:
        return await ctx.llm("ask", prompt="hi", **MODEL)

    wf = Workflow("ctx-llm-nokey")
    wf.add_step("s", step)
    result = await wf.run_async()

    assert route.call_count == 0
    assert "ctx.llm 'ask': the environment variable TEST_LLM_KEY" in \
        (result.steps["s"].error or "")


async def test_a_name_used_twice_fails_the_step(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(URL).respond(200, json=answer())

    async def step(ctx: StepContext) -> object:
        await ctx.llm("same", prompt="a", **MODEL)
        return await ctx.llm("same", prompt="b", **MODEL)

    wf = Workflow("ctx-llm-twice")
    wf.add_step("s", step, retry=Retry(max_retries=2, initial_delay=0))
    result = await wf.run_async()

    assert (result.steps["s"].status, result.steps["s"].attempts) == ("failed", 1)
    assert "same" in (result.steps["s"].error or "")
