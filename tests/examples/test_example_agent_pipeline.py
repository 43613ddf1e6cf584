"""examples/agent_pipeline: plan -> research (map of llm steps) -> critique loop ->
approval -> publish, end to end through the CLI against the fake OpenAI server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_server import start_fake_openai

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-agent-pipeline-KEY-must-not-leak-7f3a"
TOPIC = "durable execution for AI agents"
SUB_QUESTIONS = [f"What is {TOPIC}?", f"Who uses {TOPIC} today, and for what?",
                 f"What are the open problems of {TOPIC}?"]


@pytest.fixture(scope="module")  # stateless: one server serves the module
def fake_openai() -> Iterator[str]:
    """The fake server on a free port with this example's replies; only KEY accepted."""
    proc, base = start_fake_openai("--replies", "examples/agent_pipeline/fake_replies.json",
                                   env={"FAKE_OPENAI_KEY": KEY})
    try:
        yield base
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # closes its stdout pipe too


@pytest.fixture
def plait(tmp_path: Path):
    """``plait(*args, key=KEY) -> CompletedProcess``: the CLI from the repository root,
    on a temporary SQLite database, with ``key`` in OPENAI_API_KEY."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FORCE_"))}
    env.update({"PLAIT_DB": f"sqlite:///{tmp_path / 'plait.db'}", "OPENAI_API_KEY": KEY,
                "PYTHONUNBUFFERED": "1"})

    def run(*args: str, key: str = KEY) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "plait", *args], cwd=ROOT,
                              env={**env, "OPENAI_API_KEY": key},
                              capture_output=True, text=True, timeout=60)

    return run


def show(plait: Any, run_id: str) -> tuple[dict[str, Any], str]:
    proc = plait("show", run_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stdout


def test_the_pipeline_waits_for_approval_then_publishes(plait, fake_openai, tmp_path):
    report = tmp_path / "out" / "report.md"
    proc = plait("run", "examples/agent_pipeline/flow.yaml", "--json", "--input",
                 json.dumps({"topic": TOPIC, "base_url": fake_openai,
                             "publish_to": str(report)}))
    assert proc.returncode == 3, proc.stderr  # waiting for the person
    waiting = json.loads(proc.stdout)
    run_id = waiting["run_id"]
    assert waiting["status"] == "waiting"
    assert waiting["steps"]["publish_gate"]["status"] == "waiting"
    assert waiting["steps"]["publish"]["status"] == "pending"
    assert not report.exists()

    proc = plait("approve", run_id, "publish_gate", "--data", '{"note": "ship it"}')
    assert proc.returncode == 0, proc.stderr
    run, raw = show(plait, run_id)
    assert run["status"] == "completed"
    steps = run["steps"]

    # plan: the JSON-schema answer; research: one item per sub-question, in order
    assert steps["plan"]["output"]["json"] == {"sub_questions": SUB_QUESTIONS}
    items = [f"research[{i}]" for i in range(3)]
    assert [k for k in steps if k.startswith("research[")] == items
    notes = [steps[i]["output"]["content"] for i in items]
    assert notes == [f"Notes on '{q}': two recent surveys agree on the basics; "
                     "practitioners report mixed results; one benchmark disagrees."
                     for q in SUB_QUESTIONS]
    assert [n["content"] for n in steps["research"]["output"]] == notes
    # the `llm` pool (concurrency 2) held the third item until one of the first two ended
    spans = sorted((steps[i]["started_at"], steps[i]["finished_at"]) for i in items)
    assert spans[2][0] >= min(spans[0][1], spans[1][1])

    # the loop: two rounds, each a child run; the critic approved the second
    revise = steps["revise"]["output"]
    assert revise["iterations"] == 2
    assert revise["output"]["verdict"] == "approve"
    children = steps["revise"]["child_run_ids"]
    assert len(children) == 2 and steps["revise"]["child_run_id"] == children[1]
    rounds = [show(plait, child) for child in children]
    for n, (child, _) in enumerate(rounds):
        assert child["parent_run_id"] == run_id
        assert child["status"] == "completed"
        assert child["input"]["round"] == n
        assert child["input"]["notes"] == notes
    first, second = rounds[0][0], rounds[1][0]
    assert first["output"]["verdict"] == "revise"
    assert first["input"]["draft"] is None
    assert second["input"]["draft"] == first["output"]["draft"]
    assert second["input"]["feedback"] == first["output"]["feedback"]
    assert second["output"]["draft"].startswith(f"# {TOPIC}\n\nRevision 1: ")

    # the person's decision, and the published file
    assert steps["publish_gate"]["output"]["approved"] is True
    assert steps["publish_gate"]["output"]["data"] == {"note": "ship it"}
    assert run["output"] == {"published": str(report), "sub_questions": SUB_QUESTIONS,
                             "critique_rounds": 2, "verdict": "approve",
                             "approved_by": steps["publish_gate"]["output"]["by"]}
    text = report.read_text()
    assert "critique_rounds: 2" in text and "note: ship it" in text
    assert text.endswith(second["output"]["draft"] + "\n")

    # token usage of every llm attempt: the parent's and each round's
    usage = {a["step"]: a["usage"] for a in run["attempts"]}
    for step in ["plan", *items]:
        assert usage[step]["total_tokens"] == (usage[step]["prompt_tokens"]
                                               + usage[step]["completion_tokens"]) > 0
    for child, _ in rounds:
        assert {a["step"] for a in child["attempts"] if a["usage"]} == {"write", "critique"}
    proc = plait("metrics", "--json")
    assert proc.returncode == 0, proc.stderr
    flows = {w["workflow"]: w for w in json.loads(proc.stdout)["workflows"]}
    assert flows["agent-pipeline"]["total_tokens"] == sum(
        usage[s]["total_tokens"] for s in ["plan", *items])

    # the key was sent (the fake accepts only it) but is nowhere in what plait shows
    for _, shown in [(run, raw), *rounds]:
        assert KEY not in shown
    assert KEY not in proc.stdout


def test_a_rejected_report_is_not_published(plait, fake_openai, tmp_path):
    report = tmp_path / "report.md"
    proc = plait("run", "examples/agent_pipeline/flow.yaml", "--json", "--input",
                 json.dumps({"topic": TOPIC, "base_url": fake_openai,
                             "publish_to": str(report)}))
    assert proc.returncode == 3, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    proc = plait("approve", run_id, "publish_gate", "--reject")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    run, _ = show(plait, run_id)
    assert run["status"] == "failed"
    assert run["steps"]["publish"]["status"] == "upstream_failed"
    assert not report.exists()


def test_a_wrong_key_fails_the_plan_at_once_and_is_not_shown(plait, fake_openai):
    wrong = "sk-wrong-key-for-the-fake-0000"
    proc = plait("run", "examples/agent_pipeline/flow.yaml", "--json", "--input",
                 json.dumps({"topic": TOPIC, "base_url": fake_openai}), key=wrong)
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    plan = result["steps"]["plan"]
    assert (plan["status"], plan["attempts"]) == ("failed", 1)  # a 401 is not retried
    assert plan["error"] == (f"HTTPStatusError: HTTP 401 from {fake_openai}/chat/completions:"
                             " Incorrect API key provided.")
    assert result["steps"]["research"]["status"] == "upstream_failed"
    _, raw = show(plait, result["run_id"])
    assert wrong not in raw and wrong not in proc.stdout + proc.stderr


@pytest.mark.parametrize(("content", "message"), [
    ('{"match": "x"}', "expected a JSON list of {match, reply} rules"),
    ('[{"match": "x"}]', "rule 0 needs a string `match` and a `reply`"),
    ('[{"match": "(", "reply": "y"}]', "rule 0: bad regex '('"),
])
def test_a_bad_replies_file_is_refused_naming_the_rule(tmp_path, content, message):
    replies = tmp_path / "replies.json"
    replies.write_text(content)
    proc = subprocess.run([sys.executable, "-m", "examples.fake_openai.server", "--port",
                           "0", "--replies", str(replies)], cwd=ROOT, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2
    assert f"--replies: {replies}: {message}" in proc.stderr
