"""The ``plait`` command: argument parsing and ``asyncio.run`` only.

What each command does lives beside it: session.py executes runs (run, resume, retry),
control.py acts on stored runs (approve, cancel), inspection.py reads history (runs,
show, gantt, metrics, sla), commands.py inspects definitions (validate, plan, graph),
detach.py starts background runs; services.py holds the long-running commands (worker,
serve) and their options; output.py, records.py, views.py and progress.py render."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from .. import __version__
from .inputs import COUNT, RUN_ID, check_reference, parse_json_option, parse_since, read_input
from .settings import DB_ENV, DEFAULT_DB

if TYPE_CHECKING:
    from ..core.model import JSON
    from .views import RunScreen

_DB_HELP = (f"Store URL (memory://, sqlite:///path.db, postgresql://user@host/db). "
            f"Default: ${DB_ENV}, else {DEFAULT_DB}.")
_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
# RunStatus's values, spelled out so that parsing arguments does not load the core (a
# unit test checks that they match)
RUN_STATUSES = ["pending", "running", "waiting", "completed", "failed", "cancelled"]

F = TypeVar("F", bound=Callable[..., object])


def db_option(command: F) -> F:
    """``--db URL``, default ``$PLAIT_DB``, else ``settings.DEFAULT_DB``."""
    return click.option("--db", default=DEFAULT_DB, envvar=DB_ENV, show_envvar=False,
                        metavar="URL", help=_DB_HELP)(command)


def json_option(help: str) -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help)


def finish(work: Coroutine[Any, Any, int]) -> NoReturn:
    """Run a command's coroutine and exit with its code (130 after a Ctrl-C that came
    outside a run's execution, which handles its own)."""
    import asyncio

    from .commands import exit_now

    try:
        code = asyncio.run(work)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        code = 130
    exit_now(code)


class Commands(click.Group):
    """The ``plait`` group: the commands defined here, and those of ``LAZY`` (module
    beside this one by command name), imported when asked for (help included)."""

    LAZY = {"serve": "services", "worker": "services", "prune": "prune"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = self.LAZY.get(cmd_name)
        if module is None:
            return super().get_command(ctx, cmd_name)
        found = getattr(importlib.import_module(f"{__package__}.{module}"), cmd_name)
        assert isinstance(found, click.Command)
        return found


@click.group(cls=Commands, context_settings=_CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="plait",
                      message="%(prog)s %(version)s")
@click.option("--log-format", type=click.Choice(["text", "json"]), envvar="PLAIT_LOG_FORMAT",
              default=None, help="plait's log lines (workers, scheduler, server) as text "
              "or as one JSON object per line. Default: $PLAIT_LOG_FORMAT, else text.")
@click.option("--notify", "notify_targets", metavar="JSON", envvar="PLAIT_NOTIFY",
              default=None, help="Notification targets for every run, as a JSON list "
              "[{\"on\": [\"run_failed\"], \"url\": \"https://...\"}] "
              "(docs/notifications.md). Default: $PLAIT_NOTIFY.")
def cli(log_format: str | None, notify_targets: str | None) -> None:
    """plait: a workflow engine for Python.

    A workflow is a DAG of steps defined in YAML/JSON or in Python. plait validates it,
    runs independent steps in parallel, routes around conditions, retries what fails and
    records every transition.

    Runs are stored in ./.plait/plait.db unless --db or $PLAIT_DB says otherwise.

    \b
    Examples:
      plait validate flow.yaml
      plait run flow.yaml --input '{"ticket": "refund please"}'
      plait runs --status failed
      plait show RUN_ID
      plait retry RUN_ID
      plait approve RUN_ID sign_off --data '{"note": "ok"}'
      plait plan flow.yaml
      plait graph flow.yaml --format dot | dot -Tsvg > flow.svg
    """
    from .settings import apply_global_options

    apply_global_options(log_format, notify_targets)


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False),
                metavar="FILE...")
@click.option("--no-import", "no_import", is_flag=True,
              help="Do not import the functions of python steps (check the file only).")
