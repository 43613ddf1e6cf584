"""The run page of a step waiting for an event: its panel says which event it waits
for (and until when), and a small form sends it (name and JSON data); the run then
completes with the event's data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Server, open_page

PAID = {"name": "ui-paid", "steps": [
    {"id": "paid", "type": "event", "event": "paid", "timeout": "1h"},
    {"id": "receipt", "type": "transform", "depends_on": ["paid"],
     "value": {"amount": "{{ steps.paid.output.amount }}"}}]}


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    yield from open_page(browser, 1400, 1000)


def test_a_waiting_event_is_shown_and_sent_from_the_run_page(server: Server,
                                                              page: Any) -> None:
    server.register(PAID)
    run_id = server.start("ui-paid")
    server.wait(run_id, "waiting")
    page.goto(f"{server.base}/#/runs/{run_id}")
    page.wait_for_selector("[data-node=paid][data-status=waiting]")
    # no approval buttons for a step that waits for an event
    assert page.locator("[data-action=approve]").count() == 0
    page.click("[data-node=paid]")
    panel = page.locator("[data-testid=step-detail]")
    reason = panel.locator("[data-testid=wait-reason]")
    reason.wait_for()
    assert 'for event "paid"' in reason.inner_text()
    assert "times out at" in reason.inner_text()
    form = panel.locator("[data-testid=event-form]")
    assert form.locator("[aria-label='event name']").input_value() == "paid"
    form.locator("[aria-label='event data']").fill("{not json")
    form.locator("[data-action=send-event-go]").click()
    page.wait_for_selector("#toast:not([hidden])")
    assert server.run(run_id)["status"] == "waiting"  # nothing sent
    form.locator("[aria-label='event data']").fill('{"amount": 7}')
    form.locator("[data-action=send-event-go]").click()
    page.wait_for_selector("[data-testid=run-status][data-status=completed]")
    assert server.run(run_id)["steps"]["receipt"]["output"] == {"amount": 7}
