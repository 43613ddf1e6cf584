"""Waiting for a person and streaming partial output from Python steps:
``ctx.wait_for_approval`` (semantics of the ``approval`` step, durable like
LangGraph's interrupt: the step re-runs from the start once approved) and ``ctx.emit``,
through the CLI on SQLite."""

from __future__ import annotations

import json
import subprocess
import time

FLOW = """
    name: py-waits
    steps:
      - id: draft
        type: python
        call: waits_steps:draft
      - id: publish
        type: python
        call: waits_steps:publish
        depends_on: [draft]
"""

STEPS = """
    from pathlib import Path

    def _count(name):
        path = Path(__file__).with_name(name)
        n = int(path.read_text()) + 1 if path.exists() else 1
        path.write_text(str(n))
        return n

    async def draft(ctx):
        ctx.emit({"progress": 0.5, "token": "PLAIT_SECRET_VALUE_xyz"})
        ctx.emit("half way")
        return "the draft"

    async def publish(draft, ctx):
        _count("before.txt")              # code before the call runs again
        decision = await ctx.wait_for_approval(prompt="Publish " + draft + "?")
        _count("after.txt")
        return {"published": draft, "approved_by": decision["by"], "data": decision["data"]}
"""

SYNC_STEPS = """
    def gate(ctx):
        decision = ctx.wait_for_approval_sync(prompt="go?", timeout="{timeout}",
                                              on_timeout="{on_timeout}")
        return decision
"""


def test_a_python_step_waits_then_runs_again_when_approved(plait, write, tmp_path):
    write("flow.yaml", FLOW)
    write("waits_steps.py", STEPS)

    first = plait("run", "flow.yaml", "--json")
    assert first.returncode == 3, first.stderr
    waiting = json.loads(first.stdout)
    run_id = waiting["run_id"]
    assert waiting["status"] == "waiting"
    assert waiting["steps"]["publish"]["status"] == "waiting"
    assert waiting["steps"]["draft"]["status"] == "completed"
    assert (tmp_path / "before.txt").read_text() == "1"
    assert not (tmp_path / "after.txt").exists()

    shown = json.loads(plait("show", run_id, "--json").stdout)
    assert [(a["step"], a["attempt"], a["status"]) for a in shown["attempts"]] == [
        ("draft", 1, "completed"), ("publish", 1, "waiting")]

    approved = plait("approve", run_id, "publish", "--data", '{"channel": "blog"}',
                     "--by", "ada", "--json")
    assert approved.returncode == 0, approved.stderr
    result = json.loads(approved.stdout)
    assert result["status"] == "completed"
    assert result["steps"]["publish"]["output"] == {
        "published": "the draft", "approved_by": "ada", "data": {"channel": "blog"}}
    assert result["steps"]["publish"]["attempts"] == 2
    assert (tmp_path / "before.txt").read_text() == "2"  # re-run from the start
    assert (tmp_path / "after.txt").read_text() == "1"

    again = plait("approve", run_id, "publish", "--reject")
    assert again.returncode == 1
    assert "the first decision stands" in again.stderr


def test_a_rejection_fails_the_step_without_running_it_again(plait, write, tmp_path):
    write("flow.yaml", FLOW)
    write("waits_steps.py", STEPS)
    run_id = json.loads(plait("run", "flow.yaml", "--json").stdout)["run_id"]

    rejected = plait("approve", run_id, "publish", "--reject", "--by", "bob", "--json")

    assert rejected.returncode == 1
    step = json.loads(rejected.stdout)["steps"]["publish"]
    assert (step["status"], step["error"]) == ("failed", "rejected by bob")
    assert (tmp_path / "before.txt").read_text() == "1"
    assert not (tmp_path / "after.txt").exists()


def test_emitted_values_are_history_shown_and_redacted(plait, write):
    write("flow.yaml", FLOW)
    write("waits_steps.py", STEPS)
    env = {"PLAIT_SECRET_TOKEN": "PLAIT_SECRET_VALUE_xyz"}
    run_id = json.loads(plait("run", "flow.yaml", "--json", env=env).stdout)["run_id"]

    shown = json.loads(plait("show", run_id, "--json").stdout)
    assert [(e["step"], e["attempt"], e["value"]) for e in shown["emits"]] == [
        ("draft", 1, {"progress": 0.5, "token": "***"}), ("draft", 1, "half way")]
    text = plait("show", run_id).stdout
    assert "emitted by draft" in text and "half way" in text
    assert "PLAIT_SECRET_VALUE_xyz" not in text + json.dumps(shown)


def _past_deadline(plait, write, on_timeout: str) -> subprocess.CompletedProcess[str]:
    """Run a sync step that waits with a 0.2 s timeout; like an approval step's, the
    deadline is applied by the process that next holds the run (here ``resume``)."""
    write("gate.yaml", f"""
        name: py-gate-{on_timeout}
        steps:
          - {{id: gate, type: python, call: gate_steps:gate}}
    """)
    write("gate_steps.py", SYNC_STEPS.format(timeout="0.2s", on_timeout=on_timeout))
    first = plait("run", "gate.yaml", "--json")
    assert first.returncode == 3, first.stderr
    time.sleep(0.3)
    return plait("resume", json.loads(first.stdout)["run_id"], "--json")


def test_a_sync_step_waits_and_its_timeout_decides(plait, write):
    proc = _past_deadline(plait, write, "approve")

    assert proc.returncode == 0, proc.stderr
    output = json.loads(proc.stdout)["steps"]["gate"]["output"]
    assert (output["approved"], output["by"]) == (True, "timeout")


def test_a_sync_steps_timeout_rejects_by_default(plait, write):
    proc = _past_deadline(plait, write, "reject")

    assert proc.returncode == 1, proc.stderr
    step = json.loads(proc.stdout)["steps"]["gate"]
    assert (step["status"], step["error"]) == ("failed", "approval timed out (rejected)")