def validate(files: tuple[str, ...], no_import: bool) -> None:
    """Check workflow definitions without running them.

    Every problem of every FILE is listed on stderr with its location (for example
    steps[3].depends_on[0]) and, where it helps, a suggestion. The module:function of
    each python step must import, with the file's directory and the current directory
    on sys.path (skip with --no-import).

    Exit status: 0 when every file is valid, 1 otherwise.
    """
    from .commands import validate_files

    sys.exit(validate_files(files, check_imports=not no_import))


@cli.command()
@click.argument("target", metavar="FILE|NAME[@V]", callback=check_reference)
@click.option("--input", "input_text", metavar="JSON", help="The run's input, as JSON.")
@click.option("--input-file", metavar="FILE",
              help="Read the run's input (JSON) from FILE ('-' for stdin).")
@db_option
@click.option("--json", "as_json", is_flag=True,
              help="Print exactly one JSON object (the run, its steps and output) on stdout.")
@click.option("--detach", is_flag=True,
              help="Store the run, print its id and return: a background process "
              "(SQLite) or the workers (PostgreSQL) execute it.")
@click.option("-q", "--quiet", is_flag=True,
              help="Print only the final status line (--json takes precedence).")
def run(target: str, input_text: str | None, input_file: str | None, db: str,
        as_json: bool, detach: bool, quiet: bool) -> None:
    """Run a workflow to its end.

    FILE is a YAML or JSON definition (NAME[@V]: a workflow already stored). The
    directory of the file and the current directory are put on sys.path, so python
    steps can `call: module:function` from modules next to the definition.

    On a terminal the run's progress is shown live, then a summary table; when stdout is
    not a terminal a plain summary is printed. Ctrl-C cancels the run (running steps are
    recorded as cancelled); press it twice to stop at once.

    With --detach the run is stored, `plait resume RUN_ID` continues it in a background
    process (its output goes to .plait/logs/RUN_ID.log beside the database) and the run
    id is printed alone on stdout (with --json: {"run_id", "workflow", "version",
    "status", "pid", "log"}); exit 0. Follow it with `plait show RUN_ID`.

    With a PostgreSQL --db the steps run on workers (`plait worker`), never in this
    process: the definition and the run are stored, then the command follows the run
    until it ends and shows it as a local run (same exit status); Ctrl-C asks for its
    cancellation. With --detach it prints the run id (with --json: {"run_id",
    "workflow", "version", "status"}) and exits 0 at once.

    \b
    Exit status:
      0  the run completed
      1  the run failed or was cancelled
      2  bad usage, an invalid definition or bad input (nothing is stored)
      3  the run is waiting for an approval or an event
      4  the store's server cannot be reached (tried for $PLAIT_CONNECT_WAIT, 5 s)
    """
    if detach:
        _detachable(db)
    value = read_input(input_text, input_file)
    from .session import run_command

    finish(run_command(target, value, db=db, view=_view(as_json, quiet), detach=detach))


@cli.command()
@click.argument("run_id", type=RUN_ID)
@db_option
@json_option("Print exactly one JSON object (as plait run --json) on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the final status line.")
def resume(run_id: str, db: str, as_json: bool, quiet: bool) -> None:
    """Continue a stored run whose process stopped (crashed, killed, or a run waiting
    for an approval).

    Steps that completed are never run again; attempts that were running when the
    process stopped count as failed attempts and retry under their step's policy. The
    stored definition is used: its python steps must import from the current directory
    or PYTHONPATH. A run that already ended is shown as it is. Refused (exit 1) while
    another live process executes the run.

    \b
    Exit status (as plait run):
      0  the run completed
      1  the run failed or was cancelled
      2  bad usage, an unknown run, or a store that cannot be used
      3  the run is waiting for an approval or an event
      4  the store's server cannot be reached (tried for $PLAIT_CONNECT_WAIT, 5 s)
    """
    from .session import resume_command

    finish(resume_command(run_id, db=db, view=_view(as_json, quiet)))



@cli.command()
@click.option("--workflow", metavar="W", help="Only runs of workflow W.")
@click.option("--status", type=click.Choice(RUN_STATUSES), help="Only runs in this status.")
@click.option("--limit", type=COUNT, default=20, show_default=True,
              metavar="N", help="Show at most N runs.")
