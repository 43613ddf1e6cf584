"""Token budgets (``limits.max_llm_tokens``) on SQLite: an agent step calling the model
in a loop until the budget stops it, a ``loop`` step whose iterations spend from the
parent's budget, and a run killed with SIGKILL whose count carries on after
``plait resume``.  Every answer spends 10 tokens.

respx stands in for the model in this process; the killed run talks to a small HTTP
server of the test's own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import respx
from click.testing import CliRunner

from plait import StepContext, TokenBudgetSpent, Workflow
from plait.cli.main import cli
from plait.core.model import Limits

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0  # a bound on waiting for a process or a request, never a claim about speed
BASE = "https://llm.test/v1"
URL = f"{BASE}/chat/completions"
MODEL = {"base_url": BASE, "model": "gpt-test", "api_key_env": "TEST_LLM_KEY"}
ANSWER = {"model": "gpt-test", "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant",
                                                        "content": "more"}}],
          "usage": {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}}


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-budget-test")


def show(db: str, run_id: str) -> dict[str, Any]:
    out = CliRunner().invoke(cli, ["show", run_id, "--db", db, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


async def endless(ctx: StepContext) -> list[str]:
    """An agent that asks the model again and again: only the budget stops it."""
    return [(await ctx.llm(f"turn-{i}", prompt=f"turn {i}", **MODEL))["content"]
            for i in range(100)]


def test_an_agent_loop_is_stopped_by_the_budget(respx_mock: respx.MockRouter,
                                                tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    route = respx_mock.post(URL).respond(200, json=ANSWER)
    wf = Workflow("budget-agent", limits=Limits(max_llm_tokens=35))
    wf.add_step("agent", endless, retry={"max_retries": 3, "initial_delay": 0})

    result = wf.run(db=db)

    # calls sent at 0, 10, 20 and 30 used; the fifth is refused, and not retried
    assert route.call_count == 4
    step = result.steps["agent"]
    assert (result.status, step.status, step.attempts) == ("failed", "failed", 1)
    assert "token budget of 35 spent: 40 used" in (step.error or "")
    doc = show(db, result.run_id)
    assert doc["llm_tokens"] == 40
    assert doc["llm_budget"] == {"max_llm_tokens": 35, "used": 40}
    assert doc["steps"]["agent"]["usage"]["total_tokens"] == 40
    # Prometheus counts the step's calls (its output holds no usage of its own)
    scraped = CliRunner().invoke(cli, ["metrics", "--prometheus", "--db", db])
    assert 'plait_llm_tokens_total{kind="total",step="agent",workflow="budget-agent"} 40.0' \
        in scraped.output, scraped.output
    text = CliRunner().invoke(cli, ["show", result.run_id, "--db", db])
    assert "token budget of 35 spent: 40 used" in text.output
    assert "tokens    40 (prompt 24, completion 16); budget 35 spent (40 used)" \
        in text.output


def test_an_agent_may_catch_the_refusal_and_answer_with_what_it_has(
        respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    respx_mock.post(URL).respond(200, json=ANSWER)

    async def thrifty(ctx: StepContext) -> dict[str, int]:
        turns = 0
        try:
            while True:
                await ctx.llm(f"turn-{turns}", prompt="again", **MODEL)
                turns += 1
        except TokenBudgetSpent as spent:
            return {"turns": turns, "limit": spent.limit, "used": spent.used}

    wf = Workflow("budget-thrifty", limits=Limits(max_llm_tokens=20))
    wf.add_step("agent", thrifty)
    result = wf.run(db=db)

    assert result.status == "completed"
    assert result.steps["agent"].output == {"turns": 2, "limit": 20, "used": 20}
    assert show(db, result.run_id)["llm_tokens"] == 20


def test_loop_iterations_spend_from_the_parents_budget(respx_mock: respx.MockRouter,
                                                       tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    route = respx_mock.post(URL).respond(200, json=ANSWER)
    (tmp_path / "ask.yaml").write_text(json.dumps({"name": "budget-ask", "steps": [
        {"id": "ask", "type": "llm", "prompt": "round {{ input.round }}", **MODEL}]}))
    (tmp_path / "rounds.yaml").write_text(json.dumps({
        "name": "budget-rounds", "limits": {"max_llm_tokens": 25},
        "steps": [{"id": "rounds", "type": "loop", "workflow": "./ask.yaml",
                   "input": {"round": "{{ loop.iteration }}"},
                   "until": "{{ false }}", "max_iterations": 10}]}))

    out = CliRunner().invoke(cli, ["run", str(tmp_path / "rounds.yaml"), "--db", db,
                                   "--json"])

    assert out.exit_code == 1, out.output
    run_id = json.loads(out.stdout)["run_id"]
    # iterations 0-2 are sent (0, 10, 20 used); iteration 3's call is refused
    assert route.call_count == 3
    doc = show(db, run_id)
    assert (doc["status"], doc["llm_tokens"]) == ("failed", 30)
    assert doc["llm_budget"] == {"max_llm_tokens": 25, "used": 30}
    last = show(db, doc["steps"]["rounds"]["child_run_id"])
    assert f"token budget of 25 spent: 30 used (by run {run_id}" in \
        last["steps"]["ask"]["error"]
    assert last["steps"]["ask"]["attempts"] == 1


# ------------------------------------------------------------------ kill -9, resume

AGENT = """
async def agent(ctx):
    return [(await ctx.llm(f"turn-{i}", base_url=ctx.input["base_url"], model="m",
                           api_key_env="TEST_LLM_KEY", prompt=f"turn {i}"))["content"]
            for i in range(100)]
