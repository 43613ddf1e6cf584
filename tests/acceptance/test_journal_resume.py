"""A ``plait run`` killed with SIGKILL inside a step that makes journaled calls: after
``plait resume`` the calls whose results were stored are not made again; the others
are made once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import textwrap
import time
from collections import Counter
from pathlib import Path

import plaitproc
from plait.store import RunFilter, open_store

WAIT_S = 60.0  # a bound on waiting for a process, never a claim about speed

STEPS_MODULE = '''
import os
import time
from pathlib import Path


def _call(n):
    with open(os.environ["JOURNAL_LOG"], "a") as f:
        f.write(f"call {n}\\n")
    return {"n": n}


def four_calls(ctx):
    got = [ctx.run_sync("one", _call, 1), ctx.run_sync("two", _call, 2)]
    if ctx.attempt == 1:  # stay here until the test kills the process
        Path(os.environ["JOURNAL_LOG"] + ".stored").write_text("two calls stored")
        time.sleep(120)
    got += [ctx.run_sync("three", _call, 3), ctx.run_sync("four", _call, 4)]
    return got
'''

FLOW = """
    name: journal-kill
    steps:
      - {id: agent, type: python, call: "journalmod:four_calls"}
"""


def _plait(*args: str, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "JOURNAL_LOG": str(log), "PYTHONPATH": str(cwd)}
    return plaitproc.popen([*args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=False)


async def _only_run(db: str) -> str:
    store = open_store(db)
    await store.open()
    try:
        runs = await store.list_runs(RunFilter(workflow="journal-kill", limit=5))
        assert len(runs) == 1
        return runs[0].run_id
    finally:
        await store.close()


def test_resume_after_kill_does_not_repeat_stored_calls(tmp_path: Path) -> None:
    (tmp_path / "journalmod.py").write_text(STEPS_MODULE)
    flow = tmp_path / "flow.yaml"
    flow.write_text(textwrap.dedent(FLOW))
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    log = tmp_path / "calls.log"
    marker = Path(str(log) + ".stored")

    proc = _plait("run", str(flow), "--db", db, "--quiet", cwd=tmp_path, log=log)
    deadline = time.monotonic() + WAIT_S
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the step never reached its second call"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=WAIT_S)  # reaps it and closes its stderr pipe

    run_id = asyncio.run(_only_run(db))
    resumed = _plait("resume", run_id, "--db", db, "--quiet", cwd=tmp_path, log=log)
    _, err = resumed.communicate(timeout=WAIT_S)
    assert resumed.returncode == 0, err.decode()

    calls = Counter(log.read_text().split("\n")[:-1])
    assert calls == {"call 1": 1, "call 2": 1, "call 3": 1, "call 4": 1}
