"""Templates are bounded and never stall the run loop (issue 9 items 4, 12, 16)."""

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


class Ticks:
    """A chain of five quick steps added beside a long render: if the loop kept going
    while the template rendered, every tick ran, in order, before the render ended."""

    def __init__(self, wf: Workflow, after: str | None = None) -> None:
        self.seen: list[str] = []
        previous = after
        for n in range(5):
            wf.add_step(f"tick{n}", lambda n=n: self._tick(n),
                        depends_on=[previous] if previous else [])
            previous = f"tick{n}"

    async def _tick(self, n: int) -> int:
        await asyncio.sleep(0.01)
        self.seen.append(f"tick{n}")
        return n

    def ran_before(self, result: Any, slow: str) -> bool:
        last, other = result.steps["tick4"], result.steps[slow]
        return (self.seen == [f"tick{n}" for n in range(5)]
                and last.status == "completed" and last.finished_at is not None
                and other.finished_at is not None and last.finished_at < other.finished_at)


async def cancel_mid_render(wf: Workflow, after: str | None = None) -> tuple[Any, float]:
    """Run ``wf`` with a step that starts at once and waits, cancel the run once that
    step started, and return the result and how long the cancel took to act."""
    engine = Engine(MemoryStore())
    started = asyncio.Event()

    async def mark() -> None:
        started.set()
        await asyncio.sleep(60)

    wf.add_step("marker", mark, depends_on=[after] if after else [])
    checked = wf.validate()
    try:
        run = await engine.submit(checked, {})
        task = asyncio.create_task(engine.execute(checked, run))
        await asyncio.wait_for(started.wait(), 10)
        before = time.monotonic()
        await engine.cancel(run.run_id)
        result = await asyncio.wait_for(task, 10)
        return result, time.monotonic() - before
    finally:
        engine.close()


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
    wf = Workflow("parallel")
    wf.add_step("slow", type="transform", value=ENDLESS)
    ticks = Ticks(wf)
    result = await run_wf(wf)
    slow = result.steps["slow"]
    assert slow.status == "failed" and "time bound" in (slow.error or "")
    assert ticks.ran_before(result, "slow")  # the chain ran while `slow` rendered


async def test_cancel_acts_during_a_long_render() -> None:
    wf = Workflow("cancel_render")
    wf.add_step("slow", type="transform", value=ENDLESS)
    result, took = await cancel_mid_render(wf)
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
    """An LLM answering "No" is a non-empty string: true."""
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


# a legal `when` that runs until its time bound, then would be true
ENDLESS_WHEN = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                "{% endfor %}yes")


async def test_a_long_when_does_not_stall_the_loop(
        run_wf: RunWf, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `when` is judged by the core, but one that is not cheap renders in a worker
    thread: meanwhile a sibling chain starts, completes and is committed."""
    monkeypatch.setattr(sandbox, "MAX_SECONDS", 1.0)
    wf = Workflow("guarded")
    wf.add_step("root", lambda: 1)
    wf.add_step("guarded", lambda: 2, depends_on=["root"], when=ENDLESS_WHEN)
    wf.add_step("after", lambda: 3, depends_on=["guarded"])
    ticks = Ticks(wf, after="root")
    result = await run_wf(wf)
    guarded = result.steps["guarded"]
    assert (guarded.status, guarded.attempts) == ("failed", 0)
    assert guarded.error == ("TemplateError: step 'guarded', field 'when': time bound: the "
                             f"template took longer than 1 s in template {ENDLESS_WHEN!r}")
    assert result.steps["after"].status == "upstream_failed"
    assert ticks.ran_before(result, "guarded")  # the chain ran while `when` rendered


@pytest.mark.parametrize(("when", "status"), [
    ("{% for i in range(3) %}{% endfor %}{{ input.go }}", "completed"),
    ("{% for i in range(3) %}{% endfor %}{{ input.stop }}", "skipped"),
])
async def test_a_when_rendered_off_the_loop_queues_or_skips(
        run_wf: RunWf, when: str, status: str) -> None:
    wf = Workflow("offloop")
    wf.add_step("root", lambda: 1)
    wf.add_step("guarded", lambda: 2, depends_on=["root"], when=when)
    wf.add_step("join", lambda: 3, depends_on=["guarded"])
    result = await run_wf(wf, {"go": "yes", "stop": ""})
    assert result.steps["guarded"].status == status
    assert result.steps["join"].status == ("completed" if status == "completed"
                                           else "skipped")
    assert result.status == "completed"


async def test_cancel_acts_during_a_long_when() -> None:
    wf = Workflow("cancel_when")
    wf.add_step("root", lambda: 1)
    wf.add_step("guarded", lambda: 2, depends_on=["root"], when=ENDLESS_WHEN)
    result, took = await cancel_mid_render(wf, after="root")
    assert result.status == "cancelled"
    assert statuses(result) == {"root": "completed", "guarded": "cancelled",
                                "marker": "cancelled"}
    assert took < sandbox.MAX_SECONDS  # acted on before the render's own bound


async def test_a_long_fallback_output_renders_off_the_loop(
        run_wf: RunWf, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "MAX_SECONDS", 1.0)

    def broken() -> None:
        raise FatalError("down")

    wf = Workflow("fallback_render")
    wf.add_step("root", lambda: 1)
    wf.add_step("flaky", broken, depends_on=["root"], fallback={"output": ENDLESS_WHEN})
    ticks = Ticks(wf, after="root")
    result = await run_wf(wf)
    flaky = result.steps["flaky"]
    assert flaky.status == "failed"
    assert "fallback failed: TemplateError: step 'flaky', field 'fallback.output': time " \
           "bound" in (flaky.error or "")
    assert ticks.ran_before(result, "flaky")


async def test_a_fallback_output_off_the_loop_completes_the_step(run_wf: RunWf) -> None:
    def broken() -> None:
        raise FatalError("down")

    wf = Workflow("fallback_value")
    wf.add_step("flaky", broken,
                fallback={"output": "{% for i in range(2) %}{{ i }}{% endfor %}"})
    result = await run_wf(wf)
    assert (result.steps["flaky"].status, result.steps["flaky"].output) == ("completed", "01")
    assert result.steps["flaky"].fallback_used


async def test_the_run_output_renders_off_the_loop_and_is_bounded(run_wf: RunWf) -> None:
    looped = Workflow.from_dict({
        "name": "run_output", "output": "{% for i in range(3) %}{{ i }}{% endfor %}",
        "steps": [{"id": "a", "type": "transform", "value": 1}]})
    result = await run_wf(looped)
    assert (result.status, result.output) == ("completed", "012")

    big = Workflow.from_dict({
        "name": "run_output_big", "limits": {"max_output_bytes": 64},
        "steps": [{"id": "a", "type": "transform", "value": "x" * 40},
                  {"id": "b", "type": "transform", "value": "y" * 40}]})
    result = await run_wf(big)
    assert result.steps["a"].status == result.steps["b"].status == "completed"
    assert result.status == "failed"
    assert result.error is not None and result.error.startswith("run output: ")
    assert "64" in result.error
