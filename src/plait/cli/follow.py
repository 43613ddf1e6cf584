"""``plait run --db postgresql://...``: the run is stored for the workers (docs/workers.md).

This process never executes it: it stores the definition and the run, wakes the
listening workers (``NOTIFY plait_run`` with the run id, right after the run's commit;
a worker that misses it finds the run by polling), then either returns at once
(``--detach``) or follows the run by reading it every ``FOLLOW_POLL_S`` until it ends
or waits for a person or an event (a run whose step sleeps is followed on until the
workers continue it), and shows it as a local run is shown, with the same exit code.
Ctrl-C while following asks for the run's cancellation (the driving worker records
it); a second one stops following at once.
"""

from __future__ import annotations

import asyncio
import time

from ..core.states import FINAL_RUN_STATES, RunStatus, StepStatus
from ..rundoc.notes import waits_of
from ..runtime.engine import Engine
from ..runtime.results import RunResult
from ..store.base import RunRecord
from ..store.url import shown_url
from .views import RunScreen

FOLLOW_POLL_S = 0.2
NO_WORKER_HINT_S = 10.0  # a run still pending this long: say that workers are needed


def for_workers(url: str) -> bool:
    """Whether ``plait run`` hands runs stored at ``url`` to workers."""
    from ..store.postgres_url import is_postgres

    return is_postgres(url)


async def until_settled(engine: Engine, run: RunRecord, view: RunScreen,
                        db: str) -> RunResult:
    """``run`` once it has ended or waits for an approval, read every
    ``FOLLOW_POLL_S``; a notice on stderr says that the workers execute it, and
    another one when it is still pending after ``NO_WORKER_HINT_S``."""
    view.notices().print(f"run {run.run_id} of {run.workflow} v{run.version} is stored; "
                         f"its steps run on the workers of {shown_url(db)}",
                         highlight=False, markup=False)
    hinted = False
    started = time.monotonic()
    while True:
        current = await engine.store.get_run(run.run_id)
        if current.status in FINAL_RUN_STATES or (current.status is RunStatus.WAITING
                                                  and not await sleeps(engine, current)):
            return await engine.result(run.run_id)
        if (not hinted and current.status is RunStatus.PENDING
                and time.monotonic() - started >= NO_WORKER_HINT_S):
            hinted = True
            view.notices().print(
                f"run {run.run_id} waits for a worker: start one with "
                f"`plait worker --db {shown_url(db)}` (Ctrl-C cancels the run)",
                highlight=False, markup=False)
        await asyncio.sleep(FOLLOW_POLL_S)


async def sleeps(engine: Engine, run: RunRecord) -> bool:
    """Whether a ``waiting`` run has a step that sleeps (a workers' run goes on by
    itself at its ``wake_at``): followed on, as a local ``plait run`` keeps it, where
    one that waits for a person or an event is shown waiting (exit 3)."""
    if run.wake_at is None:
        return False
    steps = await engine.store.get_steps(run.run_id)
    waits = waits_of({s.step_id: str(s.status) for s in steps},
                     await engine.store.get_events(run.run_id))
    return any(w.get("kind") == "sleep" for w in waits.values())


async def until_applied(engine: Engine, run_id: str, step: str, view: RunScreen,
                        db: str) -> RunResult:
    """``plait approve`` on PostgreSQL: the run once the workers applied the decision on
    ``step`` and it ended or waits for another decision, read every ``FOLLOW_POLL_S``
    (with a notice when no worker took it up after ``NO_WORKER_HINT_S``).  Ctrl-C stops
    following only: the workers go on."""
    view.notices().print(f"the workers of {shown_url(db)} continue run {run_id}",
                         highlight=False, markup=False)
    hinted = False
    started = time.monotonic()
    try:
        while True:
            run = await engine.store.get_run(run_id)
            steps = await engine.store.get_steps(run_id)
            waits = any(s.step_id == step and s.status is StepStatus.WAITING for s in steps)
            if run.status in FINAL_RUN_STATES or (run.status is RunStatus.WAITING
                                                  and not waits
                                                  and not await sleeps(engine, run)):
                return await engine.result(run_id)
            if waits and not hinted and time.monotonic() - started >= NO_WORKER_HINT_S:
                hinted = True
                view.notices().print(
                    f"run {run_id} waits for a worker to apply the decision: start one "
                    f"with `plait worker --db {shown_url(db)}`", highlight=False,
                    markup=False)
            await asyncio.sleep(FOLLOW_POLL_S)
    except asyncio.CancelledError:  # Ctrl-C: said, then raised on
        view.notices().print(f"stopped following run {run_id}; the workers go on with "
                             f"it (plait show {run_id})", highlight=False, markup=False)
        raise