@click.option("--all", "every", is_flag=True,
              help="Child runs (of `workflow` and `loop` steps) too, each under its "
                   "parent when both are listed.")
@db_option
@json_option('Print one JSON object: {"runs": [{"run_id", "workflow", "version", '
             '"fingerprint", "status", "error", "created_at", "started_at", "finished_at", '
             '"duration_s", "steps_done", "steps_total", "retry_of", "parent_run_id"}]} '
             "(times ISO-8601 UTC; duration_s null until the run ends).")
def runs(workflow: str | None, status: str | None, limit: int, every: bool, db: str,
         as_json: bool) -> None:
    """List top-level runs, newest first (--all: child runs too).

    Columns: run id, workflow@version, status, start time (UTC), duration (the time so
    far, marked +, for a run still going) and steps ended/total.  Child runs of a run
    are listed by `plait show RUN_ID`.
    """
    from .inspection import runs_command

    finish(runs_command(db=db, workflow=workflow, status=status, limit=limit,
                        as_json=as_json, children=every))


@cli.command()
@click.argument("run_id", type=RUN_ID)
@db_option
@json_option("Print one JSON object: the run as plait run --json prints it, plus "
             '"retry_of", "parent_run_id", "fingerprint", "input", "created_at", '
             '"started_at", "finished_at" and "attempts": [{"step", "attempt", "fallback", '
             '"status", "started_at", "finished_at", "duration_s", "worker", "error"}]; '
             'a workflow or loop step\'s entry adds "child_run_id" and "child_run_ids"; '
             'every step entry has "llm" (the messages a model call sent, or null) and '
             '"usage" (its tokens, with its child runs\'), the run "usage" and '
             '"llm_tokens" (with its child runs\'), "llm_budget" (null, or '
             '{"max_llm_tokens", "used"}). With --step: that step\'s entry.')
@click.option("--step", "step", metavar="STEP", default=None,
              help="Show one step: its attempts, output and, for an llm step, the "
                   "messages sent and the answer, as a conversation.")
def show(run_id: str, db: str, as_json: bool, step: str | None) -> None:
    """Show a run: its status, each step (status, attempts, duration, error or skip
    reason, fallback used) and each attempt (start, end, duration, worker, error).
    A step waiting for approval is followed by what it asks: its prompt and the
    content under review (its `show:`); in --json, the step's "waiting" entry.
    Model calls: a "tokens" line (the run's and its child runs') and a table of the
    tokens of each step that used any; --step STEP shows the messages sent.

    Times are UTC. Errors are cut to their first line; --json has all of them.
    Exit status: 0, 2 when there is no such run (or no such step), 4 when the store's
    server cannot be reached (tried for $PLAIT_CONNECT_WAIT, 5 s).
    """
    from .inspection import show_command

    finish(show_command(run_id, db=db, as_json=as_json, step=step))


@cli.command()
@click.argument("run_id", type=RUN_ID)
@db_option
def cancel(run_id: str, db: str) -> None:
    """Cancel a run.

    A run executing in another process (plait run, plait resume) is flagged in the
    store; that process notices within about a second, records its running steps as
    cancelled and ends the run cancelled. A run no process executes (waiting for an
    approval, detached but not started, or left by a crashed process) is recorded as
    cancelled at once.

    \b
    Exit status:
      0  cancellation requested or done (or the run was already cancelled)
      1  the run already completed or failed: nothing to cancel
      2  bad usage, an unknown run, or a store that cannot be used
      4  the store's server cannot be reached (tried for $PLAIT_CONNECT_WAIT, 5 s)
    """
    from .control import cancel_command

    finish(cancel_command(run_id, db=db))


@cli.command()
@click.argument("run_id", type=RUN_ID)
@click.argument("step")
@click.option("--reject", is_flag=True, help="Reject instead of approving (the step fails).")
@click.option("--data", "data_text", metavar="JSON",
              help="JSON recorded with the decision (the approval step's output data).")
@click.option("--by", metavar="NAME", help="Who decides. Default: the OS user.")
@db_option
@json_option("Print exactly one JSON object (as plait run --json) on stdout.")
@click.option("--detach", is_flag=True,
              help="Record the decision and return at once: the workers (PostgreSQL) or "
              "a background `plait resume` (SQLite) continue the run.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the final status line.")
