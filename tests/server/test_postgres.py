"""The API over PostgreSQL: the server is the worker that executes its runs,
and with --no-worker it only stores them."""

from __future__ import annotations

import time

import pytest

from .conftest import GATED, HELLO, Client, register, wait_status

pytestmark = [pytest.mark.postgres, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_runs_started_over_the_api_complete_on_the_servers_worker(
        make_client: Client, pg_database: str) -> None:
    client = make_client(pg_database)
    register(client, HELLO)
    run_id = client.post("/api/runs", json={"workflow": "hello",
                                            "input": {"n": 2}}).json()["run_id"]
    run = wait_status(client, run_id, ("completed", "failed"), timeout=20)
    assert run["status"] == "completed" and run["output"] == "2!"
    assert run["attempts"][0]["worker"]  # executed by the server's worker
    register(client, GATED)
    gated = client.post("/api/runs", json={"workflow": "gated"}).json()["run_id"]
    wait_status(client, gated, ("waiting",), timeout=20)
    approved = client.post(f"/api/runs/{gated}/steps/sign_off/approve",
                           json={"approved": True})
    assert approved.status_code == 200
    assert wait_status(client, gated, ("completed",), timeout=20)["status"] == "completed"
    page = client.get("/api/runs", params={"limit": 1, "workflow": "gated"}).json()
    assert page["runs"][0]["run_id"] == gated and page["next"] is None


def test_without_a_worker_the_runs_wait_for_one(make_client: Client,
                                                pg_database: str) -> None:
    client = make_client(pg_database, worker=False)
    register(client, HELLO)
    run_id = client.post("/api/runs", json={"workflow": "hello",
                                            "input": {"n": 3}}).json()["run_id"]
    time.sleep(0.5)
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "pending"
    make_client(pg_database)  # a server with a worker takes the run
    assert wait_status(client, run_id, ("completed",), timeout=20)["output"] == "3!"


def test_events_stream_live_on_postgres(make_client: Client, pg_database: str) -> None:
    import threading

    from .test_api import _stream, approve_once_followed

    client = make_client(pg_database)
    register(client, GATED)
    run_id = client.post("/api/runs", json={"workflow": "gated"}).json()["run_id"]
    wait_status(client, run_id, ("waiting",), timeout=20)
    thread = threading.Thread(target=approve_once_followed, args=(client, run_id))
    thread.start()
    events = _stream(client, run_id)
    thread.join()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert (events[-1]["kind"], events[-1]["data"]["to"]) == ("run", "completed")


def test_cancel_and_retry_on_postgres(make_client: Client, pg_database: str) -> None:
    client = make_client(pg_database)
    register(client, GATED)
    run_id = client.post("/api/runs", json={"workflow": "gated"}).json()["run_id"]
    wait_status(client, run_id, ("waiting",), timeout=20)
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 202
    wait_status(client, run_id, ("cancelled",), timeout=20)
    new_id = client.post(f"/api/runs/{run_id}/retry", json={}).json()["run_id"]
    new = wait_status(client, new_id, ("waiting",), timeout=20)
    assert new["retry_of"] == run_id and new["steps"]["draft"]["status"] == "completed"
