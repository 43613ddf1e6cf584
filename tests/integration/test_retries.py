"""Failures: retries and their timing, what is never retried, per-attempt
timeouts, fallbacks, circuit breakers, non-JSON outputs and template errors."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from plait import FatalError, Retry, StepContext, Workflow
from plait.core.model import CircuitBreakerSpec
from plait.runtime.engine import Engine
from plait.store import MemoryStore

from .conftest import RunWf, run_with, statuses


class Flaky:
    """A step function that fails ``failures`` times, recording when each call began."""

    def __init__(self, failures: int, exc: type[Exception] = ValueError) -> None:
        self.failures, self.exc = failures, exc
        self.times: list[float] = []

    def __call__(self) -> str:
        self.times.append(time.monotonic())
        if len(self.times) <= self.failures:
            raise self.exc(f"failure {len(self.times)}")
        return "ok"

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:])]


# ---------------------------------------------------------------- timing


async def test_gaps_between_attempts_follow_the_backoff(run_wf: RunWf) -> None:
    flaky = Flaky(3)
    wf = Workflow("backoff")
    wf.add_step("s", flaky, retry=Retry(max_retries=3, initial_delay=0.06, backoff=2.0,
                                        max_delay=10, jitter=0.5))
    result = await run_wf(wf, rand=lambda: 0.0)  # rand 0: no jitter at all
    assert result.steps["s"].status == "completed"
    assert result.steps["s"].attempts == 4
    expected = [0.06, 0.12, 0.24]
    for gap, want in zip(flaky.gaps, expected, strict=True):
        assert want - 0.005 <= gap <= want + 0.15, (flaky.gaps, expected)
    assert flaky.gaps[0] < flaky.gaps[1] < flaky.gaps[2]


async def test_max_delay_caps_the_backoff(run_wf: RunWf) -> None:
    flaky = Flaky(3)
    wf = Workflow("capped")
    wf.add_step("s", flaky, retry=Retry(max_retries=3, initial_delay=0.05, backoff=10.0,
                                        max_delay=0.08, jitter=0.0))
    await run_wf(wf)
    assert 0.045 <= flaky.gaps[0] <= 0.2
    for gap in flaky.gaps[1:]:
        assert 0.075 <= gap <= 0.25, flaky.gaps


async def test_jitter_is_really_applied(run_wf: RunWf) -> None:
    base, jitter = 0.15, 1.0

    async def measure(rand: float) -> float:
        flaky = Flaky(1)
        wf = Workflow("jitter")
        wf.add_step("s", flaky, retry=Retry(max_retries=1, initial_delay=base,
                                            jitter=jitter))
        result = await run_wf(wf, rand=lambda: rand)
        assert result.steps["s"].attempts == 2
        return flaky.gaps[0]

    low = await measure(0.0)
    high = await measure(0.999)
    assert base - 0.005 <= low <= base + 0.1
    # with rand ~1 the gap grows by about jitter * base
    assert high - low == pytest.approx(jitter * base * 0.999, abs=0.07)
    assert high >= base * (1 + jitter * 0.999) - 0.005


# ---------------------------------------------------------------- what is retried


async def test_retries_until_success(run_wf: RunWf) -> None:
    flaky = Flaky(2)
    wf = Workflow("until")
    wf.add_step("s", flaky, retry=Retry(max_retries=3, initial_delay=0.001))
    result = await run_wf(wf)
    step = result.steps["s"]
    assert (step.status, step.attempts, step.output, step.error) == ("completed", 3, "ok",
                                                                     None)


async def test_retries_are_spent_then_the_step_fails(run_wf: RunWf) -> None:
    flaky = Flaky(10)
    wf = Workflow("spent")
    wf.add_step("s", flaky, retry=Retry(max_retries=2, initial_delay=0.001))
    result = await run_wf(wf)
    step = result.steps["s"]
    assert (step.status, step.attempts) == ("failed", 3)
    assert len(flaky.times) == 3
    assert step.error is not None and "ValueError" in step.error and "failure 3" in step.error


async def test_every_attempt_is_in_the_history() -> None:
    flaky = Flaky(2)
    wf = Workflow("history")
    wf.add_step("s", flaky, retry=Retry(max_retries=3, initial_delay=0.001))
    store = MemoryStore()
    eng = Engine(store)
    try:
        result = await run_with(eng, wf)
    finally:
        eng.close()
    attempts = await store.get_attempts(result.run_id)
    assert [(a.attempt, a.status) for a in attempts] == [(1, "failed"), (2, "failed"),
                                                         (3, "completed")]
    assert all(a.finished_at is not None and a.finished_at >= a.started_at for a in attempts)
    assert "failure 1" in (attempts[0].error or "")
    assert attempts[0].worker == eng.worker


class Transient(Exception):
    pass


class Permanent(Exception):
    pass


class SubTransient(Transient):
    pass


@pytest.mark.parametrize(("exc", "retry", "calls"), [
    (Transient, Retry(max_retries=2, initial_delay=0.001, retry_on=[Transient]), 3),
    (SubTransient, Retry(max_retries=2, initial_delay=0.001, retry_on=["Transient"]), 3),
    (Permanent, Retry(max_retries=2, initial_delay=0.001, retry_on=["Transient"]), 1),
    (Permanent, Retry(max_retries=2, initial_delay=0.001, no_retry_on=["Permanent"]), 1),
    (Transient, Retry(max_retries=2, initial_delay=0.001, no_retry_on=["Permanent"]), 3),
    (SubTransient, Retry(max_retries=2, initial_delay=0.001, retry_on=["Exception"],
                         no_retry_on=["Transient"]), 1),
])
async def test_retry_on_and_no_retry_on(run_wf: RunWf, exc: type[Exception], retry: Any,
                                        calls: int) -> None:
    flaky = Flaky(10, exc)
    wf = Workflow("retryon")
    wf.add_step("s", flaky, retry=retry)
    result = await run_wf(wf)
    assert result.steps["s"].status == "failed"
    assert len(flaky.times) == calls == result.steps["s"].attempts


async def test_fatal_error_is_not_retried(run_wf: RunWf) -> None:
    flaky = Flaky(10, FatalError)
    wf = Workflow("fatal")
    wf.add_step("s", flaky, retry=Retry(max_retries=5, initial_delay=0.001,
                                        retry_on=["FatalError"]))
    result = await run_wf(wf)
    assert (result.steps["s"].status, result.steps["s"].attempts) == ("failed", 1)
    assert "FatalError" in (result.steps["s"].error or "")


async def test_retry_policy_from_a_definition(run_wf: RunWf) -> None:
    wf = Workflow.from_dict({"name": "defretry", "defaults": {
        "retry": {"max_retries": 2, "initial_delay": "1ms"}}, "steps": [
        {"id": "s", "type": "transform", "value": "{{ input.missing }}"}]})
    result = await run_wf(wf)
    assert result.steps["s"].attempts == 1  # a template error is never retried


# ---------------------------------------------------------------- timeouts


async def test_async_attempt_is_cancelled_on_timeout(run_wf: RunWf) -> None:
    seen: list[str] = []

    async def slow() -> str:
        seen.append("start")
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        seen.append("finished")
        return "late"

    wf = Workflow("atimeout")
    wf.add_step("s", slow, timeout=0.1, retry=Retry(max_retries=1, initial_delay=0.01))
    started = time.monotonic()
    result = await run_wf(wf)
    elapsed = time.monotonic() - started
    step = result.steps["s"]
    assert (step.status, step.attempts) == ("failed", 2)
    assert "timed out after 0.1s" in (step.error or "")
    assert seen == ["start", "cancelled", "start", "cancelled"]
    assert 0.2 <= elapsed < 1.5


async def test_sync_attempt_fails_on_time_and_its_thread_is_abandoned(
        run_wf: RunWf) -> None:
    release = threading.Event()
    finished: list[float] = []

    def stuck() -> str:
        release.wait(10)
        finished.append(time.monotonic())
        return "late"

    wf = Workflow("stimeout")
    wf.add_step("s", stuck, timeout=0.15, retry=0)
    wf.add_step("after", lambda: "next", depends_on=["s"], trigger="all_done")
    started = time.monotonic()
    try:
        result = await run_wf(wf)
        elapsed = time.monotonic() - started
    finally:
        release.set()
    step = result.steps["s"]
    assert step.status == "failed" and step.attempts == 1
    assert "timed out" in (step.error or "")
    assert 0.14 <= elapsed < 1.0  # the run did not wait for the thread
    assert finished == [] or finished[0] - started >= elapsed
    assert result.steps["after"].status == "completed"
    assert step.finished_at is not None and step.started_at is not None
    assert 0.14 <= step.finished_at - step.started_at < 1.0


async def test_a_timeout_error_raised_by_the_step_is_not_reported_as_the_timeout(
        run_wf: RunWf) -> None:
    async def own_timeout() -> None:
        raise TimeoutError("upstream took too long")

    wf = Workflow("owntimeout")
    wf.add_step("s", own_timeout, timeout=5, retry=0)
    result = await run_wf(wf)
    assert "upstream took too long" in (result.steps["s"].error or "")


# ---------------------------------------------------------------- fallbacks


async def test_fallback_call_runs_once_retries_are_spent(run_wf: RunWf) -> None:
    flaky = Flaky(10)
    got: list[Any] = []

    def fallback(error: str, input: dict[str, Any]) -> dict[str, Any]:
        got.append(error)
        return {"cached": input["key"]}

    wf = Workflow("fbcall")
    wf.add_step("s", flaky, retry=Retry(max_retries=1, initial_delay=0.001),
                fallback=fallback)
    wf.add_step("next", lambda s: {"saw": s}, depends_on=["s"])
    result = await run_wf(wf, {"key": "k1"})
    step = result.steps["s"]
    assert (step.status, step.attempts, step.fallback_used) == ("completed", 2, True)
    assert step.output == {"cached": "k1"}
    assert len(flaky.times) == 2
    assert len(got) == 1 and "failure 2" in got[0]
    assert result.steps["next"].output == {"saw": {"cached": "k1"}}
    assert result.status == "completed"


async def test_fallback_output_is_rendered(run_wf: RunWf) -> None:
    wf = Workflow("fbout")
    wf.add_step("s", Flaky(10, FatalError), retry=3,
                fallback={"output": {"answer": "{{ input.default }}", "fixed": 1}})
    result = await run_wf(wf, {"default": "n/a"})
    step = result.steps["s"]
    assert (step.status, step.attempts, step.fallback_used) == ("completed", 1, True)
    assert step.output == {"answer": "n/a", "fixed": 1}


async def test_a_failing_fallback_fails_the_step_naming_both_errors(run_wf: RunWf) -> None:
    def bad_fallback() -> None:
        raise RuntimeError("fallback broke")

    wf = Workflow("fbfail")
    wf.add_step("s", Flaky(10), retry=0, fallback=bad_fallback)
    result = await run_wf(wf)
    step = result.steps["s"]
    assert step.status == "failed"
    assert step.fallback_used is False
    assert "failure 1" in (step.error or "") and "fallback broke" in (step.error or "")


async def test_fallback_not_used_when_the_step_succeeds(run_wf: RunWf) -> None:
    wf = Workflow("fbunused")
    wf.add_step("s", Flaky(1), retry=Retry(max_retries=1, initial_delay=0.001),
                fallback={"output": "fb"})
    result = await run_wf(wf)
    assert (result.steps["s"].output, result.steps["s"].fallback_used) == ("ok", False)


async def test_fallback_attempt_is_recorded_separately() -> None:
    wf = Workflow("fbhistory")
    wf.add_step("s", Flaky(10), retry=0, fallback=lambda: "fb")
    store = MemoryStore()
    eng = Engine(store)
    try:
        result = await run_with(eng, wf)
    finally:
        eng.close()
    attempts = await store.get_attempts(result.run_id)
    assert [(a.attempt, a.fallback, a.status) for a in attempts] == [
        (1, False, "failed"), (1, True, "completed")]


# ---------------------------------------------------------------- circuit breaker


async def test_circuit_breaker_is_shared_by_key_across_steps(run_wf: RunWf) -> None:
    first = Flaky(10)
    second = Flaky(0)
    breaker = {"key": "svc", "failure_threshold": 2, "reset_after": 60}
    wf = Workflow("breaker")
    wf.add_step("first", first, retry=Retry(max_retries=1, initial_delay=0.001),
                circuit_breaker=breaker, fallback={"output": "first-fb"})
    wf.add_step("second", second, depends_on=["first"], circuit_breaker=breaker,
                retry=Retry(max_retries=3, initial_delay=0.001),
                fallback={"output": "second-fb"})
    started = time.monotonic()
    result = await run_wf(wf)
    assert time.monotonic() - started < 1.0
    assert len(first.times) == 2  # two consecutive failures open the breaker
    assert second.times == []  # open: the attempt fails at once, without a call
    one, two = result.steps["first"], result.steps["second"]
    assert (one.status, one.fallback_used, one.output) == ("completed", True, "first-fb")
    assert (two.status, two.fallback_used, two.output) == ("completed", True, "second-fb")
    assert two.attempts == 1  # an open breaker is not retried
    assert result.status == "completed"


async def test_open_breaker_without_fallback_fails_naming_the_key(run_wf: RunWf) -> None:
    breaker = {"key": "api", "failure_threshold": 1, "reset_after": 60}
    second = Flaky(0)
    wf = Workflow("breakerfail")
    wf.add_step("first", Flaky(10), retry=0, circuit_breaker=breaker)
    wf.add_step("second", second, circuit_breaker=breaker, depends_on=["first"],
                trigger="all_done", retry=3)
    result = await run_wf(wf)
    assert second.times == []
    assert result.steps["second"].status == "failed"
    assert "circuit breaker 'api' is open" in (result.steps["second"].error or "")


async def test_a_success_resets_the_breaker_across_runs_of_one_engine(engine: Engine) -> None:
    breaker = {"key": "k", "failure_threshold": 2, "reset_after": 60}
    wf_ok = Workflow("breakerok")
    wf_ok.add_step("s", Flaky(1), retry=Retry(max_retries=1, initial_delay=0.001),
                   circuit_breaker=breaker)
    wf_ok2 = Workflow("breakerok2")
    wf_ok2.add_step("s", Flaky(1), retry=Retry(max_retries=1, initial_delay=0.001),
                    circuit_breaker=breaker)
    # fail, succeed, fail, succeed: never two consecutive failures
    assert (await run_with(engine, wf_ok)).steps["s"].status == "completed"
    assert (await run_with(engine, wf_ok2)).steps["s"].status == "completed"
    state = await engine.breakers.state(CircuitBreakerSpec(key="k", failure_threshold=2))
    assert (state.state, state.failures) == ("closed", 0)


# ---------------------------------------------------------------- outputs and templates


async def test_non_json_output_fails_naming_the_key_path(run_wf: RunWf) -> None:
    calls: list[int] = []

    def bad() -> dict[str, Any]:
        calls.append(1)
        return {"items": [1, 2, object()], "ok": True}

    wf = Workflow("nonjson")
    wf.add_step("s", bad, retry=Retry(max_retries=3, initial_delay=0.001))
    result = await run_wf(wf)
    step = result.steps["s"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert calls == [1]  # never retried
    assert "output.items[2]" in (step.error or "")
    assert "OutputError" in (step.error or "")


@pytest.mark.parametrize(("value", "path"), [
    ({"a": {"b": {1, 2}}}, "output.a.b"),
    ({"when": float("nan")}, "output.when"),
    ({1: "int key"}, "output"),
    (b"bytes", "output"),
])
async def test_non_json_values_are_refused(run_wf: RunWf, value: Any, path: str) -> None:
    wf = Workflow("nonjson2")
    wf.add_step("s", lambda: value, retry=0)
    result = await run_wf(wf)
    assert result.steps["s"].status == "failed"
    assert path in (result.steps["s"].error or "")


async def test_tuples_are_stored_as_lists(run_wf: RunWf) -> None:
    wf = Workflow("tuples")
    wf.add_step("s", lambda: {"pair": (1, 2)})
    result = await run_wf(wf)
    assert result.steps["s"].output == {"pair": [1, 2]}


async def test_template_error_fails_without_retry_naming_step_field_template(
        run_wf: RunWf) -> None:
    wf = Workflow.from_dict({"name": "tplerr", "steps": [
        {"id": "render_me", "type": "transform", "retry": {"max_retries": 3},
         "value": {"greeting": "hello", "who": "{{ input.user.name }}"}}]})
    result = await run_wf(wf, {"user": {}})
    step = result.steps["render_me"]
    assert (step.status, step.attempts) == ("failed", 1)
    error = step.error or ""
    assert "TemplateError" in error
    assert "render_me" in error
    assert "value.who" in error
    assert "{{ input.user.name }}" in error


async def test_template_error_in_python_with_is_not_retried(run_wf: RunWf) -> None:
    calls: list[int] = []

    def greet(name: str) -> str:
        calls.append(1)
        return name

    wf = Workflow("tplwith")
    wf.add_step("greet", greet, with_={"name": "{{ input.nope }}"},
                retry=Retry(max_retries=3, initial_delay=0.001))
    result = await run_wf(wf, {})
    step = result.steps["greet"]
    assert (step.status, step.attempts, calls) == ("failed", 1, [])
    assert "with.name" in (step.error or "") and "{{ input.nope }}" in (step.error or "")


async def test_template_error_in_when_fails_the_step(run_wf: RunWf) -> None:
    wf = Workflow("tplwhen")
    wf.add_step("s", lambda: 1, when="{{ input.missing.deeper }}")
    result = await run_wf(wf, {})
    step = result.steps["s"]
    assert step.status == "failed"
    assert "when" in (step.error or "") and "{{ input.missing.deeper }}" in (step.error or "")


async def test_step_outputs_are_never_rendered_again(run_wf: RunWf) -> None:
    wf = Workflow.from_dict({"name": "literal", "steps": [
        {"id": "a", "type": "transform", "value": "{{ input.text }}"},
        {"id": "b", "type": "transform", "depends_on": ["a"],
         "value": {"lone": "{{ steps.a.output }}", "mixed": "got {{ steps.a.output }}"}}]})
    result = await run_wf(wf, {"text": "{{ 7*7 }}"})
    assert result.steps["a"].output == "{{ 7*7 }}"
    assert result.steps["b"].output == {"lone": "{{ 7*7 }}", "mixed": "got {{ 7*7 }}"}


async def test_python_output_with_template_text_stays_literal(run_wf: RunWf) -> None:
    wf = Workflow("literal2")
    wf.add_step("a", lambda: {"text": "{{ 7*7 }}"})
    wf.add_step("b", lambda a: a["text"])
    wf.add_step("c", type="transform", depends_on=["a"],
                value="{{ steps.a.output.text }}")
    result = await run_wf(wf)
    assert result.steps["b"].output == "{{ 7*7 }}"
    assert result.steps["c"].output == "{{ 7*7 }}"


async def test_context_attempt_counts_retries(run_wf: RunWf) -> None:
    seen: list[tuple[int, str]] = []

    def step(ctx: StepContext) -> str:
        seen.append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt < 3:
            raise ValueError("again")
        return "done"

    wf = Workflow("ctxretry")
    wf.add_step("s", step, retry=Retry(max_retries=3, initial_delay=0.001))
    result = await run_wf(wf)
    key = f"{result.run_id}:s"
    assert seen == [(1, key), (2, key), (3, key)]
    assert statuses(result) == {"s": "completed"}


async def test_a_stray_cancelled_error_from_step_code_does_not_wedge_the_run(
        run_wf: RunWf) -> None:
    async def own_cancel() -> None:
        raise asyncio.CancelledError  # e.g. leaked by a library, not by plait

    wf = Workflow("straycancel")
    wf.add_step("f", own_cancel, retry=0)
    wf.add_step("g", lambda f: "after", depends_on=["f"])
    wf.add_step("cleanup", lambda: "done", depends_on=["f"], trigger="all_done")
    result = await run_wf(wf, timeout=5)
    assert result.steps["f"].status in ("failed", "cancelled")
    assert result.steps["g"].status in ("upstream_failed", "cancelled")
    assert result.status in ("failed", "cancelled")
    assert all(s.status not in ("pending", "queued", "running") for s in result.steps.values())


async def test_breaker_half_opens_after_reset_after(engine: Engine) -> None:
    breaker = {"key": "svc-reset", "failure_threshold": 2, "reset_after": 0.2}
    healthy = {"now": False}
    calls: list[float] = []

    def service() -> str:
        calls.append(time.monotonic())
        if not healthy["now"]:
            raise ConnectionError("down")
        return "up"

    def flow(name: str) -> Workflow:
        wf = Workflow(name)
        wf.add_step("s", service, retry=Retry(max_retries=1, initial_delay=0.001),
                    circuit_breaker=breaker, fallback={"output": "fb"})
        return wf

    first = await run_with(engine, flow("b1"))  # two failures: the breaker opens
    assert (first.steps["s"].output, len(calls)) == ("fb", 2)
    healthy["now"] = True
    second = await run_with(engine, flow("b2"))  # still open: no call at all
    assert (second.steps["s"].output, len(calls)) == ("fb", 2)
    await asyncio.sleep(0.25)
    third = await run_with(engine, flow("b3"))  # half-open: one trial, it succeeds
    assert (third.steps["s"].output, third.steps["s"].fallback_used) == ("up", False)
    assert len(calls) == 3
    fourth = await run_with(engine, flow("b4"))  # closed again
    assert fourth.steps["s"].output == "up" and len(calls) == 4
