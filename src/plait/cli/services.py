"""The long-running commands, ``plait worker`` and ``plait serve``: each is a process
that serves others (a cluster's worker, the REST API and UI) until a signal drains it.

Loaded when one of them is asked for (``main.Commands``): ``import plait.cli.main`` stays
free of them."""

from __future__ import annotations

import click

from .inputs import COUNT
from .main import db_option, finish


def _duration(ctx: click.Context, param: click.Parameter, value: str) -> float:
    """A duration option (``30s``, ``500ms``, ``2m``, or seconds), more than zero."""
    from ..core.durations import parse_duration

    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if seconds <= 0:
        raise click.BadParameter(f"must be more than zero, got {value!r}")
    return seconds


def _lease(ctx: click.Context, param: click.Parameter, value: str) -> float:
    """``--lease``: a duration of at least ``MIN_LEASE_S`` (a driven run's lease is
    renewed every half second: a shorter one runs out between renewals)."""
    from ..core.durations import format_duration
    from ..runtime.waiting import CANCEL_POLL_S, MIN_LEASE_S

    seconds = _duration(ctx, param, value)
    if seconds < MIN_LEASE_S:
        shown = format_duration(seconds)
        given = repr(value) if shown == value.strip() else f"{value!r} ({shown})"
        raise click.BadParameter(
            f"{given} is shorter than the minimum of "
            f"{format_duration(MIN_LEASE_S)}: a worker renews the lease of a run it drives "
            f"every {format_duration(CANCEL_POLL_S)}, and a shorter lease runs out between "
            f"two renewals (other workers would take its runs over); use --lease 1s or "
            f"more")
    return seconds


@click.command()
@db_option
@click.option("--concurrency", type=COUNT, default=4, show_default=True,
              metavar="N", help="Attempts this worker runs at once.")
@click.option("--import", "imports", multiple=True, metavar="MODULE",
              help="Import MODULE at start (repeatable): the modules of the python steps "
              "this worker runs. A module that cannot be imported stops the command "
              "(exit 2).")
@click.option("--lease", default="30s", show_default=True, metavar="DURATION",
              callback=_lease, help="How long a claimed attempt (or a driven run) "
              "stays this worker's without a heartbeat; heartbeats come every third of it. "
              "At least 1s.")
@click.option("--poll", default="1s", show_default=True, metavar="DURATION",
              callback=_duration, help="How often to look for work when no notification "
              "comes (the only wake-up on SQLite or with --no-listen).")
@click.option("--grace", default="30s", show_default=True, metavar="DURATION",
              callback=_duration, help="On SIGTERM/SIGINT, how long running attempts may "
              "finish before they are let go (they retry on another worker).")
@click.option("--max-runs", type=COUNT, default=100, show_default=True,
              metavar="N", help="Runs this worker drives (decides for) at once.")
@click.option("--no-listen", is_flag=True,
              help="Do not LISTEN for PostgreSQL notifications: poll only.")
@click.option("--no-eager", is_flag=True,
              help="Run no attempt of the runs this worker drives without a ticket: every "
              "attempt waits for a claim, in priority order across the cluster (by "
              "default a driver with a free slot runs the attempt itself).")
def worker(db: str, concurrency: int, imports: tuple[str, ...], lease: float,
           poll: float, grace: float, max_runs: int, no_listen: bool,
           no_eager: bool) -> None:
    """Run the steps of stored runs: one worker of a cluster (docs/workers.md).

    Start any number of workers, on any hosts, on one shared store (PostgreSQL; a
    SQLite file works for workers of one machine). Each claims ready attempts of any
    run, heartbeats while they run, and stores their results; each also drives runs
    that need a driver (runs stored with `plait run --db ... --detach`, or whose
    driving process died). The current directory is on sys.path.

    On PostgreSQL a worker is woken by LISTEN/NOTIFY and polls every --poll as a
    fallback. It logs to stderr: one line at start, one when it has drained.

    A worker driving a run runs the run's ready attempts itself while it has free
    slots (eager attempts: stored running first, no ticket, no claim); the rest, and
    every attempt of a step with a pool or a circuit breaker, become tickets any
    worker claims.

    SIGTERM or SIGINT drains: no new claims and no new runs, the runs it drives are
    handed to other workers at once, running attempts finish (or after --grace are
    let go and retried elsewhere), then it exits 0. A second signal stops at once.

    \b
    Exit status:
      0  drained after SIGTERM/SIGINT
      1  stopped at once by a second signal, or the worker failed: one of its loops
         kept failing (each failure logged with its traceback)
      2  bad usage: a memory:// store, a --lease under 1s, a module that cannot be
         imported, a store that cannot be used
      4  the store's server stopped answering once started (at start a worker waits
         for it, retrying, until it answers or a signal comes)
    """
    from .worker import WorkerOptions, worker_command

    finish(worker_command(WorkerOptions(
        db=db, concurrency=concurrency, imports=imports, lease=lease, poll=poll,
        grace=grace, max_runs=max_runs, listen=not no_listen, eager=not no_eager)))


@click.command()
@db_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback needs PLAIT_API_TOKEN.")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=8080,
              show_default=True, help="Port to listen on.")
@click.option("--no-worker", is_flag=True,
              help="With PostgreSQL, do not run a worker in the server: the runs it "
              "starts are executed by `plait worker` processes.")
@click.option("--grace", default="10s", show_default=True, metavar="DURATION",
              callback=_duration, help="On SIGTERM/SIGINT, how long running runs may "
              "go on before they are left unfinished (resumable).")
@click.option("--import", "imports", multiple=True, metavar="MODULE",
              help="Import MODULE at start (repeatable), as `plait worker --import`: the "
              "modules of the python steps the server runs (still subject to "
              "PLAIT_ALLOWED_MODULES). A module that cannot be imported stops the "
              "command (exit 2).")
def serve(db: str, host: str, port: int, no_worker: bool, grace: float,
          imports: tuple[str, ...]) -> None:
    """Serve the REST API (OpenAPI at /docs) and the web UI (docs/server.md).

    The server executes the runs it starts (with PostgreSQL it is also a worker,
    unless --no-worker). The python steps of a run stored by `plait run FILE` import
    from that file's directory, the current directory and PYTHONPATH. With
    PLAIT_API_TOKEN set, every route but /healthz needs
    `Authorization: Bearer TOKEN` (the UI logs in once and keeps a cookie); bound to
    anything but loopback the server refuses to start without it. Definitions
    registered over the API are untrusted: see docs/server.md.

    SIGTERM or SIGINT drains: no new runs, running runs get --grace to end, the rest
    stay resumable; then it exits 0.

    \b
    Exit status:
      0  stopped by SIGTERM/SIGINT
      1  the server could not start (address in use, store unusable)
      2  bad usage: a public --host without PLAIT_API_TOKEN, a token shorter
         than 16 characters, an --import module that cannot be imported
    """
    from .serve import serve_command

    finish(serve_command(db=db, host=host, port=port, worker=not no_worker, grace=grace,
                         imports=imports))
