"""A batch as the parameters of the SQLite store's named queries (JSON encoded once per
value).  What SQLite shares with PostgreSQL (the batch checks, JSON values, rows to
records) is in ``rows``.

Conventions (see ``migrations/sqlite/0001_initial.sql``): JSON values are text, SQL
NULL meaning JSON null; statuses are their plain text; a run's rows carry its integer
key ``runs.id``.
"""

from __future__ import annotations

import time

from ...core.runstate import StepChange
from ...errors import UnstorableValue
from ..base import RunRecord, WriteBatch
from .rows import (
    TEXT,
    Row,
    collapse,
    encode,
    fold_steps,
    folded_data,
    json_or_null,
    optional_text,
)

Note = tuple[float, str]  # when it was written, its JSON text


def step_updates(key: int, batch: WriteBatch) -> tuple[list[Row], list[Note]]:
    """The ``update_step`` parameters of a batch, and its notes, encoded once.

    Several changes of one step in a batch (queued -> running -> completed) become ONE
    update: the last row, expected to find the first change's source (``collapse``)."""
    text = TEXT
    try:
        steps: list[Row] = []
        for source, last in collapse(batch.steps):
            r = last.row
            steps.append((text[last.target], r.attempts,
                          None if r.output is None else encode(r.output),
                          optional_text(r.error), r.started_at, r.finished_at,
                          optional_text(r.skip_reason), r.fallback_used, r.next_attempt_at,
                          r.worker, key, last.step, text[source]))
        notes = [(time.time(), encode(data)) for _, data in batch.notes]
    except (TypeError, ValueError) as exc:
        raise UnstorableValue(f"run {batch.run_id!r}: a value to store is not JSON "
                         f"({exc})") from exc
    return steps, notes


def history(key: int, seq: int, batch: WriteBatch,
            notes: list[Note]) -> tuple[list[Row], list[Row]]:
    """The ``insert_event`` parameters of a batch, numbered after ``seq`` in the memory
    store's order (steps, attempts, run, notes), a step's changes folded into the row
    of its first attempt change (``rows.fold_steps``), and the ``upsert_attempt`` ones."""
    text = TEXT
    events: list[Row] = []
    add = events.append
    fold = fold_steps(batch)
    parts: dict[str, list[tuple[int, StepChange]]] = {}
    for ch in batch.steps:
        seq += 1
        if ch.step in fold:
            parts.setdefault(ch.step, []).append((seq, ch))
        else:
            add((key, seq, ch.at, "step", ch.step, text[ch.source], text[ch.target], None,
                 None))
    attempts: list[Row] = []
    for a in batch.attempts:
        seq += 1
        held = parts.pop(a.step, None) if parts else None
        if held is None:
            add((key, seq, a.at, "attempt", a.step, None, a.status, a.attempt, None))
        else:
            add((key, seq, a.at, "attempt", a.step, text[held[0][1].source], a.status,
                 a.attempt, folded_data(held, seq, a.at)))
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
            run.parent_run_id, run.sla, run.cancel_requested, run.owner, run.heartbeat_at,
            optional_text(run.concurrency_key), run.max_runs_per_key)
