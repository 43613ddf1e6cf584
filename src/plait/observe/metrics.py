"""Run and step metrics over stored history: what ``plait metrics`` shows.

API (the CLI calls these)::

    histories = await load_histories(store, workflow=None, since=None, limit=1000)
    descendants = await load_descendants(store, histories)   # for one workflow
    report = compute(histories, since=None, descendants=())  # pure
    report = await collect(store, workflow=None, since=None, limit=1000)   # both at once
    report.to_json()                                  # the --json object
    render_metrics(report)                            # the plain-text table
    since_cutoff("1h", now=time.time())               # --since 1h -> an epoch cutoff

Definitions (one place; the alert rules in ``alerts.py`` read these same numbers):

- A run *finished* when its status is completed, failed or cancelled; ``active`` counts
  the rest.  ``success_rate`` = completed / finished (None when nothing finished).
- Run duration (wall time) = ``finished_at - started_at`` of finished runs that started.
  Run compute time (``compute_s``) = the union of the compute intervals of the run's
  finished attempts (``waits.py``): the wall time during which at least one of its
  steps was working, so never more than the wall time; waits (for a person, a delay,
  a map's items, a child run) are not compute time.
- Steps are reported by name, a map's items folded into one row ``ID[*]``
  (``fetch[0]``, ``fetch[1]``... are all ``fetch[*]``; each item is an execution),
  beside the row of the map step ``ID`` itself: the rule the Prometheus metrics follow
  (``store.observations``).
- A step *executed* in a run when it started at least one attempt there
  (``StepRecord.attempts > 0``); skipped and upstream-failed steps did not execute.
  ``executions`` counts those runs.  Of the finished executions (completed, failed,
  cancelled), ``success_rate`` = completed / finished; a step that completed through its
  fallback counts as completed and is also counted in ``fallbacks``.
- Step duration = ``finished_at - started_at`` of the step, so it includes every attempt
  and the retry delays between them.  Attempt duration = ``finished_at - started_at`` of
  each finished attempt that is not a fallback; attempt compute time (``compute_s``) =
  the same minus the waits of its step within it (``waits.py``: an approval's whole
  attempt is a wait).
- ``retries_per_execution`` = mean of ``attempts - 1`` over executions;
  ``retries_per_run`` (workflow level) = mean over runs of the retries of all its steps.
- Percentiles use **linear interpolation between closest ranks** (NumPy's default
  ``linear`` method, Excel's ``PERCENTILE.INC``): for the sorted values ``x[0..n-1]``
  and ``q`` in [0, 1], ``h = (n - 1) * q`` and the result is
  ``x[floor h] + (h - floor h) * (x[floor h + 1] - x[floor h])``.  For 1..10:
  p50 = 5.5, p95 = 9.55, p99 = 9.91.  No values: None.

JSON (``MetricsReport.to_json()``; keys are stable, durations in seconds)::

    {"since": ISO-8601 UTC | null, "runs": int,
     "tokens": {"prompt_tokens": int, "completion_tokens": int, "total_tokens": int},
     "workflows": [{
        "workflow": str, "runs": int, "completed": int, "failed": int, "cancelled": int,
        "active": int, "success_rate": float | null,
        "duration_s": {"count": int, "mean", "p50", "p95", "p99", "max": float | null},
        "compute_s": {...as above},
        "retries_per_run": float | null, "fallbacks": int,
        "steps": [{
            "step": str, "executions": int, "completed": int, "failures": int,
            "cancelled": int, "success_rate": float | null,
            "duration_s": {...as above}, "attempt_duration_s": {...as above},
            "compute_s": {...as above},
            "attempts": int, "retries": int, "retries_per_execution": float | null,
            "fallbacks": int, "cache_hits": int,
            "prompt_tokens": int, "completion_tokens": int, "total_tokens": int,
            "tokens_with_children": {...as "tokens"}}],
        "cache_hits": int, "prompt_tokens": int, "completion_tokens": int,
        "total_tokens": int, "tokens_with_children": {...as "tokens"}}]}

Tokens are the sums of the ``usage`` history notes ``llm`` steps leave, one per attempt
that got a completion (a refused answer that was retried counts: its tokens were
billed), counted under the workflow and step that made the call.  A workflow's
``tokens_with_children`` adds those of its runs' descendants (child runs at any depth,
through ``parent_run_id``); a step's, those of the child runs it started (a ``workflow``
or ``loop`` step, or map items of one; ``tokens.by_step``).  The report's ``tokens``
counts every run read once (never the sum of ``tokens_with_children``).  ``collect`` for
one workflow reads its runs' descendants too (``load_descendants``).

``cache_hits`` counts steps completed from the step cache (``cache:``) without running
their code; such a step is still an execution (of one attempt).

Workflows are sorted by name; steps by first appearance in the workflow's runs
(definition order, then map items, as stores return them).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..core.child_ids import child_run_id
from ..core.durations import format_duration, parse_duration
from ..core.model import JSON, JSONDict
from ..core.states import RunStatus, StepStatus
from ..core.timestamps import iso
from ..errors import RunNotFound, StoreError
from ..store.base import AttemptRecord, EventRecord, RunFilter, RunRecord, StepRecord, Store
from ..store.observations import item_pattern
from .tokens import (
    Tokens,
    by_step,
    is_cache_hit,
    parent_steps,
    tokens_of,
    usage_of,
    with_descendants,
)
from .waits import Interval, compute_intervals, covered, step_waits, waiting_steps

__all__ = ["MetricsReport", "RunHistory", "StepMetrics", "Summary", "Tokens",
           "WorkflowMetrics", "collect", "compute", "load_descendants", "load_histories",
           "percentile", "render_metrics", "since_cutoff", "usage_of"]

DEFAULT_LIMIT = 1000
_FINISHED_RUN = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
_FINISHED_STEP = frozenset({StepStatus.COMPLETED, StepStatus.FAILED, StepStatus.CANCELLED})


# ------------------------------------------------------------------------ statistics


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-quantile (``q`` in [0, 1]) of ``values`` by linear interpolation
    between closest ranks (see the module docstring); None for no values."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"a quantile must be between 0 and 1, got {q!r}")
    if not values:
        return None
    ordered = sorted(values)
    h = (len(ordered) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (h - low) * (ordered[high] - ordered[low])


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """Distribution of a set of durations (seconds); every field None when empty."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        if not values:
            return cls()
        return cls(count=len(values), mean=_mean(values), p50=percentile(values, 0.50),
                   p95=percentile(values, 0.95), p99=percentile(values, 0.99),
                   max=max(values))

    def to_json(self) -> JSONDict:
        return {"count": self.count, "mean": self.mean, "p50": self.p50, "p95": self.p95,
                "p99": self.p99, "max": self.max}


