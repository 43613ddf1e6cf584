"""Journaled calls of attempts run by ``plait worker`` (docs/python-api.md): the
worker executing the attempt stores each call's result, and the step's next attempt,
on whichever worker claims it, gets the results back without calling again."""

from __future__ import annotations

import sys
import uuid

import pytest

from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.store.base import Store

from .conftest import StepsModule, run_on_two_workers

WAIT_S = 30.0  # a bound on waiting for the workers, never a claim about speed

_STEPS = '''
from collections import Counter

CALLS = Counter()

def _call(what):
    CALLS[what] += 1
    return {"got": what}

async def agent(ctx):
    first = await ctx.run("first", _call, "first")
    second = await ctx.run("second", _call, "second")
    if ctx.attempt == 1:
        raise ConnectionError("lost after two calls")
    return [first, second, await ctx.run("third", _call, "third")]

def sync_agent(ctx):
    one = ctx.run_sync("one", _call, "one")
    if ctx.attempt == 1:
        raise ConnectionError("lost after one call")
    return one
'''


# the conftest's store, on the backends a worker shares with its driver's process
@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgresql",
                                                          marks=pytest.mark.postgres)],
                         indirect=True)
async def test_a_worker_attempt_journals_and_the_retry_reads_it_back(
        store: Store, write_steps_module: StepsModule) -> None:
    module = write_steps_module(_STEPS)
    retry = {"max_retries": 1, "initial_delay": 0}
    checked = check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "agent", "type": "python", "call": f"{module}:agent", "retry": retry},
        {"id": "sync", "type": "python", "call": f"{module}:sync_agent", "retry": retry}]})
    run_id, status = await run_on_two_workers(store, checked, WAIT_S)

    assert status == RunStatus.COMPLETED
    assert sys.modules[module].CALLS == {"first": 1, "second": 1, "third": 1, "one": 1}
    entries = [(e.step, e.name, e.attempt) for e in await store.journal(run_id)]
    assert sorted(entries) == [("agent", "first", 1), ("agent", "second", 1),
                               ("agent", "third", 2), ("sync", "one", 1)]
