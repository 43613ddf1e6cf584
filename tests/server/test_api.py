"""Every route of the HTTP API over memory and SQLite: happy paths and refusals."""

from __future__ import annotations

import threading

import pytest
import yaml

from plait.defschema import definition_schema
from waiting import wait_until

from .conftest import GATED, HELLO, Client, error_of, register, wait_status
from .untrusted_kit import store_directly

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_healthz_schema_docs_and_ui(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/api/schema").json() == definition_schema()
    assert client.get("/docs").status_code == 200
    assert "/api/runs/{run_id}/events" in client.get("/openapi.json").json()["paths"]
    index = client.get("/")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert client.get("/ui/index.html").status_code == 200


def test_a_run_started_over_the_api_completes(make_client: Client, db_url):
    client = make_client(db_url)
    created = register(client, HELLO)
    assert created == {"name": "hello", "version": 1, "fingerprint": created["fingerprint"]}
    response = client.post("/api/runs", json={"workflow": "hello", "input": {"n": 4}})
    assert response.status_code == 201
    started = response.json()
    assert set(started) == {"run_id", "status"}
    run = wait_status(client, started["run_id"], ("completed", "failed"))
    assert run["status"] == "completed" and run["output"] == "4!"
    assert {"run_id", "workflow", "version", "status", "output", "error", "duration_s",
            "steps"} <= set(run)
    assert set(run["steps"]["a"]) >= {"status", "attempts", "output", "error", "started_at",
                                     "finished_at", "skip_reason", "fallback_used"}
    assert [(a["step"], a["attempt"], a["status"]) for a in run["attempts"]] == \
        [("a", 1, "completed"), ("b", 1, "completed")]
    assert set(run["attempts"][0]) >= {"step", "attempt", "status", "started_at",
                                       "finished_at", "error", "worker"}
    pinned = client.post("/api/runs", json={"workflow": "hello@1", "input": {"n": 1}})
    assert pinned.status_code == 201
    assert wait_status(client, pinned.json()["run_id"], ("completed",))["version"] == 1


def test_workflows_are_listed_read_and_versioned(client):
    register(client, HELLO)
    changed = {**HELLO, "description": "second"}
    assert register(client, changed)["version"] == 2
    text = yaml.safe_dump({**GATED})
    response = client.post("/api/workflows", content=text,
                           headers={"Content-Type": "application/yaml"})
    assert response.status_code == 201 and response.json()["name"] == "gated"
    listed = client.get("/api/workflows").json()
    assert [(w["name"], w["version"]) for w in listed] == [("gated", 1), ("hello", 2)]
    assert set(listed[0]) == {"name", "version", "fingerprint", "created_at"}
    detail = client.get("/api/workflows/hello").json()
    assert detail["version"] == 2 and detail["versions"] == [1, 2]
    assert detail["definition"]["description"] == "second"
    old = client.get("/api/workflows/hello", params={"version": 1}).json()
    assert old["version"] == 1 and "description" not in old["definition"]
    error_of(client.get("/api/workflows/nope"), 404, "workflow_not_found")
    error_of(client.get("/api/workflows/hello", params={"version": 7}), 404,
             "workflow_not_found")
    conflict = {**HELLO, "version": 1, "description": "other"}
    error_of(client.post("/api/workflows", json=conflict), 409, "version_conflict")


def test_an_invalid_definition_lists_every_problem(client):
    bad = {"name": "Bad Name", "stepz": 1,
           "steps": [{"id": "a", "type": "transform"},
                     {"id": "b", "type": "transform", "value": 1, "depends_on": ["zz"]}]}
    error = error_of(client.post("/api/workflows", json=bad), 422, "invalid_definition")
    locations = {d["location"] for d in error["details"]}
    assert {"name", "stepz", "steps[0].value"} <= locations
    assert any("zz" in d["message"] for d in error["details"])
    assert all(set(d) == {"location", "message"} for d in error["details"])
    error = error_of(client.post("/api/workflows", content="name: [unclosed",
                                 headers={"Content-Type": "application/yaml"}), 422)
    assert "YAML" in error["details"][0]["message"]
    error_of(client.post("/api/workflows", content="{not json",
                         headers={"Content-Type": "application/json"}), 422)


def test_python_steps_may_only_call_allowed_modules(make_client: Client):
    client = make_client(allowed_modules=("server.steps_for_api",))
    bad = {"name": "shell", "steps": [
        {"id": "a", "type": "python", "call": "os:system", "with": {"command": "id"}},
        {"id": "b", "type": "transform", "value": 1,
         "fallback": {"call": "subprocess:run"}}]}
    error = error_of(client.post("/api/workflows", json=bad), 422, "invalid_definition")
    messages = {d["location"]: d["message"] for d in error["details"]}
    assert "'os'" in messages["steps[0].call"]
    assert "'subprocess'" in messages["steps[1].fallback.call"]
    assert "PLAIT_ALLOWED_MODULES" in messages["steps[0].call"]
    # a notification's call: runs in the server's process too
    notifying = {"name": "pager", "steps": [{"id": "a", "type": "transform", "value": 1}],
                 "notify": [{"on": ["run_failed"], "call": "os:abort"}]}
    error = error_of(client.post("/api/workflows", json=notifying), 422)
    assert "'os'" in {d["location"]: d["message"] for d in error["details"]}["notify[0].call"]
    # a prefix allows the module and its submodules, not a look-alike
    lookalike = {"name": "sly", "steps": [
        {"id": "a", "type": "python", "call": "server.steps_for_api_evil:x"}]}
    error_of(client.post("/api/workflows", json=lookalike), 422)
    good = {"name": "double", "steps": [
        {"id": "a", "type": "python", "call": "server.steps_for_api:double",
         "with": {"n": "{{ input.n }}"}}], "output": "{{ steps.a.output }}"}
    register(client, good)
    run_id = client.post("/api/runs", json={"workflow": "double",
                                            "input": {"n": 21}}).json()["run_id"]
    assert wait_status(client, run_id, ("completed",))["output"] == 42
    nothing = make_client(allowed_modules=())
    error_of(nothing.post("/api/workflows", json=good), 422, "invalid_definition")


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/x", "http://2130706433/", "http://0x7f000001/", "http://127.1/",
    "http://[::ffff:127.0.0.1]/", "http://[::ffff:a9fe:a9fe]/latest",
    "http://169.254.169.254/latest/meta-data", "http://10.1.2.3/", "http://localhost:8080/",
    "http://metadata.google.internal/", "https://192.168.0.1/admin",
])
def test_http_steps_may_not_name_private_addresses(client, url):
    definition = {"name": "fetch", "steps": [{"id": "get", "type": "http", "url": url}]}
    error = error_of(client.post("/api/workflows", json=definition), 422)
    assert error["details"][0]["location"] == "steps[0].url"
    assert "PLAIT_ALLOWED_HOSTS" in error["details"][0]["message"]


