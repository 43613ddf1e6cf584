"""The server's refusals: the token (bearer and the UI's cookie session with CSRF), body
limits and cross-site writes (webhooks: test_hooks.py)."""

from __future__ import annotations

import json

import pytest

from .conftest import HELLO, TOKEN, Client, error_of, wait_status

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def test_without_a_token_everything_is_open(client):
    assert client.get("/api/runs").status_code == 200
    assert client.get("/api/session").json() == {"authenticated": True,
                                                 "auth_required": False}


def test_every_route_but_healthz_needs_the_token(make_client: Client):
    client = make_client(token=TOKEN)
    assert client.get("/healthz").json() == {"status": "ok"}
    for method, path in [("GET", "/api/workflows"), ("GET", "/api/runs"),
                         ("GET", "/api/runs/x"), ("POST", "/api/runs"),
                         ("GET", "/api/schema"), ("GET", "/docs"), ("GET", "/openapi.json"),
                         ("GET", "/api/runs/x/events"), ("POST", "/api/runs/x/cancel")]:
        error = error_of(client.request(method, path), 401, "unauthorized")
        assert "Bearer" in error["message"]
        error_of(client.request(method, path, headers={"Authorization": "Bearer wrong"}),
                 401, "unauthorized")
        error_of(client.request(method, path, headers={"Authorization": f"Basic {TOKEN}"}),
                 401)
    assert client.get("/api/runs", headers=BEARER).status_code == 200
    response = client.post("/api/workflows", json=HELLO, headers=BEARER)
    assert response.status_code == 201  # bearer requests need no CSRF header
    # the UI's files and the session probe are open
    assert client.get("/").status_code == 200
    assert client.get("/ui/index.html").status_code == 200
    assert client.get("/api/session").json() == {"authenticated": False,
                                                 "auth_required": True}
    assert client.get("/api/session", headers=BEARER).json()["authenticated"] is True


def test_login_sets_a_signed_httponly_session_and_a_csrf_cookie(make_client: Client):
    client = make_client(token=TOKEN)
    error_of(client.post("/api/login", json={"token": "wrong"}), 401, "unauthorized")
    response = client.post("/api/login", json={"token": TOKEN})
    assert response.status_code == 200
    cookies = {c.split("=", 1)[0]: c for c in response.headers.get_list("set-cookie")}
    session, csrf = cookies["plait_session"], cookies["plait_csrf"]
    assert "HttpOnly" in session and "SameSite=strict" in session.replace("Strict", "strict")
    assert "Path=/" in session
    assert "HttpOnly" not in csrf and "SameSite=strict" in csrf.replace("Strict", "strict")
    assert TOKEN not in session
    assert client.get("/api/session").json() == {"authenticated": True,
                                                 "auth_required": True}
    assert client.get("/api/runs").status_code == 200  # the cookie authenticates
    csrf_value = client.cookies["plait_csrf"]
    assert response.json()["csrf_token"] == csrf_value
    # state changes with the cookie need X-CSRF-Token equal to the plait_csrf cookie
    error_of(client.post("/api/workflows", json=HELLO), 403, "csrf_failed")
    error_of(client.post("/api/workflows", json=HELLO, headers={"X-CSRF-Token": "nope"}),
             403, "csrf_failed")
    ok = client.post("/api/workflows", json=HELLO, headers={"X-CSRF-Token": csrf_value})
    assert ok.status_code == 201
    # logout clears both cookies
    out = client.post("/api/logout", headers={"X-CSRF-Token": csrf_value})
    assert out.status_code == 204
    cleared = " ".join(out.headers.get_list("set-cookie"))
    assert "plait_session=" in cleared and "plait_csrf=" in cleared
    assert "plait_session" not in client.cookies
    error_of(client.get("/api/runs"), 401)


def test_a_forged_or_foreign_session_is_refused(make_client: Client):
    client = make_client(token=TOKEN)
    client.post("/api/login", json={"token": TOKEN})
    value = client.cookies["plait_session"]
    version, expires, csrf, sig = value.split(".")
    client.cookies.set("plait_session", f"{version}.{int(expires) + 9999}.{csrf}.{sig}")
    error_of(client.get("/api/runs"), 401)
    other = make_client(token="another-token")  # a session of another token
    other.cookies.set("plait_session", value)
    error_of(other.get("/api/runs"), 401)
    client.cookies.set("plait_session", "garbage")
    error_of(client.get("/api/runs"), 401)


def test_bodies_over_one_mib_are_refused(client):
    big = b'{"workflow": "x", "input": "' + b"a" * (1024 * 1024) + b'"}'
    error_of(client.post("/api/runs", content=big,
                         headers={"Content-Type": "application/json"}), 413,
             "payload_too_large")

    def chunks():  # no Content-Length: chunked transfer
        yield b'{"workflow": "x", "input": "'
        for _ in range(20):
            yield b"a" * 65536
        yield b'"}'

    error_of(client.post("/api/runs", content=chunks(),
                         headers={"Content-Type": "application/json"}), 413,
             "payload_too_large")
    small = client.post("/api/runs", content=b'{"workflow": "nope"}',
                        headers={"Content-Type": "application/json"})
    assert small.status_code == 404


def test_cross_site_browser_requests_cannot_change_state(client):
    """A page on another site can make a browser POST to a server without a token (a
    'simple' request: text/plain, no preflight); such requests carry a foreign Origin
    (or Sec-Fetch-Site: cross-site) and are refused before anything runs."""
    yaml_ish = json.dumps(HELLO).encode()
    for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"},
                    {"Origin": "http://testserver.evil.example"},
                    {"Origin": "http://testserver:8081"},
                    {"Sec-Fetch-Site": "cross-site"}):
        response = client.post("/api/workflows", content=yaml_ish,
                               headers={"Content-Type": "text/plain", **headers})
        error = error_of(response, 403, "cross_origin")
        assert "Origin" in error["message"]
    assert client.get("/api/workflows").json() == []  # nothing was registered
    # reads stay open to any origin (the browser keeps their answers from the page)
    assert client.get("/api/runs", headers={"Origin": "http://evil.example"}).status_code \
        == 200
    # the server's own pages (same origin) and programs (no Origin) may write
    same = client.post("/api/workflows", json=HELLO,
                       headers={"Origin": "http://testserver",
                                "Sec-Fetch-Site": "same-origin"})
    assert same.status_code == 201, same.text
    run = client.post("/api/runs", json={"workflow": "hello", "input": {"n": 1}})
    assert run.status_code == 201
    wait_status(client, run.json()["run_id"], ("completed",))
