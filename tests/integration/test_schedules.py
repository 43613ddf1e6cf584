"""Schedules end to end through ``plait.runtime.scheduler.Scheduler`` and a store: each
fire starts one run however many schedulers tick, catch_up after a gap, the latest
version's schedules only, and what a scheduler does with definitions it cannot use."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from plait import DefinitionError, Workflow
from plait.core.states import RunStatus
from plait.runtime.engine import Engine
from plait.runtime.scheduler import ScheduledRun, Scheduler
from plait.store import MemoryStore, RunFilter, Store, open_store

T0 = 1_717_200_000.0  # 2024-06-01 00:00:00 UTC, a multiple of 3600
SCHEMA = {"type": "object", "required": ["customer"],
          "properties": {"customer": {"type": "string"}}}


def definition(name: str, *schedules: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"name": name, "input": SCHEMA, "schedules": list(schedules),
            "steps": [{"id": "hello", "type": "transform",
                       "value": "{{ input.customer }}"}], **top}


async def store_definition(store: Store, data: dict[str, Any]) -> None:
    checked = Workflow.from_dict(data).validate()
    await store.save_workflow(checked.name, checked.definition_json, checked.fingerprint,
                              None)


async def fires_of(store: Store, workflow: str) -> list[float]:
    """The fire time of every run of ``workflow``, from each run's schedule note."""
    found = []
    for run in await store.list_runs(RunFilter(workflow=workflow, limit=10_000)):
        notes = [e.data for e in await store.get_events(run.run_id) if e.kind == "note"]
        found.append(notes[0]["schedule"]["fire_time"])
    return sorted(found)


async def test_a_fire_creates_one_pending_run_and_tells_on_run() -> None:
    store = MemoryStore()
    await store_definition(store, definition(
        "every-five", {"cron": "*/5 * * * *", "input": {"customer": "acme"}}))
    told: list[ScheduledRun] = []

    async def on_run(started: ScheduledRun) -> None:
        told.append(started)

    scheduler = Scheduler(store, on_run=on_run)
    first = await scheduler.tick(T0 + 10)  # first sight: nothing before it is due
    assert first.created == () and first.next_fire == T0 + 300
    assert (await scheduler.tick(T0 + 299)).created == ()

    tick = await scheduler.tick(T0 + 301)
    [started] = tick.created
    assert told == [started]
    assert (started.fire_time, started.run.input) == (T0 + 300, {"customer": "acme"})
    assert tick.next_fire == T0 + 600
    stored = await store.get_run(started.run.run_id)
    assert (stored.status, stored.workflow, stored.version) == (RunStatus.PENDING,
                                                                "every-five", 1)
    assert [s.step_id for s in await store.get_steps(stored.run_id)] == ["hello"]
    # ticking again at the same time (or by another scheduler) starts nothing more
    assert (await scheduler.tick(T0 + 301)).created == ()
    assert (await Scheduler(store).tick(T0 + 302)).created == ()
    assert await fires_of(store, "every-five") == [T0 + 300]


async def test_the_created_run_executes_like_any_stored_run() -> None:
    store = MemoryStore()
    await store_definition(store, definition(
        "hourly", {"cron": "@hourly", "input": {"customer": "acme"}}))
    engine = Engine(store)
    results = []

    async def execute(started: ScheduledRun) -> None:
        results.append(await engine.execute(started.checked, started.run))

    scheduler = Scheduler(store, on_run=execute)
    await scheduler.tick(T0 - 1)
    await scheduler.tick(T0 + 1)
    engine.close()
    [result] = results
    assert (result.status, result.output) == ("completed", {"hello": "acme"})


async def test_after_a_gap_catch_up_all_starts_every_fire_and_skip_the_latest() -> None:
    store = MemoryStore()
    for name, catch_up in (("all-of-them", "all"), ("latest-only", "skip")):
        await store_definition(store, definition(name, {
            "cron": "*/5 * * * *", "catch_up": catch_up, "input": {"customer": name}}))
    scheduler = Scheduler(store)
    await scheduler.tick(T0)
    await scheduler.tick(T0 + 300)  # both start the 00:05 fire
    # then nobody ticks for an hour
    tick = await Scheduler(store).tick(T0 + 3900 + 42)
    assert Counter(s.run.workflow for s in tick.created) == {"all-of-them": 12,
                                                             "latest-only": 1}
    assert await fires_of(store, "all-of-them") == [T0 + 300 * k for k in range(1, 14)]
    assert await fires_of(store, "latest-only") == [T0 + 300, T0 + 3900]


