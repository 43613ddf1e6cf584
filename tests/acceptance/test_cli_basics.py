"""The command itself: entry points, --version and --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import plait


def test_version(plait):
    proc = plait("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"plait {plait_version()}"


def plait_version() -> str:
    return plait.__version__


@pytest.mark.parametrize("command", ["validate", "run", "plan", "graph"])
def test_every_command_has_help(plait, command):
    proc = plait(command, "--help")
    assert proc.returncode == 0
    assert f"Usage: plait {command}" in proc.stdout
    assert len(proc.stdout.splitlines()) > 5


def test_help_lists_the_commands_and_run_exit_codes(plait):
    top = plait("--help")
    for command in ("validate", "run", "plan", "graph"):
        assert command in top.stdout
    run = plait("run", "--help").stdout
    for line in ("0  the run completed", "1  the run failed or was cancelled",
                 "3  the run is waiting for an approval or an event"):
        assert line in run
    assert "--input-file" in run and "--db" in run and "PLAIT_DB" in run


def test_unknown_command_exits_2(plait):
    proc = plait("frobnicate")
    assert proc.returncode == 2
    assert "No such command" in proc.stderr


def test_the_console_script_and_module_entry_points(tmp_path):
    script = Path(sys.executable).with_name("plait")
    entry_points = [[sys.executable, "-m", "plait.cli.main", "--version"]]
    if script.exists():
        entry_points.append([str(script), "--version"])
    for argv in entry_points:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("plait ")
