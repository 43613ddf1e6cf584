"""``ctx.llm`` in attempts run by ``plait worker``: the worker that executes the attempt
sends the request and journals the answer; the step's next attempt, on whichever worker
claims it, gets the answer back without a request; the tokens are counted once."""

from __future__ import annotations

import uuid

import pytest
import respx

from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.store.base import Store

from .conftest import StepsModule, run_on_two_workers

WAIT_S = 30.0  # a bound on waiting for the workers, never a claim about speed
BASE = "https://llm.test/v1"

_STEPS = f'''
ADD = {{"type": "function", "function": {{"name": "add", "parameters": {{
    "type": "object", "properties": {{"a": {{"type": "number"}}}}}}}}}}

async def agent(ctx):
    reply = await ctx.llm("pick", base_url="{BASE}", model="gpt-test",
                          api_key_env="TEST_LLM_KEY", prompt="add", tools=[ADD])
    if ctx.attempt == 1:
        raise ConnectionError("lost after the model call")
    return reply["tool_calls"]
'''


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgresql",
                                                          marks=pytest.mark.postgres)],
                         indirect=True)
async def test_a_worker_attempt_journals_the_model_call(
        store: Store, write_steps_module: StepsModule, respx_mock: respx.MockRouter,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-worker-ctx-llm")
    route = respx_mock.post(f"{BASE}/chat/completions").respond(200, json={
        "model": "gpt-test", "choices": [{"index": 0, "finish_reason": "tool_calls",
                                          "message": {"role": "assistant", "content": None,
                                                      "tool_calls": [{
                                                          "id": "c1", "type": "function",
                                                          "function": {
                                                              "name": "add",
                                                              "arguments": '{"a": 1}'}}]}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})
    module = write_steps_module(_STEPS)
    checked = check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "agent", "type": "python", "call": f"{module}:agent",
         "retry": {"max_retries": 1, "initial_delay": 0}}]})
    run_id, status = await run_on_two_workers(store, checked, WAIT_S)

    assert status == RunStatus.COMPLETED
    assert route.call_count == 1
    stored = await store.journal_get(run_id, "agent", "pick")
    assert stored is not None
    assert stored.value["tool_calls"] == [{"id": "c1", "name": "add", "arguments": {"a": 1}}]
    entries = [(e.step, e.name, e.attempt) for e in await store.journal(run_id)]
    assert entries == [("agent", "pick", 1)]
    usage = [e.data["usage"] for e in await store.get_events(run_id)
             if e.kind == "note" and "usage" in e.data]
    assert [(u["total_tokens"], u["call"]) for u in usage] == [(10, "pick")]
