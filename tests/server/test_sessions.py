"""The UI's session: logout revokes it (the old cookie is refused afterwards), and
failed logins are limited per client address (429 with Retry-After)."""

from __future__ import annotations

import pytest

from .conftest import TOKEN, Client, error_of

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_logout_revokes_the_session_cookie(make_client: Client) -> None:
    client = make_client(token=TOKEN)
    assert client.post("/api/login", json={"token": TOKEN}).status_code == 200
    session, csrf = client.cookies["plait_session"], client.cookies["plait_csrf"]
    assert client.get("/api/runs").status_code == 200
    out = client.post("/api/logout", headers={"X-CSRF-Token": csrf})
    assert out.status_code == 204
    # the old cookie, sent again as an attacker who copied it would
    client.cookies.set("plait_session", session)
    client.cookies.set("plait_csrf", csrf)
    error_of(client.get("/api/runs"), 401, "unauthorized")
    assert client.get("/api/session").json()["authenticated"] is False
    error_of(client.post("/api/workflows", json={}, headers={"X-CSRF-Token": csrf}), 401)
    # a new login gets a new session that works
    client.cookies.clear()
    assert client.post("/api/login", json={"token": TOKEN}).status_code == 200
    assert client.cookies["plait_session"] != session
    assert client.get("/api/runs").status_code == 200


def test_logging_out_one_session_keeps_the_others(make_client: Client) -> None:
    client = make_client(token=TOKEN)
    client.post("/api/login", json={"token": TOKEN})
    first = client.cookies["plait_session"]
    client.post("/api/login", json={"token": TOKEN})
    second = client.cookies["plait_session"]
    client.post("/api/logout")
    client.cookies.clear()
    client.cookies.set("plait_session", first)
    assert client.get("/api/runs").status_code == 200
    client.cookies.clear()
    client.cookies.set("plait_session", second)
    error_of(client.get("/api/runs"), 401)


def test_a_forged_cookie_at_logout_is_ignored(make_client: Client) -> None:
    client = make_client(token=TOKEN)
    client.cookies.set("plait_session", "v1.99999999999.abc.def")
    assert client.post("/api/logout").status_code == 204
    client.cookies.clear()
    error_of(client.get("/api/runs", headers={"Cookie": b"plait_session=v1.\xb2.abc.def"}),
             401)


def test_failed_logins_are_limited_per_address(make_client: Client) -> None:
    client = make_client(token=TOKEN, login_failures=3, login_window=60.0)
    for _ in range(3):
        error_of(client.post("/api/login", json={"token": "guess"}), 401, "unauthorized")
    limited = client.post("/api/login", json={"token": "guess"})
    error = error_of(limited, 429, "too_many_logins")
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert "try again" in error["message"]
    # even the right token waits: the limit is not a way to test guesses
    error_of(client.post("/api/login", json={"token": TOKEN}), 429)
    # bearer requests are not logins
    assert client.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code \
        == 200


def test_the_limit_ends_after_its_window(make_client: Client) -> None:
    import time

    client = make_client(token=TOKEN, login_failures=1, login_window=0.3)
    error_of(client.post("/api/login", json={"token": "guess"}), 401)
    error_of(client.post("/api/login", json={"token": TOKEN}), 429)
    time.sleep(0.35)
    assert client.post("/api/login", json={"token": TOKEN}).status_code == 200
