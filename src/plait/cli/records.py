"""Rendering stored runs: the ``plait runs`` list and the ``plait show`` page, as JSON
and as text (rich tables on a terminal, aligned plain columns in a pipe).

Times: JSON holds ISO-8601 UTC (``2024-05-01T12:00:00.123456Z``) like every ``--json``
of the CLI; text shows UTC too, and says so in its headings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..core.model import JSON, JSONDict
from ..core.states import FINAL_RUN_STATES, FINAL_STEP_STATES
from ..rundoc.notes import wait_notes, waiting_json
from ..rundoc.records import (  # the run document, which `plait show --json` prints
    LogRecord,
    attempt_status,
    duration,
    parked_steps,
)
from ..runtime.results import StepResult, iso
from ..store.base import AttemptRecord, EventRecord, RunRecord, StepRecord
from .output import MAX_NOTE, json_head, output_json, status_style, step_note
from .style import format_seconds

MAX_INPUT = 300  # characters of a run's input shown by `plait show` outside --json


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLine:
    """One line of ``plait runs``: the run and how many of its steps ended."""

    run: RunRecord
    steps_done: int
    steps_total: int

    @classmethod
    def of(cls, run: RunRecord, steps: Sequence[StepRecord]) -> RunLine:
        done = sum(1 for s in steps if s.status in FINAL_STEP_STATES)
        return cls(run=run, steps_done=done, steps_total=len(steps))


def elapsed_text(run: RunRecord, now: float) -> str:
    """The duration of an ended run; the time so far, marked ``+``, of an active one."""
    if run.started_at is None:
        return "-"
    if run.finished_at is None:
        return format_seconds(max(0.0, now - run.started_at)) + "+"
    return format_seconds(run.finished_at - run.started_at)


def utc(ts: float | None, *, millis: bool = False) -> str:
    """``2024-05-01 12:00:00`` (UTC), ``-`` when unknown."""
    if ts is None:
        return "-"
    text = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return text[:-3] if millis else text[:-7]


def first_line(text: str | None, limit: int = MAX_NOTE) -> str:
    line = text.strip().splitlines()[0] if text and text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


# ------------------------------------------------------------------ tables


def print_table(console: Console, headers: Sequence[str], rows: Sequence[Sequence[str]],
                *, status_column: int | None = None, title: str | None = None) -> None:
    """A rich table on a terminal; aligned columns, no colour and no wrapping in a pipe
    (the last column is not padded, so each row stays one line)."""
    if console.is_terminal:
        table = Table(title=title, title_justify="left", expand=False)
        for i, header in enumerate(headers):
            last = i == len(headers) - 1
            table.add_column(header, no_wrap=not last, overflow="fold" if last else "ellipsis")
        for row in rows:
            cells: list[str | Text] = list(row)
            if status_column is not None:
                status = row[status_column]
                cells[status_column] = Text(status, status_style(status))
            table.add_row(*cells)
        console.print(table)
        return
    if title:
        console.print(title, markup=False, highlight=False)
    console.print(plain_columns(headers, rows), end="", markup=False, highlight=False)


def plain_columns(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    table = [list(headers), *(list(r) for r in rows)]
    widths = [max(len(row[c]) for row in table) for c in range(len(headers) - 1)]
    lines = ["  ".join([*(cell.ljust(widths[c]) for c, cell in enumerate(row[:-1])),
                        row[-1]]).rstrip() for row in table]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ plait runs


RUNS_HEADERS = ("RUN ID", "WORKFLOW", "STATUS", "STARTED (UTC)", "DURATION", "STEPS")


def runs_json(summaries: Sequence[RunLine]) -> JSONDict:
    """``{"runs": [...]}``, newest first (see ``run_summary_json``)."""
    return {"runs": [run_summary_json(s) for s in summaries]}


def run_summary_json(summary: RunLine) -> JSONDict:
    run = summary.run
    return {"run_id": run.run_id, "workflow": run.workflow, "version": run.version,
            "fingerprint": run.fingerprint, "status": str(run.status), "error": run.error,
            "created_at": iso(run.created_at), "started_at": iso(run.started_at),
            "finished_at": iso(run.finished_at), "duration_s": duration(run),
            "steps_done": summary.steps_done, "steps_total": summary.steps_total,
            "retry_of": run.retry_of, "parent_run_id": run.parent_run_id}


def runs_rows(summaries: Sequence[RunLine], now: float) -> list[list[str]]:
    """One row per run, newest first, each child run (a `workflow` or `loop` step's)
    right under its parent when the parent is listed, its workflow indented."""
    return [[s.run.run_id, "  " * depth + ("└ " if depth else "")
             + f"{s.run.workflow}@{s.run.version}", str(s.run.status),
             utc(s.run.started_at), elapsed_text(s.run, now),
             f"{s.steps_done}/{s.steps_total}"] for s, depth in nested(summaries)]


def nested(summaries: Sequence[RunLine]) -> list[tuple[RunLine, int]]:
    """The runs with each child moved under its parent (oldest child first) when the
    parent is among them, with its depth."""
    listed = {s.run.run_id for s in summaries}
    children: dict[str, list[RunLine]] = {}
    for s in summaries:
        parent = s.run.parent_run_id
        if parent is not None and parent in listed and parent != s.run.run_id:
            children.setdefault(parent, []).append(s)
    out: list[tuple[RunLine, int]] = []
    seen: set[str] = set()

    def add(s: RunLine, depth: int) -> None:
        if s.run.run_id in seen:
            return
        seen.add(s.run.run_id)
        out.append((s, depth))
        for child in sorted(children.get(s.run.run_id, ()), key=lambda c: c.run.created_at):
            add(child, depth + 1)

    for s in summaries:
        if s.run.parent_run_id not in listed or s.run.parent_run_id == s.run.run_id:
            add(s, 0)
    for s in summaries:  # a cycle of parents (never made by plait): listed anyway
        add(s, 0)
    return out


# ------------------------------------------------------------------ plait show


CHILD_HEADERS = ("STEP", "CHILD RUN", "WORKFLOW", "STATUS")


def child_rows(children: Mapping[str, Sequence[RunRecord]]) -> list[list[str]]:
    return [[step_id, child.run_id, f"{child.workflow}@{child.version}", str(child.status)]
            for step_id, runs in children.items() for child in runs]


MAX_SHOW_LINES = 40  # of a waiting step's `show` in `plait show` (all of it: --json)


def waiting_sections(steps: Sequence[StepRecord],
                     events: Sequence[EventRecord]) -> list[tuple[str, list[str]]]:
    """``plait show``: per waiting step, what the person is asked (prompt, then the
    content under review as indented JSON, cut at ``MAX_SHOW_LINES``)."""
    notes, parked = wait_notes(events), parked_steps(steps)
    out: list[tuple[str, list[str]]] = []
    for s in steps:
        if s.step_id not in parked:
            continue
        entry = waiting_json(notes.get(s.step_id))
        if entry["kind"] == "child":
            out.append((f"waiting for child run {entry['child_run_id']}: {s.step_id}", []))
            continue
        if entry["kind"] in ("event", "sleep"):
            what = f"event {entry['event']}" if entry["kind"] == "event" else "a time"
            until = [f"until   {entry['until']}"] if entry["until"] else []
            out.append((f"waiting for {what}: {s.step_id}", until))
            continue
        lines = [f"prompt  {entry['prompt']}" if entry["prompt"] else "prompt  (none)"]
        if entry["show"] is not None:
            lines += ["show", *_show_lines(entry["show"])]
        out.append((f"waiting for approval: {s.step_id}", lines))
    return out


def _show_lines(show: JSON) -> list[str]:
    text = show if isinstance(show, str) else json.dumps(show, indent=2, ensure_ascii=False)
    lines = text.splitlines() or [""]
    cut = [f"  {line}" for line in lines[:MAX_SHOW_LINES]]
    if len(lines) > MAX_SHOW_LINES:
        cut.append(f"  … ({len(lines) - MAX_SHOW_LINES} more lines: use --json for all)")
    return cut


def header_lines(run: RunRecord, now: float, *,
                 owner_alive: bool = True) -> list[tuple[str, str]]:
    """``(label, value)`` lines heading ``plait show``; ``owner_alive`` False says the
    process that was executing the run is gone."""
    status = str(run.status)
    if run.error and run.status in FINAL_RUN_STATES:
        first = first_line(run.error)
        if first != status:
            status += f": {first}"
    lines = [("run", run.run_id),
             ("workflow", f"{run.workflow} v{run.version} (fingerprint {run.fingerprint})"),
             ("status", status)]
    if run.retry_of:
        lines.append(("retry of", run.retry_of))
    if run.parent_run_id:
        lines.append(("parent run", run.parent_run_id))
    if run.status not in FINAL_RUN_STATES:
        if run.owner:
            lines.append(("executed by", run.owner if owner_alive else
                          f"{run.owner}, which is gone: `plait resume {run.run_id}` "
                          f"continues the run"))
        if run.cancel_requested:
            lines.append(("cancel", "requested"))
        if run.wake_at is not None:
            lines.append(("continues", f"{utc(run.wake_at)} UTC"
                          + (" (its time has come)" if run.wake_at <= now
                             else f" (in {max(1, round(run.wake_at - now))}s)")))
    lines += [("created", f"{utc(run.created_at)} UTC"),
              ("started", f"{utc(run.started_at)} UTC" if run.started_at else "-"),
              ("finished", f"{utc(run.finished_at)} UTC" if run.finished_at else "-"),
              ("duration", elapsed_text(run, now)),
              ("input", _clip(json_head(run.input, MAX_INPUT), MAX_INPUT))]
    if run.output is not None:
        lines.append(("output", output_json(run.output)[0]))
    return lines


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "… (use --json for all)"


def header_text(lines: Sequence[tuple[str, str]], color: bool) -> Text:
    width = max(len(label) for label, _ in lines)
    text = Text()
    for label, value in lines:
        text.append(label.ljust(width + 2), "bold" if color else "")
        style = status_style(value.split(":", 1)[0]) if label == "status" and color else ""
        text.append(value + "\n", style)
    return text


STEP_HEADERS = ("STEP", "STATUS", "ATTEMPTS", "DURATION", "ERROR / SKIP REASON")
ATTEMPT_HEADERS = ("STEP", "ATTEMPT", "STATUS", "STARTED (UTC)", "FINISHED (UTC)",
                   "DURATION", "WORKER", "ERROR")


def step_rows(steps: Sequence[StepRecord]) -> list[list[str]]:
    rows = []
    for s in steps:
        result = StepResult.from_record(s)
        rows.append([s.step_id, str(s.status), str(s.attempts),
                     format_seconds(result.duration_s), step_note(result)])
    return rows


def attempt_rows(attempts: Sequence[AttemptRecord], now: float,
                 parked: frozenset[str] = frozenset()) -> list[list[str]]:
    rows = []
    for a in attempts:
        took = (a.finished_at if a.finished_at is not None else now) - a.started_at
        shown = format_seconds(took) + ("" if a.finished_at is not None else "+")
        rows.append([a.step_id, f"{a.attempt} (fallback)" if a.fallback else str(a.attempt),
                     attempt_status(a, parked), utc(a.started_at, millis=True),
                     utc(a.finished_at, millis=True), shown, a.worker or "-", first_line(a.error)])
    return rows


def step_detail_lines(step: str, entry: JSONDict,
                      attempts: Sequence[JSONDict]) -> list[tuple[str, str]]:
    """``plait show RUN --step STEP``: the step's facts, one ``(label, value)`` a line
    (an llm step's conversation follows them: ``llm_calls.conversation_lines``)."""
    lines = [("step", step), ("status", str(entry.get("status"))),
             ("attempts", str(entry.get("attempts")))]
    for label, key in (("started", "started_at"), ("finished", "finished_at"),
                       ("skip reason", "skip_reason"), ("error", "error")):
        if entry.get(key):
            lines.append((label, str(entry[key])))
    usage = entry.get("usage")
    if isinstance(usage, dict):
        lines.append(("tokens", f"{usage.get('total_tokens', 0):,} (prompt "
                                f"{usage.get('prompt_tokens', 0):,}, completion "
                                f"{usage.get('completion_tokens', 0):,})"))
    children = entry.get("child_run_ids")
    if isinstance(children, list) and children:
        lines.append(("child runs", ", ".join(str(c) for c in children)))
    for a in attempts:
        lines.append((f"attempt {a.get('attempt')}", f"{a.get('status')}"
                      + (f": {first_line(str(a['error']))}" if a.get("error") else "")))
    if entry.get("llm") is None and entry.get("output") is not None:
        lines.append(("output", output_json(entry["output"])[0]))
    return lines


# ------------------------------------------------------------------ step logs


def log_sections(logs: Sequence[LogRecord]) -> list[tuple[str, list[str]]]:
    """``plait show``'s logs: per step (in the order steps first logged), one line per
    record (``12:00:00.123 WARNING #1 message``; later lines of a message indented)."""
    sections: dict[str, list[str]] = {}
    for log in logs:
        lines = sections.setdefault(log.step or "(run)", [])
        time_of_day = utc(log.at, millis=True).split(" ", 1)[-1]
        attempt = f"#{log.attempt}" if log.attempt is not None else "-"
        first, *rest = log.message.splitlines() or [""]
        lines.append(f"{time_of_day} {log.level:<8} {attempt:<3} {first}")
        lines += [f"    {line}" for line in rest]
    return list(sections.items())
