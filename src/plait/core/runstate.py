"""The live state of one run: a driven state machine (graphlib-shaped).

The run loop owns the clock, the randomness and the I/O.  It asks ``pop_ready()`` for
the next step to start, reports what happened (``begin``, ``succeed``, ``fail_attempt``,
``fail``, ``cancel``...), and drains ``changes`` to persist them before acting on them.
Every rule of SPEC 5 (trigger rules, guards, ``when``, retries, fail-fast, the run's
final status) is decided here.  Each event costs O(1) plus the step's children.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import OutputError, TransitionError
from . import expressions
from .mapping import item_id, item_step, map_concurrency
from .model import JSON, JSONDict, StepSpec
from .reducers import reduce_value
from .retry import ErrorInfo, next_delay
from .states import (
    FINAL_STEP_STATES,
    STEP_TRANSITIONS,
    RunStatus,
    StepStatus,
)
from .validate import CheckedWorkflow

S = StepStatus
# Members bound to module names: reading ``StepStatus.X`` goes through the enum's class
# attribute machinery, about ten times the cost of a global on CPython 3.11, and the
# hot path reads several per step.
PENDING, QUEUED, RUNNING, WAITING = S.PENDING, S.QUEUED, S.RUNNING, S.WAITING
COMPLETED, FAILED, SKIPPED = S.COMPLETED, S.FAILED, S.SKIPPED
UPSTREAM_FAILED, CANCELLED = S.UPSTREAM_FAILED, S.CANCELLED
_FAILED_LIKE = frozenset({FAILED, UPSTREAM_FAILED, CANCELLED})
heappush, heappop = heapq.heappush, heapq.heappop


def _ready_rank(priority: tuple[float, ...]) -> tuple[list[int], list[int]]:
    """(rank of each step, step of each rank): rank 0 is the step with the longest
    remaining path; equal priorities keep definition order (the sort is stable)."""
    by_rank = sorted(range(len(priority)), key=priority.__getitem__, reverse=True)
    rank = [0] * len(by_rank)
    for r, i in enumerate(by_rank):
        rank[i] = r
    return rank, by_rank


@dataclass(slots=True)
class StepRuntime:
    """Everything stored about one step of one run (mutable; owned by RunState)."""

    status: StepStatus = PENDING
    attempts: int = 0
    output: JSON = None
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    skip_reason: str | None = None
    fallback_used: bool = False
    next_attempt_at: float | None = None
    worker: str | None = None


# Changes are NamedTuples, not frozen dataclasses: the loop makes several per step, and
# a frozen dataclass pays object.__setattr__ per field (3x slower to build).
# NamedTuple's generated __new__ is a Python function; the hot path builds changes with
# tuple.__new__ directly, which skips it (same object, half the cost).
_new_tuple = tuple.__new__


class StepChange(NamedTuple):
    """One transition of one step, with the step's full row after it (what to store)."""

    step: str
    source: StepStatus
    target: StepStatus
    at: float
    # the step's row at the end of its batch, never changed afterwards: a copy, or the
    # core's own row once final (a final row is never written again)
    row: StepRuntime


class AttemptChange(NamedTuple):
    """An attempt started (``ended`` False) or ended, with its outcome."""

    step: str
    attempt: int
    at: float
    ended: bool
    status: str  # running | completed | failed | cancelled
    error: str | None = None
    worker: str | None = None
    fallback: bool = False


class StepsView(Mapping[str, JSONDict]):
    """``steps.<id>`` in templates: ``{"output", "status"}`` of any step of the run."""

    __slots__ = ("_index", "_rows")

    def __init__(self, rows: list[StepRuntime], index: dict[str, int]) -> None:
        self._rows, self._index = rows, index

    def __getitem__(self, key: str) -> JSONDict:
        row = self._rows[self._index[key]]
        output = row.output if row.status is COMPLETED else None
        return {"output": output, "status": str(row.status)}

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


