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


def test_the_runs_list_shows_top_level_runs_unless_children_are_asked_for(make_client,
                                                                          db_url):
    client = make_client(db_url)
    register(client, {"name": "leaf", "steps": [{"id": "one", "type": "transform",
                                                   "value": 1}]})
    register(client, {"name": "root", "steps": [
        {"id": "call", "type": "workflow", "workflow": "leaf", "input": {}}]})
    run_id = client.post("/api/runs", json={"workflow": "root", "input": {}}).json()["run_id"]
    wait_status(client, run_id, ("completed",))
    child_id = client.get(f"/api/runs/{run_id}").json()["steps"]["call"]["child_run_id"]

    page = client.get("/api/runs", params={"limit": 1}).json()
    assert [r["run_id"] for r in page["runs"]] == [run_id] and page["next"] is None
    assert page["runs"][0]["parent_run_id"] is None
    assert client.get("/api/runs", params={"workflow": "leaf"}).json()["runs"] == []

    first = client.get("/api/runs", params={"children": "true", "limit": 1}).json()
    assert [(r["run_id"], r["parent_run_id"]) for r in first["runs"]] == [(child_id, run_id)]
    rest = client.get("/api/runs", params={"children": "true", "limit": 1,
                                           "before": first["next"]}).json()
    assert [r["run_id"] for r in rest["runs"]] == [run_id] and rest["next"] is None


def test_a_definition_written_at_run_time_is_a_linked_child_with_a_stored_graph(
        make_client, db_url):
    """The child of a `definition:` template is stored as workflow PARENT.STEP: the run
    page of the child draws its graph from GET /api/workflows/PARENT.STEP?version=V."""
    client = make_client(db_url)
    register(client, {"name": "outer", "steps": [
        {"id": "call", "type": "workflow", "definition": "{{ input.graph }}",
         "input": {"n": 21}}]})
    graph = {"name": "picked-by-the-planner", "steps": [
        {"id": "one", "type": "transform", "value": "{{ input.n * 2 }}"},
        {"id": "two", "type": "transform", "value": "{{ steps.one.output + 1 }}",
         "depends_on": ["one"]}]}
    run_id = client.post("/api/runs", json={"workflow": "outer",
                                            "input": {"graph": graph}}).json()["run_id"]
    wait_status(client, run_id, ("completed",))
    run = client.get(f"/api/runs/{run_id}").json()
    child_id = run["steps"]["call"]["child_run_id"]
    assert run["steps"]["call"]["output"] == {"two": 43}
    child = client.get(f"/api/runs/{child_id}").json()
    assert (child["parent_run_id"], child["workflow"], child["version"]) == (
        run_id, "outer.call", 1)
    stored = client.get("/api/workflows/outer.call", params={"version": 1}).json()
    assert [s["id"] for s in stored["definition"]["steps"]] == ["one", "two"]
    assert stored["definition"]["steps"][1]["depends_on"] == ["one"]
