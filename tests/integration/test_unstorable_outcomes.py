"""An outcome no store could hold never wedges a run or a worker.

The three triggers found on a cluster: a step logging a file name decoded with
``surrogateescape`` (a lone surrogate), an exception whose ``retry_after`` is NaN, and
one carrying bytes and an infinity.  Everything an attempt produces is made storable
when it is built, so the first completes (its log record cleaned, and saying so) and
the others fail naming their exception; every other run completes.  Locally (memory,
SQLite) and on workers (two that only claim tickets, as ``--no-eager``, and once a
worker running eager attempts), on every store.

The net under those checks is tested too: with the cleaning of history notes turned
off, a note with NaN reaches the store, which refuses it; a worker's completions are
then split (the refused outcome stored as its attempt's failure, never retried, naming
why) and a run's batch is written again cleaned.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from plait import Workflow
from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.runtime.engine import Engine
from plait.runtime.worker import Worker
from plait.steps import context
from plait.store import MemoryStore
from plait.store.base import Store

from .conftest import StepsModule

pytestmark = pytest.mark.slow  # starts workers

STEPS = '''
import math

class MyError(Exception):
    def __init__(self, data, retry_after):
        super().__init__(data, retry_after)
        self.data, self.retry_after = data, retry_after

def logs_surrogate(ctx):
    ctx.logger.info("processing %s", b"report-\\xff.csv".decode("utf-8", "surrogateescape"))
    return {"done": True}

def nan_retry_after():
    raise MyError("the service said: later", float("nan"))

def bytes_and_infinity():
    raise MyError(b"\\xff", float("inf"))

def noted(ctx):
    ctx.journal.note(ctx.step_id, {"usage": {"tokens": math.nan}})
    return 1

def fine(n):
    return {"n": n}
'''

TRIGGERS = ("logs_surrogate", "nan_retry_after", "bytes_and_infinity")
RETRY = {"max_retries": 1, "initial_delay": 0, "jitter": 0}


@pytest.fixture
def steps(write_steps_module: StepsModule) -> str:
    return write_steps_module(STEPS)


def definition(module: str, poison: str, *, pool: bool = False) -> dict[str, Any]:
    """``pool``: the poisoned step in a pool, so it always gets a ticket (a worker
    running eager attempts claims it, and completes it through the inbox)."""
    return {"name": f"wf-{uuid.uuid4().hex[:8]}", "pools": {"p": {"concurrency": 4}},
            "steps": [
        {"id": "bad", "type": "python", "call": f"{module}:{poison}", "retry": RETRY,
         **({"with": {"n": 0}} if poison == "fine" else {}),
         **({"pool": "p"} if pool else {})},
        {"id": "good", "type": "python", "call": f"{module}:fine", "with": {"n": 1}}]}


async def final(store: Store, run_ids: list[str], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        runs = [await store.get_run(r) for r in run_ids]
        if all(r.status in ("completed", "failed", "cancelled") for r in runs):
            return
        assert asyncio.get_running_loop().time() < deadline, [r.status for r in runs]
        await asyncio.sleep(0.05)


async def check_poisoned(store: Store, run_id: str, poison: str) -> None:
    """The poisoned step ended as its trigger says; the run's other step completed."""
    run = await store.get_run(run_id)
    steps = {s.step_id: s for s in await store.get_steps(run_id)}
    assert steps["good"].status == "completed", steps["good"]
    bad = steps["bad"]
    if poison == "logs_surrogate":
        assert (run.status, bad.status) == (RunStatus.COMPLETED, "completed")
        logs = [e.data["log"] for e in await store.get_events(run_id)
                if e.step_id == "bad" and "log" in e.data]
        assert [(r["message"], r.get("cleaned")) for r in logs] == [
            ("processing report-\ufffd.csv", "lone surrogates replaced by U+FFFD")]
        return
    assert (run.status, bad.status, bad.attempts) == (RunStatus.FAILED, "failed", 2)
    shown = "('the service said: later', nan)" if poison == "nan_retry_after" \
        else "(b'\\xff', inf)"
    assert bad.error == f"MyError: {shown}", bad.error
    assert "stopped" not in (run.error or "")


@pytest.mark.parametrize("poison", TRIGGERS)
async def test_a_local_run_stores_every_trigger(steps: str, poison: str) -> None:
    engine = Engine(MemoryStore())
    try:
        result = await asyncio.wait_for(
            engine.run(check_definition(definition(steps, poison)), {}), 20)
        await check_poisoned(engine.store, result.run_id, poison)
    finally:
        engine.close()


