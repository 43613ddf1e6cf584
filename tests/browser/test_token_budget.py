"""A run stopped by its token budget (``limits.max_llm_tokens``), in the web UI: its
header shows the budget as spent.  The run is made by ``plait run`` against the fake
OpenAI server; the test app serves its SQLite file."""

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
ASK = {"type": "llm", "base_url": "{{ input.base_url }}", "model": "m",
       "api_key_env": "OPENAI_API_KEY", "prompt": "say something short"}


@pytest.fixture(scope="module")
def spent_run(tmp_path_factory: pytest.TempPathFactory,
              browser: Any) -> Iterator[tuple[str, str]]:
    """(database URL, run id) of a run whose second model call was refused."""
    folder = tmp_path_factory.mktemp("budget")
    flow = folder / "flow.yaml"
    flow.write_text(json.dumps({"name": "ui-budget", "limits": {"max_llm_tokens": 3},
                                "steps": [{"id": "first", **ASK},
                                          {"id": "second", **ASK, "depends_on": ["first"]}]}))
    fake = subprocess.Popen([sys.executable, "-m", "examples.fake_openai.server", "--port",
                             "0"], cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout is not None
        base = fake.stdout.readline().split(" on ", 1)[1].strip()
        db = f"sqlite:///{folder / 'plait.db'}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FORCE_"))}
        proc = subprocess.run(
            [sys.executable, "-m", "plait", "run", str(flow), "--json", "--db", db,
             "--input", json.dumps({"base_url": base})],
            cwd=ROOT, env={**env, "OPENAI_API_KEY": "sk-ui-budget"}, capture_output=True,
            text=True, timeout=60)
        assert proc.returncode == 1, proc.stderr
        yield db, json.loads(proc.stdout)["run_id"]
    finally:
        fake.terminate()
        fake.communicate(timeout=10)  # closes its stdout pipe too


@pytest.fixture(scope="module")
def app(spent_run: tuple[str, str]) -> Iterator[Server]:
    yield from serve(spent_run[0], None)


def test_the_run_header_shows_the_budget_spent(app: Server, spent_run: tuple[str, str],
                                               page: Any) -> None:
    run = app.run(spent_run[1])
    used = run["llm_budget"]["used"]
    assert used >= 3 and run["steps"]["second"]["status"] == "failed"
    page.goto(f"{app.base}/#/runs/{spent_run[1]}")
    budget = page.locator("[data-testid=run-token-budget]")
    budget.wait_for()
    assert budget.inner_text() == f"{used} / 3 used (spent)"