def approve(run_id: str, step: str, reject: bool, data_text: str | None, by: str | None,
            db: str, as_json: bool, detach: bool, quiet: bool) -> None:
    """Approve (or --reject) an approval STEP that waits, then continue the run.

    The decision is recorded with who made it, when, and --data. The run then continues
    here in the foreground like `plait resume` (an approved step completes with output
    {"approved", "by", "at", "data"}; a rejected one fails). When another live process
    executes the run, that process applies the decision and continues the run: this
    command waits (seconds at most) until it has, and exits 0. Refused with exit 2,
    recording nothing, when the run or step is unknown, the step is not waiting, or the
    run has ended; with exit 1 when a decision is recorded already (the first stands).

    With a PostgreSQL --db the workers continue the run, never this process: the
    decision is stored, the workers are woken, and the command follows the run like
    `plait run` does (same output and exit status; Ctrl-C stops following, the run goes
    on). With --detach it prints the run id (with --json: {"run_id", "workflow",
    "version", "status"}) and exits 0 at once; on SQLite --detach continues the run in
    a background `plait resume` (as `plait run --detach`).

    When the run cannot continue here (its python steps do not import), the decision
    stays recorded, the failure is noted in the run's history (`plait show` says so)
    and `plait resume RUN_ID` from where the steps import continues it.

    \b
    Exit status (as plait run):
      0  the run completed (or --detach)
      1  the run failed or was cancelled; a decision was recorded already
      2  bad usage, an unknown run, or a store that cannot be used
      3  the run is waiting for an approval or an event
      4  the store's server cannot be reached (tried for $PLAIT_CONNECT_WAIT, 5 s)
    """
    data = _json_value(data_text, "--data")
    if detach:
        _detachable(db)
    from .control import approve_command

    finish(approve_command(run_id, step, approved=not reject, by=by, data=data, db=db,
                           view=_view(as_json, quiet), detach=detach))


@cli.command()
@click.argument("run_id", type=RUN_ID)
@click.argument("name")
@click.option("--data", "data_text", metavar="JSON",
              help="JSON sent with the event (what the wait for it returns).")
@db_option
@json_option("Print exactly one JSON object (as plait run --json) on stdout.")
@click.option("--detach", is_flag=True,
              help="Store the event and return at once: the workers (PostgreSQL) or a "
              "background `plait resume` (SQLite) continue the run.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the final status line.")
def signal(run_id: str, name: str, data_text: str | None, db: str, as_json: bool,
           detach: bool, quiet: bool) -> None:
    """Send the event NAME (with --data) to a run, then continue the run.

    Steps that wait for NAME (ctx.wait_for_event, `type: event`) get its data; one
    sent before anything waits for it is kept. The run then continues as after
    `plait approve`: here in the foreground (SQLite, memory), by the live process that
    executes it, or by the workers (PostgreSQL; this command follows the run, or
    returns at once with --detach). The first event of a name stands.

    \b
    Exit status (as plait run):
      0  the run completed (or --detach)
      1  the run failed or was cancelled; an event of that name was sent already
      2  bad usage (a bad name or --data), an unknown run, a run that has ended
      3  the run is waiting
      4  the store's server cannot be reached (tried for $PLAIT_CONNECT_WAIT, 5 s)
    """
    data = _json_value(data_text, "--data")
    if detach:
        _detachable(db)
    from .control import signal_command

    finish(signal_command(run_id, name, data=data, db=db, view=_view(as_json, quiet),
                          detach=detach))


@cli.command()
@click.argument("run_id", type=RUN_ID)
@click.option("--from", "from_step", metavar="STEP",
              help="Run STEP and everything downstream of it again (default: the failed "
              "and cancelled steps and everything downstream of them).")
@click.option("--input", "input_text", metavar="JSON",
              help="A new input for the new run (default: the old run's input).")
