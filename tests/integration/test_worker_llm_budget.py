"""A token budget (``limits.max_llm_tokens``) on ``plait worker``: four agent steps
calling the model without end run at once on two workers; the run's count, kept in
the store, gathers every call of every worker, and once it has reached the limit no
worker sends another call.  A loop's iterations, run by the workers as child runs,
spend from the parent's budget.  Every answer spends 10 tokens."""

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
LIMIT, AGENTS = 50, 4

_STEPS = f'''
async def agent(ctx):
    return [(await ctx.llm(f"turn-{{i}}", base_url="{BASE}", model="gpt-test",
                           api_key_env="TEST_LLM_KEY", prompt=f"turn {{i}}"))["content"]
            for i in range(100)]
'''


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgresql",
                                                          marks=pytest.mark.postgres)],
                         indirect=True)
async def test_the_budget_holds_across_workers(
        store: Store, write_steps_module: StepsModule, respx_mock: respx.MockRouter,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-worker-budget")
    route = respx_mock.post(f"{BASE}/chat/completions").respond(200, json={
        "model": "gpt-test", "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant",
                                                      "content": "more"}}],
        "usage": {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}})
    module = write_steps_module(_STEPS)
    checked = check_definition({
        "name": f"wf-{uuid.uuid4().hex[:8]}", "limits": {"max_llm_tokens": LIMIT},
        "steps": [{"id": f"agent{n}", "type": "python", "call": f"{module}:agent",
                   "retry": {"max_retries": 2, "initial_delay": 0}}
                  for n in range(AGENTS)]})

    run_id, status = await run_on_two_workers(store, checked, WAIT_S)

    assert status == RunStatus.FAILED
    used = await store.llm_tokens(run_id)
    # every call sent was counted, whichever worker sent it
    assert used == 10 * route.call_count
    # a call is sent only while the count is under the limit: past it, at most the
    # calls in flight when it crossed (one per agent) were answered
    assert LIMIT <= used <= LIMIT - 10 + 10 * AGENTS
    # and each step's own calls, as Prometheus counts them, add up to it
    snap = await store.metrics_snapshot((1.0,))
    name = checked.spec.name
    assert sum(snap.tokens.get((name, f"agent{n}", "total_tokens"), 0)
               for n in range(AGENTS)) == used
    for step in await store.get_steps(run_id):
        assert (step.status, step.attempts) == ("failed", 1)
        assert f"token budget of {LIMIT} spent: " in (step.error or "")


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgresql",
                                                          marks=pytest.mark.postgres)],
                         indirect=True)
async def test_loop_iterations_on_workers_spend_from_the_parents_budget(
        store: Store, respx_mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-worker-budget")
    route = respx_mock.post(f"{BASE}/chat/completions").respond(200, json={
        "model": "gpt-test", "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant",
                                                      "content": "more"}}],
        "usage": {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}})
    ask = {"name": f"ask-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "ask", "type": "llm", "base_url": BASE, "model": "gpt-test",
         "api_key_env": "TEST_LLM_KEY", "prompt": "round {{ input.round }}"}]}
    checked = check_definition({
        "name": f"wf-{uuid.uuid4().hex[:8]}", "limits": {"max_llm_tokens": 25},
        "steps": [{"id": "rounds", "type": "loop", "workflow": ask["name"], "definition": ask,
                   "input": {"round": "{{ loop.iteration }}"}, "until": "{{ false }}",
                   "max_iterations": 10}]})

    run_id, status = await run_on_two_workers(store, checked, WAIT_S)

    # iterations 0-2 are sent (0, 10, 20 used); iteration 3's call is refused
    assert status == RunStatus.FAILED
    assert route.call_count == 3
    assert await store.llm_tokens(run_id) == 30
