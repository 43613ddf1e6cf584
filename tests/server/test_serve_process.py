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
import pytest

pytestmark = pytest.mark.slow  # starts `plait serve` processes


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


def _serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
           timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "plait", "serve", "--db", "memory://",
                           *args], cwd=tmp_path, env={**_env(), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def test_a_short_token_is_refused(tmp_path: Path) -> None:
    result = _serve(tmp_path, "--port", "1", env={"PLAIT_API_TOKEN": "fifteen-chars!!"})
    assert result.returncode == 2
    assert "PLAIT_API_TOKEN" in result.stderr and "16" in result.stderr


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "1e9"])
def test_a_bad_header_timeout_is_refused(value: str) -> None:
    from plait.server.settings import ServerSettings

    with pytest.raises(ValueError, match="PLAIT_HEADER_TIMEOUT"):
        ServerSettings.from_environment({"PLAIT_HEADER_TIMEOUT": value})
    assert ServerSettings.from_environment({"PLAIT_HEADER_TIMEOUT": "2.5"}).header_timeout \
        == 2.5


def test_a_taken_port_exits_1_naming_it(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _serve(tmp_path, "--port", str(port))
    assert result.returncode == 1, result.stderr
    assert f"port {port}" in result.stderr and "taken" in result.stderr


def _started(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return
        except httpx.TransportError:
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, "plait serve did not answer"
            time.sleep(0.05)


def _closed(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` within ``within`` s while it trickles a
    header byte every 0.1 s."""
    deadline = time.monotonic() + within
    sock.settimeout(0.1)
    while time.monotonic() < deadline:
        try:
            sock.sendall(b"a")
            if sock.recv(1024) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:  # reset, broken pipe: closed
            return True
    return False


def test_headers_that_arrive_too_slowly_close_the_connection(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "plait", "serve", "--db", "memory://",
                             "--port", str(port)], cwd=tmp_path,
                            env={**_env(), "PLAIT_HEADER_TIMEOUT": "0.6"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _started(port, proc)
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            started = time.monotonic()
            assert _closed(slow, within=5.0)
            assert 0.4 < time.monotonic() - started < 3.0
        with socket.create_connection(("127.0.0.1", port)) as idle:  # sends nothing
            idle.settimeout(3.0)
            assert idle.recv(1024) == b""
        # a client that sends its request at once is answered, also on a kept-alive
        # connection past the timeout
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            assert client.get("/healthz").status_code == 200
            time.sleep(0.8)
            assert client.get("/healthz").status_code == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
