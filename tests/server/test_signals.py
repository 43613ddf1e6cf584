"""``POST /api/runs/{id}/signals/{name}``: an event for the run's waits on that name;
the run continues.  The first event of a name stands (409), a finished run refuses
(409 naming its status), bad names and data are refused (422) storing nothing."""

from __future__ import annotations

from typing import Any

from .conftest import Client, error_of, register, wait_status

PAID: dict[str, Any] = {
    "name": "paid",
    "steps": [{"id": "paid", "type": "event", "event": "paid", "timeout": "1h"},
              {"id": "receipt", "type": "transform", "depends_on": ["paid"],
               "value": {"amount": "{{ steps.paid.output.amount }}"}}],
}


def _waiting_run(client: Any) -> str:
    register(client, PAID)
    run_id = client.post("/api/runs", json={"workflow": "paid"}).json()["run_id"]
    body = wait_status(client, run_id, ("waiting",))
    waiting = body["steps"]["paid"]["waiting"]
    assert (waiting["kind"], waiting["event"]) == ("event", "paid")
    assert waiting["until"] is not None and waiting["prompt"] is None
    return str(run_id)


def test_an_event_continues_the_run(make_client: Client, db_url: str) -> None:
    client = make_client(db_url)
    run_id = _waiting_run(client)
    sent = client.post(f"/api/runs/{run_id}/signals/paid", json={"data": {"amount": 5}})
    assert sent.status_code == 200, sent.text
    assert sent.json() == {"run_id": run_id, "event": "paid"}
    done = wait_status(client, run_id, ("completed",))
    assert done["steps"]["receipt"]["output"] == {"amount": 5}
    assert done["steps"]["paid"]["waiting"] is None
    late = error_of(client.post(f"/api/runs/{run_id}/signals/other", json={}), 409,
                    "run_finished")
    assert late["details"] == {"status": "completed"} and "completed" in late["message"]


def test_the_first_event_stands(make_client: Client, db_url: str) -> None:
    client = make_client(db_url)
    run_id = _waiting_run(client)
    assert client.post(f"/api/runs/{run_id}/signals/early", json={"data": 1}).status_code \
        == 200
    second = error_of(client.post(f"/api/runs/{run_id}/signals/early", json={"data": 2}),
                      409, "already_sent")
    assert "first one sent stands" in second["message"]
    assert second["details"]["event"] == "early"


def test_bad_events_are_refused(make_client: Client) -> None:
    client = make_client()
    run_id = _waiting_run(client)
    error_of(client.post("/api/runs/" + "0" * 32 + "/signals/paid", json={}), 404)
    for name, message in (("a/b", "cannot contain '/'"), ("x" * 200, "at most 199"),
                          ("", "cannot be empty")):
        refused = error_of(client.post(f"/api/runs/{run_id}/signals/{name}", json={}),
                           422, "invalid_event")
        assert message in refused["message"]
    error_of(client.post(f"/api/runs/{run_id}/signals/paid", json={"nope": 1}), 422)
    error_of(client.post(f"/api/runs/{run_id}/signals/paid", content=b"{not json",
                         headers={"Content-Type": "application/json"}), 422)
    big = client.post(f"/api/runs/{run_id}/signals/paid",
                      json={"data": "x" * (1 << 20)})
    assert big.status_code == 413, big.text
    assert client.get(f"/api/runs/{run_id}").json()["steps"]["paid"]["status"] == "waiting"


def test_a_session_needs_the_csrf_token(make_client: Client) -> None:
    client = make_client(token="t" * 32)
    headers = {"Authorization": "Bearer " + "t" * 32}
    register(client, PAID, headers=headers)
    run_id = client.post("/api/runs", json={"workflow": "paid"}, headers=headers
                         ).json()["run_id"]
    wait_status(client, run_id, ("waiting",), headers=headers)
    error_of(client.post(f"/api/runs/{run_id}/signals/paid", json={}), 401, "unauthorized")
    login = client.post("/api/login", json={"token": "t" * 32})
    assert login.status_code == 200, login.text
    error_of(client.post(f"/api/runs/{run_id}/signals/paid", json={}), 403, "csrf_failed")
    sent = client.post(f"/api/runs/{run_id}/signals/paid", json={"data": {"amount": 1}},
                       headers={"X-CSRF-Token": client.cookies["plait_csrf"]})
    assert sent.status_code == 200, sent.text
