"""The curl examples of README.md and docs/server.md, run as written (bash, curl,
openssl) against a live ``plait serve``: every one is answered with a 2xx.  Only the
port, the token and RUN_ID are put in, and curl is told to print the status."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .test_serve_process import _env, _free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "support_router"
TOKEN = "doc-examples-token-0123456789"
SECRET = "doc-examples-hook-secret"
GATED = {"name": "gated", "steps": [
    {"id": "classify", "type": "transform", "value": "x"},
    {"id": "sign_off", "type": "approval", "prompt": "ok?", "depends_on": ["classify"]}]}

pytestmark = [pytest.mark.skipif(not (shutil.which("curl") and shutil.which("openssl")),
                                 reason="needs curl and openssl"),
              pytest.mark.slow]  # starts `plait serve` and curl


def bash_blocks(path: Path, after: str) -> list[str]:
    """The ```bash blocks of ``path`` after its line starting with ``after``."""
    text = path.read_text("utf-8")
    text = text[text.index(after):]
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def commands(block: str) -> list[str]:
    """The block's commands, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


class Live:
    def __init__(self, port: int) -> None:
        self.port = port
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10,
                                 headers={"Authorization": f"Bearer {TOKEN}"})

    def run(self, script: str, cwd: Path) -> str:
        script = script.replace("localhost:8080", f"localhost:{self.port}")
        script = script.replace("curl ", "curl -s -o /dev/null -w '%{http_code}\\n' "
                                "--max-time 10 ")
        env = {**_env(), "PLAIT_API_TOKEN": TOKEN, "PLAIT_WEBHOOK_SECRET": SECRET}
        done = subprocess.run(["bash", "-euc", script], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (script, done.stderr)
        return done.stdout.strip()

    def gated_run(self, *, approved: bool) -> str:
        run_id = str(self.http.post("/api/runs", json={"workflow": "gated"}).json()["run_id"])
        self.wait(run_id, "waiting")
        if approved:
            self.http.post(f"/api/runs/{run_id}/steps/sign_off/approve", json={})
            self.wait(run_id, "completed")
        return run_id

    def wait(self, run_id: str, status: str) -> None:
        deadline = time.monotonic() + 15
        while self.http.get(f"/api/runs/{run_id}").json()["status"] != status:
            assert time.monotonic() < deadline, f"run {run_id} never {status}"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    port = _free_port()
    db = tmp_path_factory.mktemp("docs") / "docs.db"
    env = {**_env(), "PLAIT_API_TOKEN": TOKEN, "PLAIT_WEBHOOK_SECRET": SECRET,
           "PLAIT_ALLOWED_MODULES": "support_handlers",
           "PYTHONPATH": os.pathsep.join([str(EXAMPLE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "plait", "serve", "--db", f"sqlite:///{db}",
                             "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = Live(port)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                server.http.get("/healthz")
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()[1].decode()
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert server.http.post("/api/workflows", json=GATED).status_code == 201
        yield server
    finally:
        server.http.close()
        proc.terminate()
        proc.communicate(timeout=20)


def _run_id_for(live: Live, command: str) -> str:
    if "/approve" in command or "/cancel" in command:
        return live.gated_run(approved=False)
    return live.gated_run(approved=True)


def _check_block(live: Live, block: str, cwd: Path) -> list[str]:
    prelude = [c for c in commands(block) if re.match(r"^[A-Z]=", c)]
    codes = []
    for command in commands(block):
        if not command.startswith("curl "):
            continue
        if "RUN_ID" in command:
            command = command.replace("RUN_ID", _run_id_for(live, command))
        codes.append((command, live.run("\n".join([*prelude, command]), cwd)))
    assert codes, block
    bad = [(c, code) for c, code in codes if not code.startswith("2")]
    assert not bad, bad
    return [code for _, code in codes]


def test_the_readme_server_examples_work(live: Live) -> None:
    block = next(b for b in bash_blocks(ROOT / "README.md", "## A server")
                 if "plait serve" in b)
    assert len(_check_block(live, block, EXAMPLE)) == 3


def test_the_docs_examples_work(live: Live) -> None:
    block = bash_blocks(ROOT / "docs" / "server.md", "## Examples")[0]
    assert len(_check_block(live, block, ROOT)) == 9


def test_the_docs_webhook_example_signs_as_the_server_checks(live: Live) -> None:
    block = bash_blocks(ROOT / "docs" / "server.md", "## Webhooks")[0]
    script = "\n".join(commands(block))
    assert live.run(script, ROOT) == "201"
    assert live.run(script, ROOT) == "200"  # the same X-Plait-Delivery: nothing started
    other = script.replace("evt-0001", "evt-0002").replace('"ticket"', '"x"')
    assert live.run(other.replace("sha256=$sig", "sha256=${sig}0"), ROOT) == "401"


def test_a_json_post_without_its_content_type_is_422(live: Live) -> None:
    """What the examples used to do: a form type is refused, naming the body."""
    response: Any = live.http.post("/api/runs", content=b'{"workflow": "gated"}',
                                   headers={"Content-Type":
                                            "application/x-www-form-urlencoded"})
    assert response.status_code == 422
    assert "body" in response.json()["error"]["message"]
