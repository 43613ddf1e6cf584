"""A child run's end reaching its parent on a cluster (PostgreSQL workers;
docs/subworkflows.md).

A ``workflow`` or ``loop`` step on a worker waits for its child run holding nothing
(``runtime.children``): the parent is stored ``waiting`` once it has nothing else to
do.  When the child ends, the worker that drove it wakes the parent (``wake_parent``):
it moves it from ``waiting`` to ``running``, unheld, and NOTIFYs the workers, one of
which continues it; the step runs again and finds its child final.

What tells the parent its child ended is the child's stored status, looked at each
time the parent is (``CodeWaits.arrived``): when it is claimed or resumed, before it
parks, and every half second while a process drives it.  So a wake-up that never
comes loses nothing but time: the child's worker dies between storing the child's end
and waking the parent, or the parent was parking at that moment.  The sweep every
worker runs (``wake_stranded``, every half lease) finds such parents with one store
query (``Store.parents_to_wake``): waiting runs with a step whose latest wait is for a
child that has ended.  Only those are returned, so the sweep costs nothing per parent
that still waits.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..core.states import FINAL_RUN_STATES
from ..errors import RunNotFound, StoreError
from .control import make_claimable
from .engine import Engine

_log = logging.getLogger("plait.worker")
# a parent held by its driver when its child ends is tried again this long: the
# driver may be parking it without having looked (it looks every 0.5 s otherwise)
WAKE_TRIES_S = 2.0
WAKE_TRY_S = 0.1
SWEEP_LIMIT = 500  # parents woken per sweep, at most


async def wake_parent(engine: Engine, parent_run_id: str) -> bool:
    """Hand the waiting parent of a child that ended to the workers; False when a
    live process held it all along (it looks at the child itself)."""
    deadline = time.monotonic() + WAKE_TRIES_S
    while True:
        # (driven here: its loop looks now; a claim by its own owner would take it)
        if not engine.look_again(parent_run_id):
            run = await engine.store.claim_run(parent_run_id, engine.worker,
                                               engine.clock(), engine.lease)
            if run is not None:
                await make_claimable(engine, run)
                return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(WAKE_TRY_S)


async def child_ended(engine: Engine, run_id: str) -> None:
    """After driving run ``run_id``: when it is a child run that ended, wake its
    parent.  Never raises (the sweep catches what this misses)."""
    try:
        run = await engine.store.get_run(run_id)
        if run.parent_run_id is not None and run.status in FINAL_RUN_STATES:
            await wake_parent(engine, run.parent_run_id)
    except (StoreError, RunNotFound) as exc:
        _log.warning("run %s ended; could not wake its parent (%s): the sweep will",
                     run_id, exc, extra={"run_id": run_id})


async def wake_stranded(engine: Engine, limit: int = SWEEP_LIMIT) -> int:
    """Wake the waiting runs with a step waiting for a child run that has ended (its
    wake-up was lost), as the store finds them in one query (``parents_to_wake``);
    how many were woken."""
    woken = 0
    for run_id in await engine.store.parents_to_wake(limit):
        await wake_parent(engine, run_id)
        woken += 1
    return woken
