"""A ticket carries what is small of what its step reads; the worker reads the rest
from the store once per run (docs/workers.md, "What a ticket carries").  Every attempt
here is a ticket (workers without eager attempts), on every store: a first step that
returns 100 KB, a run input of 50 KB, and steps that read them as a parent, by a
parameter's name, by a template naming the step and by a template that names no step."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plait.core.states import RunStatus, StepStatus
from plait.definitions import check_definition
from plait.store.base import Store, WriteBatch
from plait.store.memory import MemoryStore
from plait.store.url import open_store

from .conftest import StepsModule, run_on_two_workers

pytestmark = pytest.mark.slow  # starts workers

_STEPS = '''
def first():
    return {"text": "x" * 100_000}

def link(first):
    return len(first["text"])

def chained(link):
    return link + 1

def named(first, input):
    return [len(first["text"]), len(input["blob"])]

def rendered(size, dynamic):
    return [size, dynamic]

def after(chained, named, rendered):
    return {"chained": chained, "named": named, "rendered": rendered}
'''


class _Recording(MemoryStore):
    """A memory store that keeps the tickets the drivers stored."""

    def __init__(self) -> None:
        super().__init__()
        self.tickets: list[Any] = []

    async def write(self, batch: WriteBatch) -> None:
        self.tickets.extend(batch.dispatch)
        await super().write(batch)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql",
                                                         marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        opened: Store = _Recording()
    else:
        opened = open_store(f"sqlite:///{tmp_path / 'plait.db'}" if request.param == "sqlite"
                            else str(request.getfixturevalue("pg_database")))
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


async def test_large_outputs_and_input_are_read_by_reference(
        store: Store, write_steps_module: StepsModule) -> None:
    module = write_steps_module(_STEPS)
    checked = check_definition({"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [
        {"id": "first", "type": "python", "call": f"{module}:first"},
        {"id": "link", "type": "python", "call": f"{module}:link", "depends_on": ["first"]},
        {"id": "chained", "type": "python", "call": f"{module}:chained",
         "depends_on": ["link"]},
        {"id": "named", "type": "python", "call": f"{module}:named",
         "depends_on": ["chained"]},
        {"id": "rendered", "type": "python", "call": f"{module}:rendered",
         "depends_on": ["named"],
         "with": {"size": "{{ steps.first.output.text | length }}",
                  "dynamic": "{% for k in ['first', 'link'] %}"
                             "{{ steps[k].status }},{% endfor %}"}},
        {"id": "after", "type": "python", "call": f"{module}:after",
         "depends_on": ["chained", "named", "rendered"]}]})
    run_id, status = await run_on_two_workers(store, checked, input={"blob": "b" * 50_000},
                                              eager=False)
    steps = {s.step_id: s for s in await store.get_steps(run_id)}
    assert status is RunStatus.COMPLETED, {k: (s.status, s.error) for k, s in steps.items()}
    assert steps["after"].output == {"chained": 100_001, "named": [100_000, 50_000],
                                     "rendered": [100_000, "completed,completed,"]}
    assert all(s.status is StepStatus.COMPLETED for s in steps.values())
    if isinstance(store, _Recording):  # what travelled: none of the large values
        sizes = {t.step_id: len(json.dumps(t.payload)) for t in store.tickets}
        assert set(sizes) == set(steps)
        assert max(sizes.values()) < 2_000, sizes
        assert all("input" not in t.payload for t in store.tickets)
        small = {t.step_id: t.payload["steps"] for t in store.tickets}
        assert small["chained"] == {"link": {"status": "completed", "output": 100_000}}
        assert small["link"] == {}  # its one parent's output is too large to carry
