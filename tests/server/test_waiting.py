"""``GET /api/runs/{id}``: a step waiting for approval carries ``waiting`` with the
rendered prompt and the content under review; every other entry has ``waiting: null``."""

from __future__ import annotations

from typing import Any

from .conftest import Client, register, wait_status

REVIEW: dict[str, Any] = {
    "name": "review",
    "steps": [{"id": "draft", "type": "transform", "value": {"text": "Hello {{ input.who }}"}},
              {"id": "sign_off", "type": "approval", "depends_on": ["draft"],
               "prompt": "Send the greeting to {{ input.who }}?",
               "show": {"draft": "{{ steps.draft.output.text }}", "channel": "email"}},
              {"id": "send", "type": "transform", "depends_on": ["sign_off"], "value": 1}],
}


def test_the_run_document_says_what_a_waiting_step_asks(make_client: Client) -> None:
    client = make_client()
    register(client, REVIEW)
    created = client.post("/api/runs", json={"workflow": "review", "input": {"who": "Ada"}})
    run_id = created.json()["run_id"]
    body = wait_status(client, run_id, ("waiting",))
    assert body["steps"]["sign_off"]["waiting"] == {
        "kind": "approval", "prompt": "Send the greeting to Ada?",
        "show": {"draft": "Hello Ada", "channel": "email"},
        "event": None, "until": None, "child_run_id": None}
    assert body["steps"]["draft"]["waiting"] is None
    assert body["steps"]["send"]["waiting"] is None
    response = client.post(f"/api/runs/{run_id}/steps/sign_off/approve", json={"approved": True})
    assert response.status_code == 200, response.text
    done = wait_status(client, run_id, ("completed",))
    assert done["steps"]["sign_off"]["waiting"] is None
