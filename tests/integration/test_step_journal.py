"""Journaled calls inside a python step (``ctx.run`` / ``ctx.run_sync``): a call's
result is stored before the step gets it, and every later attempt of the step in the
run gets the stored value without calling again; the rules on names and values fail
the step, naming what is wrong."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from plait import Retry, StepContext, Workflow, approve_async
from plait.cli.main import cli
from plait.core.model import Limits
from plait.store import open_store

SECRET = "hunter2/journal+secret"
CALLS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _calls() -> None:
    CALLS.clear()


def fetch(what: str) -> dict[str, str]:
    CALLS[what] += 1
    return {"got": what}


async def fetch_async(what: str) -> str:
    CALLS[what] += 1
    return what.upper()


async def stored_journal(db: str, run_id: str) -> list[tuple[str, str, int]]:
    store = open_store(db)
    await store.open()
    try:
        return [(e.step, e.name, e.attempt) for e in await store.journal(run_id)]
    finally:
        await store.close()


async def test_a_retry_gets_the_calls_before_the_failure_back(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"

    async def three_calls(ctx: StepContext) -> list[object]:
        first = await ctx.run("first", fetch, "a")
        second = await ctx.run("second", fetch_async, "b")
        if ctx.attempt == 1:
            raise RuntimeError("fails after two calls")
        third = await ctx.run("third", fetch, what="c")
        return [first, second, third]

    wf = Workflow("journal-retry")
    wf.add_step("s", three_calls, retry=Retry(max_retries=1, initial_delay=0))
    result = await wf.run_async(db=db)

    assert result.status == "completed", result.steps["s"].error
    assert result.steps["s"].output == [{"got": "a"}, "B", {"got": "c"}]
    assert CALLS == {"a": 1, "b": 1, "c": 1}
    assert await stored_journal(db, result.run_id) == [
        ("s", "first", 1), ("s", "second", 1), ("s", "third", 2)]


async def test_calls_made_together_at_an_attempts_start_get_their_stored_values(
        tmp_path: Path) -> None:
    """The step's stored results are read once, at the attempt's first journaled
    call: calls started together (gather) before that read is done each get theirs."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"

    async def together(ctx: StepContext) -> list[object]:
        got = await asyncio.gather(*(ctx.run(f"call-{w}", fetch_async, w) for w in "abc"))
        if ctx.attempt == 1:
            raise RuntimeError("fails after three calls")
        return [*got, await ctx.run("last", fetch_async, "d")]

    wf = Workflow("journal-together")
    wf.add_step("s", together, retry=Retry(max_retries=1, initial_delay=0))
    result = await wf.run_async(db=db)

    assert result.status == "completed", result.steps["s"].error
    assert result.steps["s"].output == ["A", "B", "C", "D"]
    assert CALLS == {"a": 1, "b": 1, "c": 1, "d": 1}


