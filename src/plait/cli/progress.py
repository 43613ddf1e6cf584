"""Live progress of a run on a terminal.

``ProgressModel`` folds the engine's committed batches (``Engine.listeners``) into
counters, and keeps the latest partial output (``emit`` note) of each running step of
the run: a streamed model answer shows its text growing under the step's line, as the
tail of its last ``EMIT_LINES`` lines.  ``LiveProgress`` shows it with rich.  The
engine calls the listener on the event loop, while rich redraws from its own refresh
thread, so the model keeps its mutable parts behind a lock and the view renders from a
snapshot.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ..core.child_ids import child_run_id
from ..core.states import FINAL_STEP_STATES, StepStatus
from ..core.validate import CheckedWorkflow
from ..store.base import RunRecord, StepRecord, WriteBatch
from .style import STATUS_STYLES, format_seconds

MAX_LISTED = 8  # running steps and failures shown at once; the rest are counted
EMIT_LINES = 3  # lines of a running step's latest partial output shown
EMIT_WIDTH = 100  # characters of each
_FINAL = FINAL_STEP_STATES
_KEYS_TRIED = 1000  # loop iterations looked through to place a child run (see _starter)


@dataclass(frozen=True, slots=True, kw_only=True)
class Running:
    """A running step as listed: one of the run's own (``depth`` 0), or a step of a child
    run listed under the run's step that started it (``label``: ``step > child step``)."""

    label: str
    attempt: int
    started: float
    note: str = ""
    depth: int = 0
    emitted: str = ""  # the step's latest partial output, as text ("": none)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    total: int
    done: int
    completed: int
    failed: int
    skipped: int
    not_run: int  # upstream_failed or cancelled
    running: tuple[Running, ...]  # the run's running steps oldest first, children under
    running_count: int  # the run's own running steps
    retrying: tuple[tuple[str, int, float | None], ...]  # (step, attempts, due)
    failures: tuple[tuple[str, str], ...]  # (step, error)


class _Steps:
    """The steps of one run as the display counts them: every step it has (map items
    included once stored) and which of them ended, so ``done <= total`` always."""

    __slots__ = ("completed", "emitted", "ended", "failed", "failures", "known", "not_run",
                 "retrying", "running", "skipped", "waiting")

    def __init__(self, step_ids: Iterable[str]) -> None:
        self.known: set[str] = set(step_ids)
        self.ended: set[str] = set()
        self.completed = self.failed = self.skipped = self.not_run = 0
        self.running: dict[str, tuple[int, float]] = {}
        self.waiting: set[str] = set()
        self.retrying: dict[str, tuple[int, float | None]] = {}
        self.failures: dict[str, str] = {}
        self.emitted: dict[str, str] = {}  # running step -> its latest partial output

    def change(self, step: str, target: StepStatus, at: float, attempts: int,
               error: str | None, due: float | None) -> None:
        self.known.add(step)
        if self.running.pop(step, None) is not None or target is StepStatus.RUNNING:
            self.emitted.pop(step, None)  # a new attempt, or the end: shown no more
        self.retrying.pop(step, None)
        self.waiting.discard(step)
        if target is StepStatus.RUNNING:
            self.running[step] = (attempts, at)
        elif target is StepStatus.WAITING:
            self.waiting.add(step)
        elif target is StepStatus.QUEUED and attempts > 0:
            self.retrying[step] = (attempts, due)
        if target in _FINAL and step not in self.ended:
            self.ended.add(step)
            self._count(step, target, error)

    def _count(self, step: str, target: StepStatus, error: str | None) -> None:
        if target is StepStatus.COMPLETED:
            self.completed += 1
        elif target is StepStatus.SKIPPED:
            self.skipped += 1
        elif target is StepStatus.FAILED:
            self.failed += 1
            self.failures[step] = error or str(target)
        else:
            self.not_run += 1

    def active(self) -> list[str]:
        """The steps that may have started a child run: running, then waiting."""
        return [*self.running, *self.waiting]


@dataclass(slots=True)
class _Child:
    """A child run (at any depth) of the watched run, counted under ``under``: the
    watched run's step that started it or its ancestor."""

    steps: _Steps
    under: str
    label: str  # prefix of its steps' labels: "sub > ", "sub > inner > "


