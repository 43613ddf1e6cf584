"""``plait approve`` on PostgreSQL leaves the run to the workers: it stores the decision,
wakes them and follows the run like ``plait run --db postgresql://`` (same output and
exit codes); ``--detach`` returns at once; killing the approver interrupts nothing."""

from __future__ import annotations

import json
import signal
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import pgutil
from conftest import plait_worker

pytestmark = pytest.mark.postgres

STEPS = """
import os
import pathlib
import time


def sleepy(marker, seconds):
    pathlib.Path(marker).write_text(str(os.getpid()))
    time.sleep(seconds)
    return {"pid": os.getpid()}
"""
FLOW = """
name: gated
steps:
  - {id: draft, type: transform, value: hello}
  - {id: sign_off, type: approval, depends_on: [draft]}
  - {id: sleepy, type: python, call: "apg_steps:sleepy",
     with: {marker: "{{ input.marker }}", seconds: "{{ input.seconds }}"},
     depends_on: [sign_off]}
"""


@dataclass
class Cluster:
    cwd: Path
    db: str
    worker_pid: int

    def env(self) -> dict[str, str]:
        return {"PLAIT_DB": self.db}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, pg_database: str) -> Iterator[Cluster]:
    cwd = tmp_path_factory.mktemp("approvepg")
    (cwd / "apg_steps.py").write_text(STEPS)
    (cwd / "flow.yaml").write_text(textwrap.dedent(FLOW).lstrip())
    with plait_worker(pg_database, cwd, "apg_steps") as worker:
        yield Cluster(cwd, pg_database, worker.pid)


def _waiting(plait, cluster: Cluster, marker: Path, seconds: float) -> str:
    proc = plait("run", "flow.yaml", "--json", "--input",
                 json.dumps({"marker": str(marker), "seconds": seconds}),
                 cwd=cluster.cwd, env=cluster.env())
    assert proc.returncode == 3, proc.stderr
    return str(json.loads(proc.stdout)["run_id"])


def _show(plait, cluster: Cluster, run_id: str) -> dict:
    proc = plait("show", run_id, "--json", cwd=cluster.cwd, env=cluster.env())
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_approve_follows_the_run_the_workers_execute(plait, spawn, cluster: Cluster,
                                                    tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    run_id = _waiting(plait, cluster, marker, 0.05)
    approver = spawn("approve", run_id, "sign_off", "--by", "ada", "--json",
                     cwd=cluster.cwd, env=cluster.env())
    out, err = approver.communicate(timeout=30)
    assert approver.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == "completed" and result["run_id"] == run_id
    assert result["steps"]["sign_off"]["output"]["by"] == "ada"
    assert result["steps"]["sleepy"]["output"] == {"pid": cluster.worker_pid}
    assert int(marker.read_text()) != approver.pid
    assert "the workers of" in err


def test_killing_the_approver_interrupts_no_attempt(plait, spawn, waiter, cluster: Cluster,
                                                   tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    run_id = _waiting(plait, cluster, marker, 1.0)
    approver = spawn("approve", run_id, "sign_off", cwd=cluster.cwd, env=cluster.env())
    waiter(marker.exists, proc=approver, what="the step after the approval to start")
    approver.send_signal(signal.SIGKILL)
    approver.wait(timeout=10)
    waiter(lambda: pgutil.run_status(cluster.db, run_id) == "completed",
           what="the workers to complete the run")
    shown = _show(plait, cluster, run_id)
    assert shown["steps"]["sleepy"]["attempts"] == 1
    assert [a["status"] for a in shown["attempts"] if a["step"] == "sleepy"] == ["completed"]


def test_approve_detach_returns_at_once(plait, waiter, cluster: Cluster,
                                        tmp_path: Path) -> None:
    run_id = _waiting(plait, cluster, tmp_path / "ran.txt", 0.05)
    proc = plait("approve", run_id, "sign_off", "--detach", "--json", cwd=cluster.cwd,
                 env=cluster.env())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["run_id"] == run_id
    waiter(lambda: pgutil.run_status(cluster.db, run_id) == "completed",
           what="the workers to complete the run")
    again = plait("approve", run_id, "sign_off", cwd=cluster.cwd, env=cluster.env())
    assert again.returncode == 1 and "the first decision stands" in again.stderr