def test_allowed_hosts_exempt_an_address_and_runs_use_the_strict_policy(make_client: Client):
    from plait.steps.netpolicy import UNTRUSTED, NetworkPolicy

    policy = NetworkPolicy.from_environment({"PLAIT_ALLOWED_HOSTS": "10.9.9.9"},
                                            base=UNTRUSTED)
    client = make_client(http_policy=policy)
    ok = {"name": "fetch", "steps": [{"id": "get", "type": "http",
                                      "url": "http://10.9.9.9:1/"}]}
    register(client, ok)
    # a templated URL is judged when the run connects: loopback is refused then
    late = {"name": "late", "steps": [{"id": "get", "type": "http", "url": "{{ input.url }}",
                                       "retry": 0}]}
    register(client, late)
    run_id = client.post("/api/runs", json={
        "workflow": "late", "input": {"url": "http://[::ffff:127.0.0.1]:9/"}}).json()["run_id"]
    run = wait_status(client, run_id, ("failed", "completed"))
    assert run["status"] == "failed"
    assert "NetworkRefused" in run["steps"]["get"]["error"]
    assert "127.0.0.0/8" in run["steps"]["get"]["error"]


def test_run_input_is_checked(client):
    register(client, HELLO)
    error = error_of(client.post("/api/runs", json={"workflow": "hello", "input": {}}), 422,
                     "invalid_input")
    assert "input schema" in error["message"]
    error_of(client.post("/api/runs", json={"workflow": "missing"}), 404,
             "workflow_not_found")
    error_of(client.post("/api/runs", json={"workflow": "hello@9", "input": {"n": 1}}), 404)
    error_of(client.post("/api/runs", json={"workflow": "hello@x"}), 422)
    error = error_of(client.post("/api/runs", json={"input": {}}), 422, "invalid_request")
    assert error["details"][0]["location"] == "body.workflow"


