"""Acceptance tests of the ``plait`` command, run as a subprocess like a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

TIMEOUT_S = 30


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: no terminal forced, the memory store."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PLAIT_DB", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
                        "NO_COLOR", "COLUMNS")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@pytest.fixture
def environ() -> dict[str, str]:
    """``cli_env()`` for tests that start the CLI themselves (subprocess.Popen)."""
    return cli_env()


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def plait(tmp_path: Path) -> Run:
    """``plait(*args, cwd=tmp_path, env={...}, stdin=None)``: run ``python -m plait``;
    ``env`` adds to (or overrides) the variables of ``cli_env()``."""

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "plait", *args], cwd=cwd or tmp_path,
                              env=cli_env(**(env or {})), input=stdin, capture_output=True,
                              text=True, timeout=TIMEOUT_S)

    return run


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """``write(name, text)``: a file under tmp_path with ``text`` dedented."""

    def make(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return make
