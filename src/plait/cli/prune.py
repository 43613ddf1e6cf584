"""``plait prune``: delete finished runs older than a cutoff with everything that
belongs to them (``Store.prune_runs``; docs/retention.md).

Loaded when asked for (``main.Commands``)."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

import click

from .main import db_option, finish, json_option
from .settings import ExitCode

FINAL = ("completed", "failed", "cancelled")


def parse_before(value: str, now: float) -> float:
    """``--before``: an age (``30d``, ``12h``: now minus it) or an ISO 8601 time (UTC
    when it names no zone); click.BadParameter for anything else or a future time."""
    from ..core.durations import parse_duration

    try:
        cutoff = now - parse_duration(value)
    except ValueError:
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            raise click.BadParameter(
                f"{value!r} is neither an age (such as 30d, 12h, 90m) nor an ISO 8601 "
                f"time (such as 2026-01-31 or 2026-01-31T12:00:00Z)") from None
        cutoff = (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    if cutoff > now:
        raise click.BadParameter(f"{value!r} is in the future: only runs that finished "
                                 f"before now can be pruned")
    return cutoff


def parse_statuses(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    chosen = tuple(dict.fromkeys(p.strip() for p in value.split(",") if p.strip()))
    for status in chosen:
        if status not in FINAL:
            raise click.BadParameter(f"{status!r} is not a final status: only finished "
                                     f"runs are pruned ({', '.join(FINAL)})")
    if not chosen:
        raise click.BadParameter("no status given")
    return chosen


@click.command()
@click.option("--before", required=True, metavar="AGE|TIME",
              help="Prune runs that finished before this: an age (30d, 12h) or an ISO "
              "8601 time (UTC unless it says otherwise).")
@click.option("--status", "status_text", metavar="STATUS[,STATUS]",
              help="Only runs that ended so: completed, failed, cancelled. Default: all "
              "three.")
@click.option("--workflow", metavar="NAME", help="Only runs of this workflow.")
@click.option("--dry-run", is_flag=True, help="Delete nothing; count what would go.")
@db_option
@json_option("One JSON object: {\"dry_run\", \"before\", \"runs\", \"rows\", \"tables\"}.")
def prune(before: str, status_text: str | None, workflow: str | None, dry_run: bool,
          db: str, as_json: bool) -> None:
    """Delete finished runs older than --before, with everything of theirs.

    A run goes with its steps, attempts, history, journal, events, token counts,
    outbox notifications, the step-cache entries it created and its child runs (a child
    goes with its parent, never alone). Alert notifications (they have no run) sent or
    given up before --before go too, unless --status narrows the prune. A run that is
    not finished, a parent with an unfinished child and a run with an unfinished retry
    stay. Runs go in batches of 500, each batch in one transaction, so workers and the
    server wait for one batch at most; a run is never half deleted. On SQLite the freed
    space goes back to the file system (docs/retention.md).

    \b
    Exit status:
      0  pruned (or nothing to prune)
      2  bad usage: an unparsable or future --before, a status that is not final,
         a store that cannot be used
      4  the store's server cannot be reached (tried for $PLAIT_CONNECT_WAIT, 5 s)
    """
    now = time.time()
    try:
        cutoff = parse_before(before, now)
    except click.BadParameter as exc:
        exc.param_hint = "--before"
        raise
    try:
        statuses = parse_statuses(status_text)
    except click.BadParameter as exc:
        exc.param_hint = "--status"
        raise
    finish(prune_command(db=db, cutoff=cutoff, statuses=statuses, workflow=workflow,
                         dry_run=dry_run, as_json=as_json))


async def prune_command(*, db: str, cutoff: float, statuses: tuple[str, ...] | None,
                        workflow: str | None, dry_run: bool, as_json: bool) -> ExitCode:
    from ..store.base import Store
    from . import output
    from .session import guarded

    async def body(store: Store) -> ExitCode:
        counts = await store.prune_runs(cutoff, statuses, workflow, dry_run=dry_run)
        shown = datetime.fromtimestamp(cutoff, UTC).isoformat(timespec="seconds")
        if as_json:
            output.print_json({"dry_run": dry_run, "before": shown, "runs": counts.runs,
                               "rows": counts.total_rows, "tables": dict(counts.rows)},
                              sys.stdout)
            return ExitCode.OK
        verb = "would prune" if dry_run else "pruned"
        tables = ", ".join(f"{t} {n}" for t, n in sorted(counts.rows.items()))
        detail = f" ({tables})" if tables else ""
        output.console().print(
            f"{verb} {counts.runs} run(s) that finished before {shown}: "
            f"{counts.total_rows} other row(s){detail}", highlight=False)
        return ExitCode.OK

    return await guarded(db, body)
