"""``ctx.wait_for_approval`` and ``ctx.emit`` through the Python API on the memory store
(the CLI on SQLite is in tests/acceptance/test_cli_python_waits.py)."""

from __future__ import annotations

from plait import StepContext, Workflow
from plait.runtime.engine import Engine
from plait.store import open_store

RUNS: list[int] = []


async def gate(ctx: StepContext) -> object:
    RUNS.append(ctx.attempt)
    ctx.emit({"asking": True})
    decision = await ctx.wait_for_approval(prompt="ship?")
    return {"shipped": decision["data"], "by": decision["by"]}


def after(gate: dict[str, object]) -> object:
    return gate["shipped"]


def twice(ctx: StepContext) -> object:
    ctx.wait_for_approval_sync("one")
    ctx.wait_for_approval_sync("two")
    return None


def not_json(ctx: StepContext) -> object:
    ctx.emit({"bad": {1, 2}})
    return "never"


def bad_timeout(ctx: StepContext) -> object:
    return ctx.wait_for_approval_sync("x", timeout="soon")


async def test_wait_approve_resume_on_the_memory_store() -> None:
    RUNS.clear()
    wf = Workflow("py-wait-memory")
    wf.add_step("gate", gate)
    wf.add_step("after", after)
    store = open_store("memory://")
    await store.open()
    engine = Engine(store)
    try:
        waiting = await engine.run(wf.validate(), {})
        assert (waiting.status, waiting.steps["gate"].status) == ("waiting", "waiting")
        await engine.approve(waiting.run_id, "gate", by="ada", data={"v": 2})
        done = await engine.resume(waiting.run_id)
        events = await store.get_events(waiting.run_id)
    finally:
        engine.close()
        await store.close()
    assert done is not None and done.status == "completed"
    assert done.steps["gate"].output == {"shipped": {"v": 2}, "by": "ada"}
    assert done.steps["after"].output == {"v": 2}
    assert RUNS == [1, 2]  # asked in attempt 1, ran again from the start in attempt 2
    notes = [e.data for e in events if e.kind == "note" and e.step_id == "gate"]
    assert [n["emit"]["value"] for n in notes if "emit" in n] == [{"asking": True}] * 2
    assert [n["wait"]["prompt"] for n in notes if "wait" in n] == ["ship?"]


async def test_waiting_twice_in_one_step_fails_it() -> None:
    wf = Workflow("py-wait-twice")
    wf.add_step("twice", twice)
    store = open_store("memory://")
    await store.open()
    engine = Engine(store)
    try:
        waiting = await engine.run(wf.validate(), {})
        await engine.approve(waiting.run_id, "twice", by="ada")
        done = await engine.resume(waiting.run_id)
    finally:
        engine.close()
        await store.close()
    assert done is not None
    step = done.steps["twice"]
    assert step.status == "failed" and step.attempts == 2
    assert "called wait_for_approval twice" in (step.error or "")


async def test_bad_arguments_and_non_json_emits_fail_without_retry() -> None:
    wf = Workflow("py-wait-bad")
    wf.add_step("not_json", not_json)
    wf.add_step("bad_timeout", bad_timeout)

    result = await wf.run_async({})

    assert (result.steps["not_json"].status, result.steps["not_json"].attempts) == (
        "failed", 1)
    assert "bad" in (result.steps["not_json"].error or "")
    assert (result.steps["bad_timeout"].status, result.steps["bad_timeout"].attempts) == (
        "failed", 1)
    assert "`timeout`" in (result.steps["bad_timeout"].error or "")
