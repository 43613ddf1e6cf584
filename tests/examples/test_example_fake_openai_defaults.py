"""examples/fake_openai/defaults.yaml: llm steps whose model settings come from
``defaults.llm`` (a map's inline step included) and an ``x-`` anchor merged into a
step, run end to end through ``plait run`` against the fake OpenAI server."""

from __future__ import annotations


def test_defaults_llm_reach_every_llm_step(plait_run, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-example-not-real")
    code, result, stderr = plait_run("fake_openai/defaults.yaml", {
        "base_url": fake_openai, "topics": ["queues", "retries", "leases"]})
    assert code == 0, stderr
    assert result["status"] == "completed"
    note = result["output"]
    assert note["title"] == "echo: A title for a note on queues and retries and leases"
    assert note["points"] == ["One point about queues", "One point about retries",
                              "One point about leases"]
    # the step's own model wins; the map's items take the default
    assert note["models"] == ["gpt-4o-fake", "gpt-4o-mini-fake"]
    assert [result["steps"][f"points[{k}]"]["status"] for k in range(3)] == \
        ["completed"] * 3
