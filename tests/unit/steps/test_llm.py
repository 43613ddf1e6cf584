"""The ``llm`` step type through the public API and the CLI.

respx stands in for an OpenAI-compatible endpoint (it answers before any connection);
the SSRF refusal runs through the real guarded client and network policy.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import respx
from click.testing import CliRunner

from plait import DefinitionError, RunResult, Workflow, connect
from plait.cli.main import cli

FAST = {"max_retries": 2, "initial_delay": 0.01, "jitter": 0}
BASE = "https://llm.test/v1"
URL = f"{BASE}/chat/completions"
KEY = "sk-test-Zq8uV3xL0pK9"


def llm_step(step_id: str = "ask", **fields: object) -> dict[str, object]:
    base: dict[str, object] = {"id": step_id, "type": "llm", "base_url": BASE,
                               "model": "gpt-test", "api_key_env": "TEST_LLM_KEY",
                               "retry": FAST}
    if "messages" not in fields and "prompt" not in fields:
        base["prompt"] = "Say hello to {{ input.name }}"
    return {**base, **fields}


def completion(content: str, *, finish: str = "stop", prompt_tokens: int = 7,
               completion_tokens: int = 3) -> dict[str, object]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test-0613",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


async def run(*steps: dict[str, object], input: object = None) -> RunResult:
    wf = Workflow.from_dict({"name": "llm-test", "steps": list(steps)})
    return await wf.run_async(input if input is not None else {"name": "Ada"})


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TEST_LLM_KEY", KEY)
    return KEY


async def test_prompt_becomes_one_user_message(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).respond(200, json=completion("Hello, Ada!"))

    result = await run(llm_step(temperature=0.2, max_tokens=50))

    step = result.steps["ask"]
    assert (step.status, step.attempts) == ("completed", 1)
    assert step.output == {"content": "Hello, Ada!", "json": None, "model": "gpt-test-0613",
                           "finish_reason": "stop",
                           "usage": {"prompt_tokens": 7, "completion_tokens": 3,
                                     "total_tokens": 10}}
    sent = route.calls.last.request
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(sent.content) == {
        "model": "gpt-test", "temperature": 0.2, "max_tokens": 50,
        "messages": [{"role": "user", "content": "Say hello to Ada"}]}


async def test_messages_and_response_format_are_sent_as_given(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).respond(200, json=completion('{"ok": true}'))
    messages = [{"role": "system", "content": "Answer in JSON."},
                {"role": "user", "content": "Is {{ input.name }} here?"}]

    result = await run(llm_step(messages=messages,
                                response_format={"type": "json_object"}))

    assert result.steps["ask"].output["json"] == {"ok": True}
    body = json.loads(route.calls.last.request.content)
    assert body["messages"][1] == {"role": "user", "content": "Is Ada here?"}
    assert body["response_format"] == {"type": "json_object"}


SCHEMA = {"type": "object", "required": ["score"],
          "properties": {"score": {"type": "integer", "minimum": 0}}}


async def test_json_schema_mismatch_retries_then_succeeds(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).mock(side_effect=[
        httpx.Response(200, json=completion("Sure! The score is 3.")),
        httpx.Response(200, json=completion('{"score": "three"}')),
        httpx.Response(200, json=completion('{"score": 3}')),
    ])
    fmt = {"type": "json_schema", "json_schema": {"name": "grade", "schema": SCHEMA}}

    result = await run(llm_step(response_format=fmt))

    step = result.steps["ask"]
    assert (step.status, step.attempts, route.call_count) == ("completed", 3, 3)
    assert step.output["json"] == {"score": 3}


async def test_json_that_never_matches_fails_naming_the_reason(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.post(URL).respond(200, json=completion('{"score": -1}'))
    fmt = {"type": "json_schema", "json_schema": {"schema": SCHEMA}}

    result = await run(llm_step(response_format=fmt))

    step = result.steps["ask"]
    assert (step.status, step.attempts) == ("failed", 3)
    assert "does not match the response_format schema at ['score']" in (step.error or "")


async def test_429_waits_for_retry_after(respx_mock: respx.MockRouter) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    seen: list[float] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(loop.time())
        if len(seen) == 1:
            return httpx.Response(429, headers={"Retry-After": "0.3"},
                                  json={"error": {"message": "Rate limit reached"}})
        return httpx.Response(200, json=completion("ok"))

    respx_mock.post(URL).mock(side_effect=answer)

    result = await run(llm_step())

    assert (result.steps["ask"].status, result.steps["ask"].attempts) == ("completed", 2)
    assert seen[1] - seen[0] >= 0.3  # initial_delay alone would be 0.01


async def test_401_fails_without_retry_with_the_providers_message(
        respx_mock: respx.MockRouter) -> None:
    # providers echo (part of) a wrong key in the message: it must never be stored
    route = respx_mock.post(URL).respond(401, json={"error": {
        "message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error"}})

    result = await run(llm_step())

    step = result.steps["ask"]
    assert (step.status, step.attempts, route.call_count) == ("failed", 1, 1)
    assert "HTTP 401 from https://llm.test/v1/chat/completions" in (step.error or "")
    assert "Incorrect API key provided: ***." in (step.error or "")
    assert KEY not in (step.error or "")


async def test_5xx_retries_until_spent(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).respond(503, text="overloaded")

    result = await run(llm_step())

    assert (result.steps["ask"].status, route.call_count) == ("failed", 3)
    assert "overloaded" in (result.steps["ask"].error or "")


async def test_a_missing_key_variable_fails_at_once_naming_it(
        respx_mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_LLM_KEY")
    route = respx_mock.post(URL).respond(200, json=completion("never"))

    result = await run(llm_step())

    step = result.steps["ask"]
    assert (step.status, step.attempts, route.call_count) == ("failed", 1, 0)
    assert "environment variable TEST_LLM_KEY" in (step.error or "")


async def test_a_response_that_is_no_completion_retries(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.post(URL).mock(side_effect=[
        httpx.Response(200, json={"unexpected": True}),
        httpx.Response(200, json=completion("fine")),
    ])

    result = await run(llm_step())

    assert (result.steps["ask"].status, result.steps["ask"].attempts) == ("completed", 2)


async def test_the_metadata_address_is_refused_before_connecting() -> None:
    # no respx: the real guarded client and the default network policy
    result = await run(llm_step(base_url="http://169.254.169.254/v1"))

    step = result.steps["ask"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert "169.254.169.254" in (step.error or "")
    assert "NetworkRefused" in (step.error or "") or "refused" in (step.error or "").lower()


# ------------------------------------------------------------------ history and the CLI


def test_usage_is_in_history_and_metrics_and_the_key_is_never_stored(
        tmp_path: Path, respx_mock: respx.MockRouter) -> None:
    respx_mock.post(URL).mock(side_effect=[
        httpx.Response(200, json=completion("not json", prompt_tokens=5,
                                            completion_tokens=2)),
        httpx.Response(200, json=completion(f'{{"echo": "{KEY}"}}', prompt_tokens=5,
                                            completion_tokens=4)),
    ])
    flow = tmp_path / "flow.yaml"
    flow.write_text(json.dumps({"name": "llm-cli", "steps": [
        llm_step(prompt="Echo the key", response_format={"type": "json_object"})]}))
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    runner = CliRunner()

    ran = runner.invoke(cli, ["run", str(flow), "--db", db, "--json"])
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.stdout)["run_id"]
    shown = runner.invoke(cli, ["show", run_id, "--db", db, "--json"])
    metrics = runner.invoke(cli, ["metrics", "--db", db, "--json"])
    text = runner.invoke(cli, ["metrics", "--db", db])

    assert KEY not in ran.stdout + shown.stdout + db_text(tmp_path / "runs.db")
    step = json.loads(shown.stdout)["steps"]["ask"]
    assert step["output"]["json"] == {"echo": "***"}
    attempts = json.loads(shown.stdout)["attempts"]
    assert [(a["status"], a["usage"]) for a in attempts] == [
        ("failed", {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}),
        ("completed", {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9})]
    row = json.loads(metrics.stdout)["workflows"][0]
    assert (row["prompt_tokens"], row["completion_tokens"], row["total_tokens"]) == (10, 6, 16)
    assert row["steps"][0]["total_tokens"] == 16
    assert "tokens" in text.stdout


def db_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace") + "".join(
        p.read_bytes().decode("utf-8", errors="replace")
        for p in path.parent.glob(path.name + "-*"))


# ------------------------------------------------------------------ validation


def test_missing_and_bad_fields_are_reported_with_their_location() -> None:
    with pytest.raises(DefinitionError) as excinfo:
        Workflow.from_dict({"name": "bad", "steps": [
            {"id": "a", "type": "llm", "prompt": "hi"},
            {"id": "b", "type": "llm", "base_url": "ftp://x", "model": "m",
             "api_key_env": "not a name", "prompt": "p",
             "messages": [{"role": "user", "content": "x"}],
             "temperature": "hot", "max_tokens": 0,
             "response_format": {"type": "json_schema", "json_schema": {"schema": {
                 "type": "nope"}}}},
            {"id": "c", "type": "llm", "base_url": BASE, "model": "m", "api_key_env": "K",
             "messages": [{"role": "robot", "content": "x"}]},
            {"id": "d", "type": "llm", "base_url": BASE, "model": "m", "api_key_env": "K"},
        ]}).validate()
    text = "\n".join(str(p) for p in excinfo.value.problems)
    for needle in ("steps[0]", "base_url", "model", "api_key_env",
                   "scheme 'ftp' is not allowed", "not a name", "exactly one of `messages` "
                   "or `prompt`", "temperature", "max_tokens", "not a valid JSON Schema",
                   "robot"):
        assert needle in text, (needle, text)
    assert sum("exactly one of" in str(p) for p in excinfo.value.problems) == 2


async def test_templates_are_accepted_where_values_can_be_templated(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).respond(200, json=completion("hi"))
    templated = llm_step(base_url="{{ input.url }}", model="{{ input.m }}",
                         messages="{{ input.messages }}", temperature="{{ input.t }}")
    messages = [{"role": "user", "content": "hello"}]

    result = await run(templated, input={"url": BASE, "m": "gpt-x", "messages": messages,
                                         "t": 0.5})

    assert result.steps["ask"].status == "completed", result.steps["ask"].error
    assert json.loads(route.calls.last.request.content) == {
        "model": "gpt-x", "temperature": 0.5, "messages": messages}


# ------------------------------------------------------------------ the messages sent


def test_each_attempt_stores_the_messages_it_sent_redacted_and_show_lists_them(
        tmp_path: Path, respx_mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAIT_SECRET_TOKEN", "tok-SECRET-4411")
    respx_mock.post(URL).mock(side_effect=[
        httpx.Response(503), httpx.Response(200, json=completion('{"ok": true}'))])
    messages = [{"role": "system", "content": "Be brief.\nAnswer in JSON."},
                {"role": "user", "content": "Check {{ secrets.TOKEN }} for {{ input.name }}"}]
    flow = tmp_path / "flow.yaml"
    flow.write_text(json.dumps({"name": "llm-talk", "steps": [
        llm_step(messages=messages, response_format={"type": "json_object"})]}))
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    runner = CliRunner()
    ran = runner.invoke(cli, ["run", str(flow), "--db", db, "--json", "--input",
                              '{"name": "Ada"}'])
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.stdout)["run_id"]

    shown = json.loads(runner.invoke(cli, ["show", run_id, "--db", db, "--json"]).stdout)
    sent = [{"role": "system", "content": "Be brief.\nAnswer in JSON."},
            {"role": "user", "content": "Check *** for Ada"}]
    assert shown["steps"]["ask"]["llm"] == {"model": "gpt-test", "attempt": 2,
                                            "messages": sent, "cut": None}
    assert shown["steps"]["ask"]["usage"] == {"prompt_tokens": 7, "completion_tokens": 3,
                                              "total_tokens": 10}
    assert (shown["llm_tokens"], shown["usage"]["prompt_tokens"]) == (10, 7)
    step = json.loads(runner.invoke(cli, ["show", run_id, "--db", db, "--json",
                                          "--step", "ask"]).stdout)
    assert step["step"] == "ask" and step["llm"]["messages"] == sent
    assert [a["attempt"] for a in step["attempts"]] == [1, 2]
    text = runner.invoke(cli, ["show", run_id, "--db", db, "--step", "ask"]).stdout
    assert "messages sent (attempt 2, model gpt-test)\n  system: Be brief.\n" \
           "    Answer in JSON.\n  user: Check *** for Ada\n" in text
    assert "answer\n  assistant: {\"ok\": true}\nanswer as JSON\n  {\n    \"ok\": true\n  }" \
           in text
    assert "tokens     10 (prompt 7, completion 3)" in text
    whole = runner.invoke(cli, ["show", run_id, "--db", db]).stdout
    assert "tokens    10 (prompt 7, completion 3)\n" in whole
    assert "tokens-SECRET" not in db_text(tmp_path / "runs.db")
    assert "tok-SECRET-4411" not in db_text(tmp_path / "runs.db") + text + whole
    missing = runner.invoke(cli, ["show", run_id, "--db", db, "--step", "nope"])
    assert missing.exit_code == 2 and "has no step 'nope'" in missing.stderr


async def test_messages_over_max_output_bytes_are_stored_cut_with_a_marker(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).respond(200, json=completion("fine"))
    wf = Workflow.from_dict({"name": "llm-big", "limits": {"max_output_bytes": 2048},
                             "steps": [llm_step(prompt="{{ 'word ' * 3000 }}")]})
    async with connect("memory://") as held:
        result = await wf.run_async({}, db=held)
        events = await held.store.get_events(result.run_id)
    assert result.status == "completed"
    assert len(json.loads(route.calls.last.request.content)["messages"][0]["content"]) \
        == 15000  # sent whole
    note = next(e.data["llm_request"] for e in events if "llm_request" in e.data)
    assert len(json.dumps(note["messages"]).encode()) <= 2048
    content = note["messages"][0]["content"]
    assert content.startswith("word word ") and content.endswith(" more bytes cut]")
    assert note["cut"].startswith("the messages were 15,")


def test_bounded_messages_share_the_budget_and_keep_whole_characters() -> None:
    from plait.steps.llm import bounded_messages

    messages = [{"role": "system", "content": "short"},
                {"role": "user", "content": "é\"\n" * 4000},
                {"role": "user", "content": [{"type": "text", "text": "y" * 3000}]}]
    out, cut = bounded_messages(messages, 1500)
    assert cut is not None and len(json.dumps(out, ensure_ascii=False).encode()) <= 1500
    assert isinstance(out, list) and out[0] == messages[0]
    assert [m["role"] for m in out] == ["system", "user", "user"]
    assert out[1]["content"].startswith("é\"\n") and "more bytes cut]" in out[1]["content"]
    assert out[2]["content"].startswith('[{"type": "text", "text": "yyy')
    assert bounded_messages(messages[:1], 1500) == (messages[:1], None)
