"""A run with a map and a child workflow through `plait run` on a terminal: the live
progress counts the map's items as they appear and shows the child run's steps under
the step that started it, never more done than total; then `plait runs` lists the
top-level run (`--all` the child too) and `plait metrics` folds the items into one row."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

STEPS = """
import time


def nap(seconds):
    time.sleep(seconds)
    return seconds
"""
KID = """
name: kid
steps:
  - {id: a, type: python, call: "kid_steps:nap", with: {seconds: 0.3}}
  - {id: b, type: python, call: "kid_steps:nap", with: {seconds: 0.3}, depends_on: [a]}
"""
PIPE = """
name: pipe
steps:
  - {id: topics, type: transform, value: [0.2, 0.3, 0.2]}
  - id: research
    type: map
    over: "{{ steps.topics.output }}"
    concurrency: 2
    step: {type: python, call: "kid_steps:nap", with: {seconds: "{{ item }}"}}
    depends_on: [topics]
  - {id: sub, type: workflow, workflow: ./kid.yaml, input: {}, depends_on: [research]}
  - {id: end, type: transform, value: 1, depends_on: [sub]}
"""
TERMINAL = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "120"}
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class Piped:
    """The store after one run of ``pipe`` (3 map items, one child run of ``kid``)."""

    run: Callable[..., subprocess.CompletedProcess[str]]
    cwd: Path
    db: str
    shown: str  # what `plait run` drew, escapes removed

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(*args, "--db", self.db, cwd=self.cwd)


@pytest.fixture(scope="module")
def piped(tmp_path_factory: pytest.TempPathFactory, plait_in) -> Piped:
    cwd = tmp_path_factory.mktemp("children")
    (cwd / "kid_steps.py").write_text(STEPS)
    for name, text in (("kid.yaml", KID), ("pipe.yaml", PIPE)):
        (cwd / name).write_text(textwrap.dedent(text).lstrip())
    db = f"sqlite:///{cwd / 'runs.db'}"
    proc = plait_in("run", "pipe.yaml", "--db", db, cwd=cwd, env=TERMINAL)
    assert proc.returncode == 0, proc.stderr
    return Piped(run=plait_in, cwd=cwd, db=db, shown=ESCAPES.sub("", proc.stdout))


def test_live_progress_grows_with_the_map_and_nests_the_child_run(piped: Piped):
    frames = [(int(d), int(t)) for d, t in re.findall(r"pipe v1  (\d+)/(\d+) steps done",
                                                       piped.shown)]
    assert frames, piped.shown
    assert all(done <= total for done, total in frames), frames
    assert frames[-1] == (7, 7)  # 4 steps + 3 items, the last frame drawn
    assert {total for _, total in frames} <= {4, 7}
    assert re.search(r"running\s+sub\s+\S+\s+child run: \d/2 steps done", piped.shown)
    assert re.search(r"running\s+sub > [ab]\s", piped.shown)  # the child's step, nested
    assert "run completed in" in piped.shown


def test_runs_lists_top_level_runs_unless_all(piped: Piped):
    top = json.loads(piped("runs", "--json").stdout)["runs"]
    assert [(r["workflow"], r["parent_run_id"]) for r in top] == [("pipe", None)]
    assert (top[0]["steps_done"], top[0]["steps_total"]) == (7, 7)
    newest = json.loads(piped("runs", "--limit", "1", "--json").stdout)["runs"]
    assert [r["run_id"] for r in newest] == [top[0]["run_id"]]
    every = json.loads(piped("runs", "--all", "--json").stdout)["runs"]
    assert [(r["workflow"], r["parent_run_id"]) for r in every] == [
        ("kid", top[0]["run_id"]), ("pipe", None)]
    table = piped("runs", "--all").stdout.splitlines()
    assert table[1].startswith(top[0]["run_id"]) and "└ kid@1" in table[2]
    assert "kid@" not in piped("runs").stdout


def test_metrics_fold_map_items_and_report_compute_time(piped: Piped):
    report = json.loads(piped("metrics", "--json").stdout)
    pipe = next(w for w in report["workflows"] if w["workflow"] == "pipe")
    rows = {s["step"]: s for s in pipe["steps"]}
    assert set(rows) == {"topics", "research", "research[*]", "sub", "end"}
    assert rows["research[*]"]["executions"] == 3
    assert rows["research[*]"]["compute_s"]["count"] == 3
    assert rows["sub"]["compute_s"]["max"] == 0.0  # waiting for its child run
    assert pipe["compute_s"]["max"] <= pipe["duration_s"]["max"]
    kid = next(w for w in report["workflows"] if w["workflow"] == "kid")
    assert kid["compute_s"]["max"] >= 0.5
    text = piped("metrics").stdout
    assert "research[*]" in text and "research[0]" not in text and "compute p95" in text
