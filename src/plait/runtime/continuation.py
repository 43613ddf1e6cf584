"""A decision recorded that nobody could apply: the run is *stuck*.

An approval's decision is stored first (the first one stands), then applied by whoever
executes the run: ``plait approve`` here, the server, or the workers.  When that
continuation fails (the run's python steps cannot be imported where it was tried, the
process died), the decision stays recorded and the step stays ``waiting``: a second
decision is refused, and only ``plait resume RUN_ID`` goes on.

What failed is kept in the run's history, as a note of the step::

    {"continuation_failed": {"error": "...", "command": "plait resume RUN_ID"}}

and ``stuck`` reads it back for ``plait show`` and ``GET /api/runs/{id}``: the run's
``"continuation"`` entry is ``{"step", "error", "command", "decided_at", "failed_at"}``
while the run is stuck, else null.  A decision with no failure noted, that nobody
applied within ``SETTLE_S`` seconds (the process applying it died) is stuck too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ..core.model import JSONDict
from ..core.states import FINAL_RUN_STATES, StepStatus
from ..errors import StoreError
from ..store.base import EventRecord, RunRecord, StepRecord, Store, WriteBatch
from .engine import owner_alive
from .results import iso

NOTE = "continuation_failed"
SETTLE_S = 15.0  # a decision applied by nobody for this long: the run is stuck
NOBODY = "no process continued the run after the decision"

_log = logging.getLogger("plait.continuation")


def resume_hint(run_id: str) -> str:
    """What continues a stuck run."""
    return f"plait resume {run_id}"


async def note_failure(store: Store, run_id: str, step: str, error: str) -> None:
    """Record in the run's history that the decision on ``step`` could not be applied
    (``error``: why).  A store that fails now is logged, never raised: the caller is
    reporting a failure already."""
    data: JSONDict = {NOTE: {"error": error, "command": resume_hint(run_id)}}
    try:
        await store.write(WriteBatch(run_id=run_id, notes=[(step, data)]))
    except StoreError as exc:
        _log.warning("run %s: could not record that its continuation failed: %s",
                     run_id, exc)


def stuck(run: RunRecord, steps: Sequence[StepRecord], events: Sequence[EventRecord], *,
          now: float, alive: Callable[[str], bool] = owner_alive,
          settle: float = SETTLE_S) -> JSONDict | None:
    """The run's ``continuation`` entry (see the module docstring), or None when no
    decided step waits or a live process executes the run."""
    if run.status in FINAL_RUN_STATES or (run.owner is not None and alive(run.owner)):
        return None
    waiting = {s.step_id for s in steps if s.status is StepStatus.WAITING}
    decided: dict[str, float] = {}
    failed: dict[str, EventRecord] = {}
    for event in events:
        if event.kind != "note" or event.step_id not in waiting:
            continue
        if isinstance(event.data.get("approval"), dict):
            decided[event.step_id] = event.at
        elif isinstance(event.data.get(NOTE), dict):
            failed[event.step_id] = event
    for step, at in decided.items():
        failure = failed.get(step)
        if failure is None and now - at < settle:
            continue  # being applied, most likely
        return _entry(run.run_id, step, at, failure)
    return None


def _entry(run_id: str, step: str, decided_at: float,
           failure: EventRecord | None) -> JSONDict:
    noted = failure.data.get(NOTE) if failure is not None else None
    error = noted.get("error") if isinstance(noted, dict) else None
    return {"step": step, "error": str(error) if error is not None else NOBODY,
            "command": resume_hint(run_id), "decided_at": iso(decided_at),
            "failed_at": iso(failure.at) if failure is not None else None}


def stuck_text(entry: JSONDict) -> str:
    """One line for a person: what was decided could not continue, and what to do."""
    return (f"decision on {entry['step']} recorded, could not continue: {entry['error']}; "
            f"continue it with: {entry['command']}")
