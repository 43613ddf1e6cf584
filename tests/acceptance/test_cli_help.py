"""Every command's --help: what it does, its options and its exit codes (in process:
click renders help without running anything)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from plait.cli.main import cli

COMMANDS = {
    "resume": ["RUN_ID", "--db", "--json", "PLAIT_DB", "3  the run is waiting"],
    "runs": ["--workflow", "--status", "--limit", "--all", '"steps_done"', "UTC"],
    "show": ["RUN_ID", '"attempts"', '"retry_of"', "UTC"],
    "cancel": ["RUN_ID", "0  cancellation requested", "1  the run already completed"],
    "approve": ["RUN_ID STEP", "--reject", "--data", "--by", "1  the run failed"],
    "retry": ["--from", "--input", "retry_of", "0  the run completed"],
    "gantt": ["--html", "critical path"],
    "metrics": ["--since", "--check", "--alerts", "1  --check and at least one alert",
                "compute time"],
    "sla": ["--json", "--check", '"breaches"'],
    "run": ["--detach", ".plait/logs/RUN_ID.log", '"pid"'],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_of_every_command(command):
    result = CliRunner().invoke(cli, [command, "--help"], prog_name="plait",
                                terminal_width=200)
    assert result.exit_code == 0, result.output
    assert f"Usage: plait {command}" in result.output
    text = " ".join(result.output.split())
    for needle in COMMANDS[command]:
        assert " ".join(needle.split()) in text, needle


def test_the_top_level_help_lists_every_command():
    result = CliRunner().invoke(cli, ["--help"], prog_name="plait", terminal_width=200)
    listed = result.output.split("Commands:")[1]
    for command in COMMANDS:
        assert f"  {command} " in listed
    assert "./.plait/plait.db" in result.output
