"""Gantt charts of one run: what ``plait gantt RUN_ID [--html OUT]`` shows.

API (the CLI calls these)::

    run, steps, attempts = (await store.get_run(run_id), await store.get_steps(run_id),
                            await store.get_attempts(run_id))
    render_terminal(run, steps, attempts, width=shutil.get_terminal_size().columns,
                    color=sys.stdout.isatty())                       -> str
    render_html(run, steps, attempts, graph_edges=edges_of(checked)) -> str  (one file)
    build_timeline(run, steps, attempts, now=None)                   -> Timeline (pure)

Both renderers are pure.  ``now`` (default: the latest time found in the records) ends
the bars of a run that is still going.  ``graph_edges`` are ``(parent, child)`` step id
pairs; with them the HTML page highlights the run's *critical path* as it happened (from
the step that finished last, back through the parent that finished last before it
started: the chain that decided the run's length); without them it highlights the
slowest steps.

Lanes are the steps that ran, in start order (ties in definition order), then the steps
that never ran (skipped, upstream_failed, still pending) in definition order.  Each lane
has one bar per attempt, coloured by outcome; a fallback is its own marker; the thin line
under the bars is the step's whole span, so retry delays show as gaps.

Terminal glyphs: ``█`` completed, ``▒`` failed, a diagonal cross cancelled, ``▓`` running,
``░`` waiting, ``◆`` fallback, ``·`` waiting between attempts (retry delay).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby

from ..core.durations import format_duration
from ..core.states import FINAL_RUN_STATES, StepStatus
from ..core.validate import CheckedWorkflow
from ..store.base import AttemptRecord, RunRecord, StepRecord

__all__ = ["Lane", "Segment", "Timeline", "build_timeline", "critical_path", "edges_of",
           "render_html", "render_terminal"]

# The HTML page lives in gantt_html (imported at the end of this module, which it uses).

Edge = tuple[str, str]


# ------------------------------------------------------------------------ the timeline


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """One attempt (or fallback) of a step.  ``status`` is completed, failed, cancelled,
    running or waiting (an unfinished attempt of a step parked on a person or timer);
    an unfinished attempt ends at the timeline's end (``finished`` False)."""

    step: str
    attempt: int
    fallback: bool
    status: str
    start: float
    end: float
    finished: bool
    error: str | None = None
    worker: str | None = None

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True, kw_only=True)
class Lane:
    """One step: its span (first start to finish, or to the timeline's end) and segments."""

    step: str
    status: StepStatus
    start: float | None
    end: float | None
    segments: tuple[Segment, ...] = ()
    attempts: int = 0
    fallback_used: bool = False
    error: str | None = None
    skip_reason: str | None = None

    @property
    def duration(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start

    @property
    def ran(self) -> bool:
        return self.start is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    run: RunRecord
    origin: float
    end: float
    lanes: tuple[Lane, ...]
    active: bool  # the run is still going: bars end at ``end`` (now)

    @property
    def span(self) -> float:
        return self.end - self.origin


def _latest(run: RunRecord, steps: Sequence[StepRecord],
            attempts: Sequence[AttemptRecord]) -> float:
    times = [run.created_at, run.started_at, run.finished_at]
    times += [t for s in steps for t in (s.started_at, s.finished_at)]
    times += [t for a in attempts for t in (a.started_at, a.finished_at)]
    return max(t for t in times if t is not None)


def _segment(a: AttemptRecord, step: StepRecord, end: float) -> Segment:
    status = a.status
    if a.finished_at is None and step.status == StepStatus.WAITING:
        status = "waiting"
    return Segment(step=a.step_id, attempt=a.attempt, fallback=a.fallback, status=status,
                   start=a.started_at, end=a.finished_at if a.finished_at is not None else end,
                   finished=a.finished_at is not None, error=a.error, worker=a.worker)


def _lane(step: StepRecord, attempts: Sequence[AttemptRecord], end: float) -> Lane:
    segments = tuple(sorted((_segment(a, step, end) for a in attempts),
                            key=lambda s: (s.start, s.fallback, s.attempt)))
    starts = [t for t in (step.started_at, *(s.start for s in segments)) if t is not None]
    start = min(starts) if starts else None
    finish = step.finished_at if step.finished_at is not None else end
    if start is not None and segments:
        finish = max(finish, *(s.end for s in segments))
    return Lane(step=step.step_id, status=step.status, start=start,
                end=finish if start is not None else None, segments=segments,
                attempts=step.attempts, fallback_used=step.fallback_used, error=step.error,
                skip_reason=step.skip_reason)


def build_timeline(run: RunRecord, steps: Sequence[StepRecord],
                   attempts: Sequence[AttemptRecord], *, now: float | None = None) -> Timeline:
    """The chart's model: lanes in display order on one time axis (pure)."""
    active = run.status not in FINAL_RUN_STATES
    latest = _latest(run, steps, attempts)
    end = run.finished_at if not active and run.finished_at is not None else latest
    if active and now is not None:
        end = max(end, now)
    by_step: dict[str, list[AttemptRecord]] = {}
    for a in attempts:
        by_step.setdefault(a.step_id, []).append(a)
    lanes = [_lane(s, by_step.get(s.step_id, []), end) for s in steps]
    order = {s.step_id: i for i, s in enumerate(steps)}
    ran = sorted((ln for ln in lanes if ln.start is not None),
                 key=lambda ln: (ln.start, order[ln.step]))
    rest = [ln for ln in lanes if ln.start is None]
    starts = [run.started_at if run.started_at is not None else run.created_at]
    starts += [ln.start for ln in ran if ln.start is not None]
    origin = min(starts)
    end = max([end, *(ln.end for ln in ran if ln.end is not None)])
    return Timeline(run=run, origin=origin, end=end, lanes=(*ran, *rest), active=active)


# ------------------------------------------------------------------------ critical path


def edges_of(checked: CheckedWorkflow) -> list[Edge]:
    """``(parent, child)`` pairs of a checked workflow, for ``graph_edges``."""
    ids = checked.graph.ids
    return [(ids[p], ids[c]) for c, parents in enumerate(checked.graph.parents)
            for p in parents]


def critical_path(timeline: Timeline, edges: Iterable[Edge]) -> list[str]:
    """The chain of steps that decided the run's length, first to last: from the lane
    that ended last, repeatedly back to the parent that ended last (the one the step
    waited for).  Only steps that ran take part."""
    lanes = {ln.step: ln for ln in timeline.lanes if ln.end is not None}
    parents: dict[str, list[str]] = {}
    for parent, child in edges:
        if parent in lanes:
            parents.setdefault(child, []).append(parent)
    if not lanes:
        return []
    current: str | None = max(lanes.values(), key=lambda ln: ln.end or 0.0).step
    path: list[str] = []
    while current is not None and current not in path:
        path.append(current)
        gating = parents.get(current, [])
        current = max(gating, key=lambda p: lanes[p].end or 0.0) if gating else None
    return path[::-1]


def slowest(timeline: Timeline, count: int = 3) -> list[str]:
    """The ``count`` lanes with the longest spans (at least 1% of the run's span)."""
    ran = [ln for ln in timeline.lanes if ln.duration is not None]
    ran.sort(key=lambda ln: -(ln.duration or 0.0))
    floor = timeline.span * 0.01
    return [ln.step for ln in ran[:count] if (ln.duration or 0.0) > floor]


# ------------------------------------------------------------------------ the time axis

_STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60,
          120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def tick_step(span: float, most: int) -> float:
    """The smallest round step giving at most ``most`` intervals over ``span``."""
    for step in _STEPS:
        if span / step <= most:
            return float(step)
    days = span / most / 86400
    return 86400.0 * 10.0 ** math.ceil(math.log10(days))


def ticks(span: float, most: int) -> list[float]:
    if span <= 0:
        return [0.0]
    step = tick_step(span, most)
    return [i * step for i in range(int(span / step + 1e-9) + 1)]


def tick_label(t: float, step: float) -> str:
    if step >= 3600 and t:
        return f"{t / 3600:g}h"
    if step >= 60 and t:
        return f"{t / 60:g}m"
    if 0 < t < 1:
        return f"{t * 1000:g}ms"
    return f"{round(t, 3):g}s"


def format_span(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(max(0.0, seconds))


# ------------------------------------------------------------------------ terminal

GLYPHS: Mapping[str, str] = {"completed": "█", "failed": "▒", "cancelled": "\u2573",
                             "running": "▓", "waiting": "░", "fallback": "◆", "gap": "·"}
_ANSI: Mapping[str, str] = {"completed": "32", "failed": "31", "cancelled": "90",
                            "running": "34", "waiting": "33", "fallback": "35", "gap": "2",
                            "skipped": "2", "upstream_failed": "35", "pending": "2"}


def _paint(text: str, kind: str, color: bool) -> str:
    code = _ANSI.get(kind)
    return f"\x1b[{code}m{text}\x1b[0m" if color and code and text.strip() else text


class _Scale:
    """Maps times to columns ``0 .. width-1`` of the bar area."""

    def __init__(self, origin: float, span: float, width: int) -> None:
        self.origin, self.span, self.width = origin, span or 1.0, width

    def x(self, t: float) -> float:
        return (t - self.origin) / self.span * self.width

    def cells(self, start: float, end: float) -> tuple[int, int]:
        first = min(self.width - 1, max(0, round(self.x(start))))
        last = min(self.width - 1, max(first, round(self.x(end)) - 1))
        return first, last


def _lane_cells(lane: Lane, scale: _Scale) -> list[str]:
    """The lane's cells as glyph kinds ('' = empty).  Each attempt keeps at least one
    cell of its own, so retries stay visible as separate segments at any scale."""
    cells = [""] * scale.width
    if lane.start is not None and lane.end is not None:
        first, last = scale.cells(lane.start, lane.end)
        cells[first:last + 1] = ["gap"] * (last - first + 1)
    previous = -1
    for seg in lane.segments:
        first, last = scale.cells(seg.start, seg.end)
        if first <= previous:  # push it past the previous one (a retry: past a gap too)
            first = min(scale.width - 1, previous + (1 if seg.fallback else 2))
        last = first if seg.fallback else max(last, first)
        kind = "fallback" if seg.fallback else seg.status
        cells[first:last + 1] = [kind] * (last - first + 1)
        previous = last
    used = [i for i, kind in enumerate(cells) if kind and kind != "gap"]
    for i in range(used[0], used[-1]) if used else ():
        cells[i] = cells[i] or "gap"  # waits between attempts pushed apart above
    return cells


def _suffix(lane: Lane) -> str:
    if not lane.ran:
        reason = f" ({lane.skip_reason})" if lane.skip_reason else ""
        return f"{'-':>7}  {lane.status}{reason}"
    notes = []
    if lane.attempts > 1:
        notes.append(f"{lane.attempts} attempts")
    if lane.fallback_used:
        notes.append("fallback")
    extra = f" ({', '.join(notes)})" if notes else ""
    return f"{format_span(lane.duration):>7}  {lane.status}{extra}"


def _label(step: str, width: int) -> str:
    return step if len(step) <= width else step[:width - 1] + "…"


def _axis(scale: _Scale, indent: int, most: int) -> list[str]:
    marks = ticks(scale.span, most)
    step = tick_step(scale.span, most) if scale.span > 0 else 1.0
    line = ["─"] * scale.width
    labels = [" "] * (scale.width + 12)
    free = 0
    for t in marks:
        col = min(scale.width - 1, round(t / scale.span * scale.width))
        line[col] = "┴"
        text = tick_label(t, step)
        if col >= free:
            labels[col:col + len(text)] = list(text)
            free = col + len(text) + 1
    pad = " " * indent
    return [f"{pad}└{''.join(line)}┘", f"{pad} {''.join(labels).rstrip()}"]


def _legend(color: bool) -> str:
    names = ("completed", "failed", "cancelled", "running", "waiting", "fallback", "gap")
    words = {"gap": "retry wait"}
    return "  ".join(f"{_paint(GLYPHS[n], n, color)} {words.get(n, n)}" for n in names)


def render_terminal(run: RunRecord, steps: Sequence[StepRecord],
                    attempts: Sequence[AttemptRecord], width: int = 100, *,
                    now: float | None = None, color: bool = False) -> str:
    """A text Gantt chart ``width`` columns wide: a header, one row per step (label, bar,
    duration, status), a time axis and a legend.  ``color`` adds ANSI colours."""
    timeline = build_timeline(run, steps, attempts, now=now)
    label_w = min(28, max([4, *(len(ln.step) for ln in timeline.lanes)]))
    suffixes = [_suffix(ln) for ln in timeline.lanes]
    suffix_w = min(40, max([0, *(len(s) for s in suffixes)]))
    bar_w = max(10, width - label_w - suffix_w - 4)
    scale = _Scale(timeline.origin, timeline.span, bar_w)
    lines = [_header(timeline), ""]
    for lane, suffix in zip(timeline.lanes, suffixes, strict=True):
        cells = "".join(_paint(GLYPHS[k] * len(list(run)), k, color) if k else
                        " " * len(list(run)) for k, run in groupby(_lane_cells(lane, scale)))
        label = _label(lane.step, label_w).ljust(label_w)
        lines.append(f"{label} │{cells}│ {_paint(suffix, str(lane.status), color)}")
    lines += _axis(scale, label_w + 1, max(2, bar_w // 8))
    lines += ["", _legend(color)]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _header(timeline: Timeline) -> str:
    run = timeline.run
    verb = "running for" if timeline.active else "took"
    return (f"{run.workflow} v{run.version}  run {run.run_id}  {run.status}  "
            f"{verb} {format_span(run_duration(timeline))}")


def run_duration(timeline: Timeline) -> float:
    run = timeline.run
    start = run.started_at if run.started_at is not None else run.created_at
    return timeline.end - start


from .gantt_html import render_html  # noqa: E402 - the page builds on the timeline above
