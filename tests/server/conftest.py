"""Fixtures of the server tests: an app over a store, driven by FastAPI's TestClient
(the lifespan runs, so the server executes runs as ``plait serve`` does)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.server import ServerSettings, create_app
from plait.steps.netpolicy import UNTRUSTED, NetworkPolicy

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TOKEN = "s3cret-token"
HELLO: dict[str, Any] = {
    "name": "hello",
    "input": {"type": "object", "properties": {"n": {"type": "integer"}},
              "required": ["n"]},
    "steps": [{"id": "a", "type": "transform", "value": {"n": "{{ input.n }}"}},
              {"id": "b", "type": "transform", "depends_on": ["a"],
               "value": "{{ steps.a.output.n }}!"}],
    "output": "{{ steps.b.output }}",
}
GATED: dict[str, Any] = {
    "name": "gated",
    "steps": [{"id": "draft", "type": "transform", "value": "text"},
              {"id": "sign_off", "type": "approval", "prompt": "Ship it?",
               "depends_on": ["draft"]},
              {"id": "publish", "type": "transform", "depends_on": ["sign_off"],
               "value": "published"}],
}
Client = Callable[..., TestClient]


def settings(**changes: Any) -> ServerSettings:
    # TestClient sends Host: testserver, a name a real server would list in
    # PLAIT_ALLOWED_HOSTNAMES
    base: dict[str, Any] = {"allowed_modules": ("server.steps_for_api",),
                            "allowed_hostnames": ("testserver",),
                            "http_policy": NetworkPolicy.from_environment({}, base=UNTRUSTED)}
    base.update(changes)
    return ServerSettings(**base)


@pytest.fixture(params=["memory", "sqlite"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/api.db"


@pytest.fixture
def make_client() -> Iterator[Client]:
    """``make_client(url, **settings)``: a started client (closed after the test)."""
    opened: list[TestClient] = []

    def make(url: str = "memory://", *, worker: bool = True, **changes: Any) -> TestClient:
        app = create_app(url, settings=settings(**changes), worker=worker, grace=2.0,
                         events_poll=0.05)
        client = TestClient(app)
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in reversed(opened):
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Client) -> TestClient:
    return make_client()


def register(client: TestClient, definition: dict[str, Any], **kw: Any) -> dict[str, Any]:
    response = client.post("/api/workflows", json=definition, **kw)
    assert response.status_code == 201, response.text
    return dict(response.json())


def wait_status(client: TestClient, run_id: str, statuses: tuple[str, ...],
                timeout: float = 10.0, **kw: Any) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/api/runs/{run_id}", **kw).json()
        if body["status"] in statuses:
            return dict(body)
        assert time.monotonic() < deadline, f"run {run_id} stayed {body['status']}"
        time.sleep(0.02)


def error_of(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    if code is not None:
        assert body["error"]["code"] == code, body
    return dict(body["error"])
