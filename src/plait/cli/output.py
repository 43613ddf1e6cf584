"""Rendering for the command line: definition problems, plans, graphs and run results.

Terminal output goes through rich; when stdout is not a terminal everything is plain,
unwrapped text so it can be piped and parsed.  ``--json`` output is one JSON object.
rich is imported by the functions that build its objects: a run whose summary goes to a
pipe never loads it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

from ..core.model import JSON, WorkflowSpec
from ..core.plan import Plan
from ..core.validate import CheckedWorkflow
from ..errors import DefinitionError
from ..runtime.results import RunResult, StepResult
from .style import STATUS_STYLES, format_seconds

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

MAX_PLAIN_OUTPUT = 2000  # characters of a run's output shown outside --json
MAX_NOTE = 160


def console(file: TextIO | None = None, *, stderr: bool = False) -> Console:
    """A console that never highlights or wraps what it is given (plain when piped)."""
    from rich.console import Console

    return Console(file=file, stderr=stderr, highlight=False, soft_wrap=True)


def print_json(value: object, out: TextIO) -> None:
    out.write(json.dumps(value, ensure_ascii=False) + "\n")
    out.flush()


# ------------------------------------------------------------------ problems


def problems_text(error: DefinitionError, target: str, *,
                  what: str = "workflow definition") -> Text:
    """Every problem of an invalid definition (or of ``what`` else), one per line, each
    with its location."""
    from rich.text import Text

    source = error.source or target
    count = len(error.problems)
    noun = "problem" if count == 1 else "problems"
    text = Text()
    text.append(f"{source}", "bold")
    text.append(f": invalid {what} ({count} {noun})\n", "red")
    for problem in sorted(error.problems, key=lambda p: _natural(p.location)):
        text.append("  - ")
        if problem.location:
            text.append(problem.location, "yellow")
            text.append(": ")
        text.append(problem.message)
        if problem.hint:
            text.append(f" ({problem.hint})", "cyan")
        text.append("\n")
    return text


def _natural(location: str) -> list[tuple[int, int | str]]:
    """Sort key putting ``steps[2]`` before ``steps[10]``."""
    return [(0, int(part)) if part.isdigit() else (1, part)
            for part in re.split(r"(\d+)", location) if part]


def error_text(message: str, *, heading: str = "error") -> Text:
    from rich.text import Text

    text = Text()
    text.append(f"{heading}: ", "bold red")
    text.append(message.rstrip("\n") + "\n")
    return text


def valid_text(target: str, checked: CheckedWorkflow) -> Text:
    from rich.text import Text

    steps = len(checked.spec.steps)
    text = Text()
    text.append(target, "bold")
    text.append(": valid", "green")
    text.append(f" (workflow {checked.name!r}, {steps} step{'s' if steps != 1 else ''}, "
                f"fingerprint {checked.fingerprint})\n")
    _schedules_text(text, checked.spec, time.time())
    return text


def _schedules_text(text: Text, spec: WorkflowSpec, now: float) -> None:
    """A line per schedule with its next fire (to check what a cron expression means),
    and the concurrency key."""
    from ..core.concurrency_key import runs_per_key
    from ..core.schedule import due

    for schedule in spec.schedules:
        next_fire = due(schedule, None, now).next_fire
        when = "never" if next_fire is None else datetime.fromtimestamp(
            next_fire, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        text.append(f"  schedule {schedule.cron!r} ({schedule.timezone}, catch_up "
                    f"{schedule.catch_up}): next fire {when}\n")
    if spec.concurrency_key is not None:
        text.append(f"  concurrency key {spec.concurrency_key!r}: at most "
                    f"{runs_per_key(spec)} running run(s) per key\n")


# ------------------------------------------------------------------ plans


def plan_text(name: str, plan: Plan) -> Text:
    from rich.text import Text

    text = Text()
    text.append(f"workflow {name}", "bold")
    text.append(f": {plan.steps} steps, {plan.edges} edges, depth {plan.depth}\n")
    text.append("stages", "bold")
    text.append(" (steps of a stage may run at the same time; each step starts as soon "
                "as its own parents are done):\n")
    width = len(str(len(plan.stages)))
    for number, stage in enumerate(plan.stages, start=1):
        text.append(f"  {number:>{width}}  ", "dim")
        text.append(", ".join(stage) + "\n")
    text.append("critical path", "bold")
    length = len(plan.critical_path)
    text.append(f" ({length} step{'s' if length != 1 else ''}): "
                + " -> ".join(plan.critical_path) + "\n")
    return text


# ------------------------------------------------------------------ run results


def step_note(step: StepResult) -> str:
    """Why a step ended as it did: its error, skip reason, or the fallback it used."""
    if step.fallback_used:
        note = "fallback used" + (f" after: {step.error}" if step.error else "")
    elif step.status in ("failed", "upstream_failed") and step.error:
        note = step.error
    else:
        note = step.skip_reason or step.error or ""
    line = note.strip().splitlines()[0] if note.strip() else ""
    return line if len(line) <= MAX_NOTE else line[: MAX_NOTE - 1] + "…"


def status_line(result: RunResult) -> str:
    """The final line of ``plait run``: ``run <status>...`` plus what identifies it."""
    reason = ""
    if result.status in ("failed", "cancelled") and result.error:
        first = result.error.strip().splitlines()[0]
        if first != result.status:
            reason = f": {first}"
    elif result.status == "waiting":
        reason = " for " + " and ".join(_waited_for(result))
    took = f" in {format_seconds(result.duration_s)}" if result.duration_s is not None else ""
    return (f"run {result.status}{took}{reason} "
            f"(workflow {result.workflow} v{result.version}, run {result.run_id})")


def waiting_hint(result: RunResult) -> str | None:
    """How to go on when steps wait for a person, or None."""
    maps = {sid.rpartition("[")[0] for sid in result.steps if sid.endswith("]")}
    waiting = [sid for sid, step in result.steps.items()
               if step.status == "waiting" and sid not in maps]  # a map waits for items
    if not waiting:
        return None
    said = [_go_on(result, sid) for sid in waiting]
    approvals = [sid for sid, line in zip(waiting, said, strict=True) if line is None]
    lines = [line for line in said if line is not None]
    if approvals:
        commands = "; ".join(f"plait approve {result.run_id} {sid} [--reject]"
                             for sid in approvals)
        lines.insert(0, f"waiting for a decision on {', '.join(approvals)}: {commands}")
    return "\n".join(lines)


_WAITED = {"event": "an event", "sleep": "a sleep to end", "child": "a child run"}


def _waited_for(result: RunResult) -> list[str]:
    """What the run's waiting steps wait for (``an approval``, ``an event``, ...), each
    once, in a fixed order; an approval when nothing says otherwise."""
    kinds = {str((result.waits.get(sid) or {}).get("kind", "approval"))
             for sid, step in result.steps.items() if step.status == "waiting"
             and not any(other.startswith(sid + "[") for other in result.steps)}
    said = [_WAITED.get(kind, "an approval") for kind in ("approval", *_WAITED)
            if kind in kinds]
    return said or ["an approval"]


def _go_on(result: RunResult, step: str) -> str | None:
    """How step ``step`` goes on when it waits for an event or a time (None: for a
    person)."""
    wait = result.waits.get(step) or {}
    if wait.get("kind") == "event":
        return (f"{step} waits for event {wait.get('event')}: plait signal "
                f"{result.run_id} {wait.get('event')} [--data JSON]")
    if wait.get("kind") == "sleep":
        return f"{step} sleeps until {wait.get('until')}"
    if wait.get("kind") == "child":
        return f"{step} waits for child run {wait.get('child_run_id')} to end"
    return None


def summary_table(result: RunResult) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{result.workflow} v{result.version}  run {result.run_id}",
                  title_justify="left", expand=False)
    table.add_column("step", style="bold", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("attempts", justify="right")
    table.add_column("duration", justify="right", no_wrap=True)
    table.add_column("error / skip reason", overflow="fold")
    for step_id, step in result.steps.items():
        table.add_row(step_id, Text(step.status, STATUS_STYLES.get(step.status, "")),
                      str(step.attempts), format_seconds(step.duration_s), step_note(step))
    return table


def _rows(result: RunResult) -> Iterable[tuple[str, str, str, str, str]]:
    yield ("STEP", "STATUS", "ATTEMPTS", "DURATION", "ERROR / SKIP REASON")
    for step_id, step in result.steps.items():
        yield (step_id, step.status, str(step.attempts), format_seconds(step.duration_s),
               step_note(step))


def plain_summary(result: RunResult) -> str:
    """The summary for a pipe or a file: aligned columns, no colour, no wrapping."""
    rows = list(_rows(result))
    widths = [max(len(row[c]) for row in rows) for c in range(4)]
    lines = ["  ".join([*(cell.ljust(widths[c]) for c, cell in enumerate(row[:4])),
                        row[4]]).rstrip() for row in rows]
    if result.output is not None:
        lines.append(f"output: {output_json(result.output)[0]}")
    return "\n".join(lines) + "\n"


_ENCODER = json.JSONEncoder(ensure_ascii=False)


def output_json(value: JSON) -> tuple[str, bool]:
    """A run's output as compact JSON, cut at MAX_PLAIN_OUTPUT characters (and whether
    it was cut): the whole of it is for ``--json``."""
    shown = json_head(value, MAX_PLAIN_OUTPUT)
    if len(shown) <= MAX_PLAIN_OUTPUT:
        return shown, False
    return shown[:MAX_PLAIN_OUTPUT] + "… (truncated; use --json for all of it)", True


def json_head(value: JSON, limit: int) -> str:
    """The JSON text of ``value``, encoded only until it passes ``limit`` characters:
    showing the start of a 16 MiB output costs no more than a small one."""
    parts: list[str] = []
    size = 0
    for chunk in _ENCODER.iterencode(value):
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return "".join(parts)


def status_style(status: str) -> str:
    return STATUS_STYLES.get(status, "")
