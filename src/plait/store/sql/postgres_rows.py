"""A batch, a new run or a decision as the parameters of the PostgreSQL store's named
queries (JSON encoded once per value).  What PostgreSQL shares with SQLite (the batch
checks, JSON values, rows to records) is in ``rows``.

A batch becomes the parallel arrays ``plait_write_batch`` takes (see
``migrations/postgres/0001_initial.sql`` and ``0003_attempt_tickets.sql``): one row per
changed step (``rows.collapse``), one per attempt key, one per event, in the memory
store's order (steps, attempts, run, notes), then one per key consumed, withdrawn and
dispatched.  Completions become the arrays of ``plait_complete_attempts``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import cache
from typing import Any

from ...core.jsoncheck import clean_text
from ...core.runstate import AttemptChange
from ...errors import StoreError, UnstorableValue
from ..base import (
    OUTCOME_KINDS,
    AttemptKey,
    InboxOutcome,
    RunRecord,
    WriteBatch,
    late_result_note,
    reaped_error,
)
from .rows import FINAL_RUN, TEXT, collapse, encode, json_or_null, json_text

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
    """The ``write_batch`` parameters of a batch (StoreError: a value is not JSON)."""
    try:
        params = _step_params(batch)
        notes = [encode(data) for _, data in batch.notes]
    except (TypeError, ValueError) as exc:
        raise UnstorableValue(f"run {batch.run_id!r}: a value to store is not JSON "
                         f"({exc})") from exc
    params.update(_event_params(batch, notes))
    params.update(_attempt_params(batch.attempts, len(batch.steps)))
    change = batch.run
    if change is None:
        params.update(run_source=None, run_target=None, run_at=None, run_final=False,
                      run_output=None, run_error=None)
    else:
        final = change.target in FINAL_RUN
        params.update(run_source=TEXT[change.source], run_target=TEXT[change.target],
                      run_at=change.at, run_final=final,
                      run_output=json_or_null(change.output,
                                              f"the output of run {batch.run_id!r}")
                      if final else None,
                      run_error=optional_text(change.error) if final else None)
    params["run_id"] = batch.run_id
    params["owner"] = batch.owner
    if batch.claims:
        params.update(_claims_params(batch))
    else:
        params.update(_NO_CLAIMS)
    return params


def _step_params(batch: WriteBatch) -> Params:
    names = ("steps", "expected", "status", "attempts", "output", "error", "started_at",
             "finished_at", "skip_reason", "fallback_used", "next_attempt_at", "worker")
    columns: list[list[Any]] = [[] for _ in names]
    for source, last in collapse(batch.steps):
        r = last.row
        for column, value in zip(columns, (
                last.step, TEXT[source], TEXT[last.target], r.attempts,
                None if r.output is None else encode(r.output), optional_text(r.error),
                r.started_at, r.finished_at, optional_text(r.skip_reason), r.fallback_used,
                r.next_attempt_at, optional_text(r.worker)), strict=True):
            column.append(value)
    return dict(zip(names, columns, strict=True))


def _attempt_params(attempts: list[AttemptChange], first_event: int) -> Params:
    """One row per attempt key: started_at and worker from its first change, status and
    error from its last, finished_at as ``plait_write_batch`` expects it; ``a_event``:
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
    names = ("a_step", "a_attempt", "a_fallback", "a_status", "a_started_at",
             "a_finished_at", "a_error", "a_worker", "a_event")
    columns: list[list[Any]] = [[] for _ in names]
    for first, last, event, count in keyed.values():
        finished = last.at if count > 1 else (first.at if first.ended else None)
        for column, value in zip(columns, (
                first.step, first.attempt, first.fallback, last.status, first.at,
                finished, optional_text(last.error), optional_text(first.worker), event),
                strict=True):
            column.append(value)
    return dict(zip(names, columns, strict=True))


def _event_params(batch: WriteBatch, notes: list[str]) -> Params:
    at: list[float] = []
    kind: list[str] = []
    step: list[str | None] = []
    source: list[str | None] = []
    target: list[str | None] = []
    attempt: list[int | None] = []
    data: list[str | None] = []

    def add(when: float, what: str, step_id: str | None, before: str | None,
            after: str | None, number: int | None, body: str | None) -> None:
        at.append(when)
        kind.append(what)
        step.append(step_id)
        source.append(before)
        target.append(after)
        attempt.append(number)
        data.append(body)

    for ch in batch.steps:
        add(ch.at, "step", ch.step, TEXT[ch.source], TEXT[ch.target], None, None)
    for a in batch.attempts:
        add(a.at, "attempt", a.step, None, a.status, a.attempt, None)
    change = batch.run
    if change is not None:
        add(change.at, "run", None, TEXT[change.source], TEXT[change.target], None, None)
    noted = time.time()
    for (step_id, _), body in zip(batch.notes, notes, strict=True):
        add(noted, "note", step_id, None, None, None, body)
    return {"e_at": at, "e_kind": kind, "e_step": step, "e_source": source,
            "e_target": target, "e_attempt": attempt, "e_data": data}


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

_NO_CLAIMS: Params = {name: [] for name in (
    "c_step", "c_attempt", "c_fallback", "w_step", "w_attempt", "w_fallback", "t_step",
    "t_attempt", "t_fallback", "t_priority", "t_pool", "t_pool_limit", "t_payload",
    "t_rate_count", "t_rate_period")}


def _keys(prefix: str, keys: Sequence[AttemptKey]) -> Params:
    return {f"{prefix}_step": [text(k[0]) for k in keys],
            f"{prefix}_attempt": [k[1] for k in keys],
            f"{prefix}_fallback": [k[2] for k in keys]}


def _claims_params(batch: WriteBatch) -> Params:
    """The consumed, withdrawn and dispatched arrays (StoreError: a ticket of another
    run, or a payload that is not JSON)."""
    run_id = batch.run_id
    params = {**_keys("c", batch.consumed), **_keys("w", batch.withdrawn)}
    tickets = batch.dispatch
    for ticket in tickets:
        if ticket.run_id != run_id:
            raise StoreError(f"a batch of run {run_id!r} dispatches a ticket of run "
                             f"{ticket.run_id!r}: a batch writes one run")
    params.update(_keys("t", [t.key for t in tickets]))
    params.update(
        t_priority=[t.priority for t in tickets],
        t_pool=[optional_text(t.pool) for t in tickets],
        t_pool_limit=[t.pool_limit for t in tickets],
        t_payload=[json_text(t.payload, f"the payload of the ticket of step "
                                        f"{t.step_id!r} of run {run_id!r}")
                   for t in tickets],
        t_rate_count=[t.rate_count for t in tickets],
        t_rate_period=[t.rate_period for t in tickets])
    return params


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
