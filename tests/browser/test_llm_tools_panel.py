"""An ``llm`` step offered ``tools``: the model's answer is a tool call, not text.  The
step panel shows it as ``calls NAME(ARGUMENTS)`` under the assistant's answer (not an
empty message or ``null``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Server, serve

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-ui-tools-KEY-never-shown-51aa"
FLOW = {"name": "ui-tools", "input": {"type": "object"}, "steps": [{
    "id": "pick", "type": "llm", "model": "fake", "base_url": "{{ input.base_url }}",
    "api_key_env": "OPENAI_API_KEY", "prompt": "the quick brown fox",
    "tools": [{"type": "function", "function": {
        "name": "count_words", "description": "How many words a text has",
        "parameters": {"type": "object", "required": ["text"],
                       "properties": {"text": {"type": "string"}}}}}]}]}


@pytest.fixture(scope="module")
def tool_run(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[tuple[str, str]]:
    """(database URL, run id) of a completed run whose llm step answered a tool call."""
    fake = subprocess.Popen(
        [sys.executable, "-m", "examples.fake_openai.server", "--port", "0"],
        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1", "FAKE_OPENAI_KEY": KEY},
        stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout is not None
        base = fake.stdout.readline().split(" on ", 1)[1].strip()
        where = tmp_path_factory.mktemp("tools")
        db = f"sqlite:///{where / 'plait.db'}"
        flow = where / "flow.json"
        flow.write_text(json.dumps(FLOW))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FORCE_"))}
        proc = subprocess.run(
            [sys.executable, "-m", "plait", "run", str(flow), "--json", "--db", db,
             "--input", json.dumps({"base_url": base})],
            cwd=ROOT, env={**env, "OPENAI_API_KEY": KEY}, capture_output=True, text=True,
            timeout=60)
        assert proc.returncode == 0, proc.stderr
        yield db, json.loads(proc.stdout)["run_id"]
    finally:
        fake.terminate()
        fake.communicate(timeout=10)


@pytest.fixture(scope="module")
def app(tool_run: tuple[str, str]) -> Iterator[Server]:
    yield from serve(tool_run[0], None, env={"PLAIT_ALLOWED_KEY_ENVS": "OPENAI_API_KEY"})


def test_a_tool_call_answer_shows_the_call(app: Server, tool_run: tuple[str, str],
                                           page: Any) -> None:
    run_id = tool_run[1]
    [call] = app.run(run_id)["steps"]["pick"]["output"]["tool_calls"]
    assert call["name"] == "count_words" and isinstance(call["arguments"], dict)
    page.goto(f"{app.base}/#/runs/{run_id}")
    page.wait_for_selector("[data-node=pick][data-status=completed]")
    page.click("[data-node=pick]")
    answer = page.locator("[data-testid=step-detail] [data-testid=answer]")
    answer.wait_for()
    assert answer.get_attribute("data-role") == "assistant"
    text = answer.locator(".msg-text").inner_text()
    assert text == f"calls count_words({json.dumps(call['arguments'], separators=(',', ':'))})"
    assert KEY not in page.content()
