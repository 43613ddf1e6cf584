"""The ``retention`` setting (docs/retention.md): ``PLAIT_RETENTION=30d`` makes
``plait serve`` and every ``plait worker`` that runs the scheduler prune the runs that
finished longer ago than that, once per ``PLAIT_RETENTION_EVERY`` (default an hour)
across the whole cluster.

Once across the cluster: before pruning, a process claims the turn in the store with
a compare-and-set on a versioned record (``Store.get_breaker`` / ``put_breaker``, key
``RETENTION_KEY``), ``{"next_at": now + every}``.  Of processes that look at one
moment exactly one wins; the others see ``next_at`` in the future and wait for it.  A
process that dies while pruning leaves the turn taken until ``next_at``: the next
turn prunes what it left (a prune deletes whole runs per transaction, so nothing is
left half deleted)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..core.durations import format_duration, parse_duration
from ..errors import StoreError
from ..store.base import Store
from ..store.prune import PruneCounts

_log = logging.getLogger("plait.retention")

RETENTION_ENV = "PLAIT_RETENTION"
RETENTION_EVERY_ENV = "PLAIT_RETENTION_EVERY"
RETENTION_KEY = "plait:retention"  # the store record of whose turn it is
DEFAULT_EVERY_S = 3600.0


class RetentionSettingError(ValueError):
    """``PLAIT_RETENTION`` or ``PLAIT_RETENTION_EVERY`` has a bad value: ``variable``
    names it."""

    def __init__(self, variable: str, message: str) -> None:
        self.variable = variable
        super().__init__(f"{variable}: {message}")


@dataclass(frozen=True, slots=True)
class Retention:
    """Keep finished runs ``keep`` seconds; prune every ``every`` seconds."""

    keep: float
    every: float = DEFAULT_EVERY_S


def retention_from_environment(environ: Mapping[str, str] | None = None) -> Retention | None:
    """The retention setting (None: unset, nothing is pruned); RetentionSettingError
    naming the variable whose value is not a duration above zero."""
    env = os.environ if environ is None else environ
    text = env.get(RETENTION_ENV, "").strip()
    if not text:
        return None
    keep = _seconds(RETENTION_ENV, text)
    every_text = env.get(RETENTION_EVERY_ENV, "").strip()
    every = _seconds(RETENTION_EVERY_ENV, every_text) if every_text else DEFAULT_EVERY_S
    return Retention(keep=keep, every=every)


def _seconds(variable: str, text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise RetentionSettingError(variable, str(exc)) from None
    if seconds <= 0:
        raise RetentionSettingError(variable, f"must be more than zero, got {text!r}")
    return seconds


async def prune_turn(store: Store, retention: Retention,
                     now: float) -> tuple[PruneCounts | None, float]:
    """Take this turn if it is due and no other process took it: the counts pruned
    (None: not this process's turn) and when the next turn is due."""
    state, version = await store.get_breaker(RETENTION_KEY)
    due = state.get("next_at") if state is not None else None
    if isinstance(due, int | float) and due > now:
        return None, float(due)
    next_at = now + retention.every
    if not await store.put_breaker(RETENTION_KEY, {"next_at": next_at}, version):
        return None, next_at  # another process took it
    counts = await store.prune_runs(now - retention.keep)
    return counts, next_at


async def retention_loop(store: Store, retention: Retention, *,
                         clock: Callable[[], float] = time.time,
                         name: str = "plait") -> None:
    """Prune at each turn of the cluster until cancelled; a store error is logged and
    tried again at the next turn.  A turn that deleted something logs one line: what
    it deleted and how long the prune took (``name``: the worker's or ``plait serve``)."""
    while True:
        now = clock()
        started = time.monotonic()
        try:
            counts, next_at = await prune_turn(store, retention, now)
        except StoreError as exc:
            _log.warning("%s: retention: pruning failed (%s); trying again in %gs",
                         name, exc, retention.every)
            counts, next_at = None, now + retention.every
        if counts is not None and (counts.runs or counts.total_rows):
            took = time.monotonic() - started
            _log.info("%s: retention: pruned %d run(s) (%d rows) that finished more "
                      "than %s ago, in %.2fs", name, counts.runs, counts.total_rows,
                      format_duration(retention.keep), took, extra={"pruned_runs": counts.runs,
                                                   "pruned_rows": counts.total_rows,
                                                   "seconds": round(took, 3)})
        await asyncio.sleep(max(next_at - clock(), 0.0) + 0.01)