async def test_catch_up_all_is_bounded_after_a_long_gap(caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    store = MemoryStore()
    await store_definition(store, definition(
        "minutely", {"cron": "* * * * *", "catch_up": "all", "input": {"customer": "a"}}))
    await Scheduler(store).tick(T0)
    with caplog.at_level(logging.INFO, logger="plait.scheduler"):
        tick = await Scheduler(store).tick(T0 + 86400)
    assert len(tick.created) == 100
    assert tick.created[-1].fire_time == T0 + 86400
    assert "catch_up: all starts at most 100" in caplog.text


async def test_only_the_latest_version_is_scheduled_and_a_kept_schedule_goes_on() -> None:
    store = MemoryStore()
    kept = {"cron": "*/5 * * * *", "input": {"customer": "a"}}
    await store_definition(store, definition("versions", kept))
    scheduler = Scheduler(store)
    await scheduler.tick(T0)
    await scheduler.tick(T0 + 300)
    # v2 keeps the schedule (and changes a step): it goes on where v1 stopped
    v2 = definition("versions", kept)
    v2["steps"][0]["value"] = "v2 {{ input.customer }}"
    await store_definition(store, v2)
    tick = await scheduler.tick(T0 + 600)
    assert [(s.run.version, s.fire_time) for s in tick.created] == [(2, T0 + 600)]
    # v3 edits the input: a new schedule, first seen now, nothing back-filled
    await store_definition(store, definition("versions", {**kept, "input": {"customer": "b"}}))
    assert (await scheduler.tick(T0 + 1000)).created == ()
    tick = await scheduler.tick(T0 + 1200)
    assert [(s.run.version, s.run.input) for s in tick.created] == [(3, {"customer": "b"})]
    # v4 has no schedules: nothing more starts
    await store_definition(store, {**definition("versions"), "schedules": []})
    assert (await scheduler.tick(T0 + 3600)).created == ()
    assert await fires_of(store, "versions") == [T0 + 300, T0 + 600, T0 + 1200]


def test_a_schedule_whose_input_fails_the_schema_is_refused_at_validation() -> None:
    with pytest.raises(DefinitionError) as info:
        Workflow.from_dict(definition("bad-input", {"cron": "@hourly",
                                                     "input": {"customer": 42}}))
    [problem] = info.value.problems
    assert problem.location == "schedules[0].input.customer"


async def test_a_stored_definition_that_does_not_load_here_is_skipped_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    # stored without plait's validation (another tool, or a plugin step type this
    # process does not have): its schedule must not start runs with a bad input
    bad = definition("bad-input", {"cron": "* * * * *", "input": {"customer": 42}})
    await store.save_workflow("bad-input", bad, "0123456789ab", None)
    await store_definition(store, definition("good", {"cron": "* * * * *",
                                                      "input": {"customer": "a"}}))
    scheduler = Scheduler(store)
    with caplog.at_level(logging.WARNING, logger="plait.scheduler"):
        await scheduler.tick(T0)
        tick = await scheduler.tick(T0 + 60)
    assert [s.run.workflow for s in tick.created] == ["good"]
    assert caplog.text.count("schedules of bad-input@1 are not started") == 1
    assert "schedules[0].input.customer" in caplog.text


async def test_a_failing_on_run_leaves_its_run_pending_and_the_tick_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    for name in ("first", "second"):
        await store_definition(store, definition(name, {"cron": "* * * * *",
                                                         "input": {"customer": name}}))

    async def broken(started: ScheduledRun) -> None:
        raise RuntimeError("queue full")

    scheduler = Scheduler(store, on_run=broken)
    await scheduler.tick(T0)
    tick = await scheduler.tick(T0 + 60)
    assert sorted(s.run.workflow for s in tick.created) == ["first", "second"]
    for started in tick.created:
        assert (await store.get_run(started.run.run_id)).status == RunStatus.PENDING
    assert caplog.text.count("on_run failed") == 2


async def test_run_ticks_when_the_next_fire_comes() -> None:
    store = MemoryStore()
    await store_definition(store, definition("soon", {"cron": "* * * * *",
                                                      "input": {"customer": "a"}}))
    loop = asyncio.get_running_loop()
    start = loop.time()
    created = asyncio.Event()

    async def on_run(started: ScheduledRun) -> None:
        created.set()

    # a clock 0.3 s before a minute: the first tick sees the schedule, the next fires
    scheduler = Scheduler(store, on_run=on_run,
                          clock=lambda: T0 - 0.3 + (loop.time() - start))
    task = asyncio.create_task(scheduler.run())
    try:
        await asyncio.wait_for(created.wait(), 5)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await fires_of(store, "soon") == [T0]


# ------------------------------------------------ many schedulers, one SQLite file

SCHEDULERS = 4
TICKS = [T0 + 30 * k for k in range(12)]  # six minutes, every 30 s


def _tick_in_thread(url: str, barrier: threading.Barrier, created: list[float]) -> None:
    async def main() -> None:
        store = open_store(url)
        await store.open()
        try:
            scheduler = Scheduler(store)
            for now in TICKS:
                barrier.wait()  # every scheduler ticks the same moment at once
                tick = await scheduler.tick(now)
                created.extend(s.fire_time for s in tick.created)
        finally:
            await store.close()
    asyncio.run(main())


async def test_schedulers_in_threads_on_one_sqlite_file_start_each_fire_once(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/plait.db"
    store = open_store(url)
    await store.open()
    try:
        await store_definition(store, definition(
            "minutely", {"cron": "* * * * *", "input": {"customer": "a"}},
            {"cron": "*/2 * * * *", "catch_up": "all", "input": {"customer": "b"}}))
        barrier = threading.Barrier(SCHEDULERS, timeout=30)
        created: list[list[float]] = [[] for _ in range(SCHEDULERS)]
        threads = [threading.Thread(target=_tick_in_thread, args=(url, barrier, mine))
                   for mine in created]
        for thread in threads:
            thread.start()
        await asyncio.to_thread(lambda: [t.join(60) for t in threads])
        assert not any(t.is_alive() for t in threads)
        stored = await fires_of(store, "minutely")
    finally:
        await store.close()
    every_minute = [T0 + 60 * k for k in range(1, 6)]
    every_two = [T0 + 120 * k for k in range(1, 3)]
    assert stored == sorted(every_minute + every_two)
    # each fire created by exactly one of the schedulers
    assert sorted(t for mine in created for t in mine) == stored
