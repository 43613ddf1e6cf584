"""Reading what the command line is given: a run's input (``--input``,
``--input-file``), other JSON options (``--data``), run ids and ``--since`` windows.
Argument parsing only: every problem is a click error (exit 2) naming the option."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..core.jsoncheck import MAX_INT_DIGITS, MAX_NESTING, NotJSON, checked_json

if TYPE_CHECKING:
    from ..core.model import JSON

_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# The largest whole number a store keeps: plait.core.numbers.MAX_INT, spelt out so that
# parsing arguments loads no more of the core (a unit test checks that they match).
MAX_INT = 2**31 - 1
COUNT = click.IntRange(min=1, max=MAX_INT)  # --limit N, --concurrency N...


class RunIdType(click.ParamType):  # type: ignore[type-arg]
    """A run id as plait makes them (32 hex digits) or as a store accepts them: 1 to
    64 letters, digits, ``_`` or ``-``.  Anything else is refused before a store is
    opened."""

    name = "run_id"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = str(value).strip()
        if not _RUN_ID.fullmatch(text):
            self.fail(f"{value!r} is not a run id: a run id is 1 to 64 letters, digits, "
                      f"'_' or '-' (see `plait runs`)", param, ctx)
        return text


RUN_ID = RunIdType()


def check_reference(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A ``FILE|NAME[@V]`` argument: a version no store can hold (past ``MAX_INT``)
    is bad usage, refused before a store is opened (other targets pass)."""
    version = value.rpartition("@")[2] if "@" in value else ""
    if version.isascii() and version.isdigit() and not _exists(value) and (
            len(version.lstrip("0")) > len(str(MAX_INT)) or int(version) > MAX_INT):
        shown = version if len(version) <= 30 else f"{version[:12]}... ({len(version):,} digits)"
        raise click.BadParameter(f"version {shown} is over {MAX_INT:,}, the largest version "
                                 f"a store keeps", ctx, param)
    return value


def _exists(path: str) -> bool:
    try:
        return Path(path).exists()
    except (OSError, ValueError):  # a name too long for the system
        return False


def read_input(text: str | None, file: str | None) -> JSON:
    """The run input given on the command line: ``{}`` when neither option is given.

    Raises click.BadParameter / click.UsageError (exit 2) naming the option and the
    problem, so nothing is stored for input that is not JSON or cannot be read."""
    if text is not None and file is not None:
        raise click.UsageError("give either --input or --input-file, not both")
    if file is not None:
        return _parse(_read_file(file), "--input-file", f"{file} is not valid JSON",
                      "input")
    if text is not None:
        return _parse(text, "--input", "not valid JSON", "input")
    return {}


def parse_json_option(text: str, option: str) -> JSON:
    """The JSON value of ``option`` (click.BadParameter naming it when not JSON)."""
    return _parse(text, option, "not valid JSON", option.lstrip("-"))


def parse_since(value: str | None, option: str = "--since") -> float | None:
    """``--since 1h`` -> the epoch cutoff (now - 1 hour); None when not given."""
    if value is None:
        return None
    from ..observe.metrics import since_cutoff

    try:
        return since_cutoff(value, now=time.time())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


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


def _parse(text: str, option: str, what: str, root: str) -> JSON:
    """The JSON in ``text``, checked as run inputs are (docs/limits.md: valid Unicode, at most
    4,300-digit integers, nested at most 256 levels), else click.BadParameter."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"{what}: {exc.msg} (line {exc.lineno}, column "
                                 f"{exc.colno})", param_hint=option) from None
    except RecursionError:
        raise click.BadParameter(f"not accepted: lists and dicts nest more than "
                                 f"{MAX_NESTING} levels deep", param_hint=option) from None
    except ValueError as exc:  # NaN/Infinity, or an integer past 4,300 digits
        raise click.BadParameter(f"{what}: {exc}", param_hint=option) from None
    try:
        return checked_json(value)
    except NotJSON as exc:
        raise click.BadParameter(f"not accepted: {exc.describe(root)}",
                                 param_hint=option) from None


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits.lstrip('-')):,} digits is over the "
                         f"{MAX_INT_DIGITS:,}-digit limit (write it as a string)")
    return int(digits)


def _reject_constant(name: str) -> JSON:
    # json.loads accepts NaN and Infinity, which are not JSON and cannot be stored.
    raise ValueError(f"{name} is not a JSON value")
