"""The analyst pipeline of examples/analyst_pipeline in the web UI: run with ``plait run``
against the fake OpenAI server until it waits for approval, then its run page (served by
the test app over the same SQLite file) shows the approval's prompt and the brief under
review, approves it, and shows the planner's messages as a conversation.  The page is
screenshot before and after approval for docs/ui.md."""

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
IMAGES = ROOT / "docs" / "images"
KEY = "sk-ui-pipeline-KEY-never-shown-9d2e"
TOPIC = "heat pumps"


@pytest.fixture(scope="module")
def waiting_run(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[tuple[str, str]]:
    """(database URL, run id) of the pipeline waiting for its approval."""
    fake = subprocess.Popen(
        [sys.executable, "-m", "examples.fake_openai.server", "--port", "0",
         "--replies", "examples/analyst_pipeline/fake_replies.json"],
        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1", "FAKE_OPENAI_KEY": KEY},
        stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout is not None
        base = fake.stdout.readline().split(" on ", 1)[1].strip()
        db = f"sqlite:///{tmp_path_factory.mktemp('pipeline') / 'plait.db'}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FORCE_"))}
        proc = subprocess.run(
            [sys.executable, "-m", "plait", "run", "examples/analyst_pipeline/flow.yaml",
             "--json", "--db", db, "--input", json.dumps({"topic": TOPIC, "base_url": base})],
            cwd=ROOT, env={**env, "OPENAI_API_KEY": KEY}, capture_output=True, text=True,
            timeout=60)
        assert proc.returncode == 3, proc.stderr
        yield db, json.loads(proc.stdout)["run_id"]
    finally:
        fake.terminate()
        fake.communicate(timeout=10)  # closes its stdout pipe too


@pytest.fixture(scope="module")
def app(waiting_run: tuple[str, str]) -> Iterator[Server]:
    """The test app over the run's database; the definition names OPENAI_API_KEY, which
    a server allows only when told (it treats the definitions it runs as untrusted)."""
    yield from serve(waiting_run[0], None, env={"PLAIT_ALLOWED_KEY_ENVS": "OPENAI_API_KEY"})


def test_the_pipeline_is_approved_in_the_browser_and_shows_its_conversations(
        app: Server, waiting_run: tuple[str, str], page: Any) -> None:
    run_id = waiting_run[1]
    page.goto(f"{app.base}/#/runs/{run_id}")
    banner = page.locator("[data-testid=approvals]")
    prompt = banner.locator("[data-testid=approval-prompt]")
    prompt.wait_for()
    assert prompt.inner_text() == (f"Publish the brief on {TOPIC}? The critic approved it "
                                   "after 2 rounds.")
    show = banner.locator("[data-testid=approval-show]").inner_text()
    assert show.startswith(f"# {TOPIC}: the brief") and "Verdict: worth it" in show
    tokens = page.locator("[data-testid=run-tokens]")
    assert int(tokens.inner_text().replace(",", "")) == app.run(run_id)["llm_tokens"] > 0
    page.wait_for_selector("[data-node=approve][data-status=waiting]")
    page.screenshot(path=str(IMAGES / "pipeline-waiting.png"), full_page=True)

    banner.locator("[data-action=approve]").click()
    page.wait_for_selector("[data-testid=run-status][data-status=completed]")
    page.wait_for_selector("[data-node=publish][data-status=completed]")
    assert banner.is_hidden()
    run = app.run(run_id)
    assert run["output"]["published"]["brief"] == show
    assert run["steps"]["refine"]["usage"]["total_tokens"] > 0  # the loop's child runs

    # the planner's panel: the messages it sent, each a block with its role, the answer
    # as text and its JSON pretty-printed (not one escaped JSON string)
    page.click("[data-node=plan]")
    talk = page.locator("[data-testid=step-detail] [data-testid=conversation]")
    talk.wait_for()
    blocks = talk.locator(".msg")
    assert blocks.evaluate_all("els => els.map((e) => e.dataset.role)") \
        == ["system", "user", "assistant"]
    assert blocks.nth(1).locator(".msg-text").inner_text() == f"Plan the research on: {TOPIC}"
    answer = json.loads(blocks.nth(2).locator(".msg-text").inner_text())
    assert answer == run["steps"]["plan"]["output"]["json"]
    pretty = page.locator("[data-testid=answer-json]").inner_text()
    assert '"topics": [\n    "the market for heat pumps",' in pretty
    detail = page.locator("[data-testid=step-detail]").inner_text()
    assert "Tokens" in detail and KEY not in page.content()
    page.wait_for_selector("#toast", state="hidden")  # "approve approved" has gone
    page.screenshot(path=str(IMAGES / "pipeline-approved.png"), full_page=True)
