"""examples/http_check: an http step, a condition whose branches skip, and a join."""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Iterator

import pytest

FLOW = "http_check/flow.yaml"


@pytest.fixture
def base_url(examples_dir) -> Iterator[str]:
    """The example's demo service (serve.py) on a free port of 127.0.0.1."""
    spec = importlib.util.spec_from_file_location("plait_example_http_serve",
                                                  examples_dir / "http_check" / "serve.py")
    assert spec is not None and spec.loader is not None
    serve = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = serve
    spec.loader.exec_module(serve)
    server = serve.make_server(0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_healthy_takes_the_then_branch(plait_run, base_url):
    code, result, _ = plait_run(FLOW, {"url": f"{base_url}/health"})
    assert code == 0
    steps = result["steps"]
    assert steps["check"]["output"]["status"] == 200
    assert steps["check"]["output"]["json"] == {"ok": True}
    assert steps["healthy"]["output"] == {"result": True}
    assert steps["record_ok"]["status"] == "completed"
    assert steps["open_incident"]["status"] == "skipped"
    assert "else branch" in steps["open_incident"]["skip_reason"]
    assert steps["notify"]["status"] == "completed"  # a skipped parent counts as resolved
    assert result["output"] == {"status": "up", "code": 200}


def test_unhealthy_takes_the_else_branch(plait_run, base_url):
    code, result, _ = plait_run(FLOW, {"url": f"{base_url}/broken"})
    assert code == 0
    steps = result["steps"]
    assert steps["check"]["attempts"] == 1  # 503 is listed in `expect`: no retry
    assert steps["record_ok"]["status"] == "skipped"
    assert steps["open_incident"]["status"] == "completed"
    assert steps["notify"]["status"] == "completed"
    assert result["output"] == {"status": "down", "code": 503,
                                "title": f"{base_url}/broken answered 503"}


def test_an_unexpected_status_fails_the_run(plait_run, base_url):
    code, result, stderr = plait_run(FLOW, {"url": f"{base_url}/missing"})
    assert code == 1
    assert result["status"] == "failed"
    assert "HTTP 404" in result["steps"]["check"]["error"]
    for step in ("healthy", "record_ok", "open_incident", "notify"):
        assert result["steps"][step]["status"] == "upstream_failed"
    assert "run failed" in stderr