# ------------------------------------------------------------------------ the report


@dataclass(frozen=True, slots=True, kw_only=True)
class StepMetrics:
    step: str
    executions: int
    completed: int
    failures: int
    cancelled: int
    success_rate: float | None
    duration: Summary
    attempt_duration: Summary
    attempts: int
    retries: int
    retries_per_execution: float | None
    fallbacks: int
    cache_hits: int = 0
    tokens: Tokens = field(default_factory=lambda: Tokens())
    compute: Summary = field(default_factory=Summary)
    # ``tokens`` plus the rolled-up tokens of the child runs the step started
    tokens_with_children: Tokens = field(default_factory=lambda: Tokens())

    def to_json(self) -> JSONDict:
        return {"step": self.step, "executions": self.executions,
                "completed": self.completed, "failures": self.failures,
                "cancelled": self.cancelled, "success_rate": self.success_rate,
                "duration_s": self.duration.to_json(),
                "attempt_duration_s": self.attempt_duration.to_json(),
                "compute_s": self.compute.to_json(),
                "attempts": self.attempts, "retries": self.retries,
                "retries_per_execution": self.retries_per_execution,
                "fallbacks": self.fallbacks, "cache_hits": self.cache_hits,
                **self.tokens.to_json(),
                "tokens_with_children": self.tokens_with_children.to_json()}


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowMetrics:
    workflow: str
    runs: int
    completed: int
    failed: int
    cancelled: int
    active: int
    success_rate: float | None
    duration: Summary
    retries_per_run: float | None
    fallbacks: int
    steps: tuple[StepMetrics, ...] = ()
    cache_hits: int = 0
    tokens: Tokens = field(default_factory=lambda: Tokens())
    compute: Summary = field(default_factory=Summary)
    # ``tokens`` plus those of the runs' descendants (child runs at any depth)
    tokens_with_children: Tokens = field(default_factory=lambda: Tokens())

    def step(self, step_id: str) -> StepMetrics | None:
        return next((s for s in self.steps if s.step == step_id), None)

    def to_json(self) -> JSONDict:
        return {"workflow": self.workflow, "runs": self.runs, "completed": self.completed,
                "failed": self.failed, "cancelled": self.cancelled, "active": self.active,
                "success_rate": self.success_rate, "duration_s": self.duration.to_json(),
                "compute_s": self.compute.to_json(),
                "retries_per_run": self.retries_per_run, "fallbacks": self.fallbacks,
                "steps": [s.to_json() for s in self.steps],
                "cache_hits": self.cache_hits, **self.tokens.to_json(),
                "tokens_with_children": self.tokens_with_children.to_json()}


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsReport:
    workflows: tuple[WorkflowMetrics, ...] = ()
    since: float | None = None
    # every run read counted once: the reported runs and the descendants read for them
    tokens: Tokens = field(default_factory=lambda: Tokens())

    @property
    def runs(self) -> int:
        return sum(w.runs for w in self.workflows)

    def workflow(self, name: str) -> WorkflowMetrics | None:
        return next((w for w in self.workflows if w.workflow == name), None)

    def to_json(self) -> JSONDict:
        return {"since": iso(self.since), "runs": self.runs,
                "tokens": self.tokens.to_json(),
                "workflows": [w.to_json() for w in self.workflows]}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunHistory:
    """One run with its steps and attempts: the input of ``compute``."""

    run: RunRecord
    steps: Sequence[StepRecord] = ()
    attempts: Sequence[AttemptRecord] = ()
    # notes (token usage, cache hits) and the step events into and out of `waiting`
    events: Sequence[EventRecord] = ()
    # the steps whose attempts are waits (``waits.waiting_steps`` of the definition)
    waiting: frozenset[str] = frozenset()
    # (step, most children) of the steps that start child runs (``tokens.parent_steps``)
    child_steps: tuple[tuple[str, int], ...] = ()