@db_option
@json_option("Print exactly one JSON object (the new run, as plait run --json) on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the final status line.")
def retry(run_id: str, from_step: str | None, input_text: str | None, db: str,
          as_json: bool, quiet: bool) -> None:
    """Run a run again as a new run that reuses the outputs of the steps that completed
    upstream of what is run again.

    The new run (same workflow version, linked by retry_of) is executed here in the
    foreground; its id is printed first (on stderr) and in the final status line.

    \b
    Exit status (as plait run):
      0  the run completed
      1  the run failed or was cancelled
      2  bad usage, an unknown run, or a store that cannot be used
      3  the run is waiting for an approval or an event
      4  the store's server cannot be reached (tried for $PLAIT_CONNECT_WAIT, 5 s)
    """
    new_input = _json_value(input_text, "--input")
    from .session import retry_command

    finish(retry_command(run_id, from_step=from_step, new_input=new_input,
                         replace_input=input_text is not None, db=db,
                         view=_view(as_json, quiet)))



@cli.command()
@click.argument("run_id", type=RUN_ID)
@click.option("--html", metavar="OUT", type=click.Path(dir_okay=False),
              help="Write a self-contained HTML page to OUT (and print its path) instead.")
@db_option
def gantt(run_id: str, html: str | None, db: str) -> None:
    """Draw a run's timeline: one lane per step, one bar per attempt.

    On a terminal the chart is in colour and as wide as the terminal. The HTML page
    also highlights the critical path (the chain of steps that decided the run's
    length) and lists every step.
    """
    from .inspection import gantt_command

    finish(gantt_command(run_id, db=db, html=html))


@cli.command()
@click.option("--workflow", metavar="W", help="Only workflow W.")
@click.option("--since", metavar="DURATION",
              help="Only runs created in the last DURATION (30s, 5m, 1h, 2d...).")
@click.option("--limit", type=COUNT, default=1000, show_default=True,
              metavar="N", help="Read at most the N newest runs.")
@db_option
@json_option('Print one JSON object: the metrics ({"since", "runs", "tokens", '
             '"workflows": [...]}; workflows and steps also have tokens_with_children, '
             'the tokens of their child runs included) '
             'and "alerts": {"fired", "firings": [...]}.')
@click.option("--check", is_flag=True, help="Exit 1 when any alert rule fires.")
@click.option("--alerts", "alerts_file", metavar="FILE", type=click.Path(dir_okay=False),
              help='Alert rules from a YAML file: alerts: {WORKFLOW or "*": [rules]}.')
@click.option("--prometheus", is_flag=True,
              help="Print the store's metrics in Prometheus' text exposition format "
                   "(what the server's /metrics serves; docs/observability.md).")
def metrics(workflow: str | None, since: str | None, limit: int, db: str, as_json: bool,
            check: bool, alerts_file: str | None, prometheus: bool) -> None:
    """Success rate, duration percentiles (p50/p95/p99) and retries, per workflow and
    per step (a map's items as one row, `ID[*]`).

    Durations come twice: wall time, and compute time (the time steps worked: waits for
    a person, a delay or a child run left out; docs/observability.md).

    Alert rules (such as `success_rate < 0.9`, `p95 > 30s`, `step fetch: failures >= 3`)
    come from the `alerts:` of the stored definitions and from --alerts FILE; firings
    are listed after the report.

    \b
    Exit status:
      0  no alert fired (or no --check)
      1  --check and at least one alert fired
      2  bad usage (a bad --since or rule), or a store that cannot be used
    """
    from .inspection import metrics_command, prometheus_command

    if prometheus:
        if workflow or since or as_json or check or alerts_file:
            raise click.UsageError("--prometheus prints every metric of the store: it "
                                   "takes no --workflow, --since, --json, --check or "
                                   "--alerts")
        finish(prometheus_command(db=db))
    cutoff = parse_since(since)
    finish(metrics_command(
        db=db, workflow=workflow, since=cutoff, limit=limit, as_json=as_json, check=check,
        alerts_file=alerts_file))


@cli.command()
@click.option("--workflow", metavar="W", help="Only runs of workflow W.")
@click.option("--since", metavar="DURATION",
              help="Only runs created in the last DURATION (30s, 5m, 1h, 2d...).")
@db_option
@json_option('Print one JSON object: {"now", "count", "breaches": [{"run_id", "workflow", '
             '"version", "status", "active", "sla_s", "elapsed_s", "over_s", "over_ratio", '
             '"created_at", "started_at", "finished_at"}]}.')
