"""A decision whose continuation fails is visible and recoverable: ``plait approve``
notes the failure in the run's history, ``plait show`` (text and --json) says what
failed and that ``plait resume RUN`` continues it, and a second decision is refused
pointing there.  ``plait serve`` started in another directory than the flow's imports
the run's python steps from the flow's directory (and ``--import`` modules)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx

STEPS = "def a():\n    return 1\n\n\ndef b(a):\n    return a + 41\n"
FLOW = """\
name: gate
steps:
  - {id: a, type: python, call: 'gatesteps:a'}
  - {id: ok, type: approval, depends_on: [a]}
  - {id: b, type: python, call: 'gatesteps:b', depends_on: [ok]}
"""


def _project(tmp_path: Path) -> tuple[Path, Path, str]:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "gatesteps.py").write_text(STEPS)
    (project / "flow.yaml").write_text(FLOW)
    return project, elsewhere, f"sqlite:///{tmp_path / 'runs.db'}"


def _waiting_run(plait: Callable[..., subprocess.CompletedProcess[str]], db: str,
                 cwd: Path) -> str:
    started = plait("run", "project/flow.yaml", "--db", db, "--json", cwd=cwd)
    assert started.returncode == 3, started.stderr
    return str(json.loads(started.stdout)["run_id"])


def test_a_failed_continuation_is_shown_and_resume_recovers_it(plait, tmp_path: Path) -> None:
    project, elsewhere, db = _project(tmp_path)
    run_id = _waiting_run(plait, db, tmp_path)
    hidden = project / "gatesteps.py"
    hidden.rename(project / "gatesteps.moved")  # the steps cannot import anywhere now

    approved = plait("approve", run_id, "ok", "--db", db, "--by", "ada", cwd=elsewhere)
    assert approved.returncode == 2, approved.stderr
    assert "decision recorded, could not continue" in approved.stderr
    assert f"plait resume {run_id}" in approved.stderr

    shown = json.loads(plait("show", run_id, "--db", db, "--json", cwd=elsewhere).stdout)
    entry = shown["continuation"]
    assert entry["step"] == "ok" and entry["command"] == f"plait resume {run_id}"
    assert "gatesteps" in entry["error"] and entry["failed_at"].endswith("Z")
    text = plait("show", run_id, "--db", db, cwd=elsewhere).stdout
    assert "decision on ok recorded, could not continue:" in text
    assert f"continue it with: plait resume {run_id}" in text

    again = plait("approve", run_id, "ok", "--db", db, cwd=elsewhere)
    assert again.returncode == 1
    assert "the first decision stands" in again.stderr
    assert f"continue it with: plait resume {run_id}" in again.stderr

    (project / "gatesteps.moved").rename(hidden)
    resumed = plait("resume", run_id, "--db", db, "--json", cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    shown = json.loads(plait("show", run_id, "--db", db, "--json", cwd=elsewhere).stdout)
    assert shown["status"] == "completed" and shown["continuation"] is None
    assert shown["steps"]["b"]["output"] == 42


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serving(spawn, waiter, db: str, cwd: Path, *args: str) -> tuple[str, subprocess.Popen[str]]:
    port = _free_port()
    proc = spawn("serve", "--db", db, "--port", str(port), *args, cwd=cwd,
                 env={"PLAIT_ALLOWED_MODULES": "gatesteps"})
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    waiter(answers, proc=proc, what="plait serve to answer")
    return base, proc


def _status(base: str, run_id: str, wanted: Callable[[dict], bool], waiter) -> dict:
    found: dict = {}

    def done() -> bool:
        found.update(httpx.get(f"{base}/api/runs/{run_id}", timeout=5).json())
        return wanted(found)

    waiter(done, what=f"run {run_id} to settle")
    return found


def test_serve_started_elsewhere_continues_an_approved_run(plait, spawn, waiter,
                                                          tmp_path: Path) -> None:
    project, elsewhere, db = _project(tmp_path)
    run_id = _waiting_run(plait, db, tmp_path)
    base, proc = _serving(spawn, waiter, db, elsewhere)
    try:
        answer = httpx.post(f"{base}/api/runs/{run_id}/steps/ok/approve",
                            json={"approved": True}, timeout=10)
        assert answer.status_code == 200, answer.text
        run = _status(base, run_id, lambda r: r["status"] != "waiting", waiter)
        assert run["status"] == "completed", run
        assert run["steps"]["b"]["output"] == 42 and run["continuation"] is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def test_serve_notes_a_decision_it_cannot_apply(plait, spawn, waiter,
                                                tmp_path: Path) -> None:
    project, elsewhere, db = _project(tmp_path)
    run_id = _waiting_run(plait, db, tmp_path)
    (project / "gatesteps.py").rename(project / "gatesteps.moved")
    base, proc = _serving(spawn, waiter, db, elsewhere)
    try:
        answer = httpx.post(f"{base}/api/runs/{run_id}/steps/ok/approve",
                            json={"approved": True}, timeout=10)
        assert answer.status_code == 200, answer.text
        run = _status(base, run_id, lambda r: r["continuation"] is not None, waiter)
        entry = run["continuation"]
        assert run["status"] == "waiting" and entry["step"] == "ok"
        assert "gatesteps" in entry["error"]
        assert entry["command"] == f"plait resume {run_id}"
        second = httpx.post(f"{base}/api/runs/{run_id}/steps/ok/approve",
                            json={"approved": False}, timeout=10)
        assert second.status_code == 409
        error = second.json()["error"]
        assert f"continue it with: plait resume {run_id}" in error["message"]
        assert error["details"]["continuation"]["step"] == "ok"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def test_serve_import_loads_modules_and_refuses_a_missing_one(plait, spawn, waiter,
                                                             tmp_path: Path) -> None:
    project, elsewhere, db = _project(tmp_path)
    refused = plait("serve", "--db", db, "--port", "1", "--import", "no_such_module_x",
                    cwd=elsewhere)
    assert refused.returncode == 2
    assert "--import no_such_module_x" in refused.stderr
    base, proc = _serving(spawn, waiter, db, project, "--import", "gatesteps")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
