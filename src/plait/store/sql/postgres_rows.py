"""A batch, a new run or a decision as the parameters of the PostgreSQL store's named
queries (JSON encoded once per value).  What PostgreSQL shares with SQLite (the batch
checks, JSON values, rows to records) is in ``rows``.

A batch becomes the one JSON document ``plait_write_batch`` takes (see
``migrations/postgres/0011_batch_document.sql``): one row per changed step
(``rows.collapse``), one per attempt key, one per event, in the memory store's order
(steps, attempts, run, notes), then one per key consumed, withdrawn and dispatched.
Outputs, payloads and notes are nested in it as strings of their JSON text.
Completions become the arrays of ``plait_complete_attempts``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import cache
from typing import Any

from ...core.jsoncheck import clean_text
from ...core.runstate import AttemptChange, StepChange
from ...core.states import RunStatus
from ...errors import StoreError, UnstorableValue
from ..base import (
    AttemptKey,
    InboxOutcome,
    RunRecord,
    WriteBatch,
    late_result_note,
    reaped_error,
)
from ..records import OUTCOME_KINDS
from .rows import (
    FINAL_RUN,
    TEXT,
    collapse,
    encode,
    fold_steps,
    folded_data,
    json_or_null,
    json_text,
)

Params = dict[str, Any]


def text(value: str) -> str:
    """Text as PostgreSQL can store it: lone surrogates become U+FFFD (as in SQLite),
    and so does NUL, which a PostgreSQL text value cannot hold (an error message may
    quote one from a bad value)."""
    value = clean_text(value)
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def optional_text(value: str | None) -> str | None:
    return None if value is None else text(value)


def shift(now: float | None) -> float | None:
    """How far the instant ``now`` (a reading of this process's clock, or one made up
    by a caller) is from this process's present: the database applies it to its own
    clock, so leases are judged on one clock whatever the hosts' clocks say."""
    return None if now is None else now - time.time()


def write_params(batch: WriteBatch) -> Params:
    """The ``write_batch`` parameter of a batch: the batch as one JSON document, in the
    shape ``plait_write_batch`` reads (migration 0011), its JSON values (outputs,
    payloads, notes) nested as their JSON text.  UnstorableValue: a value is not
    JSON."""
    document: dict[str, Any] = {"run_id": batch.run_id, "owner": batch.owner}
    try:
        if batch.steps:
            document["steps"] = _step_rows(batch)
        notes = [encode(data) for _, data in batch.notes]
    except (TypeError, ValueError) as exc:
        raise UnstorableValue(f"run {batch.run_id!r}: a value to store is not JSON "
                              f"({exc})") from exc
    if batch.attempts:
        document["attempts"] = _attempt_rows(batch.attempts, len(batch.steps))
    change = batch.run
    if change is not None:
        final = change.target in FINAL_RUN
        document["run"] = {
            "source": TEXT[change.source], "target": TEXT[change.target],
            "at": change.at, "final": final,
            "output": json_or_null(change.output, f"the output of run {batch.run_id!r}")
            if final else None,
            "error": optional_text(change.error) if final else None,
            "wake_at": change.wake_at if change.target is RunStatus.WAITING else None}
    document["events"] = _event_rows(batch, notes)
    document["count"] = len(batch.steps) + len(batch.attempts) + (change is not None) \
        + len(notes)
    if batch.claims:
        document.update(_claims_rows(batch))
    try:
        return {"batch": encode(document)}
    except ValueError as exc:  # a time or a priority that is NaN or infinite
        raise UnstorableValue(f"run {batch.run_id!r}: a value to store is not JSON "
                              f"({exc})") from exc


def _step_rows(batch: WriteBatch) -> list[dict[str, Any]]:
    rows = []
    for source, last in collapse(batch.steps):
        r = last.row
        rows.append({
            "step": last.step, "expected": TEXT[source], "status": TEXT[last.target],
            "attempts": r.attempts, "output": None if r.output is None else encode(r.output),
            "error": optional_text(r.error),
            "started_at": r.started_at, "finished_at": r.finished_at,
            "skip_reason": optional_text(r.skip_reason), "fallback_used": r.fallback_used,
            "next_attempt_at": r.next_attempt_at, "worker": optional_text(r.worker)})
    return rows


