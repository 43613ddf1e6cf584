"""The web UI in headless chromium against a real plait serve app: start a run from the
workflows page, watch it complete on the run page (graph, Gantt, step detail), approve a
waiting step, filter the runs list, log in with a token."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import TOKEN, Server, serve
from .workflows import APPROVAL, FAILING, PARENT, PIPELINE

# wait_for_function gets arrow functions, never bare expressions: Playwright runs an
# expression with eval(), which the UI's Content-Security-Policy forbids (no unsafe-eval)
SHOTS = "/tmp"


@pytest.fixture(scope="module", autouse=True)
def registered(server: Server) -> None:
    server.register(PIPELINE)
    server.register(APPROVAL)
    server.register(FAILING)


def test_start_a_run_from_the_workflows_page_and_watch_it_complete(server: Server, page: Any) -> None:
    page.goto(f"{server.base}/#/workflows")
    page.click("[data-workflow=ui-pipeline]")
    # the version's graph: every step is a node, the condition's branches are edges
    page.wait_for_selector("svg.graph [data-node=long_name]")
    assert page.locator("svg.graph [data-node]").count() == len(PIPELINE["steps"])
    assert page.locator("[data-edge='long_name->shout']").count() == 1
    assert page.locator("[data-edge='greet->pause']").count() == 1
    page.screenshot(path=f"{SHOTS}/ui-workflows.png", full_page=True)

    page.fill("textarea[name=input]", '{"name": "Grace"}')
    page.click("[data-testid=start-run] button[type=submit]")
    page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+"))
    run_id = page.url.rsplit("/", 1)[-1]
    # live: the page shows the run before it ends (pause is a 0.6 s delay) ...
    page.wait_for_selector("[data-node=greet][data-status=completed]")
    assert server.run(run_id)["workflow"] == "ui-pipeline"
    # ... and every node reaches its final state without a reload
    page.wait_for_selector("[data-testid=run-status][data-status=completed]", timeout=20_000)
    page.wait_for_selector("[data-node=done][data-status=completed]")
    # the updates came over the event stream (SSE), not only from re-reading the run
    assert page.evaluate("window.__plaitRunPage.events") > 0
    assert page.get_attribute("[data-node=shout]", "data-status") == "completed"
    assert page.get_attribute("[data-node=whisper]", "data-status") == "skipped"
    # the Gantt chart has a bar per step that ran
    bars = page.locator("[data-testid=gantt] .bar")
    assert bars.count() >= 5
    # a delay waits holding nothing: an attempt that parks it, one that ends it
    assert page.locator("[data-testid=gantt] .bar[data-step=pause]").count() == 2
    # a step's detail: attempts, output as JSON
    page.click("[data-node=shout]")
    detail = page.locator("[data-testid=step-detail]")
    detail.locator("[data-testid=attempts]").wait_for()
    assert '"GRACE"' in detail.inner_text()
    page.screenshot(path=f"{SHOTS}/ui-run.png", full_page=True)


def test_bad_input_is_refused_with_the_servers_message(server: Server, page: Any) -> None:
    page.goto(f"{server.base}/#/workflows/ui-pipeline")
    page.fill("textarea[name=input]", '{"name": ""}')
    page.click("[data-testid=start-run] button[type=submit]")
    error = page.locator("[data-testid=start-run] .errbox")
    error.wait_for()
    assert "name" in error.inner_text()
    page.fill("textarea[name=input]", "{not json")
    page.click("[data-testid=start-run] button[type=submit]")
    page.wait_for_function("() => document.querySelector('[data-testid=start-run] .errbox')?.textContent.includes('not valid JSON')")


def test_approve_a_waiting_step_and_see_the_run_complete(server: Server, page: Any) -> None:
    run_id = server.start("ui-approval")
    server.wait(run_id, "waiting")
    page.goto(f"{server.base}/#/runs/{run_id}")
    page.wait_for_selector("[data-node=sign_off][data-status=waiting]")
    banner = page.locator("[data-testid=approvals]")
    assert "sign_off" in banner.inner_text()
    page.screenshot(path=f"{SHOTS}/ui-run-waiting.png", full_page=True)
    page.click("[data-node=sign_off]")
    page.fill("[data-testid=step-detail] textarea", '{"ticket": "CHG-7"}')
    page.click("[data-testid=step-detail] [data-action=approve]")
    page.wait_for_selector("[data-testid=run-status][data-status=completed]")
    page.wait_for_selector("[data-node=release][data-status=completed]")
    assert banner.is_hidden()
    run = server.run(run_id)
    assert run["steps"]["sign_off"]["output"]["approved"] is True
    assert run["steps"]["sign_off"]["output"]["data"] == {"ticket": "CHG-7"}


def test_reject_fails_the_run(server: Server, page: Any) -> None:
    run_id = server.start("ui-approval")
    server.wait(run_id, "waiting")
    page.goto(f"{server.base}/#/runs/{run_id}")
    page.click("[data-testid=approvals] [data-action=reject]")
    page.wait_for_selector("[data-testid=run-status][data-status=failed]")
    assert page.get_attribute("[data-node=release]", "data-status") == "upstream_failed"
    # a finished run offers a retry, which opens the new run's page
    page.click("[data-action=retry]")
    page.click("[data-action=retry-go]")
    page.wait_for_function(f"() => !location.hash.includes('{run_id}')")
    page.wait_for_selector("[data-node=sign_off][data-status=waiting]")
    new_id = page.url.rsplit("/", 1)[-1]
    assert new_id != run_id


def test_cancel_a_waiting_run(server: Server, page: Any) -> None:
    run_id = server.start("ui-approval")
    server.wait(run_id, "waiting")
    page.goto(f"{server.base}/#/runs/{run_id}")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("[data-action=cancel]")
    page.wait_for_selector("[data-testid=run-status][data-status=cancelled]")
    assert server.run(run_id)["status"] == "cancelled"


def test_runs_list_filters_and_live_status(server: Server, page: Any) -> None:
    done = server.start("ui-pipeline", {"name": "Ada"})
    server.wait(done, "completed")
    waiting = server.start("ui-approval")
    server.wait(waiting, "waiting")
    page.goto(f"{server.base}/#/runs")
    page.wait_for_selector(f"[data-run='{waiting}']")
    page.wait_for_selector(f"[data-run='{done}'] [data-status=completed]")
    page.screenshot(path=f"{SHOTS}/ui-runs.png", full_page=True)
    # live: approving elsewhere turns the row completed without a reload
    resp = server.http.post(f"/api/runs/{waiting}/steps/sign_off/approve", json={"approved": True})
    assert resp.status_code == 200, resp.text
    page.wait_for_selector(f"[data-run='{waiting}'] [data-status=completed]", timeout=10_000)
    # filters go into the address and narrow the list
    page.select_option("select[name=workflow]", "ui-pipeline")
    page.wait_for_function("() => location.hash.includes('workflow=ui-pipeline')")
    page.wait_for_selector(f"[data-run='{waiting}']", state="detached")
    # the list is drawn anew: wait for its row before counting it
    page.wait_for_selector(f"[data-run='{done}']")
    assert page.locator(f"[data-run='{done}']").count() == 1
    page.select_option("select[name=status]", "failed")
    page.wait_for_selector(f"[data-run='{done}']", state="detached")


def test_runs_list_pages_with_the_next_cursor(server: Server, page: Any) -> None:
    ids = [server.start("ui-pipeline", {"name": f"n{i}"}) for i in range(27)]
    for run_id in ids:
        server.wait(run_id, "completed")
    page.goto(f"{server.base}/#/runs?workflow=ui-pipeline")
    page.wait_for_selector("[data-run]")
    assert page.locator("[data-run]").count() == 25
    page.click("text=Load older runs")
    page.wait_for_function("() => document.querySelectorAll('[data-run]').length > 25")
    shown = page.eval_on_selector_all("[data-run]", "rows => rows.map(r => r.dataset.run)")
    assert set(ids) <= set(shown)
    assert len(shown) == len(set(shown))


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("locked") / "ui.db"
    yield from serve(f"sqlite:///{db}", TOKEN)


def test_login_form_with_a_token(locked: Server, page: Any) -> None:
    locked.register(APPROVAL)
    run_id = locked.start("ui-approval")
    locked.wait(run_id, "waiting")
    page.goto(f"{locked.base}/#/runs/{run_id}")
    form = page.locator("[data-testid=login]")
    form.wait_for()
    page.fill("input[name=token]", "wrong")
    page.click("[data-testid=login] button")
    page.wait_for_selector("[data-testid=login] .errbox:not([hidden])")
    page.fill("input[name=token]", TOKEN)
    page.click("[data-testid=login] button")
    page.wait_for_selector("[data-node=sign_off][data-status=waiting]")
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies["plait_session"]["httpOnly"] is True
    # a state-changing call from the UI carries the CSRF header (approve works)
    page.click("[data-testid=approvals] [data-action=approve]")
    page.wait_for_selector("[data-testid=run-status][data-status=completed]")
    page.click("#logout")
    form.wait_for()


def test_a_big_run_page_is_clustered_and_virtualized(server: Server, page: Any) -> None:
    """1,500 parallel steps: the graph draws the wide layer as one cluster node, the steps
    table and the timeline keep a few dozen rows in the DOM, and a cluster click filters
    the table.  (benchmarks/ui_run_page.py measures 10,000 steps.)"""
    from .workflows import fan_out

    definition = fan_out(1500)
    server.register(definition)
    run_id = server.start(definition["name"])
    server.wait(run_id, "completed", timeout=60)
    page.goto(f"{server.base}/#/runs/{run_id}")
    page.wait_for_selector("[data-node=join][data-status=completed]")
    nodes = page.locator("svg.graph [data-node]")
    assert nodes.count() == 3  # start, the 1,500-step cluster, join
    cluster = page.locator("svg.graph [data-node^='layer:']")
    assert cluster.get_attribute("data-status") == "completed"
    assert "1,500 steps" in cluster.text_content()
    assert page.locator(".vlist.steps .vrow").count() < 60
    assert page.locator("[data-testid=gantt] .vrow").count() < 60
    page.screenshot(path=f"{SHOTS}/ui-run-big.png", full_page=True)
    cluster.click()
    page.fill("input[type=search]", "s0149")
    page.wait_for_selector(".vlist.steps [data-step=s01499]")
    assert page.locator(".vlist.steps .vrow").count() == 10
    stats = page.evaluate("window.__plaitRunPage")
    assert stats["bytes"] > 100_000


def test_a_run_of_more_than_one_page_is_drawn_whole(server: Server, page: Any) -> None:
    """2,101 steps: the API answers in pages of 2,000; the run page reads them all, so
    an item of the second page is in the table with its output and attempt."""
    from .workflows import wide_map

    definition = wide_map(2100)
    server.register(definition)
    run_id = server.start(definition["name"], {"xs": list(range(2100))})
    first = server.wait(run_id, "completed", timeout=60)
    assert first["steps_next"] and "m[2050]" not in first["steps"]
    page.goto(f"{server.base}/#/runs/{run_id}?step=m[2050]")
    page.wait_for_selector(".vlist.steps .vrow")
    page.fill("input[type=search]", "m[2050]")
    page.wait_for_selector('.vlist.steps [data-step="m[2050]"]')
    detail = page.locator("[data-testid=step-detail]")
    assert "m[2050]" in detail.text_content()
    assert "2050" in detail.locator("pre, .json").first.text_content()
    assert detail.locator("[data-testid=attempts] tbody tr").count() == 1
    assert page.evaluate("window.__plaitRunPage")["pages"] == 2
    assert "2,101" in page.locator("dl.facts").text_content()


def test_a_deep_definition_is_drawn_in_bands(server: Server, page: Any) -> None:
    """600 steps in a chain: the workflows page draws at most 40 band nodes, each naming
    its layers, with the edges between consecutive bands."""
    from .workflows import chain

    server.register(chain(600))
    page.goto(f"{server.base}/#/workflows/chain-600")
    page.wait_for_selector("svg.graph [data-node]")
    nodes = page.locator("svg.graph [data-node]")
    assert 2 <= nodes.count() <= 40
    assert "layers 1–15" in page.locator("svg.graph [data-node='layer:0'] title").text_content()
    assert page.locator("svg.graph path.edge").count() == nodes.count() - 1


def test_a_step_logs_live_and_a_failure_shows_its_error(server: Server, page: Any) -> None:
    run_id = server.start("ui-failing")
    page.goto(f"{server.base}/#/runs/{run_id}?step=work")
    detail = page.locator("[data-testid=step-detail]")
    # the log line arrives over the event stream while the step still runs
    page.wait_for_function(
        "() => document.querySelector('[data-testid=step-detail]')?.textContent.includes('halfway there')")
    assert page.get_attribute("[data-node=work]", "data-status") in {"running", "queued"}
    page.wait_for_selector("[data-testid=run-status][data-status=failed]")
    assert page.get_attribute("[data-node=boom]", "data-status") == "failed"
    assert page.get_attribute("[data-node=after]", "data-status") == "upstream_failed"
    page.click("[data-node=boom]")
    detail.locator(".errbox").first.wait_for()
    assert "the disk is full" in detail.locator(".errbox").first.inner_text()
    # every attempt the API lists is in the table
    attempts = [a for a in server.run(run_id)["attempts"] if a["step"] == "boom"]
    assert attempts
    assert detail.locator("[data-testid=attempts] tbody tr .pill").count() == len(attempts)
    assert '"the disk is full"' in detail.inner_text()  # the rendered `with` template
    page.screenshot(path=f"{SHOTS}/ui-run-failed.png", full_page=True)


def test_a_workflow_step_links_to_its_child_run_and_back(server: Server, page: Any) -> None:
    server.register(PARENT)
    run_id = server.start("ui-parent")
    run = server.wait(run_id, "completed")
    child_id = run["steps"]["child"]["child_run_id"]
    page.goto(f"{server.base}/#/runs/{run_id}?step=child")
    page.click(f"[data-testid=step-detail] [data-child-run='{child_id}']")
    page.wait_for_selector("[data-node=done][data-status=completed]")
    assert child_id in page.url
    page.wait_for_selector(f"a[href='#/runs/{run_id}']")  # the parent run, in the header
