"""The server's edge in chromium: ``/docs`` draws the API's operations; a page on
another host name that rebinds to the server's address can neither read nor write; no
other origin can frame the UI.

``--host-resolver-rules`` makes ``evil.test`` resolve to 127.0.0.1 without DNS: the
attacker's page is loaded from a throwaway server on a port, which then stops and plait
starts on the same port (what a DNS rebinding achieves: the page's origin now reaches
plait)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from waiting import wait_until

from .conftest import CHROMIUM, Server, _free_port, serve

ATTACKER_PAGE = b"""<!doctype html><html><body><h1>cute cats</h1></body></html>"""
DEFINITION = '{"name": "evil", "steps": [{"id": "a", "type": "transform", "value": 1}]}'


@pytest.fixture(scope="module")
def rebinding_browser(browser: Any) -> Iterator[Any]:
    """Chromium with evil.test mapped to 127.0.0.1 (a second browser: the resolver rule
    is a launch option)."""
    launched = browser.browser_type.launch(
        executable_path=CHROMIUM, headless=True,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--host-resolver-rules=MAP evil.test 127.0.0.1"])
    yield launched
    launched.close()


class AttackerSite:
    """A throwaway HTTP server on 127.0.0.1:``port`` answering ``body`` to GET /."""

    def __init__(self, port: int, body: bytes) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _fetch(page: Any, path: str, method: str = "GET", body: str | None = None) -> dict[str, Any]:
    """What the attacker's script sees of a same-origin fetch."""
    return dict(page.evaluate("""async ([path, method, body]) => {
        const init = {method};
        if (body !== null) { init.body = body; init.headers = {"Content-Type": "text/plain"}; }
        try {
          const r = await fetch(path, init);
          return {status: r.status, text: await r.text()};
        } catch (e) { return {status: 0, text: String(e)}; }
    }""", [path, method, body]))


def test_docs_draws_the_operations_of_the_openapi_document(server: Server, page: Any) -> None:
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text)
            if "Content Security Policy" in m.text else None)
    page.goto(f"{server.base}/docs")
    page.wait_for_selector(".opblock", timeout=15_000)
    paths = page.locator(".opblock .opblock-summary-path").all_inner_texts()
    assert any("/api/runs" in p for p in paths) and any("/api/hooks" in p for p in paths)
    assert "Unable to render" not in page.content()
    assert not blocked, blocked


def test_a_rebound_page_can_neither_read_nor_write(rebinding_browser: Any,
                                                   tmp_path: Path) -> None:
    port = _free_port()
    attacker = AttackerSite(port, ATTACKER_PAGE)
    context = rebinding_browser.new_context()
    page = context.new_page()
    try:
        page.goto(f"http://evil.test:{port}/")
        assert page.inner_text("h1") == "cute cats"
    finally:
        attacker.stop()
    served = serve(f"sqlite:///{tmp_path}/rebind.db", None, port=port)
    plait = next(served)
    try:
        plait.register({"name": "secret", "steps": [{"id": "a", "type": "transform",
                                                     "value": 1}]})
        run_id = plait.start("secret")
        reads: list[dict[str, Any]] = []
        # until the browser has dropped its connection to the throwaway server (a fetch
        # over it fails: status 0) and reaches plait
        wait_until(lambda: reads.append(_fetch(page, "/api/runs")) or reads[-1]["status"],
                   what="a fetch from the rebound page to reach plait")
        read = reads[-1]
        assert read["status"] == 421, read
        assert run_id not in read["text"] and "PLAIT_ALLOWED_HOSTNAMES" in read["text"]
        assert _fetch(page, f"/api/runs/{run_id}")["status"] == 421
        for path, body in [("/api/workflows", DEFINITION),
                           ("/api/runs", '{"workflow": "secret"}'),
                           (f"/api/runs/{run_id}/cancel", "")]:
            assert _fetch(page, path, "POST", body)["status"] == 421
        names = [w["name"] for w in plait.http.get("/api/workflows").json()]
        assert names == ["secret"]
        assert [r["run_id"] for r in plait.http.get("/api/runs").json()["runs"]] == [run_id]
        # the same fetch from the server's own address is answered: the refusal is the
        # host name's
        page.goto(f"{plait.base}/healthz")
        assert _fetch(page, "/api/runs")["status"] == 200
    finally:
        context.close()
        next(served, None)


def test_no_other_origin_can_frame_the_ui(server: Server, rebinding_browser: Any) -> None:
    port = _free_port()
    framing = f'<iframe id="f" src="{server.base}/#/runs" width="800" height="600"></iframe>'
    attacker = AttackerSite(port, framing.encode())
    context = rebinding_browser.new_context()
    page = context.new_page()
    refusals: list[str] = []
    page.on("console", lambda m: refusals.append(m.text))
    try:
        page.goto(f"http://evil.test:{port}/", wait_until="load")  # the frame's load too
        frame = page.frames[1]
        assert frame.url != f"{server.base}/#/runs" or frame.locator("#app").count() == 0
        assert frame.locator("header.top").count() == 0  # the UI was not drawn
        response = httpx.get(f"{server.base}/")
        assert response.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    finally:
        context.close()
        attacker.stop()
