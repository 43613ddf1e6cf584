"""``plait serve`` as a real process: it serves, and SIGTERM drains and exits 0; a
public address without a token is refused (exit 2)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    return env


def test_serve_answers_and_sigterm_drains(tmp_path: Path) -> None:
    port = _free_port()
    db = f"sqlite:///{tmp_path}/serve.db"
    proc = subprocess.Popen([sys.executable, "-m", "plait", "serve", "--db", db,
                             "--port", str(port)], cwd=tmp_path, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                response = httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()[1].decode()
                assert time.monotonic() < deadline, "plait serve did not answer"
                time.sleep(0.05)
        assert response.json() == {"status": "ok"}
        definition = {"name": "proc", "steps": [{"id": "a", "type": "transform",
                                                 "value": "{{ input.x }}"}],
                      "output": "{{ steps.a.output }}"}
        assert httpx.post(f"{base}/api/workflows", json=definition).status_code == 201
        run_id = httpx.post(f"{base}/api/runs", json={"workflow": "proc",
                                                      "input": {"x": 7}}).json()["run_id"]
        while httpx.get(f"{base}/api/runs/{run_id}").json()["status"] != "completed":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err.decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_public_address_needs_a_token(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "plait", "serve", "--host", "0.0.0.0",
                             "--db", "memory://", "--port", "1"], cwd=tmp_path, env=_env(),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "PLAIT_API_TOKEN" in result.stderr and "0.0.0.0" in result.stderr
