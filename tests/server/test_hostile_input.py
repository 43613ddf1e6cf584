"""Hostile values where the API takes integers and text: huge integers (2^63 and more),
non-ASCII digits, NaN, lone surrogates.  Each gets a 4xx naming what is wrong, never a
500 (which would also mean a traceback in the server's log)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from .conftest import HELLO, TOKEN, Client, error_of, register, wait_status

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
JSON_TYPE = {"Content-Type": "application/json"}


def cursor(value: Any) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.fixture
def hello_run(make_client: Client, db_url: str) -> tuple[Any, str]:
    client = make_client(db_url)
    register(client, HELLO)
    run_id = client.post("/api/runs", json={"workflow": "hello", "input": {"n": 1}}).json()
    wait_status(client, run_id["run_id"], ("completed",))
    return client, run_id["run_id"]


@pytest.mark.parametrize("value", [[2**63, "x"], [10**400, "x"], b'[NaN, "x"]',
                                   b'[Infinity, "x"]', [-1, "x"], [1e300, "x"]])
def test_a_cursor_out_of_range_is_refused(hello_run: tuple[Any, str], value: Any) -> None:
    client, _ = hello_run
    error = error_of(client.get("/api/runs", params={"before": cursor(value)}), 400,
                     "invalid_cursor")
    assert "before" in error["message"]


@pytest.mark.parametrize("value", [str(2**63), "9" * 30, "\u00b2", "-1", "1e3"])
def test_a_bad_last_event_id_is_refused(hello_run: tuple[Any, str], value: str) -> None:
    client, run_id = hello_run
    response = client.get(f"/api/runs/{run_id}/events",
                          headers={"Last-Event-ID": value.encode("latin-1")})
    error = error_of(response, 400, "invalid_last_event_id")
    assert "Last-Event-ID" in error["message"]


def test_the_largest_last_event_id_and_after_are_answered(hello_run: tuple[Any, str]) -> None:
    client, run_id = hello_run
    largest = str(2**63 - 1)
    assert client.get(f"/api/runs/{run_id}/events",
                      headers={"Last-Event-ID": largest}).status_code == 204
    assert client.get(f"/api/runs/{run_id}/events",
                      params={"after": largest}).status_code == 204
    error = error_of(client.get(f"/api/runs/{run_id}/events", params={"after": 2**63}), 422)
    assert "after" in error["message"]


@pytest.mark.parametrize("reference", ["hello@99999999999999999999", f"hello@{2**63}",
                                       "hello@2147483648", "hello@\u00b2", "hello@0",
                                       "hello@-1", "hello@"])
def test_a_bad_version_in_a_reference_is_refused(hello_run: tuple[Any, str],
                                                 reference: str) -> None:
    client, _ = hello_run
    error = error_of(client.post("/api/runs", json={"workflow": reference}), 422,
                     "invalid_request")
    assert "version" in error["message"] and error["details"][0]["location"] == "body.workflow"


@pytest.mark.parametrize("version", [2**63, 10**30, 2**31])
def test_a_huge_version_query_is_not_found(hello_run: tuple[Any, str], version: int) -> None:
    client, _ = hello_run
    error = error_of(client.get("/api/workflows/hello", params={"version": version}), 404,
                     "workflow_not_found")
    assert str(version) in error["message"]


def test_a_lone_surrogate_is_refused_not_a_crash(make_client: Client, db_url: str) -> None:
    client = make_client(db_url, token=TOKEN)
    login = client.post("/api/login", content=b'{"token": "\\ud800"}', headers=JSON_TYPE)
    error = error_of(login, 422, "invalid_request")
    assert "token" in error["message"]
    bearer = {"Authorization": f"Bearer {TOKEN}", **JSON_TYPE}
    run = client.post("/api/runs", content=b'{"workflow": "\\ud800x"}', headers=bearer)
    assert error_of(run, 404, "workflow_not_found")["details"]["workflow"] == "\ud800x"


@pytest.mark.postgres
def test_huge_integers_on_postgres(make_client: Client, pg_database: str) -> None:
    client = make_client(pg_database, worker=False)
    register(client, HELLO)
    run_id = client.post("/api/runs", json={"workflow": "hello", "input": {"n": 1}}).json()
    for version in (2**31, 2**63, 10**30):
        error_of(client.get("/api/workflows/hello", params={"version": version}), 404)
    events = f"/api/runs/{run_id['run_id']}/events"
    error_of(client.get(events, headers={"Last-Event-ID": str(2**63)}), 400)
    error_of(client.get("/api/runs", params={"before": cursor([2**63, "x"])}), 400)