def _attempt_rows(attempts: list[AttemptChange], first_event: int) -> list[dict[str, Any]]:
    """One row per attempt key: started_at and worker from its first change, status and
    error from its last, finished_at as ``plait_write_batch`` expects it; ``event``:
    the position (from 1) of its first change's event, which follows the steps'."""
    keyed: dict[tuple[str, int, bool], list[Any]] = {}
    for n, a in enumerate(attempts, start=first_event + 1):
        key = (a.step, a.attempt, a.fallback)
        seen = keyed.get(key)
        if seen is None:
            keyed[key] = [a, a, n, 1]
        else:
            seen[1] = a
            seen[3] += 1
    rows = []
    for first, last, event, count in keyed.values():
        finished = last.at if count > 1 else (first.at if first.ended else None)
        rows.append({
            "step": first.step, "attempt": first.attempt, "fallback": first.fallback,
            "status": last.status, "started_at": first.at, "finished_at": finished,
            "error": optional_text(last.error), "worker": optional_text(first.worker),
            "event": event})
    return rows


def _event_rows(batch: WriteBatch, notes: list[str]) -> list[dict[str, Any]]:
    """The batch's history in the memory store's order: steps, attempts, the run's
    change, notes (only the keys an event of its kind has: absent ones are NULL), a
    step's changes folded into the row of its first attempt change
    (``rows.fold_steps``).  Then each row carries ``seq``, its last event's position
    among the batch's events (from 1), and ``write_params`` the number of events."""
    fold = fold_steps(batch)
    if not fold:
        rows: list[dict[str, Any]] = [
            {"at": ch.at, "kind": "step", "step": ch.step, "source": TEXT[ch.source],
             "target": TEXT[ch.target]} for ch in batch.steps]
        rows += [{"at": a.at, "kind": "attempt", "step": a.step, "target": a.status,
                  "attempt": a.attempt} for a in batch.attempts]
    else:
        rows = []
        parts: dict[str, list[tuple[int, StepChange]]] = {}
        seq = 0
        for ch in batch.steps:
            seq += 1
            if ch.step in fold:
                parts.setdefault(ch.step, []).append((seq, ch))
            else:
                rows.append({"at": ch.at, "kind": "step", "step": ch.step,
                             "source": TEXT[ch.source], "target": TEXT[ch.target],
                             "seq": seq})
        for a in batch.attempts:
            seq += 1
            row = {"at": a.at, "kind": "attempt", "step": a.step, "target": a.status,
                   "attempt": a.attempt, "seq": seq}
            held = parts.pop(a.step, None) if parts else None
            if held is not None:
                row["source"] = TEXT[held[0][1].source]
                row["data"] = folded_data(held, seq, a.at)
            rows.append(row)
    change = batch.run
    if change is not None:
        rows.append({"at": change.at, "kind": "run", "source": TEXT[change.source],
                     "target": TEXT[change.target]})
    noted = time.time()
    rows += [{"at": noted, "kind": "note", "step": step_id, "data": data}
             for (step_id, _), data in zip(batch.notes, notes, strict=True)]
    if fold:
        seq = len(batch.steps) + len(batch.attempts)
        for row in rows:
            if "seq" not in row:
                seq += 1
                row["seq"] = seq
    return rows


def run_params(run: RunRecord, step_ids: list[str]) -> Params:
    """The ``create_run`` parameters of a new run."""
    what = f"run {run.run_id!r}"
    return {"run_id": run.run_id, "workflow": run.workflow, "version": run.version,
            "fingerprint": run.fingerprint, "status": TEXT[run.status],
            "input": json_or_null(run.input, what), "output": json_or_null(run.output, what),
            "error": optional_text(run.error), "created_at": run.created_at,
            "started_at": run.started_at, "finished_at": run.finished_at,
            "retry_of": run.retry_of, "parent_run_id": run.parent_run_id, "sla": run.sla,
            "cancel_requested": run.cancel_requested, "owner": optional_text(run.owner),
            "heartbeat_at": run.heartbeat_at, "shift": shift(run.heartbeat_at),
            "step_ids": step_ids, "concurrency_key": optional_text(run.concurrency_key),
            "max_runs_per_key": run.max_runs_per_key}