def _worker(store: Store, name: str, **options: Any) -> Worker:
    return Worker(store, name=name, **{"concurrency": 2, "lease": 2.0, "poll": 0.1,
                                       "grace": 2.0, "schedules": False, **options})


async def _with_workers(store: Store, run_ids: list[str], *workers: Worker) -> None:
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        await final(store, run_ids)
    finally:
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)


@pytest.mark.parametrize("eager", [False, True], ids=["no-eager", "eager"])
async def test_workers_store_every_trigger_and_complete_every_other_run(
        store: Store, steps: str, eager: bool) -> None:
    engine = Engine(store)
    poisoned = {}
    for poison in TRIGGERS:
        for pool in (False, True) if eager else (False,):
            run = await engine.submit(check_definition(definition(steps, poison,
                                                                  pool=pool)), {})
            poisoned[run.run_id] = poison
    good = [await engine.submit(check_definition(definition(steps, "fine")), {})
            for _ in range(3)]
    workers = [_worker(store, "w1", eager=eager)] if eager else \
        [_worker(store, "w1", eager=False), _worker(store, "w2", eager=False)]
    await _with_workers(store, [*poisoned, *(r.run_id for r in good)], *workers)
    for run_id, poison in poisoned.items():
        await check_poisoned(store, run_id, poison)
    for run in good:
        assert (await store.get_run(run.run_id)).status is RunStatus.COMPLETED
    for run_id in [*poisoned, *(r.run_id for r in good)]:
        assert await store.tickets(run_id) == []
        assert await store.outcomes(run_id) == []


# ---------------------------------------------------------------- the net


@pytest.fixture
def uncleaned_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    """History notes reach the store as the step gave them (the net's test)."""
    monkeypatch.setattr(context, "note_data", lambda data, redact: data)


def noted_definition(module: str) -> dict[str, Any]:
    return {"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "bad", "type": "python", "call": f"{module}:noted", "retry": RETRY},
        {"id": "good", "type": "python", "call": f"{module}:fine", "with": {"n": 1}}]}


@pytest.mark.usefixtures("uncleaned_notes")
async def test_a_worker_splits_completions_the_store_refuses(store: Store,
                                                             steps: str) -> None:
    engine = Engine(store)
    runs = [await engine.submit(check_definition(noted_definition(steps)), {})
            for _ in range(2)]
    ids = [r.run_id for r in runs]
    await _with_workers(store, ids, _worker(store, "w1", eager=False, concurrency=4),
                        _worker(store, "w2", eager=False, concurrency=4))
    for run_id in ids:
        steps_ = {s.step_id: s for s in await store.get_steps(run_id)}
        assert steps_["good"].status == "completed"
        bad = steps_["bad"]
        assert (bad.status, bad.attempts) == ("failed", 1), bad  # never retried
        assert bad.error is not None
        assert bad.error.startswith("UnstorableOutcome: the outcome of attempt 1 (ok) "
                                    "could not be stored: "), bad.error
        assert "not JSON" in bad.error and "stopped" not in bad.error


# the stores that encode what they keep (the memory store keeps notes as given)
@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgresql",
                                                          marks=pytest.mark.postgres)],
                         indirect=True)
@pytest.mark.usefixtures("uncleaned_notes")
async def test_a_run_batch_the_store_refuses_is_stored_cleaned(store: Store,
                                                               steps: str) -> None:
    engine = Engine(store)
    result = await asyncio.wait_for(
        engine.run(check_definition(noted_definition(steps)), {}), 20)
    assert result.status == "completed"
    events = await store.get_events(result.run_id)
    usage = [e.data["usage"] for e in events if "usage" in e.data]
    assert usage == [{"tokens": None}]
    warnings = [e.data["log"]["message"] for e in events
                if "log" in e.data and e.data["log"]["level"] == "WARNING"]
    assert len(warnings) == 1 and "they were stored cleaned: NaN and infinities" \
        in warnings[0], warnings


def test_the_python_api_runs_each_trigger_on_memory(steps: str) -> None:
    import importlib

    module = importlib.import_module(steps)
    for poison in TRIGGERS:
        wf = Workflow(f"api-{poison}")
        wf.add_step("bad", getattr(module, poison), retry=0)
        wf.add_step("good", module.fine, with_={"n": 1})
        result = wf.run({}, db="memory://")
        assert result.steps["good"].status == "completed"
        expected = "completed" if poison == "logs_surrogate" else "failed"
        assert (result.status, result.steps["bad"].status) == (expected, expected)
