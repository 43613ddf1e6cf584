"""Two ``plait worker`` processes with a short lease (SQLite and PostgreSQL) run a
python step that holds the GIL for longer than the lease (one catastrophic regex):
with ``executor: process`` the worker running it keeps heartbeating, so the step runs
once and the run completes.  (In a worker thread the same call stalls the worker's
heartbeat: the other worker takes the attempt for dead and runs it again meanwhile.)"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import plaitproc
from conftest import cli_env
from plait.core.states import RunStatus
from plait.definitions import check_definition
from plait.runtime.engine import Engine
from plait.store.base import RunRecord
from plait.store.url import open_store

DEADLINE_S = 60.0

_STEPS = '''
import os
import re
import time


def hold_gil(marks):
    with open(marks, "a") as f:
        f.write(f"{os.getpid()}\\n")
    # C code that never releases the GIL for some seconds here: longer than the lease
    re.match(r"(a+)+$", "a" * 25 + "b")
    return {"pid": os.getpid()}


def sleep_long(marks):
    with open(marks, "a") as f:
        f.write(f"{os.getpid()}\\n")
    time.sleep(120)
'''


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'plait.db'}"
    return str(request.getfixturevalue("pg_database"))


@contextlib.contextmanager
def workers(db: str, cwd: Path, module: str,
            count: int = 2) -> Iterator[list[plaitproc.Process]]:
    """``count`` ``plait worker`` processes on ``db`` with a one-second lease."""
    args = ["worker", "--db", db, "--import", module, "--lease", "1s", "--poll", "100ms",
            "--grace", "1s"]
    started = [plaitproc.popen(args, cwd=cwd, env=cli_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) for _ in range(count)]
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in started:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def submit(db: str, definition: dict[str, object]) -> str:
    async def go() -> str:
        store = open_store(db)
        await store.open()
        try:
            run = await Engine(store).submit(check_definition(definition, check_imports=True),
                                             {})
            return run.run_id
        finally:
            await store.close()
    return asyncio.run(go())


def stored(db: str, run_id: str) -> RunRecord:
    async def go() -> RunRecord:
        store = open_store(db)
        await store.open()
        try:
            return await store.get_run(run_id)
        finally:
            await store.close()
    return asyncio.run(go())


def test_a_process_step_holding_the_gil_runs_once_on_two_workers(
        db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = f"gil_steps_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(_STEPS)
    monkeypatch.syspath_prepend(str(tmp_path))
    marks = tmp_path / "marks"
    run_id = submit(db, {"name": "gil", "steps": [{
        "id": "s", "type": "python", "call": f"{module}:hold_gil", "executor": "process",
        "with": {"marks": str(marks)}, "retry": {"max_retries": 2, "initial_delay": "0s"}}]})
    with workers(db, tmp_path, module):
        deadline = time.monotonic() + DEADLINE_S
        while (run := stored(db, run_id)).status not in (RunStatus.COMPLETED,
                                                         RunStatus.FAILED):
            assert time.monotonic() < deadline, f"still {run.status}"
            time.sleep(0.1)
    assert run.status is RunStatus.COMPLETED, run.error
    assert len(marks.read_text().split()) == 1  # one body: never started again meanwhile


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the child dies with its "
                    "worker on Linux (PR_SET_PDEATHSIG)")
def test_a_worker_killed_mid_call_takes_its_child_process_along(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'plait.db'}"
    module = f"gil_steps_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(_STEPS)
    sys.path.insert(0, str(tmp_path))
    try:
        marks = tmp_path / "marks"
        submit(db, {"name": "sleeper", "steps": [{
            "id": "s", "type": "python", "call": f"{module}:sleep_long",
            "executor": "process", "with": {"marks": str(marks)}}]})
    finally:
        sys.path.remove(str(tmp_path))
    with workers(db, tmp_path, module, count=1) as [worker]:
        deadline = time.monotonic() + DEADLINE_S
        while not (marks.exists() and marks.read_text().split()):
            assert time.monotonic() < deadline, "the step's child never started"
            assert worker.poll() is None, "the worker ended"
            time.sleep(0.05)
        child = int(marks.read_text().split()[0])
        worker.kill()
        worker.wait()
        while _alive(child):
            assert time.monotonic() < deadline, f"the child {child} outlived its worker"
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