# ------------------------------------------------------------------------- claims

def _keys(keys: Sequence[AttemptKey]) -> list[dict[str, Any]]:
    return [{"step": text(k[0]), "attempt": k[1], "fallback": k[2]} for k in keys]


def _claims_rows(batch: WriteBatch) -> dict[str, Any]:
    """The consumed, withdrawn and dispatched lists (StoreError: a ticket of another
    run)."""
    run_id = batch.run_id
    for ticket in batch.dispatch:
        if ticket.run_id != run_id:
            raise StoreError(f"a batch of run {run_id!r} dispatches a ticket of run "
                             f"{ticket.run_id!r}: a batch writes one run")
    return {"consumed": _keys(batch.consumed), "withdrawn": _keys(batch.withdrawn),
            "dispatch": [{"step": text(t.step_id), "attempt": t.attempt,
                          "fallback": t.fallback, "priority": t.priority,
                          "pool": optional_text(t.pool), "pool_limit": t.pool_limit,
                          "payload": json_text(t.payload, f"the payload of the ticket "
                                               f"of step {t.step_id!r} of run {run_id!r}"),
                          "rate_count": t.rate_count,
                          "rate_period": t.rate_period} for t in batch.dispatch]}


def complete_params(worker: str, results: Sequence[tuple[str, InboxOutcome]]) -> Params:
    """The ``complete_attempts`` parameters (StoreError, before anything is sent: an
    outcome of an unknown kind, or a value that is not JSON).  Each item carries the
    note its run gets if it is discarded, so the wording is ``late_result_note``'s."""
    worker = text(worker)
    names = ("run_ids", "steps", "attempts", "fallbacks", "tokens", "kinds", "outputs",
             "errors", "at", "notes", "logs")
    columns: list[list[Any]] = [[] for _ in names]
    for token, outcome in results:
        what = (f"the outcome of attempt {outcome.attempt} of step {outcome.step_id!r} "
                f"of run {outcome.run_id!r}")
        if outcome.kind not in OUTCOME_KINDS:
            raise StoreError(f"{what}: unknown kind {outcome.kind!r} (known: "
                             f"{', '.join(sorted(OUTCOME_KINDS))})")
        step = text(outcome.step_id)
        for column, value in zip(columns, (
                text(outcome.run_id), step, outcome.attempt, outcome.fallback, text(token),
                outcome.kind, json_or_null(outcome.output, f"{what}: its output"),
                json_or_null(outcome.error, f"{what}: its error"), outcome.at,
                encode(late_result_note(step, outcome.attempt, outcome.fallback, worker)),
                json_or_null(list(outcome.logs), f"{what}: its logs")
                if outcome.logs else None),
                strict=True):
            column.append(value)
    params: Params = dict(zip(names, columns, strict=True))
    params.update(worker=worker, noted=time.time())
    return params


# What plait_reap_expired puts in place of the holder, the step id and the attempt in
# reaped_error's JSON text: marks that the wording (and JSON) leaves as they are.
_REAP_MARKS = ("PLAIT_HOLDER_MARK_7f3e", "PLAIT_STEP_MARK_7f3e", "918273645")


@cache
def _reaped_error_template() -> str:
    holder, step, attempt = _REAP_MARKS
    template = encode(reaped_error(holder, step, int(attempt)))
    assert all(template.count(mark) == 1 for mark in _REAP_MARKS), template
    return template


def reap_params(limit: int) -> Params:
    """The ``reap_expired`` parameters: the limit, and ``reaped_error`` as a template."""
    return {"limit": max(limit, 0), "error": _reaped_error_template(),
            "marks": list(_REAP_MARKS)}
