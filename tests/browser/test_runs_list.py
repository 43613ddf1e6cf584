"""The runs list of the web UI shows top-level runs; ticking "Child runs" adds the runs
of `workflow` steps, each naming (and linking) its parent."""

from __future__ import annotations

from typing import Any

from .conftest import Server
from .workflows import PARENT, PIPELINE


def test_child_runs_are_listed_only_when_asked_for(server: Server, page: Any) -> None:
    server.register(PIPELINE)
    server.register(PARENT)
    run_id = server.start("ui-parent")
    child_id = server.wait(run_id, "completed")["steps"]["child"]["child_run_id"]
    page.goto(f"{server.base}/#/runs")
    page.wait_for_selector(f"[data-run='{run_id}'] [data-status=completed]")
    assert page.locator(f"[data-run='{child_id}']").count() == 0
    page.check("input[name=children]")
    page.wait_for_function("location.hash.includes('children=1')")
    row = page.wait_for_selector(f"[data-run='{child_id}'] [data-parent='{run_id}']")
    assert "child of" in row.inner_text()
    page.screenshot(path="/tmp/ui-runs-children.png", full_page=True)
    assert page.locator(f"[data-run='{run_id}'] [data-parent]").count() == 0
    page.click(f"[data-run='{child_id}'] [data-parent] a")
    page.wait_for_function(f"location.hash === '#/runs/{run_id}'")
