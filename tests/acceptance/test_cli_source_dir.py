"""A stored run remembers where its definition lives: approve (and resume, retry) from
another directory still import the run's python steps."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import plaitproc


def plait(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PLAIT_DB", "PYTHONPATH")}
    return plaitproc.run([*args], cwd=cwd, env=env, timeout=60)


def test_approve_from_another_directory_imports_the_definitions_modules(
        tmp_path: Path) -> None:
    flow_dir = tmp_path / "project"
    elsewhere = tmp_path / "elsewhere"
    flow_dir.mkdir()
    elsewhere.mkdir()
    (flow_dir / "srcmod.py").write_text("def a():\n    return 1\n\n"
                                        "def b(a):\n    return a + 41\n")
    (flow_dir / "flow.yaml").write_text(
        "name: source-dir\n"
        "steps:\n"
        "  - {id: a, type: python, call: 'srcmod:a'}\n"
        "  - {id: ok, type: approval, depends_on: [a]}\n"
        "  - {id: b, type: python, call: 'srcmod:b', depends_on: [ok]}\n")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    started = plait("run", "project/flow.yaml", "--db", db, "--json", cwd=tmp_path)
    assert started.returncode == 3, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    approved = plait("approve", run_id, "ok", "--db", db, "--json", cwd=elsewhere)
    assert approved.returncode == 0, approved.stderr
    result = json.loads(approved.stdout)
    assert result["status"] == "completed"
    assert result["steps"]["b"]["output"] == 42