@click.option("--check", is_flag=True, help="Exit 1 when any run is past its SLA.")
def sla(workflow: str | None, since: str | None, db: str, as_json: bool,
        check: bool) -> None:
    """List runs past their SLA (a definition's `sla:`), worst first.

    A run's elapsed time runs from its start (or creation, if it never started) to its
    end, or to now while it is still going. Breaches are reported, never acted on.
    Exit status: 0 (with --check: 1 when there is a breach), 2 on bad usage.
    """
    from .inspection import sla_command

    cutoff = parse_since(since)
    finish(sla_command(db=db, workflow=workflow, since=cutoff, as_json=as_json, check=check))


@cli.command()
@click.option("--state", type=click.Choice(["pending", "sent", "given_up"]),
              help="Only notifications in this state.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True,
              help="At most this many, newest first.")
@db_option
@json_option('Print one JSON object: {"count", "notifications": [{"id", "event", '
             '"run_id", "step", "target", "state", "attempts", "next_at", "created_at", '
             '"error"}]}.')
@click.option("--check", is_flag=True, help="Exit 1 when any notification was given up.")
def notifications(state: str | None, limit: int, db: str, as_json: bool,
                  check: bool) -> None:
    """List notifications of the outbox, newest first: pending (to send or retry),
    sent, or given up after the last attempt.

    The id is the idempotency key receivers got (header Idempotency-Key). Exit status:
    0 (with --check: 1 when one listed was given up), 2 on bad usage.
    """
    from .inspection import notifications_command

    finish(notifications_command(db=db, state=state, limit=limit, as_json=as_json,
                                 check=check))


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True,
              help="Print the plan as one JSON object (steps, edges, depth, critical_path, "
              "stages).")
def plan(file: str, as_json: bool) -> None:
    """Show how a workflow would run: stages, critical path and depth.

    A stage lists steps that may run at the same time; plait does not wait for a whole
    stage, each step starts as soon as its own parents are done. The critical path is
    the longest chain of dependencies; when more steps are ready than the concurrency
    allows, steps on the longest remaining path go first.
    """
    from .commands import show_plan

    sys.exit(show_plan(file, as_json=as_json))


@cli.command()
@click.argument("target", metavar="FILE|NAME[@V]", callback=check_reference)
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid",
              show_default=True, help="Mermaid flowchart or Graphviz DOT.")
@db_option
def graph(target: str, fmt: str, db: str) -> None:
    """Print a workflow's graph as Mermaid or Graphviz DOT.

    Conditions are drawn as diamonds, and edges into their branches are labelled then or
    else. Pipe DOT to Graphviz (`plait graph flow.yaml --format dot | dot -Tsvg`) or
    paste Mermaid into a Markdown file.
    """
    from .commands import show_graph

    finish(show_graph(target, fmt=fmt, db=db))


@cli.command()
def schema() -> None:
    """Print the JSON Schema of the definition format (for editors).

    \b
    Example (YAML language server, first line of a workflow file):
      # yaml-language-server: $schema=./plait.schema.json
    after `plait schema > plait.schema.json`.
    """
    import json

    from ..defschema import definition_schema

    click.echo(json.dumps(definition_schema(), indent=2))


def _detachable(db: str) -> None:
    """``--detach`` needs a store another process can continue the run from."""
    from .detach import detachable

    if not detachable(db):
        from ..store.postgres_url import redact

        raise click.UsageError(f"--detach needs a store another process can open, such "
                               f"as sqlite:///path.db (the default) or postgresql://...; "
                               f"with {redact(db)} "
                               f"nothing could continue the run")


def _view(as_json: bool, quiet: bool) -> RunScreen:
    from .views import choose_view

    return choose_view(as_json=as_json, quiet=quiet)


def _json_value(text: str | None, option: str) -> JSON:
    """The JSON of ``option``, or None when it is not given."""
    return parse_json_option(text, option) if text is not None else None


def main(argv: list[str] | None = None) -> None:
    """The console script ``plait`` (also ``python -m plait``)."""
    cli.main(args=argv, prog_name="plait")


if __name__ == "__main__":
    main()
