"""Templates are bounded and never stall the run loop (SPEC 4; issue 9 items 4, 12, 16)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from plait import FatalError, Workflow
from plait.core import sandbox
from plait.runtime.engine import Engine
from plait.store import MemoryStore

from .conftest import RunWf, statuses

# a legal template that runs until its time bound: 10^10 empty iterations
ENDLESS = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


def transform(value: Any, **fields: Any) -> Workflow:
    return Workflow.from_dict({"name": "t", "steps": [
        {"id": "render_me", "type": "transform", "retry": {"max_retries": 3},
         "value": value, **fields}]})


@pytest.mark.parametrize(("template", "message"), [
    ("{{ ((10**1000)**1000)**100 }}", "size bound: '**' would build an integer of about"),
    ("{{ lipsum(10**6) }}", "'lipsum' is undefined"),
    ("{{ [[0]*1000000]*1000000 }}", "size bound: '*' would be 3,000,000 characters or items "
                                     "(at most 1,048,576, 1 MiB)"),
])
async def test_issue_templates_fail_the_step_at_once_without_retry(
        run_wf: RunWf, template: str, message: str) -> None:
    result = await run_wf(transform({"big": template}))
    step = result.steps["render_me"]
    assert (result.status, step.status, step.attempts) == ("failed", "failed", 1)
    assert step.error is not None
    assert step.error.startswith(f"TemplateError: step 'render_me', field 'value.big': "
                                 f"{message}")
    assert step.error.endswith(f" in template {template!r}")
    assert step.output is None


async def test_the_time_bound_fails_the_step_naming_it(
        run_wf: RunWf, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "MAX_SECONDS", 0.1)
    result = await run_wf(transform(ENDLESS))
    step = result.steps["render_me"]
    assert (result.status, step.status, step.attempts) == ("failed", "failed", 1)
    assert step.error == (f"TemplateError: step 'render_me', field 'value': time bound: "
                          f"the template took longer than 0.1 s in template {ENDLESS!r}")


async def test_python_with_and_when_are_bounded_too(run_wf: RunWf) -> None:
    calls: list[object] = []

    def record(x: object) -> None:
        calls.append(x)

    wf = Workflow("with")
    wf.add_step("call", record, with_={"x": "{{ 'x'|center(10**9) }}"}, retry=2)
    wf.add_step("guarded", lambda: 1, when="{{ ('x' * 10**7) | length > 0 }}")
    result = await run_wf(wf)
    assert calls == []
    assert (result.steps["call"].status, result.steps["call"].attempts) == ("failed", 1)
    assert "field 'with.x': size bound: 'center' would be" in (result.steps["call"].error
                                                              or "")
    assert result.steps["guarded"].status == "failed"
    assert "field 'when': size bound: '*' would be 10,000,000 characters" in (
        result.steps["guarded"].error or "")


async def test_a_long_render_does_not_stall_the_loop(
        run_wf: RunWf, monkeypatch: pytest.MonkeyPatch) -> None:
    """While one template renders until its time bound, a sibling chain of steps starts,
    completes and is committed: the loop kept going."""
    monkeypatch.setattr(sandbox, "MAX_SECONDS", 1.0)
    seen: list[str] = []

    async def tick(n: int) -> int:
        await asyncio.sleep(0.01)
        seen.append(f"tick{n}")
        return n

    wf = Workflow("parallel")
    wf.add_step("slow", type="transform", value=ENDLESS)
    previous = None
    for n in range(5):
        wf.add_step(f"tick{n}", lambda n=n: tick(n),
                    depends_on=[previous] if previous else [])
        previous = f"tick{n}"
    result = await run_wf(wf)
    slow = result.steps["slow"]
    assert slow.status == "failed" and "time bound" in (slow.error or "")
    assert seen == [f"tick{n}" for n in range(5)]
    last = result.steps["tick4"]
    assert last.status == "completed"
    assert last.finished_at is not None and slow.finished_at is not None
    assert last.finished_at < slow.finished_at  # the chain ran while `slow` rendered


async def test_cancel_acts_during_a_long_render() -> None:
    engine = Engine(MemoryStore())
    started = asyncio.Event()

    async def mark() -> None:
        started.set()
        await asyncio.sleep(60)

    wf = Workflow("cancel_render")
    wf.add_step("slow", type="transform", value=ENDLESS)
    wf.add_step("marker", mark)
    checked = wf.validate()
    try:
        run = await engine.submit(checked, {})
        task = asyncio.create_task(engine.execute(checked, run))
        await asyncio.wait_for(started.wait(), 10)
        before = time.monotonic()
        await engine.cancel(run.run_id)
        result = await asyncio.wait_for(task, 10)
        took = time.monotonic() - before
    finally:
        engine.close()
    assert result.status == "cancelled"
    assert statuses(result) == {"slow": "cancelled", "marker": "cancelled"}
    assert "time bound" not in (result.steps["slow"].error or "")
    assert took < sandbox.MAX_SECONDS  # acted on before the render's own bound


@pytest.mark.parametrize(("value", "runs"), [
    ("No", True), ("false", True), ("0", True), ("none", True), ("yes", True),
    ("", False), (False, False), (0, False), (None, False), ([], False), ("x", True),
])
async def test_when_and_if_use_python_truthiness(run_wf: RunWf, value: object,
                                                 runs: bool) -> None:
    """An LLM answering "No" is a non-empty string: true (SPEC 4)."""
    wf = Workflow.from_dict({"name": "truth", "steps": [
        {"id": "answer", "type": "transform", "value": {"v": value}, "outputs": ["v"]},
        {"id": "guarded", "type": "transform", "value": 1, "depends_on": ["answer"],
         "when": "{{ state.v }}"},
        {"id": "cond", "type": "condition", "if": "{{ state.v }}", "then": ["yes"],
         "else": ["no"], "depends_on": ["answer"]},
        {"id": "yes", "type": "transform", "value": 1},
        {"id": "no", "type": "transform", "value": 0}]})
    result = await run_wf(wf)
    assert result.status == "completed"
    assert result.steps["cond"].output == {"result": runs}
    expected = "completed" if runs else "skipped"
    assert statuses(result)["guarded"] == expected
    assert statuses(result)["yes"] == expected
    assert statuses(result)["no"] == ("skipped" if runs else "completed")
    if not runs:
        assert result.steps["guarded"].skip_reason == "when was false: {{ state.v }}"


async def test_a_literal_boolean_when_keeps_its_meaning(run_wf: RunWf) -> None:
    wf = Workflow.from_dict({"name": "lit", "steps": [
        {"id": "off", "type": "transform", "value": 1, "when": False},
        {"id": "on", "type": "transform", "value": 1, "when": True}]})
    assert statuses(await run_wf(wf)) == {"off": "skipped", "on": "completed"}


async def test_missing_names_say_what_is_missing(
        run_wf: RunWf, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLAIT_SECRET_MISSING", raising=False)

    def classify() -> None:
        raise FatalError("no answer")

    wf = Workflow("missing")
    wf.add_step("classify", classify, outputs=["label"], allow_failure=True, retry=0)
    wf.add_step("secret", type="transform", value="{{ secrets.MISSING }}")
    wf.add_step("label", type="transform", value="{{ state.label }}",
                depends_on=["classify"])
    wf.add_step("source", type="transform", value={"yes": 1})
    wf.add_step("field", type="transform", value="{{ steps.source.output.nope }}",
                depends_on=["source"])
    result = await run_wf(wf)
    errors = {sid: step.error for sid, step in result.steps.items()}
    assert errors["secret"] == (
        "TemplateError: step 'secret', field 'value': secret MISSING is not set (set the "
        "environment variable PLAIT_SECRET_MISSING) in template '{{ secrets.MISSING }}'")
    assert errors["label"] == (
        "TemplateError: step 'label', field 'value': state.label is not set: step "
        "'classify' declares it in `outputs` but has not written it (it did not complete "
        "or has not run yet) in template '{{ state.label }}'")
    assert errors["field"] == (
        "TemplateError: step 'field', field 'value': the output of step 'source' has no "
        "key 'nope' in template '{{ steps.source.output.nope }}'")
    assert result.steps["label"].attempts == 1
