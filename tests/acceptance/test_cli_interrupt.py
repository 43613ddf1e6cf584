"""Ctrl-C during `plait run`: the run is recorded as cancelled and the CLI exits 1."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import plaitproc

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

STEPS = """
import asyncio
import pathlib
import time


async def long_async(marker):
    pathlib.Path(marker).write_text("started")
    await asyncio.sleep(60)


def long_sync(seconds):
    time.sleep(seconds)
    return seconds
"""

FLOW = """
    name: interruptible
    steps:
      - {id: first, type: transform, value: 1}
      - {id: waits, type: python, call: "slow_steps:long_async", with: {marker: "{{ input.marker }}"},
         depends_on: [first]}
      - {id: sleeps, type: python, call: "slow_steps:long_sync", with: {seconds: 60},
         depends_on: [first]}
      - {id: later, type: transform, value: 2, depends_on: [waits]}
"""


def start(tmp_path: Path, environ: dict[str, str], *extra: str) -> tuple[subprocess.Popen[str], Path]:
    (tmp_path / "slow_steps.py").write_text(STEPS)
    (tmp_path / "flow.yaml").write_text(FLOW.replace("\n    ", "\n").strip() + "\n")
    marker = tmp_path / "started.txt"
    proc = plaitproc.popen(["run", "flow.yaml", "--input",
         json.dumps({"marker": str(marker)}), *extra],
        cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    deadline = time.monotonic() + 20
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the run did not start its long step:\n{out}\n{err}")
        time.sleep(0.02)
    return proc, marker


def test_sigint_cancels_the_run_and_exits_1(tmp_path, environ):
    proc, _ = start(tmp_path, environ, "--json")
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    # a sync step still sleeping in a thread must not hold the exit for its 60 s
    assert time.monotonic() - began < 10
    assert proc.returncode == 1, err
    result = json.loads(out)
    assert result["status"] == "cancelled"
    steps = result["steps"]
    assert steps["first"]["status"] == "completed"
    for running in ("waits", "sleeps"):
        assert steps[running]["status"] == "cancelled"
        assert steps[running]["attempts"] == 1
        assert steps[running]["finished_at"] is not None
    assert steps["later"]["status"] == "cancelled"
    assert steps["later"]["attempts"] == 0
    assert "run cancelled" in err


def test_sigint_with_the_plain_summary(tmp_path, environ):
    proc, _ = start(tmp_path, environ)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1, err
    assert "cancelling the run" in err
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:5]}
    assert rows == {"first": "completed", "waits": "cancelled", "sleeps": "cancelled",
                    "later": "cancelled"}
    assert out.splitlines()[-1].startswith("run cancelled")


def test_a_second_sigint_stops_at_once(tmp_path, environ):
    proc, _ = start(tmp_path, environ, "--quiet")
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1, err
    assert out.startswith("run cancelled")
