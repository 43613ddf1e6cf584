"""Sending an event to a run from any process (``plait signal``, ``plait.signal``, the
API; docs/waiting.md): the event is stored first (the first one of a name stands),
then the run is continued by whoever executes it, as after a decision
(``runtime.control``): a live process that executes it already, else this one
(SQLite, memory), or the workers of a PostgreSQL cluster, to which it is handed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..core.model import JSON
from ..core.states import FINAL_RUN_STATES
from ..core.validate import CheckedWorkflow
from ..store.base import RunRecord
from .control import Handoff, executor, hand_to_workers, runnable_definition
from .engine import Engine
from .results import RunResult

T = TypeVar("T")
# how long a live executor is given to take the event in (it looks every second)
# before this process decides it let the run go without seeing it
HANDOFF_LOOKS = 3
HANDOFF_LOOK_S = 0.5


async def deliver(engine: Engine, run_id: str, name: str, data: JSON, *,
                  for_workers: bool) -> RunResult:
    """Store the event (``Engine.signal``), then see that the run goes on: handed to
    the workers (``for_workers``: PostgreSQL), left to the live process that executes
    it, or continued here until it ends or waits; the run's result as it then is."""
    await engine.signal(run_id, name, data)
    if for_workers:
        await hand_to_workers(engine, run_id)
        return await engine.result(run_id)
    done = await continue_after_event(
        engine, run_id, lambda checked, run: engine.resume(run.run_id, checked))
    return done if isinstance(done, RunResult) else await engine.result(run_id)


async def continue_after_event(engine: Engine, run_id: str,
                               execute: Callable[[CheckedWorkflow, RunRecord],
                                                 Awaitable[T]]) -> T | Handoff | None:
    """``execute(checked, run)`` continues the run here (SQLite, memory), unless a live
    process executes it (it takes the event in: Handoff) or it has ended (None).
    DefinitionError when its python steps cannot be imported here."""
    run = await _unowned(engine, run_id)
    if isinstance(run, Handoff) or run.status in FINAL_RUN_STATES:
        return run if isinstance(run, Handoff) else None
    checked = await runnable_definition(engine, run)
    return await execute(checked, run)


async def _unowned(engine: Engine, run_id: str) -> RunRecord | Handoff:
    """The run once no live process executes it, or Handoff when one still does after
    a few looks (one that was parking the run as the event came lets it go)."""
    for look in range(HANDOFF_LOOKS):
        run = await engine.store.get_run(run_id)
        owner = executor(run, engine)
        if owner is None:
            return run
        if look == HANDOFF_LOOKS - 1:
            return Handoff(owner)
        await asyncio.sleep(HANDOFF_LOOK_S)
    raise AssertionError("unreachable")
