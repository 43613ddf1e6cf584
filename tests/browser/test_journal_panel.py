"""The run page's step panel lists the step's journaled calls (``ctx.run``): name,
attempt and time, in the order stored; a step without any shows no such section."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Server, open_page

JOURNALED = {"name": "ui-journal", "steps": [
    {"id": "agent", "type": "python", "call": "browser.steps_for_ui:journaled"},
    {"id": "after", "type": "transform", "value": "{{ steps.agent.output }}",
     "depends_on": ["agent"]}]}


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    yield from open_page(browser)


def test_the_step_panel_lists_the_journaled_calls(server: Server, page: Any) -> None:
    server.register(JOURNALED)
    run_id = server.start("ui-journal")
    server.wait(run_id, "completed")
    page.goto(f"{server.base}/#/runs/{run_id}")
    page.click(".steps [data-step=agent]")
    page.wait_for_selector("[data-testid=journal] li")
    items = page.locator("[data-testid=journal] li").all_inner_texts()
    assert [text.split()[0] for text in items] == ["plan", "act"]
    assert all("attempt 1" in text for text in items)
    page.click(".steps [data-step=after]")
    page.wait_for_selector("h2 .mono:text-is('after')")
    assert page.locator("[data-testid=journal]").count() == 0
