"""A streamed ``llm`` step in the web UI: while the model's answer is still coming, the
step's panel shows the text so far (from the run's event stream), then the whole
answer once it completed.  The fake OpenAI server holds its stream half-way until the
test has seen the partial text, so nothing here depends on timing."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .conftest import Server, serve

# examples/fake_openai/server.py by its path (``examples`` here is tests/examples)
_FOUND = importlib.util.spec_from_file_location(
    "fake_openai_server",
    Path(__file__).resolve().parents[2] / "examples" / "fake_openai" / "server.py")
assert _FOUND is not None and _FOUND.loader is not None
fake_openai = importlib.util.module_from_spec(_FOUND)
_FOUND.loader.exec_module(fake_openai)

KEY = "sk-ui-stream-KEY"
RELEASE = threading.Event()


class HeldHandler(fake_openai.Handler):  # type: ignore[name-defined,misc]
    """The fake server, whose stream waits for ``RELEASE`` before its third word."""

    replies = []  # noqa: RUF012 - the base's class attributes, as serve() sets them
    limited: set[str] = set()  # noqa: RUF012
    words = 0

    @property  # type: ignore[override]
    def chunk_delay(self) -> float:  # read before each content chunk
        self.words += 1
        if self.words == 3:
            RELEASE.wait(30)
        return 0.0


@pytest.fixture(scope="module")
def fake_base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HeldHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        RELEASE.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, browser: Any,
        fake_base: str) -> Iterator[Server]:
    """A server allowed to reach the fake one (loopback) with the key's variable."""
    db = tmp_path_factory.mktemp("stream") / "ui.db"
    yield from serve(f"sqlite:///{db}", None, env={
        "PLAIT_ALLOWED_KEY_ENVS": "STREAM_TEST_KEY", "PLAIT_ALLOWED_HOSTS": "127.0.0.1"})


def test_the_step_panel_shows_the_answer_as_it_streams(
        app: Server, fake_base: str, page: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAM_TEST_KEY", KEY)
    RELEASE.clear()
    app.register({"name": "ui-stream", "steps": [
        {"id": "answer", "type": "llm", "base_url": fake_base, "model": "m",
         "api_key_env": "STREAM_TEST_KEY", "prompt": "one two three four", "stream": True}]})
    run_id = app.start("ui-stream")
    page.goto(f"{app.base}/#/runs/{run_id}")
    page.click(".steps [data-step=answer]")
    streamed = page.locator("[data-testid=streamed]")
    page.wait_for_selector("[data-testid=streamed]:text('echo: one')")
    assert streamed.inner_text().strip() == "echo: one"  # held before its third word
    assert app.run(run_id)["status"] == "running"
    RELEASE.set()
    app.wait(run_id, "completed")
    page.wait_for_selector("[data-testid=streamed]:text('echo: one two three four')")
    assert app.run(run_id)["steps"]["answer"]["output"]["content"] == \
        "echo: one two three four"
