"""examples/support_router: `when` branches, a condition, and a join."""

from __future__ import annotations

import sys

import pytest

FLOW = "support_router/flow.yaml"


@pytest.mark.parametrize(("ticket", "handler", "reply"), [
    ("I want a refund for order 42", "refund", "Hi Ada, your refund is on its way"),
    ("The app shows an error on start", "technical", "We opened a bug report"),
    ("What are your opening hours?", "general", "a member of the team will reply"),
])
def test_exactly_one_handler_runs_and_the_join_runs(plait_run, ticket, handler, reply):
    code, result, _ = plait_run(FLOW, {"ticket": ticket, "customer": "Ada"})
    assert code == 0
    assert result["status"] == "completed"
    steps = result["steps"]
    assert steps["classify"]["output"]["intent"] == handler
    for name in ("refund", "technical", "general"):
        if name == handler:
            assert steps[name]["status"] == "completed"
        else:
            assert steps[name]["status"] == "skipped"
            assert steps[name]["skip_reason"].startswith("when was false: ")
    assert steps["respond"]["status"] == "completed"  # skipped parents count as resolved
    assert result["output"]["handled_by"] == handler
    assert reply in result["output"]["reply"]
    assert result["output"]["escalated"] is False
    assert steps["escalate"]["status"] == "skipped"


def test_urgent_tickets_take_the_condition_branch(plait_run):
    code, result, _ = plait_run(FLOW, {"ticket": "URGENT: the app crashes on login"})
    assert code == 0
    assert result["steps"]["urgent"]["output"] == {"result": True}
    assert result["steps"]["escalate"]["output"] == {
        "paged": "on-call", "summary": "[technical] URGENT: the app crashes on login"}
    assert result["output"]["escalated"] is True


def test_a_ticket_is_required(run_command_in_root):
    proc = run_command_in_root(sys.executable, "-m", "plait", "run", f"examples/{FLOW}",
                               "--input", '{"customer": "Ada"}')
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "'ticket' is a required property" in proc.stderr
