"""Runs past their SLA: what ``plait sla`` shows.  Breaches are reported, never acted on.

API (the CLI calls these)::

    found = await breaches(store, now=time.time(), workflow=None, since=None, limit=10000)
    find_breaches(runs, now=...)          # pure, over RunRecords
    to_json(found, now=...)               # the --json object
    render_breaches(found)                # plain text, one line per breach

A run breaches when its ``sla`` (seconds) is set and its elapsed time exceeds it.  Elapsed
time is measured from ``started_at`` (or ``created_at`` when the run never started, so a
run stuck in the queue breaches too) to ``finished_at``, or to ``now`` while the run is
still pending, running or waiting.  Finished runs of any status (completed, failed,
cancelled) are reported; ``active`` says whether the run is still going, in which case
the breach still grows.  Breaches are sorted by how far over they are, worst first.

JSON (``to_json``)::

    {"now": ISO-8601 UTC, "count": int,
     "breaches": [{"run_id": str, "workflow": str, "version": int, "status": str,
                   "active": bool, "sla_s": float, "elapsed_s": float, "over_s": float,
                   "over_ratio": float,           # elapsed / sla
                   "created_at": str, "started_at": str | null, "finished_at": str | null}]}

(times ISO-8601 UTC, as everywhere in the CLI's JSON.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..core.durations import format_duration
from ..core.model import JSONDict
from ..core.states import FINAL_RUN_STATES, RunStatus
from ..core.timestamps import iso
from ..store.base import RunFilter, RunRecord, Store

__all__ = ["SlaBreach", "breach_of", "breaches", "find_breaches", "render_breaches",
           "to_json"]

DEFAULT_LIMIT = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class SlaBreach:
    run_id: str
    workflow: str
    version: int
    status: RunStatus
    active: bool
    sla: float
    elapsed: float
    created_at: float
    started_at: float | None
    finished_at: float | None

    @property
    def over(self) -> float:
        """Seconds past the SLA."""
        return self.elapsed - self.sla

    def to_json(self) -> JSONDict:
        return {"run_id": self.run_id, "workflow": self.workflow, "version": self.version,
                "status": str(self.status), "active": self.active, "sla_s": self.sla,
                "elapsed_s": self.elapsed, "over_s": self.over,
                "over_ratio": self.elapsed / self.sla if self.sla else None,
                "created_at": iso(self.created_at), "started_at": iso(self.started_at),
                "finished_at": iso(self.finished_at)}


def _elapsed(run: RunRecord, now: float) -> float | None:
    start = run.started_at if run.started_at is not None else run.created_at
    if run.status in FINAL_RUN_STATES:
        return None if run.finished_at is None else run.finished_at - start
    return now - start


def breach_of(run: RunRecord, *, now: float) -> SlaBreach | None:
    """The run's breach, or None when it has no SLA or is within it (pure)."""
    if run.sla is None:
        return None
    elapsed = _elapsed(run, now)
    if elapsed is None or elapsed <= run.sla:
        return None
    return SlaBreach(run_id=run.run_id, workflow=run.workflow, version=run.version,
                     status=run.status, active=run.status not in FINAL_RUN_STATES,
                     sla=run.sla, elapsed=elapsed, created_at=run.created_at,
                     started_at=run.started_at, finished_at=run.finished_at)


def find_breaches(runs: Iterable[RunRecord], *, now: float) -> list[SlaBreach]:
    """Every breach among ``runs``, worst (most seconds over) first (pure)."""
    found = [b for run in runs if (b := breach_of(run, now=now)) is not None]
    return sorted(found, key=lambda b: (-b.over, b.run_id))


async def breaches(store: Store, *, now: float, workflow: str | None = None,
                   since: float | None = None, limit: int = DEFAULT_LIMIT) -> list[SlaBreach]:
    """Breaches among the newest ``limit`` runs created at or after ``since``."""
    runs = await store.list_runs(RunFilter(workflow=workflow, since=since, limit=limit))
    return find_breaches(runs, now=now)


def to_json(found: Sequence[SlaBreach], *, now: float) -> JSONDict:
    return {"now": iso(now), "count": len(found),
            "breaches": [b.to_json() for b in found]}


def render_breaches(found: Sequence[SlaBreach]) -> str:
    """One line per breach: run, workflow, status, elapsed against the SLA, how far over."""
    if not found:
        return "no runs past their SLA\n"
    lines = []
    for b in found:
        state = f"{b.status} (still going)" if b.active else str(b.status)
        lines.append(f"{b.run_id}  {b.workflow}@{b.version}  {state}  "
                     f"{format_duration(b.elapsed)} / SLA {format_duration(b.sla)}  "
                     f"+{format_duration(b.over)} over")
    return "\n".join(lines) + "\n"
