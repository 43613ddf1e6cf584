"""`plait resume` after a crash, `plait run --detach`, and reading a store another
process is writing."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sessions")

CRASH_STEPS = """
import pathlib
import time


def record(log, name):
    with open(log, "a") as f:
        f.write(name + "\\n")
    return name


def slow_once(log):
    first = "b" not in pathlib.Path(log).read_text().splitlines()
    with open(log, "a") as f:
        f.write("b\\n")
    if first:
        time.sleep(60)  # the test kills the process meanwhile
    return "b done"
"""

CRASH = """
    name: crashy
    defaults:
      retry: {max_retries: 2, initial_delay: 10ms}
    steps:
      - {id: a, type: python, call: "crash_steps:record", with: {log: "{{ input.log }}", name: a}}
      - {id: b, type: python, call: "crash_steps:slow_once", with: {log: "{{ input.log }}"},
         depends_on: [a]}
      - {id: c, type: python, call: "crash_steps:record", with: {log: "{{ input.log }}", name: c},
         depends_on: [b]}
"""

@posix_only
def test_resume_after_sigkill_does_not_rerun_completed_steps(tmp_path, write, plait, spawn,
                                                             waiter):
    write("crash_steps.py", CRASH_STEPS)
    write("crash.yaml", CRASH)
    log = tmp_path / "side-effects.log"
    runner = spawn("run", "crash.yaml", "--json", "--input", json.dumps({"log": str(log)}))
    waiter(lambda: log.exists() and "b" in log.read_text().split(), proc=runner,
           what="step b to start")
    runner.send_signal(signal.SIGKILL)
    runner.communicate(timeout=10)
    listed = json.loads(plait("runs", "--json", "--workflow", "crashy").stdout)["runs"]
    assert listed[0]["status"] == "running" and listed[0]["steps_done"] == 1
    run_id = listed[0]["run_id"]
    orphan = plait("show", run_id)
    assert f"which is gone: `plait resume {run_id}` continues the run" in orphan.stdout

    proc = plait("resume", run_id, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["run_id"] == run_id and result["status"] == "completed"
    assert result["output"] == {"c": "c"}
    assert result["steps"]["a"]["attempts"] == 1
    assert result["steps"]["b"]["attempts"] == 2  # the killed attempt counts as failed
    assert log.read_text().splitlines() == ["a", "b", "b", "c"]  # `a` ran once
    attempts = json.loads(plait("show", run_id, "--json").stdout)["attempts"]
    killed = [a for a in attempts if a["step"] == "b"][0]
    assert killed["status"] == "failed" and "interrupted" in killed["error"]


def test_resume_refusals_and_a_finished_run(plait, write):
    write("one.yaml", "name: one\nsteps:\n  - {id: a, type: transform, value: 1}\n")
    done = json.loads(plait("run", "one.yaml", "--json").stdout)["run_id"]
    again = plait("resume", done, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["status"] == "completed"
    assert f"run {done} already ended (completed); there is nothing to resume" in again.stderr

    unknown = plait("resume", "abc123")
    assert unknown.returncode == 2
    assert "no run with id 'abc123'" in unknown.stderr
    malformed = plait("resume", "../etc/passwd")
    assert malformed.returncode == 2
    assert "is not a run id" in malformed.stderr and "Traceback" not in malformed.stderr


def test_resume_refuses_a_missing_database_without_creating_it(plait, tmp_path):
    proc = plait("resume", "abc123")
    assert proc.returncode == 2
    assert "no run with id 'abc123'" in proc.stderr
    assert "does not exist" in proc.stderr
    assert not (tmp_path / ".plait").exists()


DETACHED = """
    name: detached
    steps:
      - {id: a, type: python, call: "detached_steps:hello", with: {name: bg}}
      - {id: b, type: transform, value: "{{ steps.a.output }}!", depends_on: [a]}
"""


@posix_only
def test_detach_hands_the_run_to_a_background_process(tmp_path, write, plait, waiter):
    write("defs/detached_steps.py", "def hello(name):\n    return f'hello {name}'\n")
    write("defs/detached.yaml", DETACHED)
    proc = plait("run", "defs/detached.yaml", "--detach", "--json")
    assert proc.returncode == 0, proc.stderr
    started = json.loads(proc.stdout)
    assert set(started) >= {"run_id", "status", "workflow", "version", "pid", "log"}
    assert started["status"] == "pending"
    run_id = started["run_id"]
    log = tmp_path / ".plait" / "logs" / f"{run_id}.log"
    assert started["log"] == str(log)
    try:
        waiter(lambda: _exited(started["pid"]), what="the background run to end")
    finally:
        _kill(started["pid"])
    shown = json.loads(plait("show", run_id, "--json").stdout)
    assert shown["status"] == "completed", log.read_text()
    assert shown["output"] == {"b": "hello bg!"}  # the definition's directory imported
    assert "run completed" in log.read_text()

    plain = plait("run", "defs/detached.yaml", "--detach")
    assert plain.returncode == 0, plain.stderr
    other = plain.stdout.strip()
    assert len(plain.stdout.splitlines()) == 1 and len(other) == 32  # the run id alone
    assert f"follow it with `plait show {other}`" in plain.stderr


def _exited(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child any more: probe it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return waited == pid


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_detach_needs_a_store_another_process_can_open(plait, write, tmp_path):
    write("one.yaml", "name: one\nsteps:\n  - {id: a, type: transform, value: 1}\n")
    proc = plait("run", "one.yaml", "--detach", "--db", "memory://")
    assert proc.returncode == 2
    assert "--detach needs a store another process can open" in proc.stderr
    assert proc.stdout == ""


WRITER_STEPS = """
import pathlib
import time


def tick(i, marker, release):
    if i == 0:
        pathlib.Path(marker).write_text("started")
    if not pathlib.Path(release).exists():
        time.sleep(0.01)  # keep writing while the test reads
    return i
"""

WRITER_LENGTH = 400


def test_reading_while_another_process_writes(tmp_path, write, plait, spawn, waiter):
    write("writer_steps.py", WRITER_STEPS)
    steps = [f"  - {{id: s{i}, type: python, call: 'writer_steps:tick', with: {{i: {i}, "
             f"marker: '{{{{ input.marker }}}}', release: '{{{{ input.release }}}}'}}"
             + (f", depends_on: [s{i - 1}]" if i else "") + "}"
             for i in range(WRITER_LENGTH)]
    write("writer.yaml", "name: writer\nsteps:\n" + "\n".join(steps) + "\n")
    marker, release = tmp_path / "writing.txt", tmp_path / "release.txt"
    runner = spawn("run", "writer.yaml", "--quiet", "--input",
                   json.dumps({"marker": str(marker), "release": str(release)}))
    waiter(marker.exists, proc=runner, what="the writer to start")
    done = []
    for _ in range(2):
        listed = plait("runs", "--json")
        assert listed.returncode == 0, listed.stderr
        run = json.loads(listed.stdout)["runs"][0]
        assert run["status"] == "running"
        shown = plait("show", run["run_id"], "--json")
        assert shown.returncode == 0, shown.stderr
        assert "locked" not in shown.stderr + listed.stderr
        shown_run = json.loads(shown.stdout)
        assert len(shown_run["steps"]) == WRITER_LENGTH
        done.append(sum(s["status"] == "completed" for s in shown_run["steps"].values()))
    release.write_text("done")
    assert done == sorted(done) and done[-1] > done[0]  # it was writing meanwhile
    out, err = runner.communicate(timeout=30)
    assert runner.returncode == 0, err
