"""GET /api/runs/{id} names the child runs of `workflow` steps (as plait show --json), and
a child run names its parent: the web UI links them both ways."""

from __future__ import annotations

from .conftest import register, wait_status


def test_a_workflow_step_names_its_child_run_and_the_child_its_parent(make_client, db_url):
    client = make_client(db_url)
    register(client, {"name": "inner", "steps": [{"id": "one", "type": "transform",
                                                    "value": "{{ input.n * 2 }}"}]})
    register(client, {"name": "outer", "steps": [
        {"id": "call", "type": "workflow", "workflow": "inner", "input": {"n": 21}},
        {"id": "plain", "type": "transform", "value": 1}]})
    run_id = client.post("/api/runs", json={"workflow": "outer", "input": {}}).json()["run_id"]
    wait_status(client, run_id, ("completed",))
    run = client.get(f"/api/runs/{run_id}").json()
    child_id = run["steps"]["call"]["child_run_id"]
    assert run["steps"]["call"]["child_run_ids"] == [child_id]
    assert "child_run_id" not in run["steps"]["plain"]
    child = client.get(f"/api/runs/{child_id}").json()
    assert child["parent_run_id"] == run_id
    assert child["workflow"] == "inner"
    assert child["steps"]["one"]["output"] == 42