# ------------------------------------------------------------------------ computing


def _elapsed(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, end - start)


@dataclass(slots=True)
class _StepTally:
    """Accumulates one step's numbers (a map's items: one ``ID[*]`` tally) across the
    runs of one workflow."""

    executions: int = 0
    completed: int = 0
    failures: int = 0
    cancelled: int = 0
    attempts: int = 0
    fallbacks: int = 0
    durations: list[float] = field(default_factory=list)
    attempt_durations: list[float] = field(default_factory=list)
    computes: list[float] = field(default_factory=list)
    cache_hits: int = 0
    tokens: Tokens = field(default_factory=lambda: Tokens())
    child_tokens: Tokens = field(default_factory=lambda: Tokens())

    def add(self, step: StepRecord) -> None:
        self.executions += 1
        self.attempts += step.attempts
        self.completed += step.status == StepStatus.COMPLETED
        self.failures += step.status == StepStatus.FAILED
        self.cancelled += step.status == StepStatus.CANCELLED
        self.fallbacks += step.fallback_used
        duration = _elapsed(step.started_at, step.finished_at)
        if duration is not None and step.status in _FINISHED_STEP:
            self.durations.append(duration)

    def add_attempt(self, attempt: AttemptRecord, working: Sequence[Interval]) -> None:
        """A finished attempt and the parts of it its step worked (waits excluded)."""
        took = _elapsed(attempt.started_at, attempt.finished_at)
        if took is not None and not attempt.fallback:
            self.attempt_durations.append(took)
            self.computes.append(sum(stop - start for start, stop in working))

    def metrics(self, step_id: str) -> StepMetrics:
        retries = self.attempts - self.executions
        finished = self.completed + self.failures + self.cancelled
        return StepMetrics(
            step=step_id, executions=self.executions, completed=self.completed,
            failures=self.failures, cancelled=self.cancelled,
            success_rate=_ratio(self.completed, finished),
            duration=Summary.of(self.durations),
            attempt_duration=Summary.of(self.attempt_durations),
            compute=Summary.of(self.computes),
            attempts=self.attempts, retries=retries,
            retries_per_execution=retries / self.executions if self.executions else None,
            fallbacks=self.fallbacks, cache_hits=self.cache_hits, tokens=self.tokens,
            tokens_with_children=self.tokens + self.child_tokens)