class ProgressModel:
    """Counts of a run's steps, updated in O(changes) per committed batch.

    ``total`` is the run's steps, growing when a map stores its items (the map step
    counts once, and each item once); ``done`` those that ended.  Steps of child runs
    (``workflow``/``loop`` steps, at any depth) are not in these counts: they are shown
    under the run's step that started them.  The model learns of a child run when the
    engine starts driving it (``watch``, a ``RunObserver`` that watches nothing
    itself: every batch reaches ``apply`` through ``Engine.listeners``)."""

    def __init__(self, step_ids: Sequence[str], run_id: str | None = None) -> None:
        self._lock = threading.Lock()
        self._run_id = run_id  # None: the run of the first batch applied
        self._top = _Steps(step_ids)
        self._children: dict[str, _Child] = {}
        self._under: dict[str, list[_Child]] = {}  # the run's step -> its child runs
        self._started: dict[tuple[str, str], int] = {}  # (run, step) -> children placed

    @property
    def total(self) -> int:
        return len(self._top.known)

    def apply(self, batch: WriteBatch) -> None:
        """An ``Engine.listeners`` callback: quick, and it never raises on odd input."""
        with self._lock:
            if self._run_id is None:
                self._run_id = batch.run_id
            steps = self._steps_of(batch.run_id)
            if steps is None:
                return  # a run that is not this one nor one of its children
            steps.known.update(step for step, _ in batch.new_steps)
            for change in batch.steps:
                steps.change(change.step, change.target, change.at, change.row.attempts,
                             change.row.error, change.row.next_attempt_at)
            if batch.run_id == self._run_id:
                for step, note in batch.notes:
                    emit = note.get("emit") if step in steps.running else None
                    if step is not None and isinstance(emit, dict):
                        steps.emitted[step] = emitted_text(emit.get("value"))

    def _steps_of(self, run_id: str) -> _Steps | None:
        if run_id == self._run_id:
            return self._top
        child = self._children.get(run_id)
        return None if child is None else child.steps

    def watch(self, run: RunRecord, checked: CheckedWorkflow) -> None:
        """``RunObserver.watch``: note a child run of the watched run (any depth) and the
        step it counts under; returns None (it watches nothing itself)."""
        parent_id = run.parent_run_id
        with self._lock:
            if parent_id is None or run.run_id in self._children:
                return
            parent = self._steps_of(parent_id)
            step = None if parent is None else self._starter(run.run_id, parent_id, parent)
            if step is None:
                return
            above = self._children.get(parent_id)
            child = _Child(steps=_Steps(checked.graph.ids),
                           under=above.under if above else step,
                           label=f"{above.label if above else ''}{step} > ")
            self._children[run.run_id] = child
            self._under.setdefault(child.under, []).append(child)

    def _starter(self, run_id: str, parent_id: str, parent: _Steps) -> str | None:
        """The parent's step whose child run ``run_id`` is: child ids derive from the
        parent, the step and a key (``"0"``, or a loop's iteration), so the running and
        waiting steps are tried with the key that comes next, then with any key."""
        active = parent.active()
        for step in active:
            key = self._started.get((parent_id, step), 0)
            if child_run_id(parent_id, step, str(key)) == run_id:
                self._started[parent_id, step] = key + 1
                return step
        for step in active:
            for key in range(_KEYS_TRIED):
                if child_run_id(parent_id, step, str(key)) == run_id:
                    self._started[parent_id, step] = key + 1
                    return step
        return None

    def seed(self, steps: Iterable[StepRecord]) -> None:
        """Start from the stored steps of a run that is resumed (or a retry reusing
        outputs): what already ended counts as done, what was running as running."""
        with self._lock:
            for row in steps:
                self._top.known.add(row.step_id)
                if row.status is not StepStatus.PENDING:
                    self._top.change(row.step_id, row.status, row.started_at or time.time(),
                                     row.attempts, row.error, row.next_attempt_at)

    def snapshot(self) -> Snapshot:
        with self._lock:
            top = self._top
            return Snapshot(
                total=len(top.known), done=len(top.ended), completed=top.completed,
                failed=top.failed, skipped=top.skipped, not_run=top.not_run,
                running=tuple(self._running_lines()), running_count=len(top.running),
                retrying=tuple((s, a, d) for s, (a, d)
                               in list(top.retrying.items())[:MAX_LISTED]),
                failures=tuple(list(top.failures.items())[:MAX_LISTED]))

    def _running_lines(self) -> list[Running]:
        """The run's running steps (oldest first), each followed by the running steps
        of its child runs; at most MAX_LISTED lines."""
        lines: list[Running] = []
        for step, (attempt, started) in self._top.running.items():
            if len(lines) >= MAX_LISTED:
                break
            children = self._under.get(step, ())
            lines.append(Running(label=step, attempt=attempt, started=started,
                                 note=_children_note(children),
                                 emitted=self._top.emitted.get(step, "")))
            lines.extend(Running(label=child.label + inner, attempt=a, started=t, depth=1)
                         for child in children for inner, (a, t) in child.steps.running.items())
        return lines[:MAX_LISTED]


