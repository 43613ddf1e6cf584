"""Writes the store refused for a value it cannot hold (``UnstorableValue``).

Everything an attempt produces is made storable when it is built (``jsoncheck``:
outputs checked, log records, notes and error details cleaned), so a refusal is a
value that slipped past those checks.  Writing the same values again would fail the
same way, forever: a worker's completions would wedge it (its leases heartbeated,
nothing stored), a run's loop would stop.  So a refused write is split instead:

- ``complete_split``: a worker's completions (``Store.complete_attempts``, one
  transaction) are split in halves until the refused outcome is alone; it is then
  stored as that attempt's failure, never retried, naming why (``unstorable_outcome``),
  and the other outcomes are stored as they were.
- ``cleaned_batch``: a run's batch (one transaction the run's consistency rests on: the
  changes a loop turn made, the outcomes it consumed, the tickets it dispatched) is
  not split across transactions; its JSON values are cleaned (``jsoncheck.storable``)
  and it is written once more, with a warning in the run's history saying what was
  cleaned.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

from ..core.jsoncheck import clean_text, storable
from ..core.model import JSON, JSONDict
from ..core.runstate import StepChange
from ..errors import StoreError, UnstorableValue
from ..store.base import InboxOutcome, RunChange, Store, Ticket, WriteBatch

_log = logging.getLogger("plait.worker")
UNSTORABLE = "UnstorableOutcome"  # the error type of an outcome the store refused

Completion = tuple[str, InboxOutcome]  # (lease token, outcome): what complete_attempts takes


def unstorable_outcome(outcome: InboxOutcome, refused: StoreError) -> InboxOutcome:
    """``outcome`` as a failure of its attempt, never retried, saying that and why it
    could not be stored (its notes kept as far as they can be stored)."""
    why = clean_text(str(refused))
    error: JSONDict = {
        "type": UNSTORABLE, "names": [UNSTORABLE], "retryable": False,
        "message": f"the outcome of attempt {outcome.attempt} ({outcome.kind}) could not "
                   f"be stored: {why}; it fails without retry"}
    logs = tuple(_storable_dict(note) for note in outcome.logs)
    return dataclasses.replace(outcome, kind="error", output=None, error=error, logs=logs)


async def complete_split(store: Store, worker: str,
                         results: Sequence[Completion]) -> list[bool | None]:
    """``store.complete_attempts(worker, results)``, split on UnstorableValue (module
    docstring).  Per outcome: True (stored in the inbox), False (its lease was lost:
    discarded), None (not stored: the store failed otherwise; try it again later)."""
    try:
        return list(await store.complete_attempts(worker, results))
    except UnstorableValue as exc:
        refused = exc
    except StoreError as exc:
        _log.warning("worker %s: storing %d outcomes failed (%s)", worker, len(results),
                     exc)
        return [None] * len(results)
    if len(results) > 1:
        half = len(results) // 2
        first = await complete_split(store, worker, results[:half])
        return first + await complete_split(store, worker, results[half:])
    token, outcome = results[0]
    _log.warning("worker %s: the outcome of attempt %d of step %r (run %s) could not be "
                 "stored (%s): it is stored as the attempt's failure", worker,
                 outcome.attempt, outcome.step_id, outcome.run_id, refused,
                 extra={"run_id": outcome.run_id, "step_id": outcome.step_id,
                        "worker": worker})
    try:
        return list(await store.complete_attempts(
            worker, [(token, unstorable_outcome(outcome, refused))]))
    except StoreError as exc:  # its values are plain text: the store itself failed
        _log.error("worker %s: storing the failure failed too (%s)", worker, exc)
        return [None]


def cleaned_batch(batch: WriteBatch, refused: UnstorableValue) -> WriteBatch:
    """``batch`` with every JSON value made storable (``jsoncheck.storable``) and a
    WARNING record in the run's history naming what the store refused and what was
    cleaned."""
    cleaned: set[str] = set()
    steps = [_cleaned_change(change, cleaned) for change in batch.steps]
    notes = [(step, _storable_dict(data, cleaned)) for step, data in batch.notes]
    run = batch.run
    if run is not None and run.output is not None:
        run = RunChange(source=run.source, target=run.target, at=run.at,
                        output=_storable(run.output, cleaned), error=run.error)
    dispatch = [_cleaned_ticket(ticket, cleaned) for ticket in batch.dispatch]
    what = "; ".join(sorted(cleaned)) or "nothing found to clean"
    notes.append((None, {"log": {
        "level": "WARNING", "attempt": None, "at": time.time(),
        "message": f"the store refused a value of this run's changes "
                   f"({clean_text(str(refused))}); they were stored cleaned: {what}"}}))
    return dataclasses.replace(batch, steps=steps, notes=notes, run=run, dispatch=dispatch)


def _storable(value: JSON, cleaned: set[str] | None = None) -> JSON:
    out, what = storable(value)
    if what is not None and cleaned is not None:
        cleaned.add(what)
    return out


def _storable_dict(value: JSONDict, cleaned: set[str] | None = None) -> JSONDict:
    out = _storable(value, cleaned)
    return out if isinstance(out, dict) else {"note": out}


def _cleaned_change(change: StepChange, cleaned: set[str]) -> StepChange:
    row = change.row
    output = _storable(row.output, cleaned)
    if output is row.output:
        return change
    return change._replace(row=dataclasses.replace(row, output=output))


def _cleaned_ticket(ticket: Ticket, cleaned: set[str]) -> Ticket:
    payload = _storable_dict(ticket.payload, cleaned)
    return ticket if payload is ticket.payload else dataclasses.replace(ticket,
                                                                        payload=payload)
