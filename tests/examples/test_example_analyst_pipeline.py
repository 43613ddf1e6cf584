"""examples/analyst_pipeline: planner -> map research -> two analysts in turn -> an
agent loop -> synthesis -> approval (prompt and show) -> publish, through the CLI
against the fake OpenAI server; the run's tokens include its loop's child runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_server import start_fake_openai

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-analyst-pipeline-KEY-never-shown-51c0"
TOPIC = "heat pumps"
REPLIES = "examples/analyst_pipeline/fake_replies.json"
TOPICS = [f"the market for {TOPIC}", f"the technology of {TOPIC}", f"the risks of {TOPIC}"]

Plait = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")  # stateless: one server serves the module
def fake_openai() -> Iterator[str]:
    proc, base = start_fake_openai("--replies", REPLIES, env={"FAKE_OPENAI_KEY": KEY})
    try:
        yield base
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # closes its stdout pipe too


def plait_cli(db: str) -> Plait:
    """``plait(*args) -> CompletedProcess``: the CLI from the repository root on ``db``,
    with KEY in OPENAI_API_KEY."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FORCE_"))}
    env.update({"PLAIT_DB": db, "OPENAI_API_KEY": KEY, "PYTHONUNBUFFERED": "1"})

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "plait", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)

    return run


def shown(plait: Plait, run_id: str, *more: str) -> dict[str, Any]:
    proc = plait("show", run_id, "--json", *more)
    assert proc.returncode == 0, proc.stderr
    assert KEY not in proc.stdout
    return dict(json.loads(proc.stdout))


def test_the_pipeline_waits_for_approval_then_publishes_with_its_tokens(
        fake_openai: str, tmp_path: Path) -> None:
    plait = plait_cli(f"sqlite:///{tmp_path / 'plait.db'}")
    proc = plait("run", "examples/analyst_pipeline/flow.yaml", "--json", "--input",
                 json.dumps({"topic": TOPIC, "base_url": fake_openai}))
    assert proc.returncode == 3, proc.stderr  # waiting for the person
    waiting = json.loads(proc.stdout)
    run_id = waiting["run_id"]
    asks = waiting["steps"]["approve"]["waiting"]
    assert asks["prompt"] == (f"Publish the brief on {TOPIC}? The critic approved it "
                              "after 2 rounds.")
    assert asks["show"].startswith(f"# {TOPIC}: the brief\n\n- Demand grows")
    assert waiting["steps"]["publish"]["status"] == "pending"

    proc = plait("approve", run_id, "approve", "--data", '{"note": "ship it"}')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = shown(plait, run_id)
    steps = run["steps"]
    assert run["status"] == "completed"
    published = run["output"]["published"]
    assert published == {"title": f"Brief: {TOPIC}", "brief": asks["show"], "topics": TOPICS,
                         "critic_rounds": 2, "approved_by": published["approved_by"],
                         "note": "ship it"}
    # the map: one llm item per topic; the two analysts in turn, the second reading the first
    assert [steps[f"research[{i}]"]["llm"]["messages"][0]["content"] for i in range(3)] \
        == [f"Research this topic in three sentences: {t}" for t in TOPICS]
    assert steps["case"]["finished_at"] <= steps["challenge"]["started_at"]
    said = steps["challenge"]["llm"]["messages"][1]["content"]
    assert steps["case"]["output"]["content"] in said
    # the planner's messages, as sent
    assert steps["plan"]["llm"]["messages"] == [
        {"role": "system", "content": "You plan research. Name at most five topics that "
         "together cover the subject and can be researched independently."},
        {"role": "user", "content": f"Plan the research on: {TOPIC}"}]

    # tokens: every step's attempts, and the loop's rounds (child runs) on `refine`
    rounds = [shown(plait, child) for child in steps["refine"]["child_run_ids"]]
    assert [r["output"]["verdict"] for r in rounds] == ["revise", "approve"]
    in_rounds = sum(r["llm_tokens"] for r in rounds)
    assert in_rounds > 0
    assert steps["refine"]["usage"]["total_tokens"] == in_rounds
    own = sum(a["usage"]["total_tokens"] for a in run["attempts"] if a["usage"])
    assert run["llm_tokens"] == run["usage"]["total_tokens"] == own + in_rounds
    assert run["usage"]["prompt_tokens"] + run["usage"]["completion_tokens"] \
        == run["llm_tokens"]

    # the text: a tokens line, a row per step that used tokens, the conversation of one
    text = plait("show", run_id).stdout
    assert f"tokens    {run['llm_tokens']:,} (prompt " in text
    assert f"{in_rounds:,} of them in child runs" in text
    assert "refine       (child runs)" in text
    talk = plait("show", run_id, "--step", "plan").stdout
    assert "  system: You plan research." in talk
    assert f"  user: Plan the research on: {TOPIC}\nanswer\n  assistant: " in talk
    assert '    "topics": [' in talk
    assert KEY not in text + talk
