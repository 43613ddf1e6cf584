"""The command line's defaults, in one place.

``DEFAULT_DB`` is the CLI's default store: a SQLite file under ``./.plait/`` of the current
directory, created by the first command that stores something (``plait run``); the
commands that only read leave a missing file missing.  ``--db`` and ``PLAIT_DB``
override it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import IntEnum

DB_ENV = "PLAIT_DB"
DEFAULT_DB = "sqlite:///./.plait/plait.db"
# how long a command keeps trying to reach a store's server before it exits
# UNREACHABLE (seconds; 0: one try)
CONNECT_WAIT_ENV = "PLAIT_CONNECT_WAIT"
DEFAULT_CONNECT_WAIT_S = 5.0


class ExitCode(IntEnum):
    """``plait run`` exit codes; other commands use OK, FAILED, USAGE and UNREACHABLE."""

    OK = 0  # the run completed / the definition is valid
    FAILED = 1  # the run failed or was cancelled / a definition is invalid
    USAGE = 2  # bad usage, an invalid definition or bad input: nothing was stored
    WAITING = 3  # the run waits for an approval or an event
    UNREACHABLE = 4  # the store's server could not be reached (after CONNECT_WAIT_ENV)


def connect_wait(environ: Mapping[str, str] | None = None) -> float:
    """How long to keep trying to reach a store's server: ``$PLAIT_CONNECT_WAIT``
    seconds (a bad or negative value: the default)."""
    text = (os.environ if environ is None else environ).get(CONNECT_WAIT_ENV, "")
    try:
        seconds = float(text) if text.strip() else DEFAULT_CONNECT_WAIT_S
    except ValueError:
        return DEFAULT_CONNECT_WAIT_S
    return seconds if 0 <= seconds < float("inf") else DEFAULT_CONNECT_WAIT_S


def exit_code_for(status: str) -> ExitCode:
    """The exit code of ``plait run`` for a run that ended (or parked) in ``status``."""
    if status == "completed":
        return ExitCode.OK
    if status == "waiting":
        return ExitCode.WAITING
    return ExitCode.FAILED


def apply_global_options(log_format: str | None, notify: str | None) -> None:
    """``plait --log-format`` and ``plait --notify``: made the process's environment
    (``PLAIT_LOG_FORMAT``, ``PLAIT_NOTIFY``), which every engine, worker and child
    process of this command reads; a bad ``--notify`` is a usage error naming each
    problem."""
    import click

    if notify is not None and notify.strip():
        from ..errors import DefinitionError
        from ..observe.notify_targets import ENV, targets_from_environment

        try:
            targets_from_environment({ENV: notify})
        except DefinitionError as exc:
            raise click.BadParameter("\n".join(str(p) for p in exc.problems),
                                     param_hint="--notify") from exc
        os.environ[ENV] = notify
    if log_format is not None:
        from ..observe.logs import ENV as LOG_ENV
        from ..observe.logs import configure

        os.environ[LOG_ENV] = log_format
        configure(log_format)
