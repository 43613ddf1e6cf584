"""Browser tests: Debian's chromium driven by Playwright against a real ``plait serve``
app (uvicorn in a background thread, SQLite store in a temporary directory).

Nothing downloads a browser: the tests use /usr/bin/chromium (``make setup`` installs it).
Without it they skip, except under CI=true where a missing browser fails them."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = os.environ.get("PLAIT_CHROMIUM", "/usr/bin/chromium")
TOKEN = "browser-test-token"


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"browser tests under CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module-scoped on purpose: Playwright's sync API keeps an event loop running in this
    thread while it is open, which would break later tests that call asyncio.run."""
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        _missing(f"no chromium at {CHROMIUM}: run `make setup` (it installs Debian's chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed: run `make setup`")
    try:
        from plait.server.app import create_app  # noqa: F401
    except ImportError:
        _missing("plait.server (plait serve) is not available on this branch")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield chromium
        chromium.close()


class Server:
    def __init__(self, base: str, token: str | None) -> None:
        self.base = base
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base, headers=headers, timeout=30)

    def register(self, definition: dict[str, Any]) -> dict[str, Any]:
        resp = self.http.post("/api/workflows", json=definition)
        assert resp.status_code == 201, resp.text
        return resp.json()

    def start(self, workflow: str, data: dict[str, Any] | None = None) -> str:
        resp = self.http.post("/api/runs", json={"workflow": workflow, "input": data or {}})
        assert resp.status_code == 201, resp.text
        return str(resp.json()["run_id"])

    def run(self, run_id: str) -> dict[str, Any]:
        resp = self.http.get(f"/api/runs/{run_id}")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    def wait(self, run_id: str, status: str, timeout: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(run_id)
            if run["status"] == status:
                return run
            assert time.monotonic() < deadline, f"run {run_id} is {run['status']}, not {status}"
            time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(db_url: str, token: str | None, port: int | None = None,
          env: dict[str, str] | None = None) -> Iterator[Server]:
    """A started server on ``port`` (default: a free one); ``env``: more settings
    (``PLAIT_*`` variables) for the server."""
    import uvicorn

    from plait.server.app import create_app
    from plait.server.settings import ServerSettings

    port = port or _free_port()
    settings = ServerSettings.from_environment({"PLAIT_ALLOWED_MODULES": "browser.steps_for_ui",
                                                **(env or {})})
    app = create_app(db_url, host="127.0.0.1", token=token, settings=settings)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive(), "the server thread died"
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    plait = Server(f"http://127.0.0.1:{port}", token)
    try:
        yield plait
    finally:
        plait.http.close()  # its kept-alive connections, before the server goes
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Server]:
    """An open server (no token) over SQLite."""
    db = tmp_path_factory.mktemp("ui") / "ui.db"
    yield from serve(f"sqlite:///{db}", None)


def open_page(browser: Any, width: int = 1440, height: int = 1000) -> Iterator[Any]:
    """A page of that size; the test fails on any JavaScript error it raised."""
    context = browser.new_context(viewport={"width": width, "height": height})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.set_default_timeout(15_000)
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    yield from open_page(browser)
