"""Between the store's values and SQLite rows: a batch becomes the parameters of the
named queries (JSON encoded once per value), and fetched rows become records.

Conventions (see ``migrations/sqlite/0001_initial.sql``): JSON values are text, SQL
NULL meaning JSON null; statuses are their plain text; a run's rows carry its integer
key ``runs.id``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ...core.jsoncheck import clean_text
from ...core.model import JSON, JSONDict
from ...core.states import RUN_TRANSITIONS, STEP_TRANSITIONS, RunStatus, StepStatus
from ...errors import StoreError
from ..base import AttemptRecord, EventRecord, RunRecord, StepRecord, WorkflowRecord, WriteBatch

Row = tuple[Any, ...]
Note = tuple[float, str]  # when it was written, its JSON text

# one encoder, built once: json.dumps(value, **options) builds one per call
encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
decode = json.loads
# status -> its plain text: binding a str subclass costs sqlite3 an adapter lookup
TEXT: dict[str, str] = {s: s.value for s in (*StepStatus, *RunStatus)}
STEP_STATUS = {s.value: s for s in StepStatus}
RUN_STATUS = {s.value: s for s in RunStatus}
FINAL_RUN = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})


class Refused(Exception):
    """The batch does not apply to the stored state; the store then says why."""


def legal(batch: WriteBatch) -> bool:
    """Every change of the batch allowed by the transition tables (no I/O)."""
    for ch in batch.steps:
        if ch.target not in STEP_TRANSITIONS[ch.source]:
            return False
    change = batch.run
    return change is None or change.source == change.target \
        or change.target in RUN_TRANSITIONS[change.source]


def json_text(value: JSON, what: str) -> str:
    try:
        return encode(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON ({exc})") from exc


def json_or_null(value: JSON, what: str) -> str | None:
    return None if value is None else json_text(value, what)


def optional_text(text: str | None) -> str | None:
    """An error or reason as it can be stored: a lone surrogate (quoted from a bad
    value) cannot be encoded as UTF-8, so it becomes U+FFFD."""
    return text if text is None or text.isascii() else clean_text(text)


def step_updates(key: int, batch: WriteBatch) -> tuple[list[Row], list[Note]]:
    """The ``update_step`` parameters of a batch, and its notes, encoded once.

    Several changes of one step in a batch (queued -> running -> completed) become ONE
    update: the last row, expected to find the first change's source.  Changes that do
    not link up (a source that is not the step's previous target) raise Refused."""
    text = TEXT
    steps: list[Row] = []
    index: dict[str, int] = {}
    try:
        for ch in batch.steps:
            r = ch.row
            expected = text[ch.source]
            i = index.get(ch.step)
            if i is not None:
                if steps[i][0] != expected:
                    raise Refused
                expected = steps[i][12]
            row = (text[ch.target], r.attempts,
                   None if r.output is None else encode(r.output), optional_text(r.error),
                   r.started_at, r.finished_at, optional_text(r.skip_reason),
                   r.fallback_used, r.next_attempt_at, r.worker, key, ch.step, expected)
            if i is None:
                index[ch.step] = len(steps)
                steps.append(row)
            else:
                steps[i] = row
        notes = [(time.time(), encode(data)) for _, data in batch.notes]
    except (TypeError, ValueError) as exc:
        raise StoreError(f"run {batch.run_id!r}: a value to store is not JSON "
                         f"({exc})") from exc
    return steps, notes


def history(key: int, seq: int, batch: WriteBatch,
            notes: list[Note]) -> tuple[list[Row], list[Row]]:
    """The ``insert_event`` parameters of a batch, numbered after ``seq`` in the memory
    store's order (steps, attempts, run, notes), and the ``upsert_attempt`` ones."""
    text = TEXT
    events: list[Row] = []
    add = events.append
    for ch in batch.steps:
        seq += 1
        add((key, seq, ch.at, "step", ch.step, text[ch.source], text[ch.target], None,
             None))
    attempts: list[Row] = []
    for a in batch.attempts:
        seq += 1
        add((key, seq, a.at, "attempt", a.step, None, a.status, a.attempt, None))
        attempts.append((key, a.step, a.attempt, a.fallback, a.status, a.at,
                         a.at if a.ended else None, optional_text(a.error), a.worker, seq))
    change = batch.run
    if change is not None:
        seq += 1
        add((key, seq, change.at, "run", None, text[change.source], text[change.target],
             None, None))
    for (step_id, _), (at, data) in zip(batch.notes, notes, strict=True):
        seq += 1
        add((key, seq, at, "note", step_id, None, None, None, data))
    return events, attempts


def run_values(run: RunRecord) -> Row:
    """The ``insert_run`` parameters of a new run."""
    what = f"run {run.run_id!r}"
    return (run.run_id, run.workflow, run.version, run.fingerprint, TEXT[run.status],
            json_or_null(run.input, what), json_or_null(run.output, what),
            optional_text(run.error),
            run.created_at, run.started_at, run.finished_at, run.retry_of,
            run.parent_run_id, run.sla, run.cancel_requested, run.owner, run.heartbeat_at)


# ------------------------------------------------------------------- records


def workflow_record(row: Row) -> WorkflowRecord:
    return WorkflowRecord(name=row[0], version=row[1], fingerprint=row[2],
                          definition_json=row[3], created_at=row[4])


def run_record(r: Row) -> RunRecord:
    return RunRecord(run_id=r[0], workflow=r[1], version=r[2], fingerprint=r[3],
                     status=RUN_STATUS[r[4]],
                     input=None if r[5] is None else decode(r[5]),
                     output=None if r[6] is None else decode(r[6]), error=r[7],
                     created_at=r[8], started_at=r[9], finished_at=r[10], retry_of=r[11],
                     parent_run_id=r[12], sla=r[13], cancel_requested=bool(r[14]),
                     owner=r[15], heartbeat_at=r[16])


def step_records(run_id: str, rows: Any) -> list[StepRecord]:
    status = STEP_STATUS
    return [StepRecord(run_id=run_id, step_id=r[0], status=status[r[1]], attempts=r[2],
                       output=None if r[3] is None else decode(r[3]), error=r[4],
                       started_at=r[5], finished_at=r[6], skip_reason=r[7],
                       fallback_used=bool(r[8]), next_attempt_at=r[9], worker=r[10])
            for r in rows]


def attempt_records(run_id: str, rows: Any) -> list[AttemptRecord]:
    return [AttemptRecord(run_id=run_id, step_id=r[0], attempt=r[1], fallback=bool(r[2]),
                          status=r[3], started_at=r[4], finished_at=r[5], error=r[6],
                          worker=r[7])
            for r in rows]


def event_record(run_id: str, r: Row) -> EventRecord:
    seq, at, kind, step_id, source, target, attempt, data = r
    if kind == "attempt":
        body: JSONDict = {"attempt": attempt, "status": target}
    elif kind == "note":
        body = decode(data)
    else:
        body = {"from": source, "to": target}
    return EventRecord(run_id=run_id, seq=seq, at=at, kind=kind, step_id=step_id,
                       data=body)