def _tally(tallies: dict[str, _StepTally], step_id: str) -> _StepTally:
    """The tally ``step_id`` counts in: its own, or its map's ``ID[*]``."""
    name = item_pattern(step_id)
    found = tallies.get(name)
    if found is None:
        found = tallies[name] = _StepTally()
    return found


def _until(history: RunHistory) -> float:
    """When the run's history ends: its finish, else its latest event or attempt."""
    if history.run.finished_at is not None:
        return history.run.finished_at
    times = [e.at for e in history.events] + [a.finished_at or a.started_at
                                               for a in history.attempts]
    return max(times, default=history.run.started_at or history.run.created_at)


def _fold_attempts(history: RunHistory, tallies: dict[str, _StepTally]) -> float:
    """Add the run's attempts to their tallies; the run's compute time (see the module
    docstring)."""
    waits = step_waits(history.events, _until(history))
    working: list[Interval] = []
    for attempt in history.attempts:
        name = item_pattern(attempt.step_id)
        parts = [] if name in history.waiting else \
            compute_intervals(attempt, waits.get(attempt.step_id, ()))
        working.extend(parts)
        _tally(tallies, attempt.step_id).add_attempt(attempt, parts)
    return covered(working)


def _fold_notes(history: RunHistory, tallies: dict[str, _StepTally]) -> None:
    for event in history.events:
        if event.step_id is None:
            continue
        usage = usage_of(event)
        if usage is not None:
            tally = _tally(tallies, event.step_id)
            tally.tokens = tally.tokens + usage
        elif is_cache_hit(event):
            _tally(tallies, event.step_id).cache_hits += 1


def _fold_children(history: RunHistory, tallies: dict[str, _StepTally],
                   rolled: Mapping[str, Tokens]) -> None:
    """Add to each step that started child runs their rolled-up tokens."""
    for step_id, tokens in by_step(history.run.run_id, history.child_steps, rolled).items():
        tally = _tally(tallies, step_id)
        tally.child_tokens = tally.child_tokens + tokens


def _fold_steps(history: RunHistory, tallies: dict[str, _StepTally]) -> int:
    """Add the run's executed steps to their tallies; the run's retries."""
    retries = 0
    for step in history.steps:
        if step.attempts > 0:
            _tally(tallies, step.step_id).add(step)
            retries += step.attempts - 1
    return retries


def _workflow_metrics(name: str, histories: Sequence[RunHistory],
                      rolled: Mapping[str, Tokens]) -> WorkflowMetrics:
    tallies: dict[str, _StepTally] = {}
    run_retries: list[float] = []
    computes: list[float] = []
    for history in histories:
        run_retries.append(_fold_steps(history, tallies))
        compute_time = _fold_attempts(history, tallies)
        if history.run.status in _FINISHED_RUN and history.run.started_at is not None:
            computes.append(compute_time)
        _fold_notes(history, tallies)
        _fold_children(history, tallies, rolled)
    runs = [h.run for h in histories]
    counts = {status: sum(r.status == status for r in runs) for status in _FINISHED_RUN}
    durations = [d for r in runs if r.status in _FINISHED_RUN
                 if (d := _elapsed(r.started_at, r.finished_at)) is not None]
    steps = tuple(t.metrics(sid) for sid, t in tallies.items())
    return WorkflowMetrics(
        workflow=name, runs=len(runs), completed=counts[RunStatus.COMPLETED],
        failed=counts[RunStatus.FAILED], cancelled=counts[RunStatus.CANCELLED],
        active=len(runs) - sum(counts.values()),
        success_rate=_ratio(counts[RunStatus.COMPLETED], sum(counts.values())),
        duration=Summary.of(durations), compute=Summary.of(computes),
        retries_per_run=_mean(run_retries),
        fallbacks=sum(s.fallbacks for s in steps), steps=steps,
        cache_hits=sum(s.cache_hits for s in steps),
        tokens=sum((s.tokens for s in steps), Tokens()),
        tokens_with_children=sum((rolled.get(r.run_id, Tokens()) for r in runs), Tokens()))


