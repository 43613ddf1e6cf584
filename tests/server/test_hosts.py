"""The host names the server answers to (DNS rebinding), and the headers every answer
carries (framing, sniffing, referrer, CSP)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from plait.server import create_app

from .conftest import HELLO, Client, error_of, settings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def app_on() -> Iterator[Any]:
    """``app_on(host, *allowed)``: a started client of a server listening on ``host``."""
    opened: list[TestClient] = []

    def make(host: str, *allowed: str) -> TestClient:
        app = create_app("memory://", host=host, grace=1.0,
                         settings=settings(allowed_hostnames=allowed))
        client = TestClient(app, base_url="http://127.0.0.1")
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


def _host(client: TestClient, host: str, method: str = "GET", path: str = "/api/runs",
          **kw: Any) -> Any:
    return client.request(method, path, headers={"Host": host, **kw.pop("headers", {})},
                          **kw)


@pytest.mark.parametrize("host", ["evil.test", "evil.test:8080", "localhost.evil.test",
                                  "127.0.0.1.nip.io", "EVIL.TEST:80"])
def test_a_foreign_host_name_gets_421_naming_it(app_on: Any, host: str) -> None:
    client = app_on("127.0.0.1")
    error = error_of(_host(client, host), 421, "unknown_host")
    assert host.split(":")[0].lower() in error["message"]
    assert "PLAIT_ALLOWED_HOSTNAMES" in error["message"]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8080", "localhost", "localhost:1",
                                  "LOCALHOST.", "[::1]:8080", "[::1]", "ui.localhost:8080",
                                  "192.0.2.7", "[2001:db8::1]:80", "ip6-localhost"])
def test_addresses_and_loopback_names_are_served(app_on: Any, host: str) -> None:
    client = app_on("127.0.0.1")
    assert _host(client, host).status_code == 200


@pytest.mark.parametrize("host", ["exa mple", "[::1", "[::1]x", "a:b", "[zz]:80", "a/b",
                                  "a:123456", "é.test"])
def test_a_malformed_host_gets_400(app_on: Any, host: str) -> None:
    client = app_on("127.0.0.1")
    error = error_of(_host(client, host.encode("utf-8")), 400, "invalid_host")
    assert "Host" in error["message"]


def test_a_missing_host_gets_400(app_on: Any) -> None:
    client = app_on("127.0.0.1")
    error_of(_host(client, ""), 400, "missing_host")


def test_the_listening_name_and_allowed_names_are_served(app_on: Any) -> None:
    client = app_on("plait.internal", "ci.example.com:8443", "*.corp.test")
    for host in ("plait.internal:8080", "ci.example.com", "a.corp.test", "b.a.corp.test"):
        assert _host(client, host).status_code == 200, host
    for host in ("corp.test", "example.com", "other.internal"):
        error_of(_host(client, host), 421, "unknown_host")


def test_a_wildcard_bind_adds_no_name(app_on: Any) -> None:
    client = app_on("0.0.0.0", "plait.example.com")
    assert _host(client, "10.1.2.3:8080").status_code == 200
    assert _host(client, "plait.example.com").status_code == 200
    error_of(_host(client, "evil.test"), 421)


def test_a_write_under_a_foreign_host_changes_nothing(app_on: Any) -> None:
    client = app_on("127.0.0.1")
    error_of(_host(client, "evil.test", "POST", "/api/workflows", json=HELLO), 421)
    assert client.get("/api/workflows").json() == []


@pytest.mark.parametrize("path", ["/", "/api/runs", "/ui/app.js", "/nope", "/healthz",
                                  "/openapi.json", "/docs/assets/swagger-ui.css"])
def test_every_answer_carries_the_security_headers(make_client: Client, path: str) -> None:
    response = make_client().get(path)
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    policy = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "script-src 'self';" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]


def test_refusals_carry_them_too(app_on: Any) -> None:
    response = _host(app_on("127.0.0.1"), "evil.test")
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


def test_the_docs_page_allows_only_its_own_inline_script(make_client: Client) -> None:
    import base64
    import hashlib
    import re

    response = make_client().get("/docs")
    policy = response.headers["content-security-policy"]
    script = re.search(r"<script>(.*?)</script>", response.text, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"script-src 'self' 'sha256-{digest}';" in policy
    assert "frame-ancestors 'none'" in policy
    assert response.headers.get_list("content-security-policy") == [policy]
