"""Retention (``Store.prune_runs``; docs/retention.md): what deleting finished runs
counts and which runs may go.

A run goes with everything that belongs to it: its steps, attempts, history, tickets
and inbox outcomes, journal, events sent to it, token counts, notifications (the outbox),
the step-cache entries it created and its schedule fire, and with its child runs (a
child goes with its parent, never alone).  Alert notifications have no run (an outbox
row whose ``run_id`` is NULL): a prune that takes every final status deletes those
settled (sent or given up) before the cutoff, of ``workflow`` when given
(``ALERTS``); one still pending stays until it is sent or given up.

A tree of runs goes whole, in one transaction, or not at all; it stays while any run
in it is unfinished, or while a retry of any run in it (``retry_of``) is unfinished.
Deleting a schedule's fire moves the schedule's first sighting up to that fire's
time, so where the schedule stands (``last_fire``) never moves back and nothing is
fired again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..core.states import FINAL_RUN_STATES
from ..errors import StoreError

FINAL: tuple[str, ...] = tuple(sorted(str(s) for s in FINAL_RUN_STATES))
BATCH = 500  # root runs looked at per transaction
# after each batch a prune leaves the database to the workers for this many times as
# long as the batch took (1.0: half the time at most is the prune's), so that deleting
# a backlog of runs slows the runs being run by little (benchmarks/MONTHS.md)
YIELD_RATIO = 1.0

# Every table holding rows of a run, with the column naming it: ``run`` holds the
# run's row id, ``run_id`` its id.  Deleted in this order, the run's row last.
RUN_TABLES: tuple[tuple[str, str], ...] = (
    ("steps", "run"), ("attempts", "run"), ("events", "run"), ("tickets", "run"),
    ("outcomes", "run"), ("step_journal", "run"), ("run_events", "run"),
    ("run_tokens", "run"), ("step_tokens", "run"), ("notification_outbox", "run_id"),
    ("step_cache", "run_id"),
)


@dataclass(frozen=True, slots=True)
class PruneCounts:
    """What a prune deleted (or, dry, would delete): runs, and rows per table (the
    runs' own rows counted as ``runs``)."""

    runs: int = 0
    rows: Mapping[str, int] = field(default_factory=dict)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def plus(self, other: PruneCounts) -> PruneCounts:
        rows = dict(self.rows)
        for table, n in other.rows.items():
            rows[table] = rows.get(table, 0) + n
        return PruneCounts(self.runs + other.runs, {t: n for t, n in rows.items() if n})


def final_statuses(statuses: Iterable[str] | None) -> tuple[str, ...]:
    """The statuses a prune takes (all final ones when None); StoreError naming one
    that is not final."""
    if statuses is None:
        return FINAL
    chosen = tuple(dict.fromkeys(str(s) for s in statuses))
    for status in chosen:
        if status not in FINAL:
            raise StoreError(f"cannot prune runs with status {status!r}: only finished "
                             f"runs are pruned ({', '.join(FINAL)})")
    if not chosen:
        raise StoreError("no status to prune given")
    return chosen


def takes_alerts(statuses: Sequence[str]) -> bool:
    """Whether a prune of runs with ``statuses`` (checked) deletes old alert rows: only
    one of every final status (``--status`` narrows the prune to runs)."""
    return set(statuses) == set(FINAL)


# The alert rows that go (an alert has no run; see the module docstring), per dialect;
# found by the index notification_outbox_alerts (0017 on SQLite, 0019 on PostgreSQL).
ALERTS = {
    "sqlite": "FROM notification_outbox WHERE run_id IS NULL AND state <> 'pending'"
              " AND created_at < ? AND (? IS NULL OR json_extract(body, '$.workflow') = ?)",
    "postgres": "FROM notification_outbox WHERE run_id IS NULL AND state <> 'pending'"
                " AND created_at < %(cutoff)s AND (%(workflow)s::text IS NULL"
                " OR body::jsonb ->> 'workflow' = %(workflow)s::text)",
}


def prunable(tree: list[tuple[int, int, str, str]], retried: set[str]) -> list[int]:
    """The roots that may go, given their trees (rows of ``(root, row id, run id,
    status)``) and the run ids that have an unfinished retry."""
    blocked = {root for root, _, run_id, status in tree
               if status not in FINAL or run_id in retried}
    return sorted({root for root, *_ in tree} - blocked)


Cursor = tuple[float, int]  # (finished_at, row id) of the last root looked at
START: Cursor = (float("-inf"), 0)
Batch = Callable[[Cursor], Awaitable[tuple[PruneCounts, "Cursor | None"]]]


async def in_batches(batch: Batch, yield_ratio: float = YIELD_RATIO) -> PruneCounts:
    """Run ``batch`` (one transaction each) from the oldest root on until it says done,
    waiting ``yield_ratio`` times as long as each batch took before the next; the
    counts added up."""
    total, after = PruneCounts(), START
    while True:
        began = time.monotonic()
        counts, next_after = await batch(after)
        total = total.plus(counts)
        if next_after is None:
            return total
        after = next_after
        if yield_ratio > 0:
            await asyncio.sleep((time.monotonic() - began) * yield_ratio)
