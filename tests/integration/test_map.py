"""``map`` steps through the public API, on the memory and SQLite stores:
item rows ``ID[INDEX]``, output in item order, concurrency, the failure policy, the
item limit, 10,000 items, and validation of the inline step."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plait import Workflow
from plait.errors import DefinitionError
from plait.runtime.engine import Engine
from plait.store import MemoryStore, open_store

RUN_TIMEOUT_S = 20.0


@pytest.fixture(params=["memory", "sqlite"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    if request.param == "memory":
        store = MemoryStore()
    else:
        store = open_store(f"sqlite:///{tmp_path / 'map.db'}")
        await store.open()
    eng = Engine(store)
    try:
        yield eng
    finally:
        eng.close()
        await store.close()


async def run(engine: Engine, definition: dict[str, Any] | Workflow, input: Any = None):
    wf = definition if isinstance(definition, Workflow) else Workflow.from_dict(definition)
    return await asyncio.wait_for(engine.run(wf.validate(), input or {}), RUN_TIMEOUT_S)


def map_wf(step: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "m", "steps": [
        {"id": "fetch", "type": "map", "over": "{{ input.xs }}", "step": step, **extra},
        {"id": "after", "type": "transform", "depends_on": ["fetch"],
         "value": "{{ steps.fetch.output }}"}]}


async def test_items_are_steps_and_the_output_is_in_item_order(engine: Engine) -> None:
    result = await run(engine, map_wf({"type": "transform",
                                       "value": "{{ item * 10 + index }}"}),
                       {"xs": [5, 6, 7]})
    assert result.status == "completed"
    assert result.steps["fetch"].output == [50, 61, 72]
    assert result.steps["after"].output == [50, 61, 72]
    assert result.steps["fetch[2]"].output == 72 and result.steps["fetch[2]"].attempts == 1
    stored = await engine.result(result.run_id)  # read back from the store
    assert stored.steps["fetch[1]"].output == 61
    assert [a.step_id for a in await engine.store.get_attempts(result.run_id)
            ].count("fetch[0]") == 1


async def test_an_empty_list_completes_with_an_empty_list(engine: Engine) -> None:
    result = await run(engine, map_wf({"type": "transform", "value": "{{ item }}"}),
                       {"xs": []})
    assert result.status == "completed" and result.steps["after"].output == []


running = 0
peak = 0
started: list[int] = []


async def slow_item(item: int) -> int:
    global running, peak
    started.append(item)
    running += 1
    peak = max(peak, running)
    try:
        await asyncio.sleep(0.01)
        if item == 2:
            raise ValueError(f"item {item} is bad")
        return item * 2
    finally:
        running -= 1


async def test_concurrency_bounds_running_items(engine: Engine) -> None:
    global peak
    peak = 0
    started.clear()
    wf = map_wf({"type": "python", "call": f"{__name__}:slow_item",
                 "with": {"item": "{{ item }}"}, "allow_failure": True,
                 "retry": {"max_retries": 1, "initial_delay": 0.01}}, concurrency=3)
    result = await run(engine, wf, {"xs": list(range(10))})
    assert peak == 3
    assert result.status == "completed"
    assert result.steps["fetch"].output == [0, 2, None, 6, 8, 10, 12, 14, 16, 18]
    assert result.steps["fetch[2]"].status == "failed"
    assert result.steps["fetch[2]"].attempts == 2  # the inline step's retry policy
    assert "item 2 is bad" in (result.steps["fetch[2]"].error or "")


async def test_a_failed_item_fails_the_map_after_started_items_end(engine: Engine) -> None:
    started.clear()
    wf = map_wf({"type": "python", "call": f"{__name__}:slow_item",
                 "with": {"item": "{{ item }}"}, "retry": 0}, concurrency=2)
    result = await run(engine, wf, {"xs": list(range(8))})
    assert result.status == "failed"
    fetch = result.steps["fetch"]
    assert fetch.status == "failed" and "fetch[2]" in (fetch.error or "")
    assert result.steps["fetch[2]"].attempts == 1  # the inline step's retry policy
    assert result.steps["fetch[1]"].status == "completed"
    assert result.steps["after"].status == "upstream_failed"
    # nothing starts after the failure: the later items are cancelled, never run
    assert max(started) <= 4
    assert result.steps["fetch[7]"].status == "cancelled"


async def test_over_that_is_not_a_list_fails_naming_what_it_got(engine: Engine) -> None:
    result = await run(engine, map_wf({"type": "transform", "value": "{{ item }}"}),
                       {"xs": {"a": 1}})
    assert result.status == "failed"
    error = result.steps["fetch"].error or ""
    assert "must render to a list" in error and "dict" in error
    assert result.steps["fetch"].attempts == 1  # not retried


async def test_more_items_than_the_limit_fail_naming_count_and_limit(engine: Engine) -> None:
    wf = map_wf({"type": "transform", "value": "{{ item }}"})
    wf["limits"] = {"max_map_items": 5}
    result = await run(engine, wf, {"xs": list(range(6))})
    assert result.status == "failed"
    error = result.steps["fetch"].error or ""
    assert "6 items" in error and "max_map_items (5)" in error


async def test_ten_thousand_items(engine: Engine) -> None:
    # CPU time of this process, so a loaded machine does not fail it: a guard
    # against a blow-up, not a speed goal
    began = time.process_time()
    result = await run(engine, map_wf({"type": "transform", "value": "{{ item + 1 }}"}),
                       {"xs": list(range(10_000))})
    assert result.status == "completed"
    assert result.steps["fetch"].output == list(range(1, 10_001))
    assert result.steps["fetch[9999]"].output == 10_000
    assert time.process_time() - began < 15


def items(input: dict[str, Any]) -> list[int]:
    return list(input["n"])


def double(item: int, index: int) -> dict[str, int]:
    return {"item": item, "index": index}


async def test_python_map_decorator_round_trips(engine: Engine) -> None:
    wf = Workflow("pymap")
    wf.step(items)
    wf.map(double, over=items, concurrency=2)
    result = await run(engine, wf, {"n": [3, 4]})
    assert result.steps["double"].output == [{"item": 3, "index": 0},
                                             {"item": 4, "index": 1}]
    again = Workflow.from_dict(wf.to_dict())  # the function is importable
    result = await run(engine, again, {"n": [7]})
    assert result.steps["double[0]"].output == {"item": 7, "index": 0}


def problems_of(definition: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(DefinitionError) as caught:
        Workflow.from_dict(definition).validate()
    return {p.location: p.message for p in caught.value.problems}


def test_validation_of_the_inline_step() -> None:
    found = problems_of({"name": "m", "steps": [
        {"id": "a", "type": "transform", "value": 1},
        {"id": "m1", "type": "map", "over": "{{ input.x }}",
         "step": {"type": "map", "over": "{{ item }}", "step": {"type": "transform",
                                                                "value": 1}}},
        {"id": "m2", "type": "map", "over": "{{ input.x }}", "concurrency": 0,
         "step": {"type": "python", "call": "m:f", "bogus": 1,
                  "with": {"x": "{{ item.", "y": "{{ steps.b.output }}"}}},
        {"id": "b", "type": "map", "over": "{{ input.x }}",
         "step": {"type": "transform", "value": "{{ steps.a.output }}",
                  "depends_on": ["a"]}},
        {"id": "c", "type": "map", "step": {"type": "transform", "value": 1}},
    ]})
    assert "any type but map" in found["steps[1].step.type"]
    assert "bogus" in found["steps[2].step.bogus"] or "bogus" in str(found)
    assert "syntax error" in found["steps[2].step.with.x"]
    assert "not an ancestor" in found["steps[2].step.with.y"]
    assert "positive integer" in found["steps[2].concurrency"]
    assert "not an ancestor" in found["steps[3].step.value"]
    assert "no 'depends_on'" in found["steps[3].step.depends_on"]
    assert "missing field 'over'" in found["steps[4].over"]


def test_the_inline_step_must_be_a_mapping() -> None:
    found = problems_of({"name": "m", "steps": [
        {"id": "m", "type": "map", "over": "{{ input.x }}", "step": "python"}]})
    assert "must be a mapping" in found["steps[0].step"]


async def test_an_inline_step_that_does_not_import_is_refused_before_running(
        engine: Engine) -> None:
    wf = Workflow.from_dict(map_wf({"type": "python", "call": "no_such_module_x:f"}))
    with pytest.raises(DefinitionError) as caught:
        await engine.run(wf.validate(), {"xs": [1]})
    assert "steps[0].step.call" in str(caught.value)


broken = {"on": True}


def picky(item: int) -> int:
    if item == 1 and broken["on"]:
        raise ValueError("one is broken")
    return item * 3


async def test_a_run_failed_in_a_map_is_retried_and_completes(engine: Engine) -> None:
    broken["on"] = True
    wf = map_wf({"type": "python", "call": f"{__name__}:picky",
                 "with": {"item": "{{ item }}"}, "retry": 0})
    failed = await run(engine, wf, {"xs": [0, 1, 2]})
    assert failed.status == "failed"
    broken["on"] = False
    new = await engine.fork(failed.run_id)
    result = await asyncio.wait_for(engine.resume(new.run_id), RUN_TIMEOUT_S)
    assert result.status == "completed"
    assert result.steps["after"].output == [0, 3, 6]
    assert result.steps["fetch[1]"].status == "completed"


CALLS: list[int] = []
FAIL_ON: set[int] = set()


def counted(item: int) -> int:
    CALLS.append(item)
    if item in FAIL_ON:
        raise ValueError(f"item {item} failed")
    return item * 10


def counted_wf() -> dict[str, Any]:
    return map_wf({"type": "python", "call": f"{__name__}:counted",
                   "with": {"item": "{{ item }}"}, "retry": 0}, concurrency=2)


async def test_retry_reuses_the_items_that_completed(engine: Engine) -> None:
    CALLS.clear()
    FAIL_ON.clear()
    FAIL_ON.add(3)
    first = await run(engine, counted_wf(), {"xs": [1, 2, 3, 4, 5]})
    assert first.status == "failed"
    assert first.steps["fetch[4]"].status == "cancelled"  # never started
    assert sorted(CALLS) == [1, 2, 3, 4]
    CALLS.clear()
    FAIL_ON.clear()
    retried = await engine.fork(first.run_id)
    result = await asyncio.wait_for(engine.resume(retried.run_id), RUN_TIMEOUT_S)
    assert result.status == "completed"
    assert result.steps["fetch"].output == [10, 20, 30, 40, 50]
    assert sorted(CALLS) == [3, 5]  # the failed item and the one never started
    assert result.steps["fetch[0]"].status == "completed"
    assert result.steps["fetch[0]"].attempts == 0  # reused, not run


class PrunesBeforeCreating:
    """A store on which a prune lands between a retry's read of the old run and the
    insert of its new run (docs/retention.md: the race of plait prune and plait retry)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def create_run(self, run: Any, step_ids: Any) -> None:
        if run.retry_of is not None:
            assert (await self._inner.prune_runs(time.time() + 1.0)).runs >= 1
        await self._inner.create_run(run, step_ids)