def compute(histories: Iterable[RunHistory], *, since: float | None = None,
            descendants: Iterable[RunHistory] = ()) -> MetricsReport:
    """The metrics of ``histories`` (pure: no store, no clock).  ``since`` is only
    recorded in the report, to say which window the histories cover.  ``descendants``
    are child runs read only for their tokens (not reported): those of the reported
    runs that ``histories`` lacks."""
    by_workflow: dict[str, list[RunHistory]] = {}
    every: dict[str, RunHistory] = {h.run.run_id: h for h in descendants}
    for history in histories:
        by_workflow.setdefault(history.run.workflow, []).append(history)
        every[history.run.run_id] = history
    own = {run_id: tokens_of(h.events) for run_id, h in every.items()}
    rolled = with_descendants({run_id: h.run.parent_run_id for run_id, h in every.items()},
                              own)
    return MetricsReport(
        workflows=tuple(_workflow_metrics(name, by_workflow[name], rolled)
                        for name in sorted(by_workflow)),
        since=since, tokens=sum(own.values(), Tokens()))


# ------------------------------------------------------------------------ the store


async def load_histories(store: Store, *, workflow: str | None = None,
                         since: float | None = None,
                         limit: int = DEFAULT_LIMIT) -> list[RunHistory]:
    """The newest ``limit`` runs (created at or after ``since``) with their steps and
    attempts.  Sequential on purpose: one connection, bounded load on the store."""
    runs = await store.list_runs(RunFilter(workflow=workflow, since=since, limit=limit))
    definitions: dict[tuple[str, int], JSON] = {}
    return [await _history(store, run, definitions) for run in runs]


async def _history(store: Store, run: RunRecord,
                   definitions: dict[tuple[str, int], JSON]) -> RunHistory:
    steps = await store.get_steps(run.run_id)
    definition = await _definition(store, run, definitions)
    return RunHistory(run=run, steps=steps, attempts=await store.get_attempts(run.run_id),
                      events=[e for e in await store.get_events(run.run_id) if _kept(e)],
                      waiting=waiting_steps(definition),
                      child_steps=tuple(parent_steps(definition,
                                                     [s.step_id for s in steps])))


async def load_descendants(store: Store, histories: Sequence[RunHistory], *,
                           limit: int = DEFAULT_LIMIT) -> list[RunHistory]:
    """The child runs (at any depth, at most ``limit``) of ``histories`` that they lack,
    for their tokens: needed when ``histories`` were read for one workflow (a run's
    children are created after it, so the newest runs of every workflow hold them).
    One ``get_run`` per child run and one more per step that starts children."""
    known = {h.run.run_id for h in histories}
    definitions: dict[tuple[str, int], JSON] = {}
    found: list[RunHistory] = []
    queue = list(histories)
    while queue and len(found) < limit:
        parent = queue.pop()
        for run in await _children_missing(store, parent, known, limit - len(found)):
            known.add(run.run_id)
            found.append(child := await _history(store, run, definitions))
            queue.append(child)
    return found


async def _children_missing(store: Store, parent: RunHistory, known: set[str],
                            most: int) -> list[RunRecord]:
    """The child runs of ``parent`` not in ``known`` (at most ``most``)."""
    out: list[RunRecord] = []
    for step_id, keys in parent.child_steps:
        for key in range(keys):
            run_id = child_run_id(parent.run.run_id, step_id, str(key))
            if run_id in known:
                continue
            if len(out) >= most:
                return out
            try:
                out.append(await store.get_run(run_id))
            except RunNotFound:
                break
    return out


def _kept(event: EventRecord) -> bool:
    """Notes, and the step events into and out of ``waiting``."""
    return event.kind == "note" or (event.kind == "step" and "waiting" in (
        event.data.get("from"), event.data.get("to")))


async def _definition(store: Store, run: RunRecord,
                      known: dict[tuple[str, int], JSON]) -> JSON:
    """The run's stored definition (read once per version; None when it cannot be
    read)."""
    key = (run.workflow, run.version)
    if key not in known:
        try:
            known[key] = (await store.get_workflow(*key)).definition
        except StoreError:
            known[key] = None
    return known[key]


