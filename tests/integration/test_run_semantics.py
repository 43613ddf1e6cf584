"""Run semantics through the public API: trigger rules, conditions, `when`,
propagation of skips and failures, on_failure, allow_failure and the run's status."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plait import FatalError, Workflow

from .conftest import RunWf, statuses


def ok() -> dict[str, bool]:
    return {"ok": True}


def boom() -> None:
    raise FatalError("boom")


def parent(wf: Workflow, sid: str, kind: str) -> None:
    """A parent that completes (ok), fails (fail) or is skipped by its `when` (skip)."""
    if kind == "ok":
        wf.add_step(sid, ok)
    elif kind == "fail":
        wf.add_step(sid, boom, retry=0)
    else:
        wf.add_step(sid, ok, when="{{ false }}")


TABLE = [
    # rule, parent outcomes, child status
    ("default", [], "completed"),
    ("default", ["ok", "ok"], "completed"),
    ("default", ["ok", "skip"], "completed"),
    ("default", ["skip", "skip"], "skipped"),
    ("default", ["ok", "fail"], "upstream_failed"),
    ("default", ["skip", "fail"], "upstream_failed"),
    ("all_success", ["ok", "ok"], "completed"),
    ("all_success", ["ok", "skip"], "skipped"),
    ("all_success", ["skip", "skip"], "skipped"),
    ("all_success", ["ok", "fail"], "upstream_failed"),
    ("all_success", ["skip", "fail"], "upstream_failed"),
    ("none_failed", ["ok", "ok"], "completed"),
    ("none_failed", ["ok", "skip"], "completed"),
    ("none_failed", ["skip", "skip"], "completed"),
    ("none_failed", ["ok", "fail"], "upstream_failed"),
    ("all_done", ["ok", "ok"], "completed"),
    ("all_done", ["fail", "skip"], "completed"),
    ("all_done", ["fail", "fail"], "completed"),
    ("one_failed", ["ok", "fail"], "completed"),
    ("one_failed", ["skip", "fail"], "completed"),
    ("one_failed", ["ok", "ok"], "skipped"),
    ("one_failed", ["skip", "skip"], "skipped"),
]


@pytest.mark.parametrize(("rule", "parents", "expected"), TABLE,
                         ids=[f"{r}-{'+'.join(p) or 'root'}" for r, p, _ in TABLE])
async def test_trigger_rules(run_wf: RunWf, rule: str, parents: list[str],
                             expected: str) -> None:
    calls: list[str] = []

    def child() -> str:
        calls.append("child")
        return "ran"

    wf = Workflow("triggers")
    for n, kind in enumerate(parents):
        parent(wf, f"p{n}", kind)
    wf.add_step("child", child, depends_on=[f"p{n}" for n in range(len(parents))],
                trigger=rule)
    result = await run_wf(wf)
    step = result.steps["child"]
    assert step.status == expected
    if expected == "completed":
        assert calls == ["child"] and step.output == "ran" and step.attempts == 1
        assert step.skip_reason is None
    else:
        assert calls == [] and step.attempts == 0
        assert step.skip_reason  # every step that did not run says why
    failed = "fail" in parents
    assert result.status == ("failed" if failed else "completed")


async def test_skip_reasons_name_the_cause(run_wf: RunWf) -> None:
    wf = Workflow("reasons")
    parent(wf, "bad", "fail")
    parent(wf, "quiet", "skip")
    wf.add_step("after_bad", ok, depends_on=["bad"])
    wf.add_step("after_quiet", ok, depends_on=["quiet"])
    wf.add_step("strict", ok, depends_on=["quiet", "after_bad"], trigger="all_success")
    wf.add_step("guarded", ok, when="{{ input.go }}")
    result = await run_wf(wf, {"go": False})
    steps = result.steps
    assert steps["quiet"].status == "skipped"
    assert "when was false" in (steps["quiet"].skip_reason or "")
    assert steps["after_bad"].status == "upstream_failed"
    assert "bad" in (steps["after_bad"].skip_reason or "")
    assert steps["after_quiet"].status == "skipped"
    assert "skipped" in (steps["after_quiet"].skip_reason or "")
    assert steps["strict"].status == "upstream_failed"
    assert steps["guarded"].status == "skipped"
    assert "input.go" in (steps["guarded"].skip_reason or "")


async def test_upstream_failed_propagates_down_a_chain(run_wf: RunWf) -> None:
    wf = Workflow("propagate")
    parent(wf, "a", "fail")
    for prev, sid in (("a", "b"), ("b", "c"), ("c", "d")):
        wf.add_step(sid, ok, depends_on=[prev])
    wf.add_step("cleanup", ok, depends_on=["d"], trigger="all_done")
    wf.add_step("on_error", ok, depends_on=["c"], trigger="one_failed")
    result = await run_wf(wf)
    assert statuses(result) == {"a": "failed", "b": "upstream_failed", "c": "upstream_failed",
                                "d": "upstream_failed", "cleanup": "completed",
                                "on_error": "completed"}
    assert result.status == "failed"


async def test_skipped_propagates_and_none_failed_still_runs(run_wf: RunWf) -> None:
    wf = Workflow("skips")
    parent(wf, "a", "skip")
    wf.add_step("b", ok, depends_on=["a"])
    wf.add_step("c", ok, depends_on=["b"])
    wf.add_step("d", ok, depends_on=["c"], trigger="none_failed")
    result = await run_wf(wf)
    assert statuses(result) == {"a": "skipped", "b": "skipped", "c": "skipped",
                                "d": "completed"}
    assert result.status == "completed"


async def test_when_false_skips_and_when_true_runs(run_wf: RunWf) -> None:
    wf = Workflow("when")
    wf.add_step("classify", lambda: {"intent": "refund"}, outputs=["intent"])
    wf.add_step("refund", lambda: "refunded", depends_on=["classify"],
                when="{{ state.intent == 'refund' }}")
    wf.add_step("tech", lambda: "fixed", depends_on=["classify"],
                when="{{ state.intent == 'technical' }}")
    wf.add_step("by_input", lambda: "x", when="{{ input.enabled }}")
    wf.add_step("by_output", lambda: "y", depends_on=["classify"],
                when="{{ steps.classify.output.intent | length > 3 }}")
    result = await run_wf(wf, {"enabled": 0})
    assert statuses(result) == {"classify": "completed", "refund": "completed",
                                "tech": "skipped", "by_input": "skipped",
                                "by_output": "completed"}
    assert result.steps["refund"].output == "refunded"


def condition_workflow(flag_join_rule: str = "default") -> dict[str, Any]:
    return {"name": "branches", "steps": [
        {"id": "check", "type": "condition", "if": "{{ input.vip }}",
         "then": ["fast"], "else": ["slow"]},
        {"id": "fast", "type": "transform", "value": "fast lane"},
        {"id": "slow", "type": "transform", "value": "slow lane"},
        {"id": "after_slow", "type": "transform", "value": 1, "depends_on": ["slow"]},
        {"id": "join", "type": "transform", "depends_on": ["fast", "slow"],
         "trigger": flag_join_rule,
         "value": {"lane": "{{ steps.fast.output or steps.slow.output }}",
                   "fast": "{{ steps.fast.status }}", "slow": "{{ steps.slow.status }}"}},
    ]}


@pytest.mark.parametrize(("vip", "taken", "not_taken"), [(True, "fast", "slow"),
                                                         (False, "slow", "fast")])
async def test_condition_runs_one_branch_and_the_join_runs(
        run_wf: RunWf, vip: bool, taken: str, not_taken: str) -> None:
    wf = Workflow.from_dict(condition_workflow())
    result = await run_wf(wf, {"vip": vip})
    steps = result.steps
    assert steps["check"].output == {"result": vip}
    assert steps[taken].status == "completed"
    assert steps[not_taken].status == "skipped"
    assert steps[not_taken].skip_reason
    assert steps["join"].status == "completed"
    assert steps["join"].output == {"lane": f"{taken} lane", taken: "completed",
                                    not_taken: "skipped"}
    assert steps["after_slow"].status == ("completed" if taken == "slow" else "skipped")
    assert result.status == "completed"


async def test_join_with_all_success_after_exclusive_branches_is_skipped(
        run_wf: RunWf) -> None:
    wf = Workflow.from_dict(condition_workflow("all_success"))
    result = await run_wf(wf, {"vip": True})
    assert result.steps["join"].status == "skipped"
    assert result.status == "completed"


async def test_condition_uses_native_truthiness(run_wf: RunWf) -> None:
    wf = Workflow.from_dict({"name": "truth", "steps": [
        {"id": "c", "type": "condition", "if": "{{ input.rows }}", "then": ["yes"],
         "else": ["no"]},
        {"id": "yes", "type": "transform", "value": 1},
        {"id": "no", "type": "transform", "value": 0}]})
    empty = await run_wf(wf, {"rows": []})
    full = await run_wf(wf, {"rows": [0]})
    assert statuses(empty)["no"] == "completed" and statuses(empty)["yes"] == "skipped"
    assert statuses(full)["yes"] == "completed" and statuses(full)["no"] == "skipped"


async def test_on_failure_continue_runs_independent_branches(run_wf: RunWf) -> None:
    wf = Workflow("cont")
    parent(wf, "bad", "fail")
    wf.add_step("other", ok)
    wf.add_step("other2", ok, depends_on=["other"])
    wf.add_step("after_bad", ok, depends_on=["bad"])
    result = await run_wf(wf)
    assert statuses(result) == {"bad": "failed", "other": "completed",
                                "other2": "completed", "after_bad": "upstream_failed"}
    assert result.status == "failed"
    assert "bad" in (result.error or "")


async def test_fail_fast_cancels_running_siblings_and_starts_nothing_new(
        run_wf: RunWf) -> None:
    seen: dict[str, str] = {}

    async def fails() -> None:
        await asyncio.sleep(0.05)
        raise FatalError("boom")

    async def slow() -> str:
        seen["slow"] = "started"
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen["slow"] = "cancelled"
            raise
        seen["slow"] = "finished"
        return "late"

    def after_slow() -> str:
        seen["after_slow"] = "ran"
        return "x"

    wf = Workflow("ff", on_failure="fail_fast")
    wf.add_step("fails", fails, retry=0)
    wf.add_step("slow", slow)
    wf.add_step("after_slow", after_slow, depends_on=["slow"])
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await run_wf(wf)
    assert loop.time() - started < 2.0
    assert seen == {"slow": "cancelled"}
    assert statuses(result) == {"fails": "failed", "slow": "cancelled",
                                "after_slow": "cancelled"}
    assert result.steps["slow"].skip_reason
    assert result.status == "failed"
    assert "fails" in (result.error or "")


async def test_fail_fast_with_a_step_waiting_for_a_slot(run_wf: RunWf) -> None:
    async def fails() -> None:
        await asyncio.sleep(0.05)
        raise FatalError("boom")

    async def slow() -> None:
        await asyncio.sleep(5)

    wf = Workflow("ffq", on_failure="fail_fast", concurrency=2)
    wf.add_step("fails", fails, retry=0)
    wf.add_step("slow", slow)
    wf.add_step("waiting", ok)  # queued: no free slot
    result = await run_wf(wf, timeout=1)
    assert statuses(result) == {"fails": "failed", "slow": "cancelled",
                                "waiting": "cancelled"}
    assert result.status == "failed"


async def test_fail_fast_does_not_start_an_all_done_cleanup(run_wf: RunWf) -> None:
    calls: list[str] = []
    wf = Workflow("ffc", on_failure="fail_fast")
    wf.add_step("fails", boom, retry=0)
    wf.add_step("cleanup", lambda: calls.append("cleanup"), depends_on=["fails"],
                trigger="all_done")
    result = await run_wf(wf, timeout=1)
    assert calls == []
    assert statuses(result) == {"fails": "failed", "cleanup": "cancelled"}


async def test_fail_fast_right_as_a_fallback_starts_ends_the_run(run_wf: RunWf) -> None:
    # Both steps fail in the same turn of the loop: the first one's fallback is handed
    # over, then the second's failure halts the run and cancels it before its task ever
    # ran.  That attempt must still end (cancelled), or the run waits for it forever.
    ran: list[str] = []

    async def fails_at_once() -> None:  # async: both failures land in one turn
        raise FatalError("boom")

    def fallback(error: str) -> str:
        ran.append(error)
        return "fallback"

    wf = Workflow("fff", on_failure="fail_fast")
    wf.add_step("with_fallback", fails_at_once, retry=0, fallback=fallback)
    wf.add_step("fails", fails_at_once, retry=0)
    result = await run_wf(wf, timeout=5)
    assert ran == []
    assert statuses(result) == {"with_fallback": "cancelled", "fails": "failed"}
    assert result.status == "failed"
    assert "'fails' failed (on_failure: fail_fast)" in (result.error or "")


async def test_allow_failure_keeps_the_run_completed(run_wf: RunWf) -> None:
    wf = Workflow("allow")
    wf.add_step("optional", boom, retry=0, allow_failure=True)
    wf.add_step("main", ok)
    wf.add_step("after_optional", ok, depends_on=["optional"])
    result = await run_wf(wf)
    assert result.steps["optional"].status == "failed"
    assert "boom" in (result.steps["optional"].error or "")
    # a tolerated failure does not hold up its children (documented choice)
    assert result.steps["after_optional"].status == "completed"
    assert result.status == "completed"


async def test_allow_failure_under_fail_fast_does_not_halt(run_wf: RunWf) -> None:
    async def slow() -> str:
        await asyncio.sleep(0.2)
        return "done"

    wf = Workflow("allowff", on_failure="fail_fast")
    wf.add_step("optional", boom, retry=0, allow_failure=True)
    wf.add_step("slow", slow)
    result = await run_wf(wf)
    assert statuses(result) == {"optional": "failed", "slow": "completed"}
    assert result.status == "completed"


async def test_run_output_defaults_to_completed_sinks(run_wf: RunWf) -> None:
    wf = Workflow("out")
    wf.add_step("a", lambda: 1)
    wf.add_step("b", lambda a: a + 1)
    wf.add_step("c", lambda a: a + 2)
    wf.add_step("d", ok, when="{{ false }}")
    result = await run_wf(wf)
    assert result.output == {"b": 2, "c": 3}


async def test_run_output_template(run_wf: RunWf) -> None:
    wf = Workflow("outt", output={"total": "{{ steps.b.output }}",
                                  "who": "{{ input.who }}"})
    wf.add_step("a", lambda: 1)
    wf.add_step("b", lambda a: a + 1)
    result = await run_wf(wf, {"who": "me"})
    assert result.output == {"total": 2, "who": "me"}


async def test_run_output_render_error_fails_the_run(run_wf: RunWf) -> None:
    wf = Workflow("outerr", output="{{ steps.a.output.missing }}")
    wf.add_step("a", lambda: {"x": 1})
    result = await run_wf(wf)
    assert result.steps["a"].status == "completed"
    assert result.status == "failed"
    assert "run output" in (result.error or "") and "missing" in (result.error or "")


async def test_templates_see_a_skipped_ancestor_as_null_output(run_wf: RunWf) -> None:
    wf = Workflow.from_dict({"name": "nullout", "steps": [
        {"id": "a", "type": "transform", "value": 1, "when": "{{ false }}"},
        {"id": "b", "type": "transform", "depends_on": ["a"], "trigger": "all_done",
         "value": {"out": "{{ steps.a.output }}", "status": "{{ steps.a.status }}"}}]})
    result = await run_wf(wf)
    assert result.steps["b"].output == {"out": None, "status": "skipped"}


async def test_secrets_are_redacted_from_what_is_stored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.runtime.engine import Engine
    from plait.store import MemoryStore

    from .conftest import run_with

    secret = "s3cr3t-Value-91"
    monkeypatch.setenv("PLAIT_SECRET_API_TOKEN", secret)

    def leak(token: str) -> str:
        raise ValueError(f"server refused token {token}")

    wf = Workflow("secrets")
    wf.add_step("header", type="transform",
                value={"auth": "Bearer {{ secrets.API_TOKEN }}"})
    wf.add_step("call", leak, with_={"token": "{{ secrets.API_TOKEN }}"}, retry=0)
    store = MemoryStore()
    engine = Engine(store)
    try:
        result = await run_with(engine, wf)
    finally:
        engine.close()
    assert result.steps["header"].output == {"auth": "Bearer ***"}
    assert result.steps["call"].status == "failed"
    assert "server refused token ***" in (result.steps["call"].error or "")
    stored = (repr(await store.get_run(result.run_id)) + repr(await store.get_steps(result.run_id))
              + repr(await store.get_attempts(result.run_id))
              + repr(await store.get_events(result.run_id)))
    assert secret not in stored


async def test_run_timeout_given_as_a_duration_string(run_wf: RunWf) -> None:
    async def slow() -> None:
        await asyncio.sleep(5)

    wf = Workflow("timeoutstr", timeout="200ms")
    wf.add_step("slow", slow)
    result = await run_wf(wf)
    assert result.status == "failed"
    assert "timed out" in (result.error or "")
    assert result.steps["slow"].status == "cancelled"
