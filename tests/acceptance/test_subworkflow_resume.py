"""A parent run killed (SIGKILL) while its child run executes: ``plait resume PARENT``
re-attaches to the child it started (resuming it) instead of starting a second one,
and a loop killed mid-way goes on at the iteration it was at, without re-running the
iterations that ended.  Plus what ``plait runs`` and ``plait show`` say of them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import plaitproc
from conftest import Run, cli_env, stored_runs, wait_line

STEPS = '''
import os
import time


def work(ctx, tag="", slow=False):
    with open(os.environ["SUB_LOG"], "a") as f:
        f.write(f"start {tag}{ctx.step_id}\\n")
    if slow:  # slow in the run that is killed, quick in the resumed one
        time.sleep(float(os.environ.get("SUB_SLOW_S", "0")))
    with open(os.environ["SUB_LOG"], "a") as f:
        f.write(f"done {tag}{ctx.step_id}\\n")
    return {"step": ctx.step_id, "tag": tag}
'''

CHILD = """\
name: child
input: {type: object, properties: {tag: {type: string}}}
steps:
  - {id: a, type: python, call: "steps:work", with: {tag: "{{ input.tag }}"}}
  - {id: b, type: python, call: "steps:work", with: {tag: "{{ input.tag }}", slow: true},
     depends_on: [a]}
output: "{{ steps.a.output }}"
"""


def _kill_then_resume(tmp_path: Path, flow: str, kill_at: str, plait: Run) -> tuple[
        str, list[str], str]:
    (tmp_path / "steps.py").write_text(STEPS)
    (tmp_path / "flow.yaml").write_text(flow)
    log, db = tmp_path / "sub.log", f"sqlite:///{tmp_path / 'runs.db'}"
    env = cli_env(SUB_LOG=str(log), PYTHONPATH=str(tmp_path), SUB_SLOW_S="60")
    proc = plaitproc.popen(["run", "flow.yaml", "--db", db,
                             "--quiet"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=False)
    try:
        wait_line(log, kill_at, proc)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    [parent] = [r for r in asyncio.run(stored_runs(db)) if r.parent_run_id is None]
    resumed = plait("resume", parent.run_id, "--db", db, "--json",
                    env={"SUB_LOG": str(log), "PYTHONPATH": str(tmp_path)})
    assert resumed.returncode == 0, resumed.stderr
    return parent.run_id, log.read_text().splitlines(), db


def test_a_killed_parent_reattaches_to_its_child_on_resume(tmp_path: Path,
                                                           plait: Run) -> None:
    (tmp_path / "child.yaml").write_text(CHILD)
    flow = """\
name: parent
steps:
  - {id: sub, type: workflow, workflow: ./child.yaml, input: {tag: "x"}}
  - {id: after, type: transform, value: "{{ steps.sub.output.tag }}", depends_on: [sub]}
"""
    parent_id, lines, db = _kill_then_resume(tmp_path, flow, "start xb", plait)
    counts = Counter(lines)
    assert counts["done xa"] == 1  # the child's completed step did not run again
    assert counts["done xb"] == 1
    runs = asyncio.run(stored_runs(db))
    children = [r for r in runs if r.parent_run_id == parent_id]
    assert len(children) == 1 and str(children[0].status) == "completed"
    shown = json.loads(plait("show", parent_id, "--db", db, "--json").stdout)
    assert shown["status"] == "completed" and shown["steps"]["after"]["output"] == "x"
    assert shown["steps"]["sub"]["child_run_id"] == children[0].run_id
    text = plait("show", children[0].run_id, "--db", db).stdout
    assert f"parent run  {parent_id}" in text
    listed = plait("runs", "--all", "--db", db).stdout.splitlines()
    assert listed[1].startswith(parent_id) and "└ child@" in listed[2]
    assert "child@" not in plait("runs", "--db", db).stdout  # top-level runs only


def test_a_loop_killed_mid_way_resumes_at_its_iteration(tmp_path: Path,
                                                        plait: Run) -> None:
    (tmp_path / "child.yaml").write_text(CHILD)
    flow = """\
name: parent
steps:
  - id: again
    type: loop
    workflow: ./child.yaml
    input: {tag: "i{{ loop.iteration }}"}
    until: "{{ loop.iteration == 2 }}"
    max_iterations: 5
"""
    parent_id, lines, db = _kill_then_resume(tmp_path, flow, "start i0b", plait)
    counts = Counter(lines)
    assert counts["done i0b"] == 1  # iteration 0's child was resumed, not started again
    assert counts["done i0a"] == 1 and counts["done i1a"] == 1 and counts["done i2a"] == 1
    assert counts["start i3a"] == 0
    children = [r for r in asyncio.run(stored_runs(db)) if r.parent_run_id == parent_id]
    assert len(children) == 3
    shown = json.loads(plait("show", parent_id, "--db", db, "--json").stdout)
    assert shown["steps"]["again"]["output"]["iterations"] == 3
    assert len(shown["steps"]["again"]["child_run_ids"]) == 3
