"""Signed webhooks: the signature covers the timestamp, the hook name and the body; a
stale timestamp, another hook's signature and a repeated delivery id start nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import HELLO, TOKEN, Client, error_of, register, wait_status

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
BEARER = {"Authorization": f"Bearer {TOKEN}"}
SECRET = "hook-secret"
OTHER = {**HELLO, "name": "other"}


def signed(body: bytes, name: str = "hello", *, secret: str = SECRET,
           at: float | None = None, delivery: str | None = None) -> dict[str, str]:
    """The headers of a delivery as docs/server.md tells a sender to sign it."""
    timestamp = str(int(time.time() if at is None else at))
    content = f"{timestamp}.{name}.".encode() + body
    digest = hmac.new(secret.encode(), content, hashlib.sha256).hexdigest()
    headers = {"X-Plait-Timestamp": timestamp, "X-Plait-Signature": f"sha256={digest}",
               "Content-Type": "application/json"}
    if delivery is not None:
        headers["X-Plait-Delivery"] = delivery
    return headers


def runs_of(client: Any, workflow: str) -> list[str]:
    page = client.get("/api/runs", params={"workflow": workflow}, headers=BEARER).json()
    return [r["run_id"] for r in page["runs"]]


def test_webhooks_start_a_run_only_when_signed(make_client: Client) -> None:
    body = json.dumps({"n": 5}).encode()
    closed = make_client()
    register(closed, HELLO)
    error_of(closed.post("/api/hooks/hello", content=body, headers=signed(body)), 401)
    client = make_client(webhook_secret=SECRET, token=TOKEN)
    register(client, HELLO, headers=BEARER)
    error_of(client.post("/api/hooks/hello", content=body), 401, "invalid_timestamp")
    error_of(client.post("/api/hooks/hello", content=body,
                         headers=signed(body, secret="wrong")), 401, "invalid_signature")
    tampered = json.dumps({"n": 6}).encode()
    error_of(client.post("/api/hooks/hello", content=tampered, headers=signed(body)), 401,
             "invalid_signature")
    response = client.post("/api/hooks/hello", content=body, headers=signed(body))
    assert response.status_code == 201, response.text
    assert response.json()["duplicate"] is False
    run = wait_status(client, response.json()["run_id"], ("completed",), headers=BEARER)
    assert run["input"] == {"n": 5} and run["output"] == "5!"
    error_of(client.post("/api/hooks/nope", content=body, headers=signed(body, "nope")),
             404, "workflow_not_found")
    bad = json.dumps({"m": 1}).encode()
    error_of(client.post("/api/hooks/hello", content=bad, headers=signed(bad)), 422,
             "invalid_input")
    error_of(client.post("/api/hooks/hello", content=b"{nope", headers=signed(b"{nope")),
             400, "bad_request")


def test_the_signature_of_one_hook_does_not_start_another(make_client: Client) -> None:
    client = make_client(webhook_secret=SECRET)
    register(client, HELLO)
    register(client, OTHER)
    body = json.dumps({"n": 1}).encode()
    error = error_of(client.post("/api/hooks/other", content=body, headers=signed(body)),
                     401, "invalid_signature")
    assert "hook name" in error["message"]
    assert runs_of(client, "other") == []


@pytest.mark.parametrize("shift", [-320, 320, -10_000])  # 300 s tolerance; whole seconds
def test_a_stale_or_future_timestamp_is_refused(make_client: Client, shift: int) -> None:
    client = make_client(webhook_secret=SECRET)
    register(client, HELLO)
    body = json.dumps({"n": 1}).encode()
    error = error_of(client.post("/api/hooks/hello", content=body,
                                 headers=signed(body, at=time.time() + shift)),
                     401, "stale_timestamp")
    assert "X-Plait-Timestamp" in error["message"]
    assert runs_of(client, "hello") == []


@pytest.mark.parametrize("timestamp", ["", "abc", "1.5", "²", "9" * 40, "-5"])
def test_a_malformed_timestamp_is_refused(make_client: Client, timestamp: str) -> None:
    client = make_client(webhook_secret=SECRET)
    headers = {**signed(b"{}"), "X-Plait-Timestamp": timestamp}
    error = error_of(client.post("/api/hooks/hello", content=b"{}",
                                 headers={k: v.encode("latin-1") for k, v in headers.items()}),
                     401, "invalid_timestamp")
    assert "X-Plait-Timestamp" in error["message"]


def test_a_repeated_delivery_id_starts_nothing(make_client: Client) -> None:
    client = make_client(webhook_secret=SECRET)
    register(client, HELLO)
    register(client, OTHER)
    body = json.dumps({"n": 2}).encode()
    first = client.post("/api/hooks/hello", content=body, headers=signed(body, delivery="d-1"))
    assert first.status_code == 201, first.text
    again = client.post("/api/hooks/hello", content=body,
                        headers=signed(body, delivery="d-1", at=time.time() + 60))
    assert again.status_code == 200, again.text
    assert again.json() == {"run_id": first.json()["run_id"], "duplicate": True}
    assert runs_of(client, "hello") == [first.json()["run_id"]]
    # the same id on another hook is another delivery
    other = client.post("/api/hooks/other", content=body,
                        headers=signed(body, "other", delivery="d-1"))
    assert other.status_code == 201
    error = error_of(client.post("/api/hooks/hello", content=body,
                                 headers=signed(body, delivery="bad id!")),
                     400, "invalid_delivery_id")
    assert "X-Plait-Delivery" in error["message"]


def test_a_delivery_that_started_nothing_may_be_sent_again(make_client: Client) -> None:
    client = make_client(webhook_secret=SECRET)
    body = json.dumps({"n": 3}).encode()
    error_of(client.post("/api/hooks/hello", content=body,
                         headers=signed(body, delivery="d-2")), 404)
    register(client, HELLO)
    retried = client.post("/api/hooks/hello", content=body,
                          headers=signed(body, delivery="d-2"))
    assert retried.status_code == 201, retried.text


def test_delivery_ids_hold_across_a_restart(make_client: Client, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/hooks.db"
    body = json.dumps({"n": 4}).encode()
    client = make_client(url, webhook_secret=SECRET)
    register(client, HELLO)
    first = client.post("/api/hooks/hello", content=body, headers=signed(body, delivery="d"))
    assert first.status_code == 201
    client.__exit__(None, None, None)
    restarted = make_client(url, webhook_secret=SECRET)
    again = restarted.post("/api/hooks/hello", content=body,
                           headers=signed(body, delivery="d"))
    assert again.status_code == 200 and again.json()["run_id"] == first.json()["run_id"]
    assert runs_of(restarted, "hello") == [first.json()["run_id"]]


@pytest.mark.postgres
def test_delivery_ids_hold_across_servers_on_one_postgres(make_client: Client,
                                                          pg_database: str) -> None:
    one = make_client(pg_database, webhook_secret=SECRET, worker=False)
    two = make_client(pg_database, webhook_secret=SECRET, worker=False)
    register(one, HELLO)
    body = json.dumps({"n": 5}).encode()
    headers = signed(body, delivery="pg-delivery")
    first = one.post("/api/hooks/hello", content=body, headers=headers)
    again = two.post("/api/hooks/hello", content=body, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["run_id"] == first.json()["run_id"]
