"""Live progress of a run on a terminal.

``ProgressModel`` folds the engine's committed batches (``Engine.listeners``) into
counters; ``LiveProgress`` shows it with rich.  The engine calls the listener on the
event loop, while rich redraws from its own refresh thread, so the model keeps its
mutable parts behind a lock and the view renders from a snapshot.
"""

from __future__ import annotations

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

from ..core.states import FINAL_STEP_STATES, StepStatus
from ..store.base import StepRecord, WriteBatch
from .style import STATUS_STYLES, format_seconds

MAX_LISTED = 8  # running steps and failures shown at once; the rest are counted


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    total: int
    done: int
    completed: int
    failed: int
    skipped: int
    not_run: int  # upstream_failed or cancelled
    running: tuple[tuple[str, int, float], ...]  # (step, attempt, started) oldest first
    running_count: int
    retrying: tuple[tuple[str, int, float | None], ...]  # (step, attempts, due)
    failures: tuple[tuple[str, str], ...]  # (step, error)


class ProgressModel:
    """Counts of a run's steps, updated in O(changes) per committed batch."""

    def __init__(self, step_ids: Sequence[str]) -> None:
        self.total = len(step_ids)
        self._lock = threading.Lock()
        self._done = self._completed = self._failed = self._skipped = self._not_run = 0
        self._running: dict[str, tuple[int, float]] = {}
        self._retrying: dict[str, tuple[int, float | None]] = {}
        self._failures: dict[str, str] = {}

    def apply(self, batch: WriteBatch) -> None:
        """An ``Engine.listeners`` callback: quick, and it never raises on odd input."""
        with self._lock:
            for change in batch.steps:
                self._change(change.step, change.source, change.target, change.at,
                             change.row.attempts, change.row.error, change.row.next_attempt_at)

    def seed(self, steps: Iterable[StepRecord]) -> None:
        """Start from the stored steps of a run that is resumed (or a retry reusing
        outputs): what already ended counts as done, what was running as running."""
        with self._lock:
            for row in steps:
                if row.status is not StepStatus.PENDING:
                    self._change(row.step_id, StepStatus.PENDING, row.status,
                                 row.started_at or time.time(), row.attempts, row.error,
                                 row.next_attempt_at)

    def _change(self, step: str, source: StepStatus, target: StepStatus, at: float,
                attempts: int, error: str | None, due: float | None) -> None:
        self._running.pop(step, None)
        self._retrying.pop(step, None)
        if target is StepStatus.RUNNING:
            self._running[step] = (attempts, at)
        elif target is StepStatus.QUEUED and attempts > 0:
            self._retrying[step] = (attempts, due)
        if target in FINAL_STEP_STATES and source not in FINAL_STEP_STATES:
            self._done += 1
            if target is StepStatus.COMPLETED:
                self._completed += 1
            elif target is StepStatus.SKIPPED:
                self._skipped += 1
            elif target is StepStatus.FAILED:
                self._failed += 1
                self._failures[step] = error or str(target)
            else:
                self._not_run += 1

    def snapshot(self) -> Snapshot:
        with self._lock:
            running = list(self._running.items())
            return Snapshot(
                total=self.total, done=self._done, completed=self._completed,
                failed=self._failed, skipped=self._skipped, not_run=self._not_run,
                running=tuple((s, a, t) for s, (a, t) in running[:MAX_LISTED]),
                running_count=len(running),
                retrying=tuple((s, a, d) for s, (a, d)
                               in list(self._retrying.items())[:MAX_LISTED]),
                failures=tuple(list(self._failures.items())[:MAX_LISTED]))


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
        for step, attempt, started in snap.running:
            note = f"attempt {attempt}" if attempt > 1 else ""
            table.add_row(Text("running", STATUS_STYLES["running"]), step,
                          format_seconds(now - started), note)
        if snap.running_count > len(snap.running):
            table.add_row("", Text(f"... and {snap.running_count - len(snap.running)} more",
                                   "dim"), "", "")
        for step, attempts, due in snap.retrying:
            wait = f"in {format_seconds(max(0.0, due - now))}" if due is not None else ""
            table.add_row(Text("retrying", STATUS_STYLES["queued"]), step, wait,
                          f"after attempt {attempts}")
        for step, error in snap.failures:
            table.add_row(Text("failed", STATUS_STYLES["failed"]), step, "",
                          _first_line(error))
        parts.append(table)
        return Group(*parts)


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
