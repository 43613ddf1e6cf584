"""A streamed ``llm`` step over the API: the run's event stream carries the text so far
(``emit`` notes) while the model is still answering.  The model, a small server in a
thread, holds its answer after the first word until the test has read that word from
the event stream, so nothing depends on timing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from plait.steps.netpolicy import UNTRUSTED, NetworkPolicy

from .conftest import Client, register

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
RELEASE = threading.Event()


class Model(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self._chunk({"role": "assistant", "content": "Hello"})
        RELEASE.wait(30)
        self._chunk({"content": ", world"})
        self._chunk({}, "stop")
        self.wfile.write(b"data: [DONE]\n\n")

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> None:
        body = {"model": "m", "choices": [{"index": 0, "delta": delta,
                                           "finish_reason": finish}]}
        self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
        self.wfile.flush()


@pytest.fixture()
def model_url() -> Iterator[str]:
    RELEASE.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        RELEASE.set()
        server.shutdown()
        server.server_close()


def test_the_event_stream_carries_the_partial_answer_while_it_streams(
        make_client: Client, db_url: str, model_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAM_KEY", "sk-stream")
    client = make_client(db_url, allowed_key_envs=("STREAM_KEY",), http_policy=(
        NetworkPolicy.from_environment({"PLAIT_ALLOWED_HOSTS": "127.0.0.1"},
                                       base=UNTRUSTED)))
    register(client, {"name": "streamed", "steps": [
        {"id": "ask", "type": "llm", "base_url": model_url, "model": "m",
         "api_key_env": "STREAM_KEY", "prompt": "greet", "stream": True}]})
    run_id = client.post("/api/runs", json={"workflow": "streamed"}).json()["run_id"]

    texts: list[str] = []
    statuses: list[str] = []
    with client.stream("GET", f"/api/runs/{run_id}/events") as response:
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            emit = (event["data"] or {}).get("emit") if event["kind"] == "note" else None
            if emit is not None:
                texts.append(emit["value"]["content"])
                if len(texts) == 1:  # the model holds the rest until now
                    statuses.append(client.get(f"/api/runs/{run_id}").json()["status"])
                    RELEASE.set()
    assert texts == ["Hello", "Hello, world"]
    assert statuses == ["running"]
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "completed"
    assert run["steps"]["ask"]["output"]["content"] == "Hello, world"
