"""The run page fits real pipelines: an approval shows its prompt and the content under
review (as text), the graph fits its box at 1400x1000 and zooms, the timeline folds a
long wait, failed and upstream_failed differ at a glance, a failed run's header names the
failing step and its error, and states are the store's (a waiting approval's attempt is
`waiting`; a map whose items run is `running`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Server, open_page
from .workflows import FAILING, MAP_RUNNING, REVIEW, chain

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
WAIT_S = 3.5  # how long the approval waits: most of the run, so the timeline folds it


@pytest.fixture(scope="module", autouse=True)
def registered(server: Server) -> None:
    for definition in (REVIEW, FAILING, MAP_RUNNING, chain(8)):
        server.register(definition)


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    """A 1400x1000 page (the size the graph must fit at)."""
    yield from open_page(browser, 1400, 1000)


def _box(page: Any, selector: str) -> dict[str, float]:
    return dict(page.eval_on_selector(selector, "e => e.getBoundingClientRect().toJSON()"))


def _nodes_inside_graph(page: Any) -> list[str]:
    """The nodes whose box is not wholly inside the graph's box (none when it fits)."""
    return list(page.evaluate("""() => {
      const box = document.querySelector('[data-testid=graph]').getBoundingClientRect();
      return [...document.querySelectorAll('svg.graph [data-node] rect.box')].filter((r) => {
        const b = r.getBoundingClientRect();
        return b.left < box.left - 0.5 || b.right > box.right + 0.5
          || b.top < box.top - 0.5 || b.bottom > box.bottom + 0.5;
      }).map((r) => r.parentNode.dataset.node);
    }"""))


def _work_bar_width(page: Any, step: str) -> float:
    return float(_box(page, f"[data-testid=gantt] .bar[data-step={step}]")["width"])


def test_an_approval_shows_its_prompt_and_content_and_the_wait_folds(
        server: Server, page: Any) -> None:
    run_id = server.start("ui-review", {"version": "2.4.0"})
    run = server.wait(run_id, "waiting")
    waiting = run["steps"]["review"]["waiting"]
    assert waiting["prompt"] == "Publish the release notes of 2.4.0 to customers?"
    time.sleep(WAIT_S)  # the wait becomes most of the run
    page.goto(f"{server.base}/#/runs/{run_id}")
    banner = page.locator("[data-testid=approvals]")
    prompt = banner.locator("[data-testid=approval-prompt]")
    prompt.wait_for()
    assert prompt.inner_text() == "Publish the release notes of 2.4.0 to customers?"
    show = banner.locator("[data-testid=approval-show]")
    assert "Approvals show what to decide" in show.inner_text()
    # the author's markup is text, never HTML
    assert "<b>markup stays text</b>" in show.inner_text()
    assert show.locator("b").count() == 0
    # the approval's attempt waits, as its step does
    page.click("[data-node=review]")
    panel = page.locator("[data-testid=step-detail]")
    assert "2.4.0 to customers?" in panel.locator("[data-testid=approval-panel]").inner_text()
    pill = panel.locator("[data-testid=attempts] tbody .pill").first
    assert pill.get_attribute("data-status") == "waiting"
    assert page.locator(".vlist.steps [data-step=review] .pill").inner_text() == "waiting"
    # the timeline folds the wait; the work around it keeps most of the width
    page.wait_for_selector("[data-testid=gantt] .bar.folded[data-step=review]")
    folded = page.locator("[data-testid=gantt] .bar.folded")
    assert "review waited" in folded.get_attribute("title")
    assert folded.inner_text().endswith(" s")  # its duration, written on it
    assert _work_bar_width(page, "unit_tests") > 60
    page.screenshot(path=str(IMAGES / "run-waiting.png"), full_page=True)

    page.click("[data-testid=approvals] [data-action=approve]")
    page.wait_for_selector("[data-testid=run-status][data-status=completed]")
    page.wait_for_selector("[data-node=announce][data-status=completed]")
    assert page.locator("[data-testid=approvals]").is_hidden()
    page.wait_for_selector("[data-testid=gantt] .bar.folded[data-step=review]")
    assert _work_bar_width(page, "unit_tests") > 60
    assert _work_bar_width(page, "publish") > 40
    page.evaluate("document.getElementById('toast').hidden = true")
    page.screenshot(path=str(IMAGES / "run-approved.png"), full_page=True)


