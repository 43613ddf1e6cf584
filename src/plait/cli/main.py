"""The ``plait`` command: argument parsing and ``asyncio.run`` only (see session.py for
running, output.py / views.py / progress.py for what is shown)."""

from __future__ import annotations

import asyncio
import sys

import click

from .. import __version__
from . import commands, session
from .inputs import read_input
from .settings import DB_ENV, DEFAULT_DB
from .views import choose_view

_DB_HELP = f"Store URL (memory://, sqlite:///path.db, postgresql://...). Default: ${DB_ENV}, " \
           f"else {DEFAULT_DB}."
_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=_CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="plait",
                      message="%(prog)s %(version)s")
def cli() -> None:
    """plait: a workflow engine for Python.

    A workflow is a DAG of steps defined in YAML/JSON or in Python. plait validates it,
    runs independent steps in parallel, routes around conditions, retries what fails and
    records every transition.

    \b
    Examples:
      plait validate flow.yaml
      plait run flow.yaml --input '{"ticket": "refund please"}'
      plait plan flow.yaml
      plait graph flow.yaml --format dot | dot -Tsvg > flow.svg
    """


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
    sys.exit(commands.validate_files(files, check_imports=not no_import))


@cli.command()
@click.argument("target", metavar="FILE|NAME[@V]")
@click.option("--input", "input_text", metavar="JSON", help="The run's input, as JSON.")
@click.option("--input-file", metavar="FILE",
              help="Read the run's input (JSON) from FILE ('-' for stdin).")
@click.option("--db", default=DEFAULT_DB, envvar=DB_ENV, show_envvar=False, metavar="URL",
              help=_DB_HELP)
@click.option("--json", "as_json", is_flag=True,
              help="Print exactly one JSON object (the run, its steps and output) on stdout.")
@click.option("--detach", is_flag=True,
              help="Store the run and return at once (needs a durable store and workers).")
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

    \b
    Exit status:
      0  the run completed
      1  the run failed or was cancelled
      2  bad usage, an invalid definition or bad input (nothing is stored)
      3  the run is waiting for an approval
    """
    if detach:
        raise click.UsageError("--detach is not supported until durable stores (sqlite, "
                               "postgresql) and `plait worker` are available; run in the "
                               "foreground for now")
    value = read_input(input_text, input_file)
    view = choose_view(as_json=as_json, quiet=quiet)
    code = asyncio.run(session.run_command(target, value, db=db, view=view))
    commands.exit_now(code)


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
    sys.exit(commands.show_plan(file, as_json=as_json))


@cli.command()
@click.argument("target", metavar="FILE|NAME[@V]")
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid",
              show_default=True, help="Mermaid flowchart or Graphviz DOT.")
@click.option("--db", default=DEFAULT_DB, envvar=DB_ENV, metavar="URL", help=_DB_HELP)
def graph(target: str, fmt: str, db: str) -> None:
    """Print a workflow's graph as Mermaid or Graphviz DOT.

    Conditions are drawn as diamonds, and edges into their branches are labelled then or
    else. Pipe DOT to Graphviz (`plait graph flow.yaml --format dot | dot -Tsvg`) or
    paste Mermaid into a Markdown file.
    """
    sys.exit(asyncio.run(commands.show_graph(target, fmt=fmt, db=db)))


def main(argv: list[str] | None = None) -> None:
    """The console script ``plait`` (also ``python -m plait``)."""
    cli.main(args=argv, prog_name="plait")


if __name__ == "__main__":
    main()
