"""What the two SQL backends (SQLite and PostgreSQL) share between the store's values and
their rows: JSON encoded once per value, the checks a batch must pass, why a refused
batch was refused, and fetched rows turned into records.

Both backends store JSON values as their exact text (SQL NULL meaning JSON null),
statuses as their plain text, times as float seconds since the epoch, and select a
record's columns in the same order, so one set of row readers serves both.  Each
backend's own module (``sqlite_rows``, ``postgres_rows``) turns a batch into the
parameters of its statements.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...core.jsoncheck import clean_text
from ...core.model import JSON, JSONDict
from ...core.runstate import StepChange
from ...core.states import (
    RUN_TRANSITIONS,
    STEP_TRANSITIONS,
    RunStatus,
    StepStatus,
    check_run_transition,
    check_step_transition,
)
from ...errors import StaleWriteError, StoreError, UnstorableValue
from ..base import AttemptRecord, EventRecord, RunRecord, StepRecord, WorkflowRecord, WriteBatch

Row = tuple[Any, ...]

# one encoder, built once: json.dumps(value, **options) builds one per call
encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
decode = json.loads
# status -> its plain text: binding a str subclass costs sqlite3 an adapter lookup
TEXT: dict[str, str] = {s: s.value for s in (*StepStatus, *RunStatus)}
STEP_STATUS = {s.value: s for s in StepStatus}
RUN_STATUS = {s.value: s for s in RunStatus}
FINAL_RUN = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # hyphenated UUIDs (36 characters) included
# a workflow name: an id, then `.STEP` per level for a definition written at run time
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}(?:\.[A-Za-z0-9_-]{1,64}){0,64}")


class Refused(Exception):
    """The batch does not apply to the stored state; the store then says why
    (``why_refused``)."""


# ----------------------------------------------------------------- ids


def valid_id(value: object) -> bool:
    """Run ids, workflow names and step ids: 1-64 of ``[A-Za-z0-9_-]`` (UUIDs too)."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def valid_name(value: object) -> bool:
    """Workflow names: an id, or ids joined by '.' (``planner.execute``: the name a
    definition written at run time is stored under)."""
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def check_name(value: str) -> None:
    if not valid_name(value):
        raise StoreError(f"invalid workflow name {value!r}: 1 to 64 letters, digits, '_' "
                         f"or '-', or such names joined by '.'")


def check_id(kind: str, value: str | None) -> None:
    if value is not None and not valid_id(value):
        raise StoreError(f"invalid {kind} {value!r}: an id is 1 to 64 letters, digits, "
                         f"'_' or '-'")


# ----------------------------------------------------------------- values


def json_text(value: JSON, what: str) -> str:
    try:
        return encode(value)
    except (TypeError, ValueError) as exc:
        raise UnstorableValue(f"{what} is not JSON ({exc})") from exc


def json_or_null(value: JSON, what: str) -> str | None:
    return None if value is None else json_text(value, what)


def optional_text(text: str | None) -> str | None:
    """An error or reason as it can be stored: a lone surrogate (quoted from a bad
    value) cannot be encoded as UTF-8, so it becomes U+FFFD."""
    return text if text is None or text.isascii() else clean_text(text)


# ----------------------------------------------------------------- batches


def legal(batch: WriteBatch) -> bool:
    """Every change of the batch allowed by the transition tables (no I/O)."""
    for ch in batch.steps:
        if ch.target not in STEP_TRANSITIONS[ch.source]:
            return False
    change = batch.run
    return change is None or change.source == change.target \
        or change.target in RUN_TRANSITIONS[change.source]


def collapse(changes: Sequence[StepChange]) -> Iterable[tuple[StepStatus, StepChange]]:
    """Each step's changes in a batch as ONE row write: (the status the step must still
    have, which is its first change's source; its last change, which carries its row),
    in the order the steps first appear.  Changes of a step that do not link up (a
    source that is not the previous change's target) raise Refused."""
    found: dict[str, list[Any]] = {}
    for ch in changes:
        seen = found.get(ch.step)
        if seen is None:
            found[ch.step] = [ch.source, ch]
        else:
            if seen[1].target != ch.source:
                raise Refused
            seen[1] = ch
    return found.values()  # type: ignore[return-value]


