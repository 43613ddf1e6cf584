"""A parent killed (SIGKILL) while the child run of a definition written at run time
executes: ``plait resume PARENT`` re-attaches to that child (its completed steps are not
run again, no second child starts), even when the function that wrote the definition
would now write another one.  The child is stored as ``PARENT.STEP`` and shown like any
child run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import plaitproc
from conftest import Run, cli_env, stored_runs, wait_line

STEPS = '''
import os
import time


def work(ctx, slow=False):
    with open(os.environ["SUB_LOG"], "a") as f:
        f.write(f"start {ctx.step_id}\\n")
    if slow:  # slow in the run that is killed, quick in the resumed one
        time.sleep(float(os.environ.get("SUB_SLOW_S", "0")))
    with open(os.environ["SUB_LOG"], "a") as f:
        f.write(f"done {ctx.step_id}\\n")
    return ctx.step_id


def _graph(names):
    steps, previous = [], None
    for name in names:
        steps.append({"id": name, "type": "python", "call": "steps:work",
                      "with": {"slow": name == "b"},
                      "depends_on": [previous] if previous else []})
        previous = name
    return {"name": "whatever", "steps": steps, "output": "{{ steps.%s.output }}" % previous}


def plan():
    return _graph(["a", "b"])


def writes_another_each_time():
    """A different graph on every call: a resumed parent must not use a new one."""
    marker = os.environ["SUB_LOG"] + ".calls"
    calls = int(open(marker).read()) if os.path.exists(marker) else 0
    open(marker, "w").write(str(calls + 1))
    return _graph(["a", "b"] if calls == 0 else ["z"])
'''

TEMPLATE_FLOW = """\
name: planner
steps:
  - {id: plan, type: python, call: "steps:plan"}
  - id: execute
    type: workflow
    definition: "{{ steps.plan.output }}"
    allowed_modules: [steps]
    depends_on: [plan]
  - {id: after, type: transform, value: "{{ steps.execute.output }}", depends_on: [execute]}
"""

CALL_FLOW = """\
name: planner
steps:
  - id: execute
    type: workflow
    call: "steps:writes_another_each_time"
    allowed_modules: [steps]
"""


def _kill_in_child_then_resume(tmp_path: Path, flow: str, plait: Run) -> tuple[
        str, Counter[str], str]:
    (tmp_path / "steps.py").write_text(STEPS)
    (tmp_path / "flow.yaml").write_text(flow)
    log, db = tmp_path / "sub.log", f"sqlite:///{tmp_path / 'runs.db'}"
    env = cli_env(SUB_LOG=str(log), PYTHONPATH=str(tmp_path), SUB_SLOW_S="60")
    proc = plaitproc.popen(["run", "flow.yaml", "--db", db, "--quiet"], cwd=tmp_path,
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           text=False)
    try:
        wait_line(log, "start b", proc)  # the child's second step is running
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    [parent] = [r for r in asyncio.run(stored_runs(db)) if r.parent_run_id is None]
    resumed = plait("resume", parent.run_id, "--db", db, "--json",
                    env={"SUB_LOG": str(log), "PYTHONPATH": str(tmp_path)})
    assert resumed.returncode == 0, resumed.stderr
    return parent.run_id, Counter(log.read_text().splitlines()), db


def _one_child(db: str, parent_id: str) -> Any:
    children = [r for r in asyncio.run(stored_runs(db)) if r.parent_run_id == parent_id]
    assert len(children) == 1, children
    return children[0]


def test_a_killed_parent_reattaches_to_the_child_its_template_wrote(tmp_path: Path,
                                                                    plait: Run) -> None:
    parent_id, counts, db = _kill_in_child_then_resume(tmp_path, TEMPLATE_FLOW, plait)
    assert counts["done a"] == 1  # the child's completed step did not run again
    assert counts["done b"] == 1
    child = _one_child(db, parent_id)
    assert (child.workflow, child.version, str(child.status)) == (
        "planner.execute", 1, "completed")
    shown = json.loads(plait("show", parent_id, "--db", db, "--json").stdout)
    assert shown["status"] == "completed" and shown["steps"]["after"]["output"] == "b"
    assert shown["steps"]["execute"]["child_run_id"] == child.run_id
    text = plait("show", child.run_id, "--db", db).stdout
    assert f"parent run  {parent_id}" in text and "planner.execute v1" in text
    listed = plait("runs", "--all", "--db", db).stdout
    assert "└ planner.execute@1" in listed


def test_a_resumed_parent_keeps_the_definition_its_function_wrote_first(
        tmp_path: Path, plait: Run) -> None:
    parent_id, counts, db = _kill_in_child_then_resume(tmp_path, CALL_FLOW, plait)
    assert counts["done a"] == 1 and counts["done b"] == 1 and counts["start z"] == 0
    child = _one_child(db, parent_id)
    assert (child.workflow, child.version, str(child.status)) == (
        "planner.execute", 1, "completed")
    shown = json.loads(plait("show", parent_id, "--db", db, "--json").stdout)
    assert shown["output"] == {"execute": "b"}
    # a new run writes the other graph: a new version of planner.execute
    again = plait("run", "flow.yaml", "--db", db, "--json", cwd=tmp_path,
                  env={"SUB_LOG": str(tmp_path / "sub.log"), "PYTHONPATH": str(tmp_path)})
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["output"] == {"execute": "z"}
    assert "└ planner.execute@2" in plait("runs", "--all", "--db", db).stdout
