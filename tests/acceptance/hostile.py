"""What the hostile-input tests share: the command run in process (``invoke``), the
checks that it refused an input cleanly (``refused``), and the problems of a definition
loaded through the core (``problems``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from plait import DefinitionError, Workflow
from plait.cli.main import cli
from plait.errors import Problem


def invoke(*args: str) -> Result:
    """``plait ARGS`` in this process (click's runner: stdout and stderr apart)."""
    return CliRunner().invoke(cli, list(args), prog_name="plait")


def refused(result: Result, code: int, *needles: str) -> str:
    """Check that the command exited with ``code`` by itself (SystemExit, no other
    exception), printed no traceback, and named every needle on stderr; return stderr."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert "Traceback" not in result.stdout + result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)
    return result.stderr


def validate_and_run(path: Path, *needles: str) -> None:
    """``plait validate`` (exit 1) and ``plait run`` (exit 2, nothing stored) of an
    invalid definition both name every needle, without a traceback."""
    refused(invoke("validate", "--no-import", str(path)), 1, *needles)
    refused(invoke("run", str(path), "--db", "memory://"), 2, *needles)


def write_json(directory: Path, name: str, definition: Any) -> Path:
    path = directory / name
    path.write_text(json.dumps(definition), encoding="utf-8")
    return path


def problems(definition: object) -> list[Problem]:
    """The problems of loading and validating ``definition`` (it must be refused)."""
    with pytest.raises(DefinitionError) as info:
        Workflow.from_dict(definition).validate()
    assert info.value.problems
    return list(info.value.problems)


def located(definition: object, location: str, needle: str = "") -> Problem:
    """The problem at ``location`` (whose message contains ``needle``)."""
    found = problems(definition)
    at = [p for p in found if p.location == location and needle in p.message]
    assert at, [str(p) for p in found]
    return at[0]


def transform(value: Any, **fields: Any) -> dict[str, Any]:
    """A definition of one transform step (``steps[0]``) with ``value``."""
    return {"name": "hostile",
            "steps": [{"id": "a", "type": "transform", "value": value, **fields}]}