async def test_a_retry_whose_old_run_was_pruned_meanwhile_runs_its_items_again(
        engine: Engine) -> None:
    CALLS.clear()
    FAIL_ON.clear()
    FAIL_ON.add(3)
    first = await run(engine, counted_wf(), {"xs": [1, 2, 3]})
    assert first.status == "failed"
    CALLS.clear()
    FAIL_ON.clear()
    racing = Engine(PrunesBeforeCreating(engine.store))
    try:
        retried = await racing.fork(first.run_id)
        result = await asyncio.wait_for(racing.resume(retried.run_id), RUN_TIMEOUT_S)
    finally:
        racing.close()
    assert result.status == "completed" and retried.retry_of == first.run_id
    assert result.steps["fetch"].output == [10, 20, 30]
    assert sorted(CALLS) == [1, 2, 3]  # nothing left to reuse: every item ran again


async def test_retry_with_a_new_input_or_from_the_map_runs_every_item(
        engine: Engine) -> None:
    CALLS.clear()
    FAIL_ON.clear()
    FAIL_ON.add(2)
    first = await run(engine, counted_wf(), {"xs": [1, 2]})
    assert first.status == "failed"
    FAIL_ON.clear()
    for fork in (engine.fork(first.run_id, input={"xs": [1, 2]}),
                 engine.fork(first.run_id, from_step="fetch")):
        CALLS.clear()
        retried = await fork
        result = await asyncio.wait_for(engine.resume(retried.run_id), RUN_TIMEOUT_S)
        assert result.status == "completed"
        assert sorted(CALLS) == [1, 2]