async def collect(store: Store, *, workflow: str | None = None, since: float | None = None,
                  limit: int = DEFAULT_LIMIT) -> MetricsReport:
    """``compute`` over ``load_histories`` (and, for one workflow, ``load_descendants``):
    the report ``plait metrics`` shows."""
    histories = await load_histories(store, workflow=workflow, since=since, limit=limit)
    descendants = [] if workflow is None else \
        await load_descendants(store, histories, limit=limit)
    return compute(histories, since=since, descendants=descendants)


def since_cutoff(value: str | float, *, now: float) -> float:
    """``--since 1h`` -> ``now - 3600``.  ValueError (naming the accepted forms) for
    anything ``parse_duration`` refuses."""
    return now - parse_duration(value)


# ------------------------------------------------------------------------ rendering


def _dur(value: float | None) -> str:
    return "-" if value is None else format_duration(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell; the first column left-aligned, the rest
    right-aligned (they are numbers)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    return [line(header), *(line(r) for r in rows)]


_STEP_HEADER = ("step", "execs", "success", "p50", "p95", "p99", "compute p50",
                "compute p95", "retries/exec", "fallbacks", "failures")


def _step_row(s: StepMetrics) -> list[str]:
    return [s.step, str(s.executions), _pct(s.success_rate), _dur(s.duration.p50),
            _dur(s.duration.p95), _dur(s.duration.p99), _dur(s.compute.p50),
            _dur(s.compute.p95), _num(s.retries_per_execution), str(s.fallbacks),
            str(s.failures)]


def _tokens_line(w: WorkflowMetrics) -> str:
    """The workflow's tokens: its own steps', then with its child runs' when they add."""
    line = f"  tokens {w.tokens.text()}"
    if w.tokens_with_children != w.tokens:
        line += f"   with child runs {w.tokens_with_children.text()}"
    return f"{line}   cache hits {w.cache_hits}"


def _token_columns(w: WorkflowMetrics, header: list[str],
                   rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """The tokens and cache hits columns; "with children" only where child runs add."""
    header = [*header, "tokens"]
    rows = [[*row, f"{s.tokens.total:,}"] for row, s in zip(rows, w.steps, strict=True)]
    if w.tokens_with_children != w.tokens:
        header.append("with children")
        rows = [[*row, f"{s.tokens_with_children.total:,}"]
                for row, s in zip(rows, w.steps, strict=True)]
    return [*header, "cache hits"], [[*row, str(s.cache_hits)]
                                     for row, s in zip(rows, w.steps, strict=True)]


def _render_workflow(w: WorkflowMetrics) -> list[str]:
    active = f", {w.active} active" if w.active else ""
    head = [f"{w.workflow}: {w.runs} runs ({w.completed} completed, {w.failed} failed, "
            f"{w.cancelled} cancelled{active})",
            f"  success {_pct(w.success_rate)}   duration p50 {_dur(w.duration.p50)}  "
            f"p95 {_dur(w.duration.p95)}  p99 {_dur(w.duration.p99)}   "
            f"retries/run {_num(w.retries_per_run)}   fallbacks {w.fallbacks}",
            f"  compute p50 {_dur(w.compute.p50)}  p95 {_dur(w.compute.p95)}  "
            f"p99 {_dur(w.compute.p99)}   (the time steps worked; waits excluded)"]
    used = bool(w.tokens_with_children or w.cache_hits)
    if used:
        head.append(_tokens_line(w))
    if not w.steps:
        return head
    header, rows = list(_STEP_HEADER), [_step_row(s) for s in w.steps]
    if used:  # columns only where llm steps, child runs' llm steps or caches are
        header, rows = _token_columns(w, header, rows)
    return [*head, "", *("  " + line for line in _table(header, rows))]


def render_metrics(report: MetricsReport) -> str:
    """A plain-text report: per workflow a summary and a table of its steps."""
    if not report.workflows:
        return "no runs\n"
    blocks = ["\n".join(_render_workflow(w)) for w in report.workflows]
    if report.tokens:  # every run once, so not the sum of the "with child runs" figures
        blocks.append(f"all runs read: tokens {report.tokens.text()}")
    return "\n\n".join(blocks) + "\n"
