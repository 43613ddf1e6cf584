"""The command's argument parsing: what it spells out instead of importing the core."""

from __future__ import annotations

import subprocess
import sys

from plait.cli.main import RUN_STATUSES
from plait.core.states import RunStatus


def test_the_status_choices_are_the_run_statuses() -> None:
    assert [str(s) for s in RunStatus] == RUN_STATUSES


def test_importing_the_command_loads_no_command_implementation() -> None:
    code = ("import sys, plait.cli.main; print(sorted(m for m in sys.modules "
            "if m.startswith(('plait.', 'rich', 'jinja2', 'asyncio'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    assert eval(out) == ["plait.cli", "plait.cli.inputs", "plait.cli.main",  # noqa: S307
                         "plait.cli.settings", "plait.core", "plait.core.jsoncheck",
                         "plait.errors"]
