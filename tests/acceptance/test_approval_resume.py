"""An approved ``ctx.wait_for_approval`` whose re-run is killed with SIGKILL: after
``plait resume`` the step's next attempt gets the stored decision at once.  It neither
asks again nor spends an attempt finding out that it was approved."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import plaitproc

WAIT_S = 60.0  # a bound on waiting for a process, never a claim about speed

STEPS_MODULE = '''
import os
import time
from pathlib import Path


def _log(line):
    with open(os.environ["APPROVAL_LOG"], "a") as f:
        f.write(line + "\\n")


def review(ctx):
    _log(f"start {ctx.attempt}")
    decision = ctx.wait_for_approval_sync("ship it?")
    _log(f"approved {ctx.attempt} by {decision['by']}")
    if not Path(os.environ["APPROVAL_LOG"] + ".killed").exists():
        Path(os.environ["APPROVAL_LOG"] + ".approved").write_text("running")
        time.sleep(120)  # the approved re-run, until the test kills its process
    return {"by": decision["by"]}
'''

FLOW = """
    name: approval-kill
    steps:
      - {id: review, type: python, call: "approvalmod:review"}
"""


def _plait(*args: str, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "APPROVAL_LOG": str(log), "PYTHONPATH": str(cwd)}
    return plaitproc.popen([*args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=False)


def _finish(proc: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=WAIT_S)
    return proc.returncode, out.decode(), err.decode()


def test_approved_step_killed_in_its_rerun_is_not_asked_again(tmp_path: Path) -> None:
    (tmp_path / "approvalmod.py").write_text(STEPS_MODULE)
    flow = tmp_path / "flow.yaml"
    flow.write_text(textwrap.dedent(FLOW))
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    log = tmp_path / "calls.log"

    code, out, err = _finish(_plait("run", str(flow), "--db", db, "--json", cwd=tmp_path,
                                    log=log))
    assert code == 3, err  # waiting for a person
    run_id = json.loads(out)["run_id"]

    approve = _plait("approve", run_id, "review", "--db", db, cwd=tmp_path, log=log)
    marker = Path(str(log) + ".approved")
    deadline = time.monotonic() + WAIT_S
    while not marker.exists():
        assert approve.poll() is None, approve.stderr.read() if approve.stderr else ""
        assert time.monotonic() < deadline, "the approved re-run never started"
        time.sleep(0.01)
    approve.send_signal(signal.SIGKILL)
    approve.communicate(timeout=WAIT_S)
    Path(str(log) + ".killed").write_text("killed")

    code, out, err = _finish(_plait("resume", run_id, "--db", db, "--json", cwd=tmp_path,
                                    log=log))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "completed"
    by = doc["output"]["review"]["by"]
    assert isinstance(by, str) and by  # who approved, as the resumed attempt was told
    lines = log.read_text().splitlines()
    starts = [line for line in lines if line.startswith("start")]
    approved = [line for line in lines if line.startswith("approved")]
    # asked once (attempt 1), approved in the killed re-run (2), and the resumed
    # attempt (3) had its decision at once: no attempt asked again
    assert starts == ["start 1", "start 2", "start 3"], lines
    assert [a.split()[1] for a in approved] == ["2", "3"], lines
