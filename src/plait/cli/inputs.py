"""Reading a run's input from ``--input`` or ``--input-file`` (argument parsing only)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..core.model import JSON


def read_input(text: str | None, file: str | None) -> JSON:
    """The run input given on the command line: ``{}`` when neither option is given.

    Raises click.BadParameter / click.UsageError (exit 2) naming the option and the
    problem, so nothing is stored for input that is not JSON or cannot be read."""
    if text is not None and file is not None:
        raise click.UsageError("give either --input or --input-file, not both")
    if file is not None:
        return _parse(_read_file(file), "--input-file", f"{file} is not valid JSON")
    if text is not None:
        return _parse(text, "--input", "not valid JSON")
    return {}


def _read_file(file: str) -> str:
    if file == "-":
        return sys.stdin.read()
    try:
        return Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise click.BadParameter(f"{file}: no such file", param_hint="--input-file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"{file}: cannot read: {exc}",
                                 param_hint="--input-file") from exc


def _parse(text: str, option: str, what: str) -> JSON:
    try:
        value: JSON = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"{what}: {exc.msg} (line {exc.lineno}, column "
                                 f"{exc.colno})", param_hint=option) from None
    except ValueError as exc:
        raise click.BadParameter(f"{what}: {exc}", param_hint=option) from None
    return value


def _reject_constant(name: str) -> JSON:
    # json.loads accepts NaN and Infinity, which are not JSON and cannot be stored.
    raise ValueError(f"{name} is not a JSON value")
