"""The rows of one run and what every rule of the run reads and writes.

``RunRows`` holds a run's per-step rows, the ready heap (ranks, critical path first),
the counters of unfinished parents and steps, the shared state written by step
outputs, and the transitions and attempt changes made since the last ``drain``.  It
moves a row only along the transition table (``_move``) and records every move for the
loop to persist (``_record``).  The rules that decide the moves live in the modules
built on it: ``judging`` (trigger rules, guards, ``when``), ``mapitems`` (a map step's
items) and ``runstate`` (what happens to a step and to the run).
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Mapping

from ..errors import OutputError, TransitionError
from . import expressions
from .effects import Effect, ParkReason
from .events import DecisionMade
from .model import JSON, JSONDict, StepSpec
from .reducers import reduce_value
from .rows import AttemptChange, MapItems, StepChange, StepRuntime, StepsView, new_change
from .states import FINAL_STEP_STATES, STEP_TRANSITIONS, StepStatus
from .validate import CheckedWorkflow

S = StepStatus
# Members bound to module names: reading ``StepStatus.X`` goes through the enum's class
# attribute machinery, about ten times the cost of a global on CPython 3.11, and the
# hot path reads several per step (benchmarks/child.py chain:10000: 10% more CPU without).
PENDING, QUEUED, RUNNING, WAITING = S.PENDING, S.QUEUED, S.RUNNING, S.WAITING
COMPLETED, FAILED, SKIPPED = S.COMPLETED, S.FAILED, S.SKIPPED
UPSTREAM_FAILED, CANCELLED = S.UPSTREAM_FAILED, S.CANCELLED
heappush, heappop = heapq.heappush, heapq.heappop


def _ready_rank(priority: tuple[float, ...]) -> tuple[list[int], list[int]]:
    """(rank of each step, step of each rank): rank 0 is the step with the longest
    remaining path; equal priorities keep definition order (the sort is stable)."""
    by_rank = sorted(range(len(priority)), key=priority.__getitem__, reverse=True)
    rank = [0] * len(by_rank)
    for r, i in enumerate(by_rank):
        rank[i] = r
    return rank, by_rank


def _output_owners(steps: tuple[StepSpec, ...]) -> dict[str, tuple[str, ...]]:
    owners: dict[str, list[str]] = {}
    for step in steps:
        for key in step.outputs:
            owners.setdefault(key, []).append(step.id)
    return {key: tuple(ids) for key, ids in owners.items()}


class RunRows(ABC):
    """One run's rows, ready heap and counters (see the module docstring)."""

    # slots, not a __dict__: past 30 attributes CPython 3.11 stops sharing an instance
    # dict's keys and attribute reads on the hot path get slower (~0.2 us a step)
    __slots__ = ("_by_rank", "_effects", "_output_owners", "_rank", "_ready", "_static",
                 "_transitions", "_unfinished", "_waiting_parents", "attempt_changes",
                 "cancelled", "checked", "due", "failure_reason", "given_approval", "graph",
                 "halt_reason", "halting", "ids", "input", "interrupted", "item_of",
                 "kept_decisions", "maps", "new_rows", "parked", "reused_items", "rows",
                 "run_id", "running", "secrets", "spec", "state", "steps", "steps_view",
                 "when_due")

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
        self.halt_reason: str | None = None  # why the run halted (cancel, timeout...)
        # what happened since the last drain, in order, for the loop to persist
        self._transitions: list[tuple[int, StepStatus, StepStatus, float]] = []
        self.attempt_changes: list[AttemptChange] = []
        self.steps_view = StepsView(self.rows, self.graph.index)
        self.interrupted: list[int] = []  # running when the run was restored
        # steps whose parents are final and whose `when` is not cheap to render: the
        # runtime renders each off the event loop, then calls settle_when (drained by it)
        self.when_due: list[int] = []
        # what the rules fired since the last event asked the runtime to do
        self._effects: list[Effect] = []
        # Python steps whose approval was given (they wait at most once)
        self.given_approval: set[int] = set()
        # decisions on Python steps that were not waiting for approval when they came
        # (waiting for an event, say): each answers its step's request (parking)
        self.kept_decisions: dict[int, DecisionMade] = {}
        self.parked: dict[int, ParkReason] = {}  # waiting steps and why (parking)
        # parked step -> when it moves on by itself, and whether that time ends its wait
        # for sure (a sleep's end) rather than being a deadline (parking)
        self.due: dict[int, tuple[float, bool]] = {}
        # a retried run (``plait retry``): map step -> (how many items it had in the
        # run retried, the outputs of those that completed there, by index), reused
        # when it expands to as many items (mapitems)
        self.reused_items: dict[int, tuple[int, dict[int, JSON]]] = {}

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

    def item_value(self, j: int) -> tuple[JSON, int]:
        """(item, index) of item row ``j``: what its templates see."""
        m = self.item_of[j - self._static]
        k = j - self.maps[m].first
        values = self.rows[m].output
        return (values[k] if isinstance(values, list) and k < len(values) else None), k

    def graph_index(self, i: int) -> int:
        """The definition's step for row ``i``: itself, or an item's map step."""
        return i if i < self._static else self.item_of[i - self._static]

    def context(self, i: int | None = None, **extra: object) -> dict[str, object]:
        """The names templates see."""
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
                    snap = snapshots[i] = r.copy()
            append(new_change(StepChange, (ids[i], source, target, at, snap)))
        return changes, attempts


    def _queue(self, i: int, now: float) -> None:
        """PENDING -> QUEUED (the caller checked PENDING): ready, by priority."""
        self.rows[i].status = QUEUED
        self._transitions.append((i, PENDING, QUEUED, now))
        heappush(self._ready, self._rank[i])

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

    # the rules that the modules built on this one provide (runstate.RunState)

    @abstractmethod
    def succeed(self, i: int, output: JSON, now: float, *, fallback: bool = False) -> None:
        ...

    @abstractmethod
    def fail(self, i: int, error: str, now: float) -> None:
        ...

    @abstractmethod
    def end_attempt(self, i: int, status: str, now: float, error: str | None = None) -> None:
        ...

    @abstractmethod
    def _finished(self, i: int, now: float, *, propagate: bool = True) -> None:
        ...
