"""examples/planner: an llm planner answers a JSON schema with the research steps, plait
runs the graph it wrote as a child run (stored as workflow planner.research), and a
writer joins the results; through the CLI against the fake OpenAI server with the
example's scripted replies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_server import start_fake_openai

ROOT = Path(__file__).resolve().parents[2]
REPLIES = "examples/planner/fake_replies.json"


@pytest.fixture(scope="module")  # stateless: one server serves the module
def fake_openai() -> Iterator[str]:
    proc, base = start_fake_openai("--replies", REPLIES)
    try:
        yield base
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # closes its stdout pipe too


def _plait(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FORCE_"))}
    env.update({"PLAIT_DB": db, "OPENAI_API_KEY": "sk-planner-example",
                "PYTHONUNBUFFERED": "1"})
    return subprocess.run([sys.executable, "-m", "plait", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_planner_writes_the_graph_plait_runs_it_and_the_writer_joins(
        fake_openai: str, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'plait.db'}"
    proc = _plait(db, "run", "examples/planner/flow.yaml", "--json", "--input",
                  json.dumps({"question": "heat pumps", "base_url": fake_openai}))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["output"] == {
        "answer": "Answer on heat pumps: growing demand, mature technology, two risks "
                  "to watch.",
        "researched": ["market", "risks", "technology"]}
    research = result["steps"]["research"]["output"]
    assert research["risks"]["content"].startswith("Notes on the risks of heat pumps")
    shown = json.loads(_plait(db, "show", result["run_id"], "--json").stdout)
    child_id = shown["steps"]["research"]["child_run_id"]
    child = json.loads(_plait(db, "show", child_id, "--json").stdout)
    assert (child["workflow"], child["version"], child["status"]) == (
        "planner.research", 1, "completed")
    assert sorted(child["steps"]) == ["market", "risks", "technology"]
    listed = _plait(db, "runs", "--all").stdout
    assert "└ planner.research@1" in listed
    # the same plan again: the same stored version
    again = _plait(db, "run", "examples/planner/flow.yaml", "--json", "--input",
                   json.dumps({"question": "heat pumps", "base_url": fake_openai}))
    assert again.returncode == 0, again.stderr
    assert _plait(db, "runs", "--all").stdout.count("└ planner.research@1") == 2
