"""``concurrency_key`` / ``max_runs_per_key`` end to end: local runs started at
once queue behind the runs of their key, and workers sharing only the store never run
more than the bound of one key.  A run's step bodies record when they ran (``timed``),
so "never overlap" is checked on what the bodies saw, not on bookkeeping."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from plait import Workflow
from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.errors import InputError
from plait.runtime.engine import Engine
from plait.store.base import RunFilter, RunRecord
from plait.store.url import open_store

from .test_workers import _bodies, _Threads, shared_url, steps_module  # noqa: F401

Body = dict[str, float]


def _keyed(module: str, per_key: int, seconds: float = 0.2) -> dict[str, Any]:
    return {"name": f"wf-{uuid.uuid4().hex[:8]}",
            "concurrency_key": "{{ input.customer }}", "max_runs_per_key": per_key,
            "input": {"customer": {"type": "string"}},
            "steps": [{"id": "work", "type": "python", "call": f"{module}:timed",
                       "with": {"seconds": seconds}}]}


def _peak(bodies: list[Body]) -> int:
    """The most bodies that ran at one instant."""
    edges = sorted([(b["t1"], -1) for b in bodies] + [(b["t0"], 1) for b in bodies])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


async def test_local_runs_of_one_key_queue_and_all_complete(
        tmp_path: Path, steps_module: str) -> None:  # noqa: F811
    wf = Workflow.from_dict(_keyed(steps_module, 1))
    url = f"sqlite:///{tmp_path / 'plait.db'}"
    results = await asyncio.gather(*(wf.run_async({"customer": "acme"}, db=url)
                                     for _ in range(4)))
    assert [r.status for r in results] == ["completed"] * 4
    bodies = [r.steps["work"].output for r in results]
    assert _peak(bodies) == 1, f"runs of key acme overlapped: {bodies}"


async def test_local_runs_of_different_keys_do_not_wait_for_each_other(
        tmp_path: Path, steps_module: str) -> None:  # noqa: F811
    wf = Workflow.from_dict(_keyed(steps_module, 1, seconds=0.5))
    url = f"sqlite:///{tmp_path / 'plait.db'}"
    results = await asyncio.gather(*(wf.run_async({"customer": c}, db=url)
                                     for c in ("a", "b", "c")))
    assert _peak([r.steps["work"].output for r in results]) == 3


async def test_a_key_that_does_not_render_is_refused_before_anything_is_stored(
        tmp_path: Path, steps_module: str) -> None:  # noqa: F811
    definition = _keyed(steps_module, 1)
    definition["input"] = {"customer": {"type": "string", "required": False}}
    checked = check_definition(definition)
    store = open_store(f"sqlite:///{tmp_path / 'plait.db'}")
    await store.open()
    try:
        with pytest.raises(InputError, match="concurrency_key"):
            await Engine(store).submit(checked, {})
        assert await store.list_runs(RunFilter(workflow=definition["name"])) == []
    finally:
        await store.close()


async def test_workers_never_run_more_than_the_bound_of_a_key(
        shared_url: str, steps_module: str) -> None:  # noqa: F811
    definition = _keyed(steps_module, 2)
    store = open_store(shared_url)
    await store.open()
    engine, checked = Engine(store), check_definition(definition)
    acme: list[RunRecord] = [await engine.submit(checked, {"customer": "acme"})
                             for _ in range(6)]
    other = [await engine.submit(checked, {"customer": "beta"})]
    workers = _Threads(shared_url, 3, concurrency=4, max_runs=2)
    try:
        bodies = await _bodies(store, acme)
        await _bodies(store, other)
    finally:
        workers.stop()
        await store.close()
    # 3 workers could drive 6 runs at once; the key allows 2
    assert _peak(bodies) == 2, f"runs of key acme: at most 2 at once, saw {_peak(bodies)}"


async def _first_running(store: Any, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await store.list_runs(RunFilter(status=RunStatus.RUNNING)):
        assert asyncio.get_running_loop().time() < deadline, "the first run never started"
        await asyncio.sleep(0.02)


async def test_a_local_run_queued_behind_its_key_can_be_cancelled(
        tmp_path: Path, steps_module: str) -> None:  # noqa: F811
    checked = check_definition(_keyed(steps_module, 1, seconds=3.0))
    store = open_store(f"sqlite:///{tmp_path / 'plait.db'}")
    await store.open()
    try:
        engine = Engine(store)
        first = asyncio.create_task(engine.run(checked, {"customer": "acme"}))
        await _first_running(store)  # it holds the key before the second is stored
        queued = await engine.submit(checked, {"customer": "acme"})
        waiting = asyncio.create_task(engine.execute(checked, queued))
        await asyncio.sleep(0.6)  # a few polls: still pending, no step started
        assert (await store.get_run(queued.run_id)).status == "pending"
        await store.request_cancel(queued.run_id)
        result = await asyncio.wait_for(waiting, 2.0)  # long before the first ends
        assert result.status == "cancelled"
        assert result.steps["work"].output is None
        assert (await first).status == "completed"
    finally:
        await store.close()
