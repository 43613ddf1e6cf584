"""The items of a run's map steps.

A map step's attempt renders its items; the step then waits, holding no slot, while
its items run as rows of their own (``ID[INDEX]``, after every step of the
definition), at most the map's ``concurrency`` at once, released in order.  The map
completes with its items' outputs in item order once all ended, or fails naming the
first item that failed (its unstarted items cancelled).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import OutputError
from .mapping import item_id, item_step, map_concurrency
from .model import JSON
from .rows import MapItems, StepRuntime
from .runrows import CANCELLED, COMPLETED, FAILED, PENDING, QUEUED, RUNNING, WAITING, RunRows
from .states import FINAL_STEP_STATES


class MapRows(RunRows):
    """A run's rows with the items of its map steps (see the module docstring)."""

    __slots__ = ()

    def _restore_items(self, i: int, rows: Mapping[str, StepRuntime]) -> int:
        """The stored item rows of map step ``i`` (none if it never expanded); the
        number of them that are final.  Items are released in order, so those before
        the first pending one were released; a completed one after it was reused from
        the run retried (``reused_items``) and is counted when the release reaches it."""
        mid, count = self.ids[i], 0
        while item_id(mid, count) in rows:
            count += 1
        row = self.rows[i]
        if not count and row.status is not WAITING:
            return 0
        items = self._add_items(i, count)
        final, first_pending = 0, None
        for k in range(count):
            stored = rows[item_id(mid, k)]
            self.rows[items.first + k] = stored.copy()
            if stored.status is PENDING and first_pending is None:
                first_pending = k
            if stored.status in FINAL_STEP_STATES:
                final += 1
        items.queued = count if first_pending is None else first_pending  # the cursor
        for j in range(items.first, items.first + items.queued):
            status = self.rows[j].status
            if status in FINAL_STEP_STATES:
                items.ended += 1
                item = self.steps[j]
                if status is not COMPLETED and items.failed is None and \
                        not (status is FAILED and item.allow_failure):
                    items.failed = f"item {item.id!r} {status}: {self.rows[j].error or ''}"
        return final

    def _add_items(self, i: int, count: int) -> MapItems:
        """Rows for ``count`` items of map step ``i``, pending (recorded in new_rows)."""
        step = self.steps[i]
        template = step.item
        assert template is not None
        first = len(self.rows)
        items = self.maps[i] = MapItems(first, count,
                                        map_concurrency(step, self.spec.concurrency))
        ids, steps, rows, rank, by_rank = self.ids, self.steps, self.rows, self._rank, \
            self._by_rank
        assert isinstance(ids, list) and isinstance(steps, list)
        assert isinstance(rank, list) and isinstance(by_rank, list)
        new_rows, item_of = self.new_rows, self.item_of
        for k in range(count):
            sid = item_id(step.id, k)
            j = first + k
            ids.append(sid)
            steps.append(item_step(template, sid))
            rows.append(StepRuntime())
            rank.append(len(by_rank))
            by_rank.append(j)
            item_of.append(i)
            new_rows.append((sid, j))
        return items

    def expand(self, i: int, values: list[JSON], now: float) -> None:
        """Map step ``i`` rendered its items: it waits (holding no slot) while its
        items, new rows named ``ID[INDEX]``, run; the first ``concurrency`` are
        queued.  Its row keeps the items (``output``) until it ends, so a resumed run
        knows them.  No items: the map completes at once with ``[]``."""
        row = self.rows[i]
        self._move(i, WAITING, now)
        self.running.discard(i)
        row.output = values
        self._record(i, RUNNING, WAITING, now)
        items = self._add_items(i, len(values))
        self._unfinished += len(values)
        reused = self.reused_items.pop(i, None)
        if reused is not None and reused[0] == len(values):
            self._reuse_items(items, reused[1], now)
        self._release_items(items, now)
        if items.ended == items.count:  # no items, or every one reused
            self._end_map(i, items, now)

    def _reuse_items(self, items: MapItems, outputs: Mapping[int, JSON],
                     now: float) -> None:
        """A retried run's map rendered as many items as in the run retried: the items
        that completed there complete here with their output, unrun (``plait retry``
        reuses completed work; like a cleared task's mapped instances that succeeded)."""
        for k, output in outputs.items():
            if not 0 <= k < items.count:
                continue
            j = items.first + k
            self.rows[j].output = output
            self.rows[j].started_at = self.rows[j].finished_at = now
            for source, target in ((PENDING, QUEUED), (QUEUED, RUNNING),
                                   (RUNNING, COMPLETED)):
                self._move(j, target, now)
                self._record(j, source, target, now)
            self._unfinished -= 1

    def row_index(self) -> dict[str, int]:
        """Step id -> row, items included."""
        if not self.maps:
            return self.graph.index
        index = dict(self.graph.index)
        ids = self.ids
        for j in range(self._static, len(ids)):
            index[ids[j]] = j
        return index

    def _release_items(self, items: MapItems, now: float) -> None:
        """Queue the next items while fewer than the map's limit are unfinished."""
        if items.failed is not None or self.halting:
            return
        rows = self.rows
        while items.queued < items.count and items.queued - items.ended < items.limit:
            j = items.first + items.queued
            items.queued += 1
            if rows[j].status is COMPLETED:  # reused from the run retried
                items.ended += 1
            else:
                self._queue(j, now)

    def _item_finished(self, j: int, now: float, propagate: bool) -> None:
        m = self.item_of[j - self._static]
        items = self.maps[m]
        items.ended += 1
        row = self.rows[j]
        if row.status is not COMPLETED and items.failed is None and \
                not (row.status is FAILED and self.steps[j].allow_failure):
            items.failed = f"item {self.ids[j]!r} {row.status}" + \
                (f": {row.error}" if row.error else "")
        if not propagate or self.rows[m].status is not WAITING:
            return
        self._release_items(items, now)
        if items.ended == items.queued and (items.failed is not None
                                            or items.ended == items.count):
            self._end_map(m, items, now)

    def _end_map(self, m: int, items: MapItems, now: float) -> None:
        """Every started item ended: the map completes with their outputs in item
        order (a tolerated failure's slot is null), or fails naming the first item
        that failed, its unstarted items cancelled."""
        rows = self.rows
        if items.failed is None:
            outputs = [rows[j].output if rows[j].status is COMPLETED else None
                       for j in range(items.first, items.first + items.count)]
            try:
                self.succeed(m, outputs, now)
                return
            except OutputError as exc:
                items.failed = str(exc)
        reason = f"map step {self.ids[m]!r} failed: {items.failed}"
        for j in range(items.first + items.queued, items.first + items.count):
            if rows[j].status is PENDING:
                self._move(j, CANCELLED, now)
                rows[j].finished_at, rows[j].skip_reason = now, reason
                self._record(j, PENDING, CANCELLED, now)
                self._unfinished -= 1
                items.ended += 1
        rows[m].output = None  # the items, kept while it waited
        self.end_attempt(m, "failed", now, items.failed)
        self.fail(m, items.failed, now)
