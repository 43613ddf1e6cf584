"""``ctx.wait_for_event`` and ``ctx.sleep`` through the engine on every store: the step
parks (its attempt ends ``waiting``, no retry), the run waits, and the step runs again
from the start once the event is sent or the time has come; its journaled calls replay.
(The CLI, the ``event`` step and a resume after kill -9 are in
tests/acceptance/test_cli_events.py.)"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from plait import EventTaken, InputError, RunFinished, StepContext, Workflow
from plait.runtime.engine import Engine
from plait.store import Store
from waiting import until

CALLS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _calls() -> None:
    CALLS.clear()


def charge(what: str) -> str:
    CALLS[what] += 1
    return f"charged {what}"


async def pay(ctx: StepContext) -> object:
    charged = await ctx.run("charge", charge, "card")
    paid = await ctx.wait_for_event("paid")
    return {"charged": charged, "paid": paid, "attempt": ctx.attempt}


def two_events(ctx: StepContext) -> object:
    return [ctx.wait_for_event_sync("a"), ctx.wait_for_event_sync("b")]


async def nap(ctx: StepContext) -> object:
    await ctx.run("before", charge, "nap")
    slept = await ctx.sleep("nap", 0.3)
    return {"slept": slept, "attempt": ctx.attempt}


def no_show(ctx: StepContext) -> object:
    return ctx.wait_for_event_sync("never", timeout=0)


async def short_wait(ctx: StepContext) -> object:
    return await ctx.wait_for_event("late", timeout="300ms")


def bad_name(ctx: StepContext) -> object:
    return ctx.wait_for_event_sync("a/b")


def bad_duration(ctx: StepContext) -> object:
    ctx.sleep_sync("x", "soon")
    return None


async def test_an_event_continues_the_waiting_step(store: Store) -> None:
    wf = Workflow("ev-pay")
    wf.add_step("pay", pay)
    engine = Engine(store)
    try:
        waiting = await engine.run(wf.validate(), {})
        assert (waiting.status, waiting.steps["pay"].status) == ("waiting", "waiting")
        await engine.signal(waiting.run_id, "paid", {"amount": 5})
        with pytest.raises(EventTaken, match="first one sent stands"):
            await engine.signal(waiting.run_id, "paid", {"amount": 6})
        done = await engine.resume(waiting.run_id)
        with pytest.raises(RunFinished, match="completed"):
            await engine.signal(waiting.run_id, "other", None)
    finally:
        engine.close()
    assert done is not None and done.status == "completed", done
    assert done.steps["pay"].output == {"charged": "charged card", "paid": {"amount": 5},
                                        "attempt": 2}
    assert done.steps["pay"].attempts == 2 and CALLS == {"card": 1}


async def test_events_sent_before_anyone_waits_are_kept(store: Store) -> None:
    wf = Workflow("ev-two")
    wf.add_step("two", two_events)
    engine = Engine(store)
    try:
        waiting = await engine.run(wf.validate(), {})
        await engine.signal(waiting.run_id, "b", "bee")
        await engine.signal(waiting.run_id, "a", "ay")
        done = await engine.resume(waiting.run_id)
    finally:
        engine.close()
    assert done is not None and done.steps["two"].output == ["ay", "bee"]
    assert done.steps["two"].attempts == 2  # b was there: no second wait


async def test_a_sleep_parks_the_step_and_runs_it_again(store: Store) -> None:
    wf = Workflow("ev-nap")
    wf.add_step("nap", nap)
    engine = Engine(store)
    started = time.time()
    try:
        done = await engine.run(wf.validate(), {})
    finally:
        engine.close()
    assert done.status == "completed", done
    assert done.steps["nap"].output == {"slept": None, "attempt": 2}
    assert time.time() - started >= 0.3 and CALLS == {"nap": 1}


async def test_a_delay_step_holds_no_slot_while_it_waits(store: Store) -> None:
    # one slot: the delay (first in order) starts first; the python step runs while
    # the delay waits instead of after it
    wf = Workflow.from_dict({"name": "ev-delay", "concurrency": 1, "steps": [
        {"id": "pause", "type": "delay", "duration": "500ms"},
        {"id": "work", "type": "python", "call": f"{__name__}:charge",
         "with": {"what": "work"}}]})
    engine = Engine(store)
    try:
        done = await engine.run(wf.validate(), {})
    finally:
        engine.close()
    assert done.status == "completed", done
    pause, work = done.steps["pause"], done.steps["work"]
    assert work.finished_at is not None and pause.finished_at is not None
    assert pause.started_at is not None and pause.started_at <= work.started_at
    assert work.finished_at < pause.finished_at  # it did not wait for the slot
    assert pause.attempts == 2  # parked once, then ran again when its time had come
    assert pause.finished_at - pause.started_at >= 0.5
    assert CALLS == {"work": 1}


async def test_a_timeout_gives_none(store: Store) -> None:
    wf = Workflow("ev-timeout")
    wf.add_step("no_show", no_show)
    wf.add_step("short_wait", short_wait)
    engine = Engine(store)
    try:
        waiting = await engine.run(wf.validate(), {})
        assert waiting.steps["no_show"].output is None
        assert waiting.steps["short_wait"].status == "waiting"
        due = time.time() + 0.3
        await until(lambda: time.time() > due, what="the wait's timeout", every=0.05)
        done = await engine.resume(waiting.run_id)
    finally:
        engine.close()
    assert done is not None and done.status == "completed", done
    assert done.steps["short_wait"].output is None
    assert done.steps["no_show"].attempts == 1


@pytest.mark.parametrize(("fn", "message"), [
    (bad_name, "an event name cannot contain '/'"),
    (bad_duration, "sleep: `duration`: expected a duration"),
])
async def test_bad_waits_fail_the_step_naming_the_problem(store: Store, fn: object,
                                                          message: str) -> None:
    wf = Workflow(f"ev-bad-{fn.__name__}")  # type: ignore[attr-defined]
    wf.add_step("s", fn)  # type: ignore[arg-type]
    engine = Engine(store)
    try:
        done = await engine.run(wf.validate(), {})
    finally:
        engine.close()
    assert done.status == "failed" and done.steps["s"].attempts == 1
    assert message in (done.steps["s"].error or "")


@pytest.mark.parametrize(("name", "data", "message"), [
    ("", None, "cannot be empty"),
    ("a/b", None, "cannot contain '/'"),
    ("x" * 200, None, "at most 199 characters"),
    ("ok", {"big": "x" * (1 << 20)}, "over the 1,048,576 bytes"),
    ("ok", {"bad": {1, 2}}, "the event's data"),
])
async def test_bad_events_are_refused_storing_nothing(store: Store, name: str,
                                                      data: object, message: str) -> None:
    wf = Workflow("ev-refused")
    wf.add_step("pay", pay)
    engine = Engine(store)
    try:
        waiting = await engine.run(wf.validate(), {})
        with pytest.raises(InputError, match=message):
            await engine.signal(waiting.run_id, name, data)  # type: ignore[arg-type]
        assert await store.event_get(waiting.run_id, name) is None
    finally:
        engine.close()


def test_an_event_step_needs_a_valid_event_name() -> None:
    from plait import DefinitionError
    from plait.definitions import check_definition

    for step, message in (({"id": "e", "type": "event"}, "event"),
                          ({"id": "e", "type": "event", "event": "a/b"},
                           "cannot contain '/'"),
                          ({"id": "e", "type": "event", "event": ""}, "cannot be empty")):
        with pytest.raises(DefinitionError) as info:
            check_definition({"name": "ev-check", "steps": [step]})
        listed = "; ".join(str(p) for p in info.value.problems)
        assert "steps[0]" in listed and message in listed, listed


LONG = "n" * 199


def long_waits(ctx: StepContext) -> object:
    ctx.sleep_sync("s" * 199, 0)
    return ctx.wait_for_event_sync(LONG, timeout="1h")


async def test_long_names_wait_with_a_timeout(store: Store) -> None:
    wf = Workflow("ev-long")
    wf.add_step("s", long_waits)
    engine = Engine(store)
    try:
        waiting = await engine.run(wf.validate(), {})
        assert waiting.steps["s"].status == "waiting", waiting.steps["s"].error
        await engine.signal(waiting.run_id, LONG, "long")
        done = await engine.resume(waiting.run_id)
    finally:
        engine.close()
    assert done is not None and done.steps["s"].output == "long"


def test_plait_signal_continues_the_run_in_this_process(tmp_path: Path) -> None:
    import plait

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    wf = Workflow("ev-public")
    wf.add_step("pay", pay)
    waiting = wf.run(db=db)
    assert waiting.status == "waiting"
    done = plait.signal(waiting.run_id, "paid", {"amount": 9}, db=db)
    assert done.status == "completed", done
    assert done.steps["pay"].output["paid"] == {"amount": 9}  # type: ignore[index]
    with pytest.raises(RunFinished, match="is completed"):
        plait.signal(waiting.run_id, "paid", 1, db=db)