@dataclass(slots=True)
class MapItems:
    """The items of one expanded map step (rows ``first .. first + count - 1``)."""

    first: int
    count: int
    limit: int  # items running at once, at most
    queued: int = 0  # items released so far (in order)
    ended: int = 0  # items that reached a final status
    failed: str | None = None  # why the map fails (the first item that failed)


def _output_owners(steps: tuple[StepSpec, ...]) -> dict[str, tuple[str, ...]]:
    owners: dict[str, list[str]] = {}
    for step in steps:
        for key in step.outputs:
            owners.setdefault(key, []).append(step.id)
    return {key: tuple(ids) for key, ids in owners.items()}


class RunState:
    def __init__(self, checked: CheckedWorkflow, *, run_id: str, input: JSON,
                 secrets: Mapping[str, str] | None = None) -> None:
        self.checked = checked
        self.spec = checked.spec
        self.graph = checked.graph
        self.run_id = run_id
        self.input = input
        # not `secrets or {}`: the truth value of a Secrets mapping walks the environment
        self.secrets: Mapping[str, str] = {} if secrets is None else secrets
        self.state: JSONDict = {}
        steps = self.spec.steps
        # declared output key -> the steps declaring it (for "state.k is not set")
        self._output_owners: dict[str, tuple[str, ...]] = checked.derive(
            "output_owners", lambda: _output_owners(steps))
        n = self.graph.size
        self.rows = [StepRuntime() for _ in range(n)]
        # The run's steps by row: the definition's, then the items of expanded map
        # steps (rows that grow, ``expand``).  Lists of their own only when the
        # workflow has a map step; a static workflow shares the definition's tuples.
        self._static = n
        self.maps: dict[int, MapItems] = {}  # expanded map step -> its items
        self.item_of: list[int] = []  # per item row (from n): its map step
        self.new_rows: list[tuple[str, int]] = []  # item rows to insert, drained
        has_map = checked.derive("has_map", lambda: any(
            s.item is not None for s in steps))
        self.steps: tuple[StepSpec, ...] | list[StepSpec] = list(steps) if has_map \
            else steps
        self.ids: tuple[str, ...] | list[str] = list(self.graph.ids) if has_map \
            else self.graph.ids
        parents = self.graph.parents
        self._waiting_parents = checked.derive(
            "parent_counts", lambda: [len(p) for p in parents]).copy()
        # the ready heap holds ranks (ints compare faster than (priority, index) tuples):
        # rank order is critical path first, then definition order
        self._rank, self._by_rank = checked.derive("ready_rank", lambda: _ready_rank(
            checked.priority))
        if has_map:  # item rows get ranks after every step's
            self._rank, self._by_rank = list(self._rank), list(self._by_rank)
        self._ready: list[int] = []
        self.running: set[int] = set()
        self._unfinished = n
        self.halting = False  # fail_fast tripped or run cancelled: start nothing new
        self.cancelled = False
        self.failure_reason: str | None = None
        # what happened since the last drain, in order, for the loop to persist
        self._transitions: list[tuple[int, StepStatus, StepStatus, float]] = []
        self.attempt_changes: list[AttemptChange] = []
        self.steps_view = StepsView(self.rows, self.graph.index)
        self.interrupted: list[int] = []  # running when the run was restored
        # steps whose parents are final and whose `when` is not cheap to render: the
        # runtime renders each off the event loop, then calls settle_when (drained by it)
        self.when_due: list[int] = []

    @classmethod
    def restore(cls, checked: CheckedWorkflow, *, run_id: str, input: JSON,
                rows: Mapping[str, StepRuntime], now: float,
                secrets: Mapping[str, str] | None = None) -> RunState:
        """Rebuild the state of a stored run (resume).  Steps stored ``running`` were
        interrupted: they stay running here and are listed in ``interrupted`` for the
        loop to count as failed attempts.  Shared state is replayed from completed
        outputs in completion order."""
        state = cls(checked, run_id=run_id, input=input, secrets=secrets)
        graph = checked.graph
        for i, sid in enumerate(graph.ids):
            stored = rows.get(sid)
            if stored is not None:
                state.rows[i] = StepRuntime(
                    stored.status, stored.attempts, stored.output, stored.error,
                    stored.started_at, stored.finished_at, stored.skip_reason,
                    stored.fallback_used, stored.next_attempt_at, stored.worker)
        for i in range(graph.size):  # stored items of expanded map steps
            if state.spec.steps[i].item is not None:
                state._restore_items(i, rows)
        done = [i for i in range(graph.size) if state.rows[i].status in FINAL_STEP_STATES]
        state._unfinished = len(state.rows) - len(done)
        for items in state.maps.values():
            state._unfinished -= items.ended
        for i in done:
            for child in graph.children[i]:
                state._waiting_parents[child] -= 1
        completed = sorted((i for i in done if state.rows[i].status is COMPLETED),
                           key=lambda i: (state.rows[i].finished_at or 0.0,
                                          graph.position[i]))
        for i in completed:
            step = state.spec.steps[i]
            if step.outputs:
                state.state.update(state._reduced(
                    state._state_writes(step, state.rows[i].output)))
        state.new_rows.clear()  # restored rows are stored already
        for i, row in enumerate(state.rows):
            if row.status is RUNNING:
                state.running.add(i)
                state.interrupted.append(i)
            elif row.status is QUEUED and (row.next_attempt_at is None
                                             or row.next_attempt_at <= now):
                heappush(state._ready, state._rank[i])
        return state

    def _restore_items(self, i: int, rows: Mapping[str, StepRuntime]) -> None:
        """The stored item rows of map step ``i`` (none if it never expanded)."""
        mid, count = self.ids[i], 0
        while item_id(mid, count) in rows:
            count += 1
        row = self.rows[i]
        if not count and row.status is not WAITING:
            return
        items = self._add_items(i, count)
        for k in range(count):
            stored = rows[item_id(mid, k)]
            j = items.first + k
            self.rows[j] = StepRuntime(
                stored.status, stored.attempts, stored.output, stored.error,
                stored.started_at, stored.finished_at, stored.skip_reason,
                stored.fallback_used, stored.next_attempt_at, stored.worker)
            status = stored.status
            if status is not PENDING:
                items.queued = k + 1
            if status in FINAL_STEP_STATES:
                items.ended += 1
                item = self.steps[j]
                if status is not COMPLETED and items.failed is None and \
                        not (status is FAILED and item.allow_failure):
                    items.failed = f"item {item.id!r} {status}: {stored.error or ''}"

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
        if not values:
            self._end_map(i, items, now)
            return
        self._release_items(items, now)

    def item_value(self, j: int) -> tuple[JSON, int]:
        """(item, index) of item row ``j``: what its templates see."""
        m = self.item_of[j - self._static]
        k = j - self.maps[m].first
        values = self.rows[m].output
        return (values[k] if isinstance(values, list) and k < len(values) else None), k

    def row_index(self) -> dict[str, int]:
        """Step id -> row, items included."""
        if not self.maps:
            return self.graph.index
        index = dict(self.graph.index)
        ids = self.ids
        for j in range(self._static, len(ids)):
            index[ids[j]] = j
        return index

    def graph_index(self, i: int) -> int:
        """The definition's step for row ``i``: itself, or an item's map step."""
        return i if i < self._static else self.item_of[i - self._static]

    def _release_items(self, items: MapItems, now: float) -> None:
        """Queue the next items while fewer than the map's limit are unfinished."""
        if items.failed is not None or self.halting:
            return
        while items.queued < items.count and items.queued - items.ended < items.limit:
            self._queue(items.first + items.queued, now)
            items.queued += 1

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

    def queued_later(self) -> list[tuple[float, int]]:
        """Queued steps due in the future (retry delays), for the loop's timers."""
        ready = set(self._ready)
        return [(r.next_attempt_at, i) for i, r in enumerate(self.rows)
                if r.status is QUEUED and r.next_attempt_at is not None
                and self._rank[i] not in ready]

    # ----------------------------------------------------------------- queries

    @property
    def done(self) -> bool:
        return self._unfinished == 0

    def step(self, i: int) -> StepSpec:
        return self.steps[i]

    def has_ready(self) -> bool:
        return bool(self._ready)

    def pop_ready(self) -> int | None:
        """The queued step with the longest remaining path, or None.  Entries of steps
        no longer queued (pushed twice, or cancelled meanwhile) are dropped here."""
        ready, rows, by_rank = self._ready, self.rows, self._by_rank
        while ready and not self.halting:
            i = by_rank[heappop(ready)]
            if rows[i].status is QUEUED:
                return i
        return None

    def push_back(self, i: int) -> None:
        """Return a popped step that could not start yet (pool full, rate limited)."""
        heappush(self._ready, self._rank[i])

    def context(self, i: int | None = None, **extra: object) -> dict[str, object]:
        """The names templates see (SPEC 4)."""
        ctx: dict[str, object] = {"input": self.input, "state": self.state,
                                  "steps": self.steps_view, "run": {"id": self.run_id},
                                  "secrets": self.secrets,
                                  expressions.OUTPUT_OWNERS: self._output_owners}
        if i is not None and i >= self._static:
            ctx["item"], ctx["index"] = self.item_value(i)
        ctx.update(extra)
        return ctx

    def parent_outputs(self, i: int) -> JSONDict:
        ids = self.graph.ids
        return {ids[p]: (self.rows[p].output if self.rows[p].status is COMPLETED else None)
                for p in self.graph.parents[self.graph_index(i)]}

    def run_status(self) -> RunStatus:
        """The run's final status once ``done`` (SPEC 5: failed if any step failed
        without allow_failure; cancelled if cancelled)."""
        if self.cancelled:
            return RunStatus.CANCELLED
        for i, row in enumerate(self.rows):
            if row.status is FAILED and not self.steps[i].allow_failure:
                return RunStatus.FAILED
        if self.failure_reason:
            return RunStatus.FAILED
        return RunStatus.COMPLETED

    def default_output(self) -> JSONDict:
        ids = self.graph.ids
        return {ids[i]: self.rows[i].output for i in self.checked.sinks
                if self.rows[i].status is COMPLETED}

    def drain(self) -> tuple[list[StepChange], list[AttemptChange]]:
        """What happened since the last drain, to commit together.  Each step changed
        carries one snapshot of its row as it is now: the batch's final state, which is
        what the store keeps (a step queued and started in one batch is copied once).

        A row in a final state never changes again (no transition leaves it and no
        event touches it), so it is its own snapshot: only rows still moving are
        copied, about one per step instead of two (queued or running, then final)."""
        transitions, attempts = self._transitions, self.attempt_changes
        self._transitions, self.attempt_changes = [], []
        if not transitions:
            return [], attempts
        rows, ids, final = self.rows, self.ids, FINAL_STEP_STATES
        snapshots: dict[int, StepRuntime] = {}
        changes: list[StepChange] = []
        append = changes.append
        for i, source, target, at in transitions:
            snap = snapshots.get(i)
            if snap is None:
                r = rows[i]
                if r.status in final:
                    snap = snapshots[i] = r
                else:
                    snap = snapshots[i] = StepRuntime(
                        r.status, r.attempts, r.output, r.error, r.started_at,
                        r.finished_at, r.skip_reason, r.fallback_used, r.next_attempt_at,
                        r.worker)
            append(_new_tuple(StepChange, (ids[i], source, target, at, snap)))
        return changes, attempts

    # ----------------------------------------------------------------- events

    def start(self, now: float) -> None:
        """Judge every step whose parents are all final (the roots, on a new run)."""
        for i in range(self.graph.size):
            if self.rows[i].status is PENDING and self._waiting_parents[i] == 0:
                self._judge(i, now)

    def begin(self, i: int, now: float, worker: str | None = None) -> int:
        """The step's next attempt starts now; returns its number (1-based)."""
        row = self.rows[i]
        if row.status is not QUEUED:
            raise TransitionError(f"step {self.ids[i]!r}", row.status, RUNNING)
        row.status = RUNNING
        attempt = row.attempts = row.attempts + 1
        row.next_attempt_at = None
        row.worker = worker
        if row.started_at is None:
            row.started_at = now
        self.running.add(i)
        self._transitions.append((i, QUEUED, RUNNING, now))
        self.attempt_changes.append(_new_tuple(AttemptChange, (
            self.ids[i], attempt, now, False, "running", None, worker, False)))
        return attempt

    def succeed(self, i: int, output: JSON, now: float, *, fallback: bool = False) -> None:
        """The step completed with ``output`` (already checked to be JSON).

        Raises OutputError, changing nothing, when declared output keys are missing or
        a reducer cannot combine a value (everything is computed before anything moves)."""
        step = self.steps[i]
        row = self.rows[i]
        if step.item is not None and row.status is RUNNING and not fallback:
            # a map step's attempt rendered its items (steps.map)
            self.expand(i, output if isinstance(output, list) else [output], now)
            return
        writes = self._reduced(self._state_writes(step, output)) if step.outputs else None
        source = row.status
        if COMPLETED not in STEP_TRANSITIONS[source]:
            raise TransitionError(f"step {step.id!r}", source, COMPLETED)
        row.status = COMPLETED
        # a fallback's success keeps the error that made it necessary
        row.output, row.finished_at = output, now
        if not fallback:
            row.error = None
        row.fallback_used = fallback
        self.running.discard(i)
        if writes:
            self.state.update(writes)
        self.attempt_changes.append(_new_tuple(AttemptChange, (
            step.id, row.attempts, now, True, "completed", None, row.worker, fallback)))
        self._transitions.append((i, source, COMPLETED, now))
        self._finished(i, now)

    def fail_attempt(self, i: int, error: ErrorInfo, now: float, rand: float) -> float | None:
        """An attempt failed.  Returns the delay before the retry (the step is queued
        again, due at ``now + delay``) or None when retries are spent: the loop then
        runs the fallback or calls ``fail``."""
        step, row = self.steps[i], self.rows[i]
        self.attempt_changes.append(AttemptChange(step.id, row.attempts, now, True, "failed",
                                          error=str(error), worker=row.worker))
        row.error = str(error)
        delay = None if self.halting else next_delay(step.retry, row.attempts, error, rand)
        if delay is None:
            return None
        self.running.discard(i)
        row.next_attempt_at = now + delay
        self._move(i, QUEUED, now)
        self._record(i, RUNNING, QUEUED, now)
        return delay

    def retry_due(self, i: int) -> None:
        """A retry's delay has passed: the step is ready again."""
        heappush(self._ready, self._rank[i])

    def fail(self, i: int, error: str, now: float) -> None:
        """The step failed for good (retries and fallback spent, or not retryable)."""
        row = self.rows[i]
        source = row.status
        self._move(i, FAILED, now)
        row.error, row.finished_at = error, now
        self.running.discard(i)
        self._record(i, source, FAILED, now)
        step = self.steps[i]
        if self.spec.on_failure == "fail_fast" and not step.allow_failure:
            self.halting = True
            self.failure_reason = f"step {step.id!r} failed (on_failure: fail_fast)"
        self._finished(i, now)

    def end_attempt(self, i: int, status: str, now: float, error: str | None = None) -> None:
        """Close the step's current attempt in history without moving the step."""
        row = self.rows[i]
        self.attempt_changes.append(AttemptChange(self.ids[i], row.attempts, now, True,
                                                  status, error=error, worker=row.worker))

    def waiting_steps(self) -> list[int]:
        return [i for i, r in enumerate(self.rows) if r.status is WAITING]

    def wait(self, i: int, now: float) -> None:
        """The step is parked (approval, long delay) and holds no concurrency slot."""
        self._move(i, WAITING, now)
        self.running.discard(i)
        self._record(i, RUNNING, WAITING, now)

    def requeue(self, i: int, now: float) -> None:
        """A waiting step is ready to run again (a Python step's approval arrived)."""
        self._move(i, QUEUED, now)
        self._record(i, WAITING, QUEUED, now)
        heappush(self._ready, self._rank[i])

    def cancel_step(self, i: int, now: float, reason: str) -> None:
        row = self.rows[i]
        if row.status in FINAL_STEP_STATES:
            return
        source = row.status
        if source is RUNNING or source is WAITING:
            self.attempt_changes.append(AttemptChange(self.ids[i], row.attempts, now, True,
                                              "cancelled", error=reason, worker=row.worker))
        self._move(i, CANCELLED, now)
        row.finished_at, row.skip_reason = now, reason
        self.running.discard(i)
        self._record(i, source, CANCELLED, now)
        # when the run goes on (a single step was cancelled), dependants are judged
        self._finished(i, now, propagate=not self.halting)

    def halt(self, reason: str, *, cancelled: bool) -> None:
        """Start nothing new (fail-fast, cancel, run timeout)."""
        self.halting = True
        self.cancelled = self.cancelled or cancelled
        if not cancelled and self.failure_reason is None:
            self.failure_reason = reason

    def cancel_unstarted(self, now: float, reason: str) -> None:
        """Once halting and nothing runs: every step not final is cancelled."""
        for i, row in enumerate(self.rows):
            if row.status not in FINAL_STEP_STATES and i not in self.running:
                self.cancel_step(i, now, reason)
        self._ready.clear()
        self.when_due.clear()

    # ----------------------------------------------------------------- rules

    def _finished(self, i: int, now: float, *, propagate: bool = True) -> None:
        self._unfinished -= 1
        if i >= self._static:
            self._item_finished(i, now, propagate)
            return
        if not propagate:
            return
        waiting = self._waiting_parents
        rows = self.rows
        for child in self.graph.children[i]:
            left = waiting[child] = waiting[child] - 1
            if left == 0 and rows[child].status is PENDING:
                self._judge(child, now)

    def _judge(self, i: int, now: float) -> None:
        """All parents are final: queue, skip or mark upstream_failed (SPEC 5)."""
        step = self.spec.steps[i]
        rows = self.rows
        if step.trigger != "one_failed" and step.when is None and not self.checked.guards[i]:
            # the common case: every trigger rule but one_failed queues a step whose
            # parents all completed
            for p in self.graph.parents[i]:
                if rows[p].status is not COMPLETED:
                    break
            else:
                self._queue(i, now)
                return
        verdict = self._trigger(i, step)
        if verdict is None and self.checked.guards[i]:
            verdict = self._guard(i)
        if verdict is None and step.when is not None:
            text = step.when
            if expressions.is_template(text) and not expressions.is_cheap(text):
                # may take up to its time bound: the runtime renders it off the event
                # loop and hands the value to settle_when; the step stays pending
                self.when_due.append(i)
                return
            verdict = self._when(i, step, now)
            if verdict is not None and verdict[0] is FAILED:
                return  # the step was failed by its `when` (already recorded)
        self._settle(i, verdict, now)

    def _settle(self, i: int, verdict: tuple[StepStatus, str] | None, now: float) -> None:
        """Queue the judged step (no verdict), or end it as the verdict says."""
        if verdict is None:
            self._queue(i, now)
            return
        row = self.rows[i]
        target, reason = verdict
        self._move(i, target, now)
        row.skip_reason, row.finished_at = reason, now
        self._record(i, PENDING, target, now)
        self._finished(i, now)

    def _queue(self, i: int, now: float) -> None:
        """PENDING -> QUEUED (the caller checked PENDING): ready, by priority."""
        self.rows[i].status = QUEUED
        self._transitions.append((i, PENDING, QUEUED, now))
        heappush(self._ready, self._rank[i])

    def _trigger(self, i: int, step: StepSpec) -> tuple[StepStatus, str] | None:
        parents = self.graph.parents[i]
        if not parents or step.trigger == "all_done":
            return None
        completed = failed = skipped = 0
        first_failed = first_skipped = ""
        steps, rows = self.spec.steps, self.rows
        for p in parents:
            status = rows[p].status
            if status is COMPLETED:
                completed += 1
            elif status is SKIPPED:
                skipped += 1
                first_skipped = first_skipped or steps[p].id
            elif status is FAILED and steps[p].allow_failure and \
                    step.trigger != "one_failed":
                completed += 1  # a tolerated failure does not hold up its children
            elif status in _FAILED_LIKE:
                failed += 1
                first_failed = first_failed or steps[p].id
        rule = step.trigger
        if rule == "one_failed":
            return None if failed else (SKIPPED, "trigger one_failed: no parent failed")
        if failed:
            return (UPSTREAM_FAILED, f"parent {first_failed!r} did not complete")
        if rule == "none_failed":
            return None
        if rule == "all_success" and skipped:
            return (SKIPPED, f"trigger all_success: parent {first_skipped!r} was skipped")
        if completed == 0:
            return (SKIPPED, "all parents were skipped")
        return None

    def _guard(self, i: int) -> tuple[StepStatus, str] | None:
        for cond, branch in self.checked.guards[i]:
            row = self.rows[cond]
            cid = self.spec.steps[cond].id
            if row.status is not COMPLETED:
                return (SKIPPED, f"condition {cid!r} did not complete")
            result = row.output.get("result") if isinstance(row.output, dict) else None
            if bool(result) is not branch:
                side = "then" if branch else "else"
                return (SKIPPED, f"condition {cid!r} was {bool(result)!s} and this step "
                        f"is in its {side} branch")
        return None

    def _when(self, i: int, step: StepSpec, now: float) -> tuple[StepStatus, str] | None:
        text = step.when or ""
        try:
            # a literal is the loader's spelling of a YAML boolean (`when: false`)
            value = expressions.render(text, self.context(i)) \
                if expressions.is_template(text) \
                else bool(text) and text.strip().lower() != "false"
        except expressions.RenderError as exc:
            return self._when_failed(i, step, exc, now)
        return self._when_verdict(step, value)

    def _when_failed(self, i: int, step: StepSpec, exc: Exception,
                     now: float) -> tuple[StepStatus, str]:
        self._move(i, QUEUED, now)
        self._record(i, PENDING, QUEUED, now)
        self.fail(i, f"TemplateError: step {step.id!r}, field 'when': {exc} in "
                  f"template {step.when!r}", now)
        return (FAILED, "")

    @staticmethod
    def _when_verdict(step: StepSpec, value: JSON) -> tuple[StepStatus, str] | None:
        if expressions.truthy(value):
            return None
        return (SKIPPED, f"when was false: {step.when}")

    def settle_when(self, i: int, value: JSON | expressions.RenderError, now: float) -> None:
        """The value of step ``i``'s ``when``, rendered off the loop (see ``when_due``),
        or the error that rendering raised: queue, skip or fail the step as ``_judge``
        would have.  Nothing happens when the step is no longer pending (the run was
        cancelled meanwhile)."""
        if self.rows[i].status is not PENDING or self.halting:
            return
        step = self.spec.steps[i]
        if isinstance(value, expressions.RenderError):
            self._when_failed(i, step, value, now)
            return
        self._settle(i, self._when_verdict(step, value), now)

    def _reduced(self, writes: JSONDict) -> JSONDict:
        """The new values of the written state keys, reducers applied (state unchanged)."""
        reducers, state = self.spec.reducers, self.state
        return {key: reduce_value(reducers.get(key), key, state.get(key), value)
                for key, value in writes.items()}

    def _state_writes(self, step: StepSpec, output: JSON) -> JSONDict:
        keys = step.outputs
        if isinstance(output, dict) and all(k in output for k in keys):
            return {k: output[k] for k in keys}
        if len(keys) == 1:
            return {keys[0]: output}
        missing = [k for k in keys if not (isinstance(output, dict) and k in output)]
        raise OutputError(f"step {step.id!r} declares outputs {list(keys)} but its output "
                          f"has no key {missing[0]!r}", step=step.id, path=missing[0])

    def _move(self, i: int, target: StepStatus, now: float) -> None:
        row = self.rows[i]
        if target not in STEP_TRANSITIONS[row.status]:
            raise TransitionError(f"step {self.ids[i]!r}", row.status, target)
        row.status = target

    def _record(self, i: int, source: StepStatus, target: StepStatus, now: float) -> None:
        self._transitions.append((i, source, target, now))
