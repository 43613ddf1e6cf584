"""examples/fake_openai: the fake OpenAI server, started as its header says, and an llm
step (the example flow) against it end to end through ``plait run``."""

from __future__ import annotations


def test_the_flow_runs_against_the_fake_server(plait_run, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-example-not-real")
    code, result, stderr = plait_run("fake_openai/flow.yaml",
                                     {"topic": "durable workflows", "base_url": fake_openai})
    assert code == 0, stderr
    outline = result["steps"]["outline"]["output"]
    assert outline["json"] == {"title": "Outline durable workflows", "points": 3}
    assert outline["model"] == "gpt-4o-mini-fake"
    assert outline["usage"]["total_tokens"] == outline["usage"]["prompt_tokens"] + \
        outline["usage"]["completion_tokens"] > 0
    assert result["output"] == f"Outline durable workflows ({outline['usage']['total_tokens']} tokens)"


def test_a_missing_key_fails_naming_the_variable(plait_run, fake_openai, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, result, _ = plait_run("fake_openai/flow.yaml",
                                {"topic": "x", "base_url": fake_openai})
    assert code == 1
    assert "OPENAI_API_KEY" in result["steps"]["outline"]["error"]


def test_the_fake_server_streams_the_same_answers_when_asked(fake_openai):
    import json

    import httpx

    schema = {"type": "object", "properties": {"title": {"type": "string"},
                                               "points": {"type": "integer"}}}
    tool = {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}}}}
    requests = [
        {"messages": [{"role": "user", "content": "Say hi to Ada"}]},
        {"messages": [{"role": "user", "content": "Outline x"}],
         "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}},
        {"messages": [{"role": "user", "content": "find heat pumps"}], "tools": [tool]},
    ]
    headers = {"Authorization": "Bearer sk-example-not-real"}
    url = f"{fake_openai}/chat/completions"
    for request in requests:
        body = {"model": "gpt-4o-mini", **request}
        whole = httpx.post(url, json=body, headers=headers).json()
        streamed = httpx.post(url, headers=headers, json={
            **body, "stream": True, "stream_options": {"include_usage": True}})
        assert streamed.headers["content-type"] == "text/event-stream"
        events = [line[6:] for line in streamed.text.splitlines()
                  if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
        message = whole["choices"][0]["message"]
        content = "".join(d.get("content") or "" for d in deltas)
        assert content == (message["content"] or "")
        assert len([d for d in deltas if d.get("content")]) > 1 or not content
        arguments = "".join(call["function"].get("arguments", "")
                            for d in deltas for call in d.get("tool_calls", []))
        assert arguments == "".join(c["function"]["arguments"]
                                    for c in message.get("tool_calls") or [])
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        assert finishes[-1] == whole["choices"][0]["finish_reason"]
        assert chunks[-1]["usage"] == whole["usage"]  # the usage comes last