"""


class Model:
    """A model in this process answering 10 tokens a call; it holds the ``hold_at``-th
    request (1-based) until released."""

    def __init__(self, hold_at: int) -> None:
        self.requests = 0
        self.held, self.release = threading.Event(), threading.Event()
        outer, lock = self, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with lock:
                    outer.requests += 1
                    number = outer.requests
                if number == hold_at:
                    outer.held.set()
                    outer.release.wait(WAIT_S)
                body = json.dumps(ANSWER).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client was killed while this request was held

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(WAIT_S)


@pytest.fixture
def model() -> Iterator[Model]:
    server = Model(hold_at=3)  # two calls answered, the third in flight at the kill
    try:
        yield server
    finally:
        server.close()


def _plait(*args: str, db: str, path: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FORCE_"))}
    env.update({"TEST_LLM_KEY": "sk-budget-kill", "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": os.pathsep.join([str(path), env.get("PYTHONPATH", "")])})
    return subprocess.Popen([sys.executable, "-m", "plait", *args, "--db", db], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_the_count_carries_on_after_kill_and_resume(model: Model, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    (tmp_path / "budget_agent.py").write_text(textwrap.dedent(AGENT))
    flow = tmp_path / "flow.yaml"
    flow.write_text(json.dumps({"name": "budget-kill", "limits": {"max_llm_tokens": 35},
                                "steps": [{"id": "agent", "type": "python",
                                           "call": "budget_agent:agent"}]}))
    proc = _plait("run", str(flow), "--quiet", "--input",
                  json.dumps({"base_url": model.base_url}), db=db, path=tmp_path)
    if not model.held.wait(WAIT_S):
        proc.kill()
        pytest.fail(f"the third model request never came: {proc.communicate()[1]}")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=WAIT_S)
    model.release.set()
    assert model.requests == 3
    listed = subprocess.run([sys.executable, "-m", "plait", "runs", "--json", "--db", db],
                            cwd=ROOT, capture_output=True, text=True, timeout=WAIT_S)
    run_id = json.loads(listed.stdout)["runs"][0]["run_id"]

    resumed = _plait("resume", run_id, "--json", db=db, path=tmp_path)
    out, err = resumed.communicate(timeout=WAIT_S)

    # the two answered calls replay from the journal and were counted before the kill
    # (20 used): the call in flight is sent again (20 -> 30), one more (30 -> 40), and
    # the next is refused.  Had the count started again from 0, four would be sent.
    assert resumed.returncode == 1, err
    assert model.requests == 5
    doc = json.loads(subprocess.run(
        [sys.executable, "-m", "plait", "show", run_id, "--json", "--db", db], cwd=ROOT,
        capture_output=True, text=True, timeout=WAIT_S).stdout)
    assert "token budget of 35 spent: 40 used" in doc["steps"]["agent"]["error"]
