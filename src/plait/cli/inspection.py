"""The commands that read history: ``plait runs``, ``show``, ``gantt``, ``metrics``,
``sla`` and ``notifications``.  They never create a database (a missing SQLite file
reads as no runs) and never change a run; the numbers and charts come from ``plait.observe``."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

from ..core.model import JSONDict
from ..core.states import FINAL_RUN_STATES, RunStatus
from ..errors import DefinitionError, PlaitError, StoreError
from ..rundoc import llm_calls as document_llm
from ..rundoc import notes
from ..rundoc import records as document
from ..rundoc.journal import add_journal, journal_sections
from ..runtime import continuation
from ..runtime.engine import Engine, owner_alive
from ..runtime.results import RunResult
from ..store.base import (
    AttemptRecord,
    EventRecord,
    JournalEntry,
    RunFilter,
    RunRecord,
    StepRecord,
    Store,
)
from ..store.url import shown_url
from . import llm_calls, output, records
from .session import Refusal, guarded, opened_store
from .settings import ExitCode

if TYPE_CHECKING:
    from rich.console import Console


async def runs_command(*, db: str, workflow: str | None, status: str | None, limit: int,
                       as_json: bool, children: bool = False) -> ExitCode:
    """``plait runs``: newest first, with how many steps of each ended; top-level runs
    only unless ``children`` (``--all``)."""

    async def body(store: Store) -> ExitCode:
        wanted = RunFilter(workflow=workflow, limit=limit, top_level=not children,
                           status=RunStatus(status) if status else None)
        summaries = [records.RunLine.of(run, await store.get_steps(run.run_id))
                     for run in await store.list_runs(wanted)]
        if as_json:
            output.print_json(records.runs_json(summaries), sys.stdout)
            return ExitCode.OK
        console = output.console()
        if not summaries:
            console.print(f"no runs in {shown_url(db)}" + _filters(workflow, status),
                          markup=False)
            return ExitCode.OK
        records.print_table(console, records.RUNS_HEADERS,
                            records.runs_rows(summaries, time.time()), status_column=2)
        return ExitCode.OK

    return await guarded(db, body, read_only=True)


def _filters(workflow: str | None, status: str | None) -> str:
    parts = [f"workflow {workflow}" if workflow else "", f"status {status}" if status else ""]
    shown = " and ".join(p for p in parts if p)
    return f" with {shown}" if shown else ""


async def show_command(run_id: str, *, db: str, as_json: bool,
                       step: str | None = None) -> ExitCode:
    """``plait show``: the run, each step, each attempt, then what each step logged;
    with ``step``, that step alone (and the conversation of its model call)."""

    async def body(store: Store) -> ExitCode:
        read = await store.read_run(run_id)  # one statement on PostgreSQL
        run, steps, attempts, events = read.run, read.steps, read.attempts, read.events
        definition = None if read.workflow is None else read.workflow.definition
        logs = document.LogRecord.from_events(events)
        children = await document.child_runs(store, run, definition)
        stuck = continuation.stuck(run, steps, events, now=time.time())
        rolled = await document_llm.roll_up(store, run, events, [s.step_id for s in steps],
                                            definition)
        journal = read.journal
        if as_json or step is not None:
            value = notes.add_history(document.show_json(run, steps, attempts, logs), events)
            document.add_child_runs(value, children)
            document.add_waiting(value, events)
            add_journal(value, journal)
            document_llm.add_llm(value, events, rolled)
            value["continuation"] = stuck
            if step is not None:
                return _show_step(value, step, events, as_json=as_json)
            output.print_json(value, sys.stdout)
            return ExitCode.OK
        _show_text(run, steps, attempts, events, logs, children, rolled, stuck, journal)
        return ExitCode.OK

    return await guarded(db, body, read_only=True)


def _show_text(run: RunRecord, steps: Sequence[StepRecord], attempts: Sequence[AttemptRecord],
               events: Sequence[EventRecord], logs: Sequence[document.LogRecord],
               children: dict[str, list[RunRecord]], rolled: document_llm.RollUp,
               stuck: JSONDict | None, journal: Sequence[JournalEntry] = ()) -> None:
    now = run.finished_at if run.status in FINAL_RUN_STATES and run.finished_at \
        else time.time()
    console = output.console()
    alive = run.owner is None or owner_alive(run.owner)
    lines = records.header_lines(run, now, owner_alive=alive)
    tokens = llm_calls.tokens_line(rolled)
    lines += [tokens] if tokens else []
    console.print(records.header_text(lines, console.is_terminal), end="")
    console.print()
    records.print_table(console, records.STEP_HEADERS, records.step_rows(steps),
                        status_column=1, title="steps")
    if children:
        console.print()
        records.print_table(console, records.CHILD_HEADERS,
                            records.child_rows(children), title="child runs")
    rows = llm_calls.token_rows(rolled, llm_calls.models_of(events),
                                [s.step_id for s in steps])
    if rows:
        console.print()
        records.print_table(console, llm_calls.MODEL_HEADERS, rows, title="tokens by step")
    if attempts:
        console.print()
        rows = records.attempt_rows(attempts, now, document.parked_steps(steps))
        records.print_table(console, records.ATTEMPT_HEADERS, rows, status_column=2,
                            title="attempts")
    sections = [*((f"logs of {sid}", lines) for sid, lines in records.log_sections(logs)),
                *((f"emitted by {sid}", lines) for sid, lines in notes.emit_sections(events)),
                *((f"journaled calls of {sid}", lines)
                  for sid, lines in journal_sections(journal))]
    for title, lines_ in sections:
        _section(console, title, lines_, "bold")
    for title, lines_ in records.waiting_sections(steps, events):
        _section(console, title, lines_, "bold yellow")
    # a decision that could not be applied: say why and what continues the run
    hint = continuation.stuck_text(stuck) if stuck is not None else \
        output.waiting_hint(_with_waits(RunResult.from_records(run, list(steps)), events))
    if hint:
        console.print()
        console.print(Text(hint, "yellow"))


def _with_waits(result: RunResult, events: Sequence[EventRecord]) -> RunResult:
    """``result`` with what its waiting steps wait for (for the hint)."""
    result.waits = notes.waits_of({sid: s.status for sid, s in result.steps.items()},
                                  events)
    return result


def _section(console: Console, title: str, lines: Sequence[str], style: str) -> None:
    console.print()
    console.print(Text(title, style if console.is_terminal else ""))
    console.print("\n".join(lines), markup=False, highlight=False)


def _show_step(value: JSONDict, step: str, events: Sequence[EventRecord], *,
               as_json: bool) -> ExitCode:
    """``plait show RUN --step STEP``: the step's entry, its attempts and, for a model
    call, the messages sent and the answer."""
    steps = value.get("steps")
    entry = steps.get(step) if isinstance(steps, dict) else None
    if not isinstance(entry, dict):
        known = ", ".join(list(steps)[:20]) if isinstance(steps, dict) else ""
        raise Refusal(f"run {value.get('run_id')} has no step {step!r} (its steps: {known})")
    attempts = value.get("attempts")
    mine = [a for a in attempts if isinstance(a, dict) and a.get("step") == step] \
        if isinstance(attempts, list) else []
    if as_json:
        output.print_json({"run_id": value.get("run_id"), "step": step, **entry,
                           "attempts": mine}, sys.stdout)
        return ExitCode.OK
    console = output.console()
    console.print(records.header_text(records.step_detail_lines(step, entry, mine),
                                      console.is_terminal), end="")
    talk = llm_calls.conversation_lines(document_llm.requests(events).get(step),
                                        entry.get("output"))
    if talk:
        console.print()
        console.print("\n".join(talk), markup=False, highlight=False)
    return ExitCode.OK


async def gantt_command(run_id: str, *, db: str, html: str | None) -> ExitCode:
    """``plait gantt``: a chart on the terminal, or one self-contained HTML file."""
    from ..observe import gantt

    async def body(store: Store) -> ExitCode:
        run = await store.get_run(run_id)
        steps = await store.get_steps(run_id)
        attempts = await store.get_attempts(run_id)
        now = None if run.status in FINAL_RUN_STATES else time.time()
        if html is None:
            console = output.console()
            color = console.is_terminal and not os.environ.get("NO_COLOR")
            sys.stdout.write(gantt.render_terminal(run, steps, attempts, console.width,
                                                   now=now, color=color))
            return ExitCode.OK
        edges = await _edges(store, run.workflow, run.version)
        page = gantt.render_html(run, steps, attempts, graph_edges=edges, now=now)
        target = Path(html)
        try:
            target.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise Refusal(f"cannot write {html}: {exc.strerror or exc}") from exc
        sys.stdout.write(f"{target.resolve()}\n")
        return ExitCode.OK

    return await guarded(db, body, read_only=True)


async def _edges(store: Store, name: str, version: int) -> list[tuple[str, str]] | None:
    """The definition's edges, for the critical path; None when it cannot be loaded
    (the page then highlights the slowest steps)."""
    from ..observe.gantt import edges_of

    engine = Engine(store)
    try:
        return edges_of(await engine.stored_workflow(name, version))
    except PlaitError:
        return None
    finally:
        engine.close()


async def metrics_command(*, db: str, workflow: str | None, since: float | None,
                          limit: int, as_json: bool, check: bool,
                          alerts_file: str | None) -> ExitCode:
    """``plait metrics``: the report, and the alert rules (from the stored definitions'
    ``alerts:`` and ``--alerts FILE``) evaluated on it; with ``check``, exit 1 when any
    fires."""
    from ..observe import alerts, metrics

    async def body(store: Store) -> ExitCode:
        try:
            extra = alerts.load_rules(alerts_file) if alerts_file else ()
        except DefinitionError as exc:
            raise Refusal(output.problems_text(exc, alerts_file or "",
                                                  what="alert rules")) from exc
        report = await metrics.collect(store, workflow=workflow, since=since, limit=limit)
        names = [w.workflow for w in report.workflows]
        try:
            rules = (*await alerts.stored_rules(store, names), *extra)
        except DefinitionError as exc:
            raise Refusal(output.problems_text(exc, "stored definitions",
                                                  what="alert rules")) from exc
        firings = alerts.evaluate(report, rules)
        if check and firings:
            await _notify_alerts(db, store, firings)
        if as_json:
            output.print_json({**report.to_json(), "alerts": alerts.firings_to_json(firings)},
                              sys.stdout)
        else:
            sys.stdout.write(metrics.render_metrics(report))
            if rules or check:
                sys.stdout.write("\n" + alerts.render_firings(firings))
        return ExitCode.FAILED if check and firings else ExitCode.OK

    return await guarded(db, body, read_only=True)


async def _notify_alerts(db: str, store: Store, firings: Sequence[Any]) -> None:
    """``plait metrics --check``: deliver ``alert`` to the targets that ask for it
    (``PLAIT_NOTIFY`` and the firing workflows' ``notify:``; docs/notifications.md).
    The store was opened read-only: delivery claims in a writable one, and a database
    that cannot be written only costs the notifications (said on stderr)."""
    from ..observe.notify import (
        Notifier,
        notify_alerts,
        stored_targets,
        targets_from_environment,
    )

    process = targets_from_environment()
    own = await stored_targets(store, {f.workflow for f in firings})
    if not any("alert" in t.events for t in [*process, *(t for v in own.values() for t in v)]):
        return
    try:
        async with opened_store(db, create=False) as writable:
            await notify_alerts(Notifier(writable, targets=process), firings,
                                lambda workflow: [*own.get(workflow, ()), *process])
    except StoreError as exc:
        output.console(stderr=True).print(output.error_text(
            f"alerts fired but were not notified: store {db}: {exc}"), end="")


async def prometheus_command(*, db: str) -> ExitCode:
    """``plait metrics --prometheus``: the exposition text of ``observe.prometheus``."""
    from ..observe.prometheus import exposition

    async def body(store: Store) -> ExitCode:
        sys.stdout.write((await exposition(store)).decode())
        return ExitCode.OK

    return await guarded(db, body, read_only=True)


async def sla_command(*, db: str, workflow: str | None, since: float | None,
                      as_json: bool, check: bool) -> ExitCode:
    """``plait sla``: runs past their SLA, worst first; with ``check``, exit 1 when
    there is any."""
    from ..observe import sla

    async def body(store: Store) -> ExitCode:
        now = time.time()
        found = await sla.breaches(store, now=now, workflow=workflow, since=since)
        if as_json:
            output.print_json(sla.to_json(found, now=now), sys.stdout)
        else:
            sys.stdout.write(sla.render_breaches(found))
        return ExitCode.FAILED if check and found else ExitCode.OK

    return await guarded(db, body, read_only=True)


async def notifications_command(*, db: str, state: str | None, limit: int, as_json: bool,
                                check: bool) -> ExitCode:
    """``plait notifications``: the outbox, newest first (docs/notifications.md); with
    ``check``, exit 1 when one listed was given up."""

    async def body(store: Store) -> ExitCode:
        found = await store.list_notifications(state, limit)
        if as_json:
            output.print_json({"count": len(found), "notifications": [
                {"id": r.id, "event": r.event, "run_id": r.run_id, "step": r.step or None,
                 "target": r.shown, "state": r.state, "attempts": r.attempts,
                 "next_at": r.next_at, "created_at": r.created_at, "error": r.error}
                for r in found]}, sys.stdout)
        else:
            sys.stdout.write("".join(
                f"{r.state:<9} {r.attempts} {r.event:<17} "
                f"{(r.run_id or '-')[:12]:<12} {r.shown} {r.id}"
                f"{': ' + r.error if r.error else ''}\n" for r in found)
                or "no notifications\n")
        given_up = any(r.state == "given_up" for r in found)
        return ExitCode.FAILED if check and given_up else ExitCode.OK

    return await guarded(db, body, read_only=True)
