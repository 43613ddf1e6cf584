"""The run page of a child run whose definition was written at run time (stored as
workflow PARENT.STEP): its graph is drawn from the stored version, its title links that
workflow, and the parent's step links the child."""

from __future__ import annotations

from typing import Any

from .conftest import Server

PLANNER = {"name": "ui-planner", "steps": [
    {"id": "run_plan", "type": "workflow", "definition": "{{ input.graph }}"}]}
GRAPH = {"name": "whatever-the-planner-says", "steps": [
    {"id": "first", "type": "transform", "value": 1},
    {"id": "second", "type": "transform", "value": 2},
    {"id": "joined", "type": "transform", "depends_on": ["first", "second"],
     "value": "{{ steps.first.output + steps.second.output }}"}]}


def test_the_child_run_page_draws_the_written_graph(server: Server, page: Any) -> None:
    server.register(PLANNER)
    run_id = server.start("ui-planner", {"graph": GRAPH})
    parent = server.wait(run_id, "completed")
    child_id = parent["steps"]["run_plan"]["child_run_id"]
    assert parent["steps"]["run_plan"]["output"] == {"joined": 3}
    page.goto(f"{server.base}/#/runs/{child_id}")
    page.wait_for_selector("[data-node=joined][data-status=completed]")
    assert page.locator("svg.graph [data-node]").count() == 3
    assert page.locator("a[href^='#/workflows/ui-planner.run_plan']").count() >= 1
    page.screenshot(path="/tmp/ui-written-child.png", full_page=True)