def test_runs_are_paged_newest_first_with_a_cursor(make_client: Client, db_url):
    client = make_client(db_url)
    register(client, HELLO)
    ids = [client.post("/api/runs", json={"workflow": "hello", "input": {"n": n}}
                       ).json()["run_id"] for n in range(5)]
    for run_id in ids:
        wait_status(client, run_id, ("completed",))
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 2, **({"before": cursor} if cursor else {})}
        page = client.get("/api/runs", params=params).json()
        assert set(page) == {"runs", "next"}
        seen += [r["run_id"] for r in page["runs"]]
        pages += 1
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == ids[::-1] and pages == 3
    first = client.get("/api/runs", params={"limit": 1}).json()["runs"][0]
    assert set(first) >= {"run_id", "workflow", "version", "status", "created_at",
                          "duration_s"}
    assert client.get("/api/runs", params={"workflow": "other"}).json() == \
        {"runs": [], "next": None}
    done = client.get("/api/runs", params={"status": "completed", "workflow": "hello"})
    assert len(done.json()["runs"]) == 5
    error_of(client.get("/api/runs", params={"before": "garbage!"}), 400, "invalid_cursor")
    error_of(client.get("/api/runs", params={"status": "done"}), 400, "invalid_status")
    error_of(client.get("/api/runs", params={"limit": "0"}), 400, "invalid_limit")


def test_approve_continues_the_run_and_the_first_decision_stands(make_client: Client, db_url):
    client = make_client(db_url)
    register(client, GATED)
    run_id = client.post("/api/runs", json={"workflow": "gated"}).json()["run_id"]
    wait_status(client, run_id, ("waiting",))
    error_of(client.post(f"/api/runs/{run_id}/steps/draft/approve", json={"approved": True}),
             409, "not_waiting")
    error_of(client.post(f"/api/runs/{run_id}/steps/nope/approve", json={}), 404,
             "step_not_found")
    error_of(client.post("/api/runs/nope/steps/sign_off/approve", json={}), 404,
             "run_not_found")
    response = client.post(f"/api/runs/{run_id}/steps/sign_off/approve",
                           json={"approved": True, "data": {"note": "ok"}})
    assert response.status_code == 200, response.text
    run = wait_status(client, run_id, ("completed", "failed"))
    assert run["status"] == "completed" and run["steps"]["publish"]["output"] == "published"
    assert run["steps"]["sign_off"]["output"]["data"] == {"note": "ok"}
    error = error_of(client.post(f"/api/runs/{run_id}/steps/sign_off/approve",
                                 json={"approved": False}), 409)
    assert error["code"] in ("already_decided", "not_waiting")


def test_cancel_and_retry(make_client: Client, db_url):
    client = make_client(db_url)
    register(client, GATED)
    run_id = client.post("/api/runs", json={"workflow": "gated"}).json()["run_id"]
    wait_status(client, run_id, ("waiting",))
    response = client.post(f"/api/runs/{run_id}/cancel")
    assert response.status_code == 202
    assert wait_status(client, run_id, ("cancelled",))["steps"]["sign_off"]["status"] == \
        "cancelled"
    error_of(client.post("/api/runs/nope/cancel"), 404, "run_not_found")
    # retry reuses what completed and runs the rest
    response = client.post(f"/api/runs/{run_id}/retry", json={})
    assert response.status_code == 201
    new_id = response.json()["run_id"]
    new = wait_status(client, new_id, ("waiting",))
    assert new["retry_of"] == run_id and new["steps"]["draft"]["status"] == "completed"
    error_of(client.post(f"/api/runs/{run_id}/retry", json={"from": "nope"}), 404,
             "step_not_found")
    error_of(client.post("/api/runs/nope/retry", json={}), 404, "run_not_found")
    client.post(f"/api/runs/{new_id}/steps/sign_off/approve", json={"approved": True})
    wait_status(client, new_id, ("completed",))
    error_of(client.post(f"/api/runs/{new_id}/cancel"), 409, "run_ended")


def test_retry_with_a_new_input(client):
    flaky = {"name": "flaky", "steps": [
        {"id": "a", "type": "python", "call": "server.steps_for_api:fail_when",
         "with": {"fail": "{{ input.fail }}"}, "retry": 0}]}
    register(client, flaky)
    run_id = client.post("/api/runs", json={"workflow": "flaky",
                                            "input": {"fail": True}}).json()["run_id"]
    assert wait_status(client, run_id, ("failed", "completed"))["status"] == "failed"
    new_id = client.post(f"/api/runs/{run_id}/retry", json={"from": "a",
                                                            "input": {"fail": False}}
                         ).json()["run_id"]
    assert wait_status(client, new_id, ("completed", "failed"))["status"] == "completed"


