"""Retention in the memory store (``Store.prune_runs``; the rules are ``store.prune``'s):
one call, no await inside, so the whole prune is one atomic step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .memory_claims import MemoryClaims
from .memory_journal import MemoryJournal
from .memory_tokens import MemoryTokens
from .outbox import MemoryOutbox
from .prune import FINAL, PruneCounts, prunable, takes_alerts
from .records import CachedResult, RunRecord


class MemoryState(Protocol):
    """What of the memory store a prune reads and deletes from (``MemoryStore``)."""

    _runs: dict[str, RunRecord]
    _rows: dict[str, Any]
    _outputs: dict[str, Any]
    _events: dict[str, Any]
    _fires: dict[tuple[str, str], dict[float, str]]
    _claims_made: MemoryClaims | None
    _cache: dict[tuple[str, str, str], CachedResult]
    _outbox: MemoryOutbox
    _journal: MemoryJournal
    _tokens: MemoryTokens
    _signals: dict[tuple[str, str], Any]


def prune_memory(store: MemoryState, cutoff: float, statuses: Sequence[str],
          workflow: str | None, dry_run: bool) -> PruneCounts:
    runs = store._runs
    roots = [r for r in runs.values()
             if r.parent_run_id is None and r.status in statuses
             and r.finished_at is not None and r.finished_at < cutoff
             and (workflow is None or r.workflow == workflow)]
    children: dict[str, list[str]] = {}
    retried: set[str] = set()
    for r in runs.values():
        if r.parent_run_id is not None:
            children.setdefault(r.parent_run_id, []).append(r.run_id)
        if r.retry_of is not None and r.status not in FINAL:
            retried.add(r.retry_of)
    index = {run_id: n for n, run_id in enumerate(runs)}
    tree: list[tuple[int, int, str, str]] = []
    for root in roots:
        stack = [root.run_id]
        while stack:
            run_id = stack.pop()
            tree.append((index[root.run_id], index[run_id], run_id, str(runs[run_id].status)))
            stack.extend(children.get(run_id, ()))
    going = set(prunable(tree, retried))
    doomed = [run_id for root, _, run_id, _ in tree if root in going]
    rows = _count(store, doomed)
    if not dry_run:
        for run_id in doomed:
            _forget(store, run_id)
    if takes_alerts(statuses):
        alerts = _alerts(store._outbox, cutoff, workflow)
        rows["notification_outbox"] += len(alerts)
        if not dry_run:
            for note in alerts:
                del store._outbox._rows[note]
    return PruneCounts(len(doomed), {t: n for t, n in rows.items() if n})


def _alerts(outbox: MemoryOutbox, cutoff: float, workflow: str | None) -> list[str]:
    """The alert rows that go (``prune.ALERTS``): no run, settled, before the cutoff."""
    return [key for key, row in outbox._rows.items()
            if row.run_id is None and row.state != "pending" and row.created_at < cutoff
            and (workflow is None or row.body.get("workflow") == workflow)]


def _count(store: MemoryState, doomed: list[str]) -> dict[str, int]:
    gone = set(doomed)
    return {
        "steps": sum(len(store._rows[r]) for r in doomed),
        "events": sum(len(store._events.get(r, ())) for r in doomed),
        "step_journal": sum(len(store._journal._runs.get(r, {})) for r in doomed),
        "run_events": sum(1 for run_id, _ in store._signals if run_id in gone),
        "run_tokens": sum(1 for r in doomed if r in store._tokens._runs),
        "step_tokens": sum(1 for run_id, _ in store._tokens._steps if run_id in gone),
        "notification_outbox": sum(1 for row in store._outbox._rows.values()
                                   if row.run_id in gone),
        "step_cache": sum(1 for c in store._cache.values() if c.run_id in gone),
        "schedule_fires": sum(1 for fires in store._fires.values()
                              for run_id in fires.values() if run_id in gone),
    }


def _forget(store: MemoryState, run_id: str) -> None:
    """Everything of one run (its schedule's latest fire time stays: ``last_fire``)."""
    for by_run in (store._runs, store._rows, store._outputs, store._events,
                   store._journal._runs, store._tokens._runs):
        by_run.pop(run_id, None)  # type: ignore[attr-defined]
    claims = store._claims_made
    if claims is not None:
        claims._tickets.pop(run_id, None)
        claims._inbox.pop(run_id, None)
    for key in [k for k in store._signals if k[0] == run_id]:
        del store._signals[key]
    for key in [k for k in store._tokens._steps if k[0] == run_id]:
        del store._tokens._steps[key]
    for note in [k for k, row in store._outbox._rows.items() if row.run_id == run_id]:
        del store._outbox._rows[note]
    for cached in [k for k, c in store._cache.items() if c.run_id == run_id]:
        del store._cache[cached]
    for fires in store._fires.values():
        for at in [t for t, r in fires.items() if r == run_id]:
            del fires[at]
