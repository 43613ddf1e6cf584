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
