"""The command line's defaults, in one place.

``DEFAULT_DB`` is the store of SPEC 6: a SQLite file under ``./.plait/`` of the current
directory, created by the first command that stores something (``plait run``); the
commands that only read leave a missing file missing.  ``--db`` and ``PLAIT_DB``
override it.
"""

from __future__ import annotations

from enum import IntEnum

DB_ENV = "PLAIT_DB"
DEFAULT_DB = "sqlite:///./.plait/plait.db"


class ExitCode(IntEnum):
    """``plait run`` exit codes (SPEC 8); other commands use OK, FAILED and USAGE."""

    OK = 0  # the run completed / the definition is valid
    FAILED = 1  # the run failed or was cancelled / a definition is invalid
    USAGE = 2  # bad usage, an invalid definition or bad input: nothing was stored
    WAITING = 3  # the run waits for an approval


def exit_code_for(status: str) -> ExitCode:
    """The exit code of ``plait run`` for a run that ended (or parked) in ``status``."""
    if status == "completed":
        return ExitCode.OK
    if status == "waiting":
        return ExitCode.WAITING
    return ExitCode.FAILED