def test_the_graph_fits_its_box_and_zooms(server: Server, page: Any) -> None:
    run_id = server.start("chain-8")
    server.wait(run_id, "completed")
    page.goto(f"{server.base}/#/runs/{run_id}")
    page.wait_for_selector("[data-node=c0007][data-status=completed]")
    assert page.locator("svg.graph [data-node]").count() == 8
    assert _nodes_inside_graph(page) == []
    fitted = page.get_attribute("svg.graph", "viewBox")
    page.click("[data-action=zoom-in]")
    page.click("[data-action=zoom-in]")
    zoomed = page.get_attribute("svg.graph", "viewBox")
    assert float(zoomed.split()[2]) < float(fitted.split()[2])
    assert _nodes_inside_graph(page) != []  # zoomed in: the ends are out of view
    page.click("[data-action=zoom-out]")
    page.click("[data-action=zoom-fit]")
    assert page.get_attribute("svg.graph", "viewBox") == fitted
    assert _nodes_inside_graph(page) == []


def test_a_failed_run_names_its_step_and_error_and_upstream_failed_differs(
        server: Server, page: Any) -> None:
    run_id = server.start("ui-failing")
    server.wait(run_id, "failed")
    page.goto(f"{server.base}/#/runs/{run_id}")
    page.wait_for_selector("[data-testid=run-status][data-status=failed]")
    assert page.locator("[data-testid=failed-step] a").inner_text() == "boom"
    assert "cannot continue: the disk is full" in page.locator(
        "[data-testid=failed-error]").inner_text()
    failed = page.locator("[data-node=boom]")
    upstream = page.locator("[data-node=after]")
    assert upstream.get_attribute("data-status") == "upstream_failed"
    # a colour, a fill (hatched) and a mark of their own
    assert failed.locator("rect.box").get_attribute("fill") != \
        upstream.locator("rect.box").get_attribute("fill")
    assert upstream.locator("rect.box").get_attribute("fill") == "url(#hatch)"
    assert failed.locator("text.icon").text_content() == "✕"
    assert upstream.locator("text.icon").text_content() == "⊘"
    colour = "e => getComputedStyle(e).color"
    fill = "e => getComputedStyle(e).fill"
    assert page.eval_on_selector("[data-node=boom] text.icon", fill) \
        != page.eval_on_selector("[data-node=after] text.icon", fill)
    legend = page.locator("[data-testid=legend]")
    assert legend.locator("[data-status=failed] .mark").text_content() == "✕"
    assert legend.locator("[data-status=upstream_failed] .mark").text_content() == "⊘"
    swatches = [page.eval_on_selector(f"[data-testid=legend] .sw-{st}",
                                      "e => getComputedStyle(e).backgroundImage + "
                                      "getComputedStyle(e).backgroundColor")
                for st in ("failed", "upstream_failed")]
    assert swatches[0] != swatches[1]
    pills = [page.eval_on_selector(f".vlist.steps [data-step={sid}] .pill", colour)
             for sid in ("boom", "after")]
    assert pills[0] != pills[1]
    page.screenshot(path="/tmp/ui-run-failed-header.png", full_page=True)


def test_a_map_whose_items_run_shows_running(server: Server, page: Any) -> None:
    run_id = server.start("ui-map-running")
    page.goto(f"{server.base}/#/runs/{run_id}")
    page.wait_for_selector("[data-node=fan][data-status=running]")
    page.wait_for_selector(".vlist.steps [data-step='fan[0]']")
    assert server.run(run_id)["steps"]["fan"]["waiting"] is None  # it waits for nobody
    assert page.locator(".vlist.steps [data-step=fan] .pill").inner_text() == "running"
    assert page.locator("[data-testid=approvals]").is_hidden()
    server.wait(run_id, "completed")
