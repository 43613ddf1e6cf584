"""Token budgets (``limits.max_llm_tokens``) through the public API: the limit's
validation, and a spent budget refusing calls before they are sent, without retry.

respx stands in for an OpenAI-compatible endpoint; each answer spends 10 tokens."""

from __future__ import annotations

import httpx
import pytest
import respx

from plait import DefinitionError, RunResult, Workflow
from plait.core.model import Limits

from .test_llm import URL, completion, llm_step

FAST = {"max_retries": 5, "initial_delay": 0.01, "jitter": 0}


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test-budget")


async def run(*steps: dict[str, object], budget: int | None) -> RunResult:
    definition: dict[str, object] = {"name": "budget-test", "steps": list(steps)}
    if budget is not None:
        definition["limits"] = {"max_llm_tokens": budget}
    return await Workflow.from_dict(definition).run_async({"name": "Ada"})


@pytest.mark.parametrize("value", [0, -5, 1.5, True, "many", None, 2**31])
def test_a_limit_that_is_not_a_positive_whole_number_is_a_located_problem(
        value: object) -> None:
    with pytest.raises(DefinitionError) as excinfo:
        Workflow.from_dict({"name": "w", "limits": {"max_llm_tokens": value},
                            "steps": [llm_step()]}).validate()
    assert [p.location for p in excinfo.value.problems] == ["limits.max_llm_tokens"]


@pytest.mark.parametrize(("value", "message"), [
    (0, "must be at least 1, got 0"), ("lots", "expected a whole number, got 'lots'")])
def test_the_problem_says_what_is_wrong(value: object, message: str) -> None:
    with pytest.raises(DefinitionError) as excinfo:
        Workflow.from_dict({"name": "w", "limits": {"max_llm_tokens": value},
                            "steps": [llm_step()]}).validate()
    assert str(excinfo.value.problems[0]) == f"limits.max_llm_tokens: {message}"


def test_the_limit_is_kept_by_the_definition_and_the_python_api() -> None:
    wf = Workflow.from_dict({"name": "w", "limits": {"max_llm_tokens": 500},
                             "steps": [llm_step()]})
    assert wf.to_dict()["limits"] == {"max_llm_tokens": 500}
    assert Workflow("p", limits=Limits(max_llm_tokens=7)).to_dict()["limits"] == \
        {"max_llm_tokens": 7}
    assert "limits" not in Workflow.from_dict({"name": "w",
                                               "steps": [llm_step()]}).to_dict()


async def test_a_spent_budget_refuses_the_next_call_without_sending_it(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).respond(200, json=completion("hi"))

    result = await run(llm_step("a", retry=FAST), llm_step("b", retry=FAST, depends_on=["a"]),
                       budget=10)

    assert route.call_count == 1
    assert result.steps["a"].status == "completed"
    refused = result.steps["b"]
    assert (refused.status, refused.attempts) == ("failed", 1)
    assert "token budget of 10 spent: 10 used" in (refused.error or "")


async def test_every_attempt_counts_and_the_refusal_is_not_retried(
        respx_mock: respx.MockRouter) -> None:
    # a JSON response_format refuses each answer: the step retries, each try spending
    route = respx_mock.post(URL).respond(200, json=completion("not json"))

    result = await run(llm_step(retry=FAST, response_format={"type": "json_object"}),
                       budget=25)

    step = result.steps["ask"]
    # tries 1-3 are sent (0, 10, 20 used: under 25), try 4 is refused, and nothing after
    assert (route.call_count, step.status, step.attempts) == (3, "failed", 4)
    assert "token budget of 25 spent: 30 used" in (step.error or "")


async def test_without_a_limit_calls_are_never_refused(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).mock(side_effect=[
        httpx.Response(200, json=completion("hi", prompt_tokens=10**6))] * 3)

    result = await run(llm_step("a"), llm_step("b", depends_on=["a"]),
                       llm_step("c", depends_on=["b"]), budget=None)

    assert (result.status, route.call_count) == ("completed", 3)


def test_a_python_workflows_limit_is_checked_the_same_way() -> None:
    wf = Workflow("p", limits=Limits(max_llm_tokens=0))
    wf.add_step("a", lambda: 1)
    with pytest.raises(DefinitionError) as excinfo:
        wf.validate()
    assert [p.location for p in excinfo.value.problems] == ["limits.max_llm_tokens"]
