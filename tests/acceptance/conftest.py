"""Acceptance tests of the ``plait`` command, run as a process of its own like a user
would (forked from a warm process that has plait imported: see tests/plaitproc.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import plaitproc
from plait.store.base import RunFilter, RunRecord
from plait.store.url import open_store

TIMEOUT_S = 30


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: no terminal forced and no PLAIT_DB, so the
    store is the default ./.plait/plait.db of the (temporary) working directory."""
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
    """``plait(*args, cwd=tmp_path, env={...}, stdin=None)``: run ``plait ARGS`` and wait
    for it; ``env`` adds to (or overrides) the variables of ``cli_env()``."""

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return plaitproc.run(args, cwd=cwd or tmp_path, env=cli_env(**(env or {})),
                             input=stdin, timeout=TIMEOUT_S)

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


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., plaitproc.Process]]:
    """``spawn(*args, cwd=tmp_path, env={...})``: start ``plait ARGS`` without waiting
    (stdout and stderr piped); whatever still runs at the end is killed."""
    started: list[plaitproc.Process] = []

    def start(*args: str, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> plaitproc.Process:
        proc = plaitproc.popen(args, cwd=cwd or tmp_path, env=cli_env(**(env or {})),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@contextlib.contextmanager
def plait_worker(db: str, cwd: Path, *imports: str) -> Iterator[plaitproc.Process]:
    """A ``plait worker`` on ``db`` (PostgreSQL), importing ``imports`` from ``cwd``,
    with a short lease and poll; stopped with SIGTERM (then SIGKILL) at the end."""
    args = ["worker", "--db", db, *(a for name in imports for a in ("--import", name)),
            "--lease", "2s", "--poll", "200ms", "--grace", "1s"]
    worker = plaitproc.popen(args, cwd=cwd,
                             env={k: v for k, v in os.environ.items() if k != "PLAIT_DB"},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield worker
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


async def stored_runs(db: str) -> list[RunRecord]:
    """Every run stored in ``db`` (up to 100), read through the Store protocol."""
    store = open_store(db)
    await store.open()
    try:
        return await store.list_runs(RunFilter(limit=100))
    finally:
        await store.close()


def wait_line(log: Path, line: str, proc: plaitproc.Process, timeout: float = 30) -> None:
    """Wait until ``log`` holds ``line`` (a line of its own); fail when ``proc`` ends
    first or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and line in log.read_text().splitlines():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {line!r}: {log.read_text()}")
        time.sleep(0.02)
    raise AssertionError(f"never saw {line!r}")


def wait_for(condition: Callable[[], bool], *, timeout: float = 20.0,
             proc: plaitproc.Process | None = None, what: str = "the condition") -> None:
    """Poll ``condition`` every 20 ms; fail the test (with the output of ``proc``, if it
    ended) when it does not hold within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the process ended before {what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def waiter() -> Callable[..., None]:
    """``wait_for`` as a fixture (acceptance tests are not a package)."""
    return wait_for


def run_plait(*args: str, cwd: Path, env: dict[str, str] | None = None,
              stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``plait *args`` in ``cwd`` and wait for it."""
    return plaitproc.run(args, cwd=cwd, env=cli_env(**(env or {})), input=stdin,
                         timeout=TIMEOUT_S)


@pytest.fixture(scope="session")
def plait_in() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_plait`` for fixtures wider than one test: ``plait_in(*args, cwd=...)``."""
    return run_plait