async def test_a_sync_step_journals_with_run_sync(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"

    def sync_step(ctx: StepContext) -> object:
        value = ctx.run_sync("one", fetch, "x")
        if ctx.attempt == 1:
            raise RuntimeError("again")
        return value

    wf = Workflow("journal-sync")
    wf.add_step("s", sync_step, retry=Retry(max_retries=1, initial_delay=0))
    result = await wf.run_async(db=db)

    assert result.steps["s"].output == {"got": "x"}
    assert CALLS == {"x": 1}


async def test_a_sync_steps_later_calls_get_their_stored_values_too(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"

    def sync_step(ctx: StepContext) -> object:
        got = [ctx.run_sync(f"call-{w}", fetch, w) for w in "xyz"]
        if ctx.attempt == 1:
            raise RuntimeError("again")
        return [*got, ctx.run_sync("last", fetch, "w")]

    wf = Workflow("journal-sync-many")
    wf.add_step("s", sync_step, retry=Retry(max_retries=1, initial_delay=0))
    result = await wf.run_async(db=db)

    assert result.steps["s"].output == [{"got": w} for w in "xyzw"]
    assert CALLS == {"x": 1, "y": 1, "z": 1, "w": 1}


async def test_run_sync_in_an_async_step_fails_on_every_call() -> None:
    async def step(ctx: StepContext) -> object:
        await ctx.run("first", fetch_async, "a")  # the step's journal is read
        return ctx.run_sync("second", fetch, "b")

    wf = Workflow("journal-sync-misused")
    wf.add_step("s", step, retry=0)
    result = await wf.run_async()

    assert result.status == "failed"
    assert "ctx.run_sync is for sync steps" in str(result.steps["s"].error)
    assert CALLS == {"a": 1}


async def test_retry_retries_the_call_in_place() -> None:
    def flaky() -> str:
        CALLS["flaky"] += 1
        if CALLS["flaky"] < 3:
            raise ConnectionError("not yet")
        return "done"

    async def step(ctx: StepContext) -> object:
        return await ctx.run("flaky", flaky, retry=Retry(max_retries=3, initial_delay=0))

    wf = Workflow("journal-call-retry")
    wf.add_step("s", step, retry=0)
    result = await wf.run_async()

    assert result.steps["s"].output == "done"
    assert (result.steps["s"].attempts, CALLS["flaky"]) == (1, 3)


async def test_the_calls_retry_policy_judges_its_exceptions() -> None:
    def refused() -> str:
        CALLS["refused"] += 1
        raise ValueError("bad request: trying again will not help")

    async def step(ctx: StepContext) -> object:
        return await ctx.run("r", refused, retry=Retry(max_retries=3, initial_delay=0,
                                                       no_retry_on=[ValueError]))

    wf = Workflow("journal-call-no-retry")
    wf.add_step("s", step, retry=0)
    result = await wf.run_async()

    assert result.status == "failed" and "ValueError" in (result.steps["s"].error or "")
    assert CALLS["refused"] == 1


async def test_a_call_that_raises_journals_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"

    def failing_once() -> str:
        CALLS["f"] += 1
        if CALLS["f"] == 1:
            raise ConnectionError("down")
        return "up"

    async def step(ctx: StepContext) -> object:
        return await ctx.run("f", failing_once)

    wf = Workflow("journal-raises")
    wf.add_step("s", step, retry=Retry(max_retries=1, initial_delay=0))
    result = await wf.run_async(db=db)

    assert (result.steps["s"].output, CALLS["f"]) == ("up", 2)
    assert await stored_journal(db, result.run_id) == [("s", "f", 2)]


async def test_a_name_used_twice_fails_the_step_naming_it() -> None:
    async def step(ctx: StepContext) -> object:
        await ctx.run("same", fetch, "a")
        return await ctx.run("same", fetch, "b")

    wf = Workflow("journal-twice")
    wf.add_step("s", step, retry=Retry(max_retries=3, initial_delay=0))
    result = await wf.run_async()

    assert result.status == "failed"
    assert result.steps["s"].attempts == 1  # never retried
    assert "JournalNameReused" in (result.steps["s"].error or "")
    assert "'same'" in (result.steps["s"].error or "")
    assert CALLS == {"a": 1}


async def test_a_result_that_is_not_json_fails_the_step(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"

    async def step(ctx: StepContext) -> object:
        return await ctx.run("odd", lambda: {"when": object()})

    wf = Workflow("journal-not-json")
    wf.add_step("s", step, retry=Retry(max_retries=3, initial_delay=0))
    result = await wf.run_async(db=db)

    assert result.status == "failed" and result.steps["s"].attempts == 1
    assert "OutputError" in (result.steps["s"].error or "")
    assert "journaled call 'odd': result.when" in (result.steps["s"].error or "")
    assert await stored_journal(db, result.run_id) == []


async def test_a_secret_in_a_journaled_value_is_redacted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    monkeypatch.setenv("PLAIT_SECRET_JOURNAL", SECRET)

    async def step(ctx: StepContext, token: str) -> object:
        return await ctx.run("auth", lambda: {"header": f"Bearer {token}"})

    wf = Workflow("journal-secret")
    wf.add_step("s", step, with_={"token": "{{ secrets.JOURNAL }}"})
    result = await wf.run_async(db=db)

    store = open_store(db)
    await store.open()
    try:
        found = await store.journal_get(result.run_id, "s", "auth")
    finally:
        await store.close()
    assert found is not None
    assert SECRET not in str(found.value) and str(found.value).startswith("{'header': 'Bearer")
    assert SECRET not in str(result.steps["s"].output)


async def draft_then_approve(ctx: StepContext) -> object:
    drafted = await ctx.run("draft", fetch, "draft")
    await ctx.wait_for_approval("ship it?")
    return drafted


async def test_the_rerun_after_an_approval_gets_the_calls_back(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"

    wf = Workflow("journal-approval")
    wf.add_step("s", draft_then_approve)
    waiting = await wf.run_async(db=db)
    assert waiting.status == "waiting"
    done = await approve_async(waiting.run_id, "s", db=db)

    assert done.steps["s"].output == {"got": "draft"}
    assert CALLS == {"draft": 1}


def test_show_lists_each_steps_journal(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"

    async def step(ctx: StepContext) -> object:
        await ctx.run("plan", fetch, "p")
        if ctx.attempt == 1:
            raise RuntimeError("once")
        return await ctx.run("act", fetch, "a")

    wf = Workflow("journal-show")
    wf.add_step("s", step, retry=Retry(max_retries=1, initial_delay=0))
    wf.add_step("plain", lambda: 1)
    result = wf.run(db=db)

    runner = CliRunner()
    shown = json.loads(runner.invoke(cli, ["show", result.run_id, "--db", db,
                                           "--json"]).stdout)
    journal = shown["steps"]["s"]["journal"]
    assert [(j["name"], j["attempt"]) for j in journal] == [("plan", 1), ("act", 2)]
    assert sorted(journal[0]) == ["at", "attempt", "name"]
    assert journal[0]["at"].endswith("Z") or "+00:00" in journal[0]["at"]
    assert shown["steps"]["plain"]["journal"] == []
    text = runner.invoke(cli, ["show", result.run_id, "--db", db]).stdout
    assert "journaled calls of s" in text
    assert "attempt 1  plan" in text and "attempt 2  act" in text


FAIL_AFTER_CALLS = {"on": True}


async def agent_step(ctx: StepContext, prep: object) -> object:
    got = [await ctx.run("a", fetch, "a"), await ctx.run("b", fetch, "b")]
    if FAIL_AFTER_CALLS["on"]:
        raise RuntimeError("the model said no")
    return got


def _failed_agent_run(db: str) -> str:
    wf = Workflow("journal-retry-cli")
    wf.add_step("prep", fetch_async, with_={"what": "prep"})
    wf.add_step("agent", agent_step, retry=0)
    first = wf.run(db=db)
    assert first.status == "failed" and CALLS == {"prep": 1, "a": 1, "b": 1}
    FAIL_AFTER_CALLS["on"] = False
    return first.run_id


@pytest.fixture
def _failing() -> object:
    FAIL_AFTER_CALLS["on"] = True
    yield
    FAIL_AFTER_CALLS["on"] = True


@pytest.mark.usefixtures("_failing")
def test_retry_copies_the_journals_of_the_steps_it_reruns(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    old = _failed_agent_run(db)

    out = CliRunner().invoke(cli, ["retry", old, "--db", db, "--json"])

    assert out.exit_code == 0, out.output
    new = json.loads(out.stdout)
    assert new["status"] == "completed"
    assert CALLS == {"prep": 1, "a": 1, "b": 1}  # the retry called nothing again
    shown = json.loads(CliRunner().invoke(cli, ["show", new["run_id"], "--db", db,
                                                "--json"]).stdout)
    assert [j["name"] for j in shown["steps"]["agent"]["journal"]] == ["a", "b"]


@pytest.mark.usefixtures("_failing")
def test_retry_from_a_step_starts_it_with_an_empty_journal(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    old = _failed_agent_run(db)

    out = CliRunner().invoke(cli, ["retry", old, "--from", "agent", "--db", db, "--json"])

    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["status"] == "completed"
    assert CALLS == {"prep": 1, "a": 2, "b": 2}


async def test_a_result_over_the_output_limit_fails_the_step() -> None:
    async def step(ctx: StepContext) -> object:
        return await ctx.run("big", lambda: "x" * 2000)

    wf = Workflow("journal-too-big", limits=Limits(max_output_bytes=1000))
    wf.add_step("s", step, retry=Retry(max_retries=2, initial_delay=0))
    result = await wf.run_async()

    assert result.status == "failed" and result.steps["s"].attempts == 1
    assert "journaled call 'big'" in (result.steps["s"].error or "")


@pytest.mark.parametrize(("name", "shown"), [
    ("", "got ''"), (7, "got 7"), ("x" * 201, "got 201 characters")])
async def test_a_bad_call_name_fails_the_step_once_and_calls_nothing(
        name: object, shown: str) -> None:
    async def step(ctx: StepContext) -> object:
        return await ctx.run(name, fetch, "a")  # type: ignore[arg-type]

    wf = Workflow("journal-bad-name")
    wf.add_step("s", step, retry=Retry(max_retries=3, initial_delay=0))
    result = await wf.run_async()

    assert result.status == "failed"
    assert result.steps["s"].attempts == 1  # a mistake in the code: never retried
    error = result.steps["s"].error or ""
    assert "a journaled call needs a name (non-empty text of at most 200 characters)" \
        in error and shown in error
    assert CALLS == {}