def why_refused(batch: WriteBatch, step_status: Callable[[str], str | None],
            run_status: Callable[[], str]) -> StoreError:
    """Why ``batch`` is refused: the memory store's checks, in its order, against the
    stored state (``step_status(step)``: None for a step the run does not have).  When
    every check passes, the state changed between the refusal and this reading."""
    run_id = batch.run_id
    try:
        expected: dict[str, str] = {}
        for ch in batch.steps:
            current = expected.get(ch.step)
            if current is None:
                current = step_status(ch.step)
                if current is None:
                    return StoreError(f"run {run_id!r} has no step {ch.step!r}")
            if current != ch.source:
                return StaleWriteError(f"step {ch.step!r} of run {run_id!r} is "
                                       f"{current}, not {ch.source}")
            if ch.target not in STEP_TRANSITIONS[ch.source]:
                check_step_transition(ch.step, ch.source, ch.target)
            expected[ch.step] = ch.target
        change = batch.run
        if change is not None:
            stored = run_status()
            if stored != change.source:
                return StaleWriteError(f"run {run_id!r} is {stored}, not {change.source}")
            check_run_transition(run_id, change.source, change.target)
    except StoreError as exc:  # the TransitionError of a check above
        return exc
    return StaleWriteError(f"run {run_id!r} changed while this batch was written; "
                           f"read it again")


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
                     owner=r[15], heartbeat_at=r[16], concurrency_key=r[17],
                     max_runs_per_key=r[18], wake_at=r[19])


def step_records(run_id: str, rows: Iterable[Row]) -> list[StepRecord]:
    status = STEP_STATUS
    return [StepRecord(run_id=run_id, step_id=r[0], status=status[r[1]], attempts=r[2],
                       output=None if r[3] is None else decode(r[3]), error=r[4],
                       started_at=r[5], finished_at=r[6], skip_reason=r[7],
                       fallback_used=bool(r[8]), next_attempt_at=r[9], worker=r[10])
            for r in rows]


def attempt_records(run_id: str, rows: Iterable[Row]) -> list[AttemptRecord]:
    return [AttemptRecord(run_id=run_id, step_id=r[0], attempt=r[1], fallback=bool(r[2]),
                          status=r[3], started_at=r[4], finished_at=r[5], error=r[6],
                          worker=r[7])
            for r in rows]


# ------------------------------------------------------------------- history rows
#
# A step's changes in a batch and its attempt's first change in the same batch are
# ONE row of ``events`` (the step moving queued -> running with its attempt starting;
# the attempt ending with the step completing): a row of kind ``attempt`` whose
# ``source`` is not NULL (a plain attempt row's is) carries the step's changes in
# ``data`` as ``[[back, target], ...]`` (``[back, target, at]`` when ``at`` is not the
# attempt's; ``back``: how far the change's seq is before the row's), the first change
# moving from ``source``.  The row takes the attempt's
# seq, which is the largest of its parts (a batch numbers its step changes before its
# attempts), so ``seq > after`` still finds every row holding an event after ``after``
# and the run's largest seq is still its latest event's.  Readers get every event back
# with its own seq (``event_records``): nothing else changes.  Rows written before
# (one per event) read as they did.


def fold_steps(batch: WriteBatch) -> dict[str, int]:
    """The steps whose changes in ``batch`` go in the row of one of its attempt
    changes: step -> the index of that step's first attempt change."""
    found: dict[str, int] = {}
    if batch.steps:
        for n, a in enumerate(batch.attempts):
            if a.step not in found:
                found[a.step] = n
    return found


def folded_data(parts: list[tuple[int, StepChange]], seq: int, at: float) -> str:
    """The ``data`` of the row (``seq``, ``at``) of folded step changes (each with its
    seq): each ``[back, target]`` or, when its time is not the row's,
    ``[back, target, at]``; ``back``: how far its seq is before ``seq``."""
    return encode([[seq - n, TEXT[ch.target]] if ch.at == at
                   else [seq - n, TEXT[ch.target], ch.at] for n, ch in parts])


def event_records(run_id: str, found: Iterable[Row], after: int = 0) -> list[EventRecord]:
    """The events of rows read in seq order (``seq > after``), folded rows given back
    as the events they hold (those after ``after``), all in seq order."""
    out: list[EventRecord] = []
    add = out.append
    folded = False
    for r in found:
        seq, at, kind, step_id, source, target, attempt, data = r
        if kind == "attempt":
            if source is not None:
                folded = True
                for part in decode(data):
                    if seq - part[0] > after:
                        add(EventRecord(run_id=run_id, seq=seq - part[0],
                                        at=part[2] if len(part) > 2 else at, kind="step",
                                        step_id=step_id,
                                        data={"from": source, "to": part[1]}))
                    source = part[1]
            body: JSONDict = {"attempt": attempt, "status": target}
        elif kind == "note":
            body = decode(data)
        else:
            body = {"from": source, "to": target}
        add(EventRecord(run_id=run_id, seq=seq, at=at, kind=kind, step_id=step_id,
                        data=body))
    if folded:
        out.sort(key=_seq)
    return out


def _seq(event: EventRecord) -> int:
    return event.seq