def test_events_stream_every_event_and_resume_with_last_event_id(client):
    register(client, HELLO)
    run_id = client.post("/api/runs", json={"workflow": "hello",
                                            "input": {"n": 1}}).json()["run_id"]
    wait_status(client, run_id, ("completed",))
    events = _stream(client, run_id)
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 4
    assert {e["kind"] for e in events} >= {"run", "step", "attempt"}
    assert set(events[0]) == {"seq", "at", "kind", "step_id", "data"}
    assert events[-1]["kind"] == "run" and events[-1]["data"]["to"] == "completed"
    resumed = _stream(client, run_id, headers={"Last-Event-ID": "3"})
    assert [e["seq"] for e in resumed] == seqs[3:]
    assert [e["seq"] for e in _stream(client, run_id, params={"after": 4})] == seqs[4:]
    done = client.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": str(seqs[-1])})
    assert done.status_code == 204  # an EventSource stops reconnecting
    error_of(client.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "x"}), 400)
    error_of(client.get("/api/runs/nope/events"), 404, "run_not_found")


def test_events_are_live_until_the_run_ends(client):
    register(client, GATED)
    run_id = client.post("/api/runs", json={"workflow": "gated"}).json()["run_id"]
    wait_status(client, run_id, ("waiting",))

    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    thread = threading.Thread(target=approve_once_followed, args=(client, run_id))
    thread.start()
    events = _stream(client, run_id)
    thread.join()
    # approved only once the stream was open: the stream stayed open while the run waited
    kinds = [(e["kind"], e["step_id"], e["data"].get("to")) for e in events]
    assert ("step", "sign_off", "waiting") in kinds
    assert ("step", "publish", "completed") in kinds
    assert kinds[-1] == ("run", None, "completed")
    # the streams that ended left nothing behind for the run (a long-lived server
    # streams many runs)
    _stream(client, run_id)
    assert runtime.watched() == 0


def approve_once_followed(client, run_id: str) -> None:
    """Approve the ``sign_off`` step of ``run_id`` once an event stream follows the run."""
    runtime = client.app.state.runtime
    wait_until(lambda: runtime.watched() > 0, what=f"an event stream to follow {run_id}")
    approved = client.post(f"/api/runs/{run_id}/steps/sign_off/approve",
                           json={"approved": True})
    assert approved.status_code == 200, approved.text


def _stream(client, run_id: str, **kw) -> list[dict]:
    import json

    with client.stream("GET", f"/api/runs/{run_id}/events", **kw) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        text = response.read().decode()
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines()
                      if ": " in line and not line.startswith(":"))
        if "data" in fields:
            event = json.loads(fields["data"])
            assert int(fields["id"]) == event["seq"]
            events.append(event)
    return events


def test_errors_have_one_shape(client):
    error_of(client.get("/nope"), 404, "not_found")
    error_of(client.get("/api/runs/nope"), 404, "run_not_found")
    error_of(client.delete("/api/runs"), 405, "method_not_allowed")
    error_of(client.post("/api/runs", content="[1", headers={"Content-Type":
                                                             "application/json"}), 422)


def test_secrets_are_never_in_responses(client, monkeypatch):
    monkeypatch.setenv("PLAIT_SECRET_API_KEY", "hunter2-very-secret")
    leaky = {"name": "leaky", "steps": [
        {"id": "a", "type": "transform", "value": {"key": "{{ secrets.API_KEY }}"}}],
        "output": "{{ steps.a.output.key }}"}
    refused = client.post("/api/workflows", json=leaky)  # a secret in an output
    assert error_of(refused, 422)["details"][0]["location"] == "steps[0].value.key"
    store_directly(client, leaky)  # as `plait run` on the same database would
    run_id = client.post("/api/runs", json={"workflow": "leaky"}).json()["run_id"]
    assert wait_status(client, run_id, ("completed", "failed"))["status"] == "failed"
    for path in (f"/api/runs/{run_id}", f"/api/runs/{run_id}/events", "/api/runs",
                 "/api/workflows/leaky"):
        assert "hunter2" not in client.get(path).text
