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


def hold_gil(marks):
    with open(marks, "a") as f:
        f.write(f"{os.getpid()}\\n")
    # C code that never releases the GIL for some seconds here: longer than the lease
    re.match(r"(a+)+$", "a" * 25 + "b")
    return {"pid": os.getpid()}
'''


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'plait.db'}"
    return str(request.getfixturevalue("pg_database"))


@contextlib.contextmanager
def workers(db: str, cwd: Path, module: str) -> Iterator[list[plaitproc.Process]]:
    """Two ``plait worker`` processes on ``db`` with a one-second lease."""
    args = ["worker", "--db", db, "--import", module, "--lease", "1s", "--poll", "100ms",
            "--grace", "1s"]
    started = [plaitproc.popen(args, cwd=cwd, env=cli_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        yield started
    finally:
        for proc in started:
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
