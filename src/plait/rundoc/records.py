"""The run document: what ``plait show --json`` prints and ``GET /api/runs/{id}``
serves of a stored run (the run object of ``plait run --json`` and what its history
adds), built from the store's records.  JSON only: the CLI and the server render it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.child_ids import child_run_id
from ..core.model import JSON, JSONDict
from ..core.timestamps import iso
from ..errors import RunNotFound
from ..runtime.results import RunResult
from ..steps.traits import traits
from ..store.base import AttemptRecord, EventRecord, RunRecord, StepRecord, Store
from .notes import waits_of


def duration(run: RunRecord) -> float | None:
    """Seconds from start to finish of a run that ended (None otherwise)."""
    if run.started_at is None or run.finished_at is None:
        return None
    return round(run.finished_at - run.started_at, 6)


def show_json(run: RunRecord, steps: Sequence[StepRecord],
              attempts: Sequence[AttemptRecord],
              logs: Sequence[LogRecord] = ()) -> JSONDict:
    """The run object of ``plait run --json`` (docs/cli.md) plus ``retry_of``,
    ``parent_run_id``, ``fingerprint``, ``input``, ``created_at``, ``started_at``,
    ``finished_at``, ``wake_at`` (when a ``waiting`` run continues by itself, else
    null), ``attempts`` (in start order) and ``logs`` (the records steps logged through
    ``ctx.logger``, in order)."""
    value = RunResult.from_records(run, list(steps)).to_json()
    parked = parked_steps(steps)
    value.update({"retry_of": run.retry_of, "parent_run_id": run.parent_run_id,
                  "fingerprint": run.fingerprint, "input": run.input,
                  "created_at": iso(run.created_at), "started_at": iso(run.started_at),
                  "finished_at": iso(run.finished_at), "wake_at": iso(run.wake_at),
                  "attempts": [attempt_json(a, parked) for a in attempts],
                  "logs": [log.to_json() for log in logs]})
    return value


def add_child_runs(value: JSONDict, children: Mapping[str, Sequence[RunRecord]]) -> None:
    """``plait show --json``: the entry of a `workflow` or `loop` step that started a
    child run gains ``"child_run_id"`` (its child; a loop's latest iteration) and
    ``"child_run_ids"`` (every child, in order: a loop's iterations)."""
    steps = value.get("steps")
    if not isinstance(steps, dict):
        return
    for step_id, runs in children.items():
        entry = steps.get(step_id)
        if isinstance(entry, dict) and runs:
            entry["child_run_id"] = runs[-1].run_id
            entry["child_run_ids"] = [r.run_id for r in runs]


def add_waiting(value: JSONDict, events: Sequence[EventRecord]) -> None:
    """``plait show --json`` and the API's run document: every step entry gains
    ``"waiting"``, what the step waits for while it is ``waiting`` (else null)."""
    steps = value.get("steps")
    if not isinstance(steps, dict):
        return
    waits = waits_of({sid: e.get("status") for sid, e in steps.items()
                      if isinstance(e, dict)}, events)
    for step_id, entry in steps.items():
        if isinstance(entry, dict):
            entry["waiting"] = waits.get(step_id)


def parked_steps(steps: Sequence[StepRecord]) -> frozenset[str]:
    """The steps that wait for something outside the run (a person): ``waiting`` steps
    but map steps, which are stored ``waiting`` while their items run."""
    maps = {s.step_id.rpartition("[")[0] for s in steps if s.step_id.endswith("]")}
    return frozenset(s.step_id for s in steps
                     if s.status == "waiting" and s.step_id not in maps)


def attempt_status(a: AttemptRecord, parked: frozenset[str] = frozenset()) -> str:
    """An attempt's status as shown: the open attempt of a parked step (an approval
    step's) is ``waiting``, as its step is, not ``running``."""
    return "waiting" if a.finished_at is None and a.step_id in parked else a.status


def attempt_json(a: AttemptRecord, parked: frozenset[str] = frozenset()) -> JSONDict:
    took = None if a.finished_at is None else round(a.finished_at - a.started_at, 6)
    return {"step": a.step_id, "attempt": a.attempt, "fallback": a.fallback,
            "status": attempt_status(a, parked), "started_at": iso(a.started_at),
            "finished_at": iso(a.finished_at), "duration_s": took, "worker": a.worker,
            "error": a.error}


@dataclass(frozen=True, slots=True, kw_only=True)
class LogRecord:
    """One record a step logged through ``ctx.logger`` (stored redacted, as a history
    note ``{"log": {...}}``)."""

    step: str | None
    attempt: int | None
    level: str
    message: str
    at: float

    @classmethod
    def from_events(cls, events: Sequence[EventRecord]) -> list[LogRecord]:
        out = []
        for event in events:
            log = event.data.get("log") if event.kind == "note" else None
            if not isinstance(log, dict):
                continue
            attempt, at = log.get("attempt"), log.get("at")
            out.append(cls(step=event.step_id,
                           attempt=attempt if isinstance(attempt, int) else None,
                           level=str(log.get("level", "INFO")),
                           message=str(log.get("message", "")),
                           at=at if isinstance(at, int | float) else event.at))
        return out

    def to_json(self) -> JSONDict:
        return {"step": self.step, "attempt": self.attempt, "level": self.level,
                "message": self.message, "at": iso(self.at)}


async def child_runs(store: Store, run: RunRecord,
                     definition: JSON) -> dict[str, list[RunRecord]]:
    """The child runs each step of ``run`` (whose definition is ``definition``: None
    when it is not stored) started (a type with the ``child_runs`` trait:
    ``workflow``, ``loop``), in order (their ids are derived from the run, the step
    and the iteration)."""
    steps = definition.get("steps") if isinstance(definition, dict) else None
    found: dict[str, list[RunRecord]] = {}
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict) or (count := traits(step.get("type")).child_runs) is None:
            continue
        step_id = str(step.get("id"))
        for key in range(count(step)):
            try:
                child = await store.get_run(child_run_id(run.run_id, step_id, str(key)))
            except RunNotFound:
                break
            found.setdefault(step_id, []).append(child)
    return found
