"""examples/tool_agent: a python step whose model picks tools in a loop, every model call
a journaled ``ctx.llm`` and every tool call a journaled ``ctx.run``.  It runs against the
fake OpenAI server as its header says; killed with SIGKILL while a model request is in
flight, ``plait resume`` repeats that request alone."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from plait.store import RunFilter, open_store

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0  # a bound on waiting for a process or a request, never a claim about speed
TASK = "the quick brown fox"
ANSWER = ('done: {"words": 4}; {"letters": 16}; {"reversed": "fox brown quick the"}')
TOOLS = ["count_words", "count_letters", "reverse_words"]


def test_the_agent_calls_each_tool_then_answers(plait_run, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-tool-agent-example")
    code, result, stderr = plait_run("tool_agent/flow.yaml",
                                     {"task": TASK, "base_url": fake_openai})
    assert code == 0, stderr
    assert result["output"] == {"answer": ANSWER, "turns": 4, "tools_called": TOOLS}


def _fake_server_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "plait_example_fake_openai_server", ROOT / "examples/fake_openai/server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Holding:
    """The fake server in this process, recording each request's body; it holds the
    ``hold_at``-th request (1-based) until ``release`` is set."""

    def __init__(self, hold_at: int) -> None:
        self.bodies: list[bytes] = []
        self.held = threading.Event()
        self.release = threading.Event()
        server = _fake_server_module()
        outer = self

        class Handler(server.Handler):  # type: ignore[name-defined,misc]
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with server.Handler.lock:
                    outer.bodies.append(body)
                    number = len(outer.bodies)
                if number == hold_at:
                    outer.held.set()
                    outer.release.wait(WAIT_S)
                self.rfile = io.BytesIO(body)
                try:
                    super().do_POST()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client was killed while this request was held

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
def holding() -> Iterator[Holding]:
    server = Holding(hold_at=3)  # the third model call: two model and two tool calls done
    try:
        yield server
    finally:
        server.close()


def _plait(*args: str, db: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FORCE_"))}
    env.update({"OPENAI_API_KEY": "sk-tool-agent-kill", "PYTHONUNBUFFERED": "1"})
    return subprocess.Popen([sys.executable, "-m", "plait", *args, "--db", db], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


async def _only_run(db: str) -> str:
    store = open_store(db)
    await store.open()
    try:
        runs = await store.list_runs(RunFilter(workflow="tool-agent", limit=5))
        assert len(runs) == 1
        return runs[0].run_id
    finally:
        await store.close()


def test_kill_mid_loop_then_resume_repeats_only_the_call_in_flight(
        holding: Holding, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    proc = _plait("run", "examples/tool_agent/flow.yaml", "--quiet", "--input",
                  json.dumps({"task": TASK, "base_url": holding.base_url}), db=db)
    if not holding.held.wait(WAIT_S):
        proc.kill()
        pytest.fail(f"the third model request never came: {proc.communicate()[1]}")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=WAIT_S)  # reaps it and closes its pipes
    holding.release.set()
    assert len(holding.bodies) == 3

    run_id = asyncio.run(_only_run(db))
    resumed = _plait("resume", run_id, "--json", db=db)
    out, err = resumed.communicate(timeout=WAIT_S)
    assert resumed.returncode == 0, err
    assert json.loads(out)["output"] == {"answer": ANSWER, "turns": 4,
                                         "tools_called": TOOLS}

    # 4 distinct model requests; only the one in flight at the kill was sent twice
    counts = Counter(holding.bodies)
    assert len(holding.bodies) == 5 and len(counts) == 4
    assert counts[holding.bodies[2]] == 2
    assert [counts[b] for b in dict.fromkeys(holding.bodies)] == [1, 1, 2, 1]

    shown = subprocess.run([sys.executable, "-m", "plait", "show", run_id, "--json",
                            "--db", db], cwd=ROOT, capture_output=True, text=True,
                           timeout=WAIT_S)
    journal = json.loads(shown.stdout)["steps"]["agent"]["journal"]
    before = [(j["name"], j["attempt"]) for j in journal[:4]]
    assert before == [("model-0", 1), ("tool-0-0", 1), ("model-1", 1), ("tool-1-0", 1)]
    assert [j["name"] for j in journal[4:]] == ["model-2", "tool-2-0", "model-3"]
    assert all(j["attempt"] > 1 for j in journal[4:])