def emitted_text(value: object) -> str:
    """A partial output as the display shows it: a streamed answer's text (an emit
    ``{"content": TEXT, ...}``), a text as it is, anything else as compact JSON; its
    last ``EMIT_LINES`` lines, each cut to its last ``EMIT_WIDTH`` characters."""
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        text = value["content"]
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    lines = text.rstrip().splitlines()[-EMIT_LINES:]
    return "\n".join(line if len(line) <= EMIT_WIDTH else "…" + line[-EMIT_WIDTH + 1:]
                     for line in lines)


def _children_note(children: Sequence[_Child]) -> str:
    """``child run: 1/2 steps done`` (``3 child runs: ...`` for a loop's iterations)."""
    if not children:
        return ""
    done = sum(len(c.steps.ended) for c in children)
    total = sum(len(c.steps.known) for c in children)
    runs = "child run" if len(children) == 1 else f"{len(children)} child runs"
    return f"{runs}: {done}/{total} steps done"


class ProgressView:
    """What the live display draws: a bar, counters, running steps and failures."""

    def __init__(self, title: str, model: ProgressModel) -> None:
        self.title = title
        self.model = model

    def __rich__(self) -> RenderableType:
        snap = self.model.snapshot()
        now = time.time()
        head = Text.assemble(
            (self.title, "bold"), "  ",
            (f"{snap.done}/{snap.total} steps done", ""), "  ",
            (f"{snap.completed} completed", STATUS_STYLES["completed"]), "  ",
            (f"{snap.running_count} running", STATUS_STYLES["running"]), "  ",
            (f"{snap.failed} failed", STATUS_STYLES["failed"] if snap.failed else "dim"), "  ",
            (f"{snap.skipped} skipped", "dim"),
            (f"  {snap.not_run} not run (upstream failed or cancelled)" if snap.not_run
             else "", STATUS_STYLES["upstream_failed"]))
        bar = Table.grid()  # a bare ProgressBar ends without a line break inside a Group
        bar.add_row(ProgressBar(total=max(snap.total, 1), completed=snap.done, width=60))
        parts: list[RenderableType] = [head, bar]
        table = Table.grid(padding=(0, 2))
        for line in snap.running:
            table.add_row(*_running_row(line, now))
            if line.emitted:
                table.add_row("", Text(line.emitted, "dim italic"), "", "")
        shown = sum(1 for line in snap.running if line.depth == 0)
        if snap.running_count > shown:
            table.add_row("", Text(f"... and {snap.running_count - shown} more", "dim"),
                          "", "")
        for step, attempts, due in snap.retrying:
            wait = f"in {format_seconds(max(0.0, due - now))}" if due is not None else ""
            table.add_row(Text("retrying", STATUS_STYLES["queued"]), step, wait,
                          f"after attempt {attempts}")
        for step, error in snap.failures:
            table.add_row(Text("failed", STATUS_STYLES["failed"]), step, "",
                          _first_line(error))
        parts.append(table)
        return Group(*parts)


def _running_row(line: Running, now: float) -> tuple[Text, Text, str, str]:
    notes = [f"attempt {line.attempt}" if line.attempt > 1 else "", line.note]
    style = STATUS_STYLES["running"] if line.depth == 0 else "dim"
    return (Text("running", style), Text("  " * line.depth + line.label),
            format_seconds(now - line.started), "  ".join(n for n in notes if n))


def _first_line(text: str, limit: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


class LiveProgress:
    """A context manager showing ``ProgressView`` until the run ends."""

    def __init__(self, console: Console, view: ProgressView) -> None:
        self._live = Live(view, console=console, refresh_per_second=10, transient=True,
                          redirect_stdout=True, redirect_stderr=True)

    def __enter__(self) -> LiveProgress:
        self._live.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._live.stop()
