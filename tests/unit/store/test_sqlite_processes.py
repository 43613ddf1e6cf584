"""Many processes, one SQLite file: three writer processes run workflows while a
reader process reads (like ``plait runs`` / ``plait show`` during a run).  No process may
fail ("database is locked" or any other error), and every run must be complete."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plait.core.runstate import StepChange, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.store import RunFilter, RunRecord, WriteBatch
from plait.store.base import Ticket
from plait.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow  # starts processes sharing one file

WORKER = Path(__file__).with_name("sqlite_worker.py")
WRITERS = 3
RUNS = 8


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen[str], timeout: float) -> str:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, f"{process.args} failed:\n{err}"
    assert "locked" not in err, err
    return out


async def test_writers_and_a_reader_share_one_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"  # created by whichever process comes first
    stop = tmp_path / "stop"
    reader = spawn("reader", url, str(stop))
    writers = [spawn("writer", url, f"w{n}", str(RUNS)) for n in range(WRITERS)]
    try:
        run_ids = [rid for w in writers for rid in json.loads(finish(w, 120))]
    finally:
        stop.touch()
    reads = json.loads(finish(reader, 60))["reads"]
    assert reads > 0

    assert len(run_ids) == WRITERS * RUNS
    store = SqliteStore(url)
    await store.open()
    try:
        listed = await store.list_runs(RunFilter(limit=1000))
        assert sorted(r.run_id for r in listed) == sorted(run_ids)
        for run_id in run_ids:
            run = await store.get_run(run_id)
            assert run.status == RunStatus.COMPLETED
            steps = await store.get_steps(run_id)
            assert len(steps) == (42 if run.workflow == "fan" else 25)
            assert all(s.status == StepStatus.COMPLETED for s in steps)
            assert all(s.output == {"by": run_id.split("-")[0]} for s in steps)
            attempts = await store.get_attempts(run_id)
            assert len(attempts) == len(steps)
            events = await store.get_events(run_id)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
        # the same definitions saved by every writer at once: one version each
        versions = sorted((w.name, w.version) for w in await store.list_workflows())
        assert versions == [("chain", 1), ("fan", 1)]
    finally:
        await store.close()


def test_the_first_open_of_a_new_file_by_many_processes_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/race.db"
    code = ("import asyncio, sys; from plait.store.sqlite import SqliteStore\n"
            "async def main():\n"
            "    s = SqliteStore(sys.argv[1]); await s.open(); await s.close()\n"
            "asyncio.run(main())\n")
    start = time.monotonic()
    openers = [subprocess.Popen([sys.executable, "-c", code, url], stderr=subprocess.PIPE,
                                text=True) for _ in range(6)]
    for p in openers:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    assert time.monotonic() - start < 60


async def test_a_writer_killed_mid_run_leaves_a_consistent_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/killed.db"
    writer = spawn("long", url, "victim", "20000")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _completed(tmp_path / "killed.db") < 200:
        time.sleep(0.02)  # let it commit a few hundred batches, then kill it mid-stride
    writer.send_signal(signal.SIGKILL)
    writer.communicate(timeout=30)

    conn = sqlite3.connect(tmp_path / "killed.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    store = SqliteStore(url)
    await store.open()
    try:
        run = await store.get_run("victim")
        assert run.status == RunStatus.RUNNING  # it never finished
        steps = await store.get_steps("victim")
        events = await store.get_events("victim")
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        # every stored status is where the step's history ends: no half-written batch
        last = {e.step_id: e.data["to"] for e in events if e.kind == "step"}
        assert all(str(s.status) == last.get(s.step_id, "pending") for s in steps)
        done = sum(s.status == StepStatus.COMPLETED for s in steps)
        assert 200 <= done < len(steps)
        attempts = {(a.step_id, a.status) for a in await store.get_attempts("victim")}
        assert all((s.step_id, "completed") in attempts
                   for s in steps if s.status == StepStatus.COMPLETED)
    finally:
        await store.close()


def _completed(path: Path) -> int:
    if not path.exists():
        return 0
    conn = sqlite3.connect(path, timeout=10)
    try:
        return conn.execute("SELECT count(*) FROM steps WHERE status = 'completed'"
                            ).fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        conn.close()


async def test_claimers_in_separate_processes_never_share_a_ticket(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/claims.db"
    steps = [f"s{n}" for n in range(60)]
    store = SqliteStore(url)
    await store.open()
    try:
        await store.create_run(RunRecord(run_id="fan", workflow="wf", version=1,
                                         fingerprint="0123456789ab",
                                         status=RunStatus.PENDING, input={},
                                         created_at=1.0), steps)
        running = StepRuntime(StepStatus.RUNNING, attempts=1)
        await store.write(WriteBatch(
            "fan", steps=[StepChange(s, source, target, 1.0, running)
                          for s in steps for source, target in (
                              (StepStatus.PENDING, StepStatus.QUEUED),
                              (StepStatus.QUEUED, StepStatus.RUNNING))],
            dispatch=[Ticket(run_id="fan", step_id=s, attempt=1) for s in steps]))
        go = tmp_path / "go"
        claimers = [spawn("claimer", url, f"p{n}", str(go)) for n in range(4)]
        ready = [tmp_path / f"ready-p{n}" for n in range(4)]
        deadline = time.monotonic() + 60
        while not all(r.exists() for r in ready) and time.monotonic() < deadline:
            time.sleep(0.01)  # every process has opened the file: they start together
        go.touch()
        claimed = {f"p{n}": json.loads(finish(c, 120)) for n, c in enumerate(claimers)}
        taken = [step for got in claimed.values() for _, step, _ in got]
        assert sorted(taken) == sorted(steps)  # each exactly once, across processes
        assert sum(1 for got in claimed.values() if got) > 1
        by = {o.step_id: o.output for o in await store.outcomes("fan")}
        assert by == {step: {"by": name} for name, got in claimed.items()
                      for _, step, _ in got}
        assert await store.tickets("fan") == []
    finally:
        await store.close()
